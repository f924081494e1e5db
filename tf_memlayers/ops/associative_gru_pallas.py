"""The AM-GRU time loop as two Pallas kernels (JAX): the whole forward loop in one kernel,
the whole backward loop in another, tied by `jax.custom_vjp`.

`associative_gru_pallas` runs the step of `tf_memlayers.ops.associative_gru_step` over a
sequence whose input projections ``p_t = x_t W_x + b`` are precomputed (as
`tf_memlayers.ops.associative_gru_loop` does on TensorFlow), with the masks and resets of
`AssociativeGRU`: a masked step keeps the states and emits the previous emitted output (zeros
with ``zero_output_for_mask``), and a reset (at an unmasked step) sets the row's memory and
previous output to zero before the step, no gradient flowing back through it. With a
``source`` memory (the Dual AM-GRU's premise memory, paper key layout) every step also reads
the source with the write key, which enters the gates and the candidate through ``W_dg`` and
``W_dc``; the source is never changed, and a reset keeps it.

The layout the kernels work on. A program owns ``block_rows`` rows of the batch and every
copy of their memory, so programs never synchronise. Each ``n``-vector of the step is kept as
its two halves (``[re | im]``, or the two halves of a gate), each ``[rows, mp]``, ``mp`` the
power of two at or above ``max(16, n/2)`` (zero columns pad them, and stay zero through the
step: the padded weights' rows and columns are zero). The memory is ``2C`` such blocks
(real parts of the ``C`` copies, then imaginary ones), carried through the loop. Every
product is a ``[rows, mp] x [mp, mp]`` matrix product: the recurrent kernel ``R`` as
``2 x 8`` blocks, ``G_h`` as ``2 x 4``, ``C_h`` as ``2 x 2``, and each copy's permutation as a
0/1 matrix (exact). So every block is a power of two, as Triton's lowering of Pallas needs,
and every product's sizes are at least 16, as Triton's compiler needs.

When differentiated, the forward kernel saves per step what the backward kernel needs: the
memory and the previous output the step read (after a reset), the permuted key copies, and
the key, the read ``h``, the gates and the candidate (and the source read): ``4C + 12``
blocks (``4C + 14``). So the backward kernel computes none of the step's products again:
its products are the adjoints of the forward's, as many. Not differentiated, the forward
kernel saves nothing. The backward kernel returns the gradients of the projections and of
the initial states (and of the source); the kernels' gradients are one product each over all
``time * batch`` rows (outside the kernels). Inside the kernels the arithmetic is float32
(float64 for float64 inputs); the outputs have the inputs' dtype.
"""

import functools

import numpy as np

#: The smallest size of a block side: Triton's matrix product needs at least 16.
MIN_BLOCK = 16
#: The largest padded half width ``mp`` compiled for a GPU. Each product's ``[mp, mp]``
#: float32 weight block goes through shared memory: for sm_90, Triton gives the backward
#: kernel 176 KiB at ``mp`` 128 and the forward kernel 288 KiB at 256, where an H100 or H200
#: has 227 KiB a block (a GPU with less may refuse 128: XLA then reports RESOURCE_EXHAUSTED).
MAX_GPU_BLOCK = 128


def _power_of_two(size, minimum=MIN_BLOCK):
    return max(minimum, 1 << max(0, int(size) - 1).bit_length())


def default_num_warps(block_rows, padded_half):
    """Warps per program: two entries of a ``[block_rows, padded_half]`` block per thread,
    between 4 and 16 warps. Triton writes out each thread's share of every product and
    elementwise step, and its compile time grows with that code: with 4 warps, blocks of
    16 x 64 (100 units) compile for minutes."""
    return min(16, max(4, block_rows * padded_half // 64))


def default_interpret():
    """Whether the kernels run in Pallas's interpret mode: everywhere but on a GPU."""
    import jax

    return jax.default_backend() != "gpu"


def associative_gru_pallas(
    projected,
    memory,
    output,
    kernels,
    permutations,
    mask=None,
    reset=None,
    zero_output_for_mask=False,
    go_backwards=False,
    interpret=None,
    block_rows=MIN_BLOCK,
    num_warps=None,
    source=None,
    dual_kernels=None,
):
    """Runs the AM-GRU (or the Dual AM-GRU) over precomputed input projections (batch-major)
    with the Pallas kernels; differentiable with respect to every tensor argument but the
    mask and the reset.

    Args:
        projected: ``[B, T, 4n]`` ``x_t W_x + b``, columns ``[key | gates | candidate]``
            (`AssociativeGRUCell._projection_kernels`).
        memory: ``[B, n * C]`` initial memory (layout of `AssociativeGRUCell`).
        output: ``[B, n]`` initial fed-back output ``o_0``.
        kernels: ``(R [n, 4n], G_h [n, 2n], C_h [n, n])``.
        permutations: the copies' permutations ``[C, n/2]``
            (`tf_memlayers.ops.holographic.make_permutations`).
        mask: optional bool ``[B, T]``; a False step neither reads nor writes.
        reset: optional bool ``[B, T]``; true where a row starts again from zero states.
        zero_output_for_mask: emit zeros (not the previous output) at masked steps.
        go_backwards: run the sequence in reverse (outputs in processing order, as Keras).
        interpret: run the kernels in Pallas's interpret mode; default `default_interpret()`,
            except that off a GPU a program lowered for CUDA takes the compiled kernels.
        block_rows: rows of the batch per program, a power of two of at least 16.
        num_warps: warps per program on a GPU (Triton), a power of two from 1 to 32; default
            `default_num_warps` of the padded blocks.
        source: optional ``[B, n * C]`` source memory read at every step with the write key
            (`DualAssociativeGRUCell` with ``dual_key="paper"``), never changed (a reset
            keeps it); needs ``dual_kernels``.
        dual_kernels: ``(W_dg [n, 2n], W_dc [n, n])`` with ``source``.

    Returns:
        ``(outputs [B, T, n], final memory [B, n * C], final output [B, n])`` in the dtype
        of ``projected``.
    """
    import jax.numpy as jnp

    block_rows = int(block_rows)
    if block_rows < MIN_BLOCK or block_rows & (block_rows - 1):
        raise ValueError(
            f"associative_gru_pallas: `block_rows` must be a power of two >= {MIN_BLOCK}, "
            f"got {block_rows!r}."
        )
    if num_warps is not None and (
        isinstance(num_warps, bool) or not isinstance(num_warps, (int, np.integer))
    ):
        raise TypeError(
            f"associative_gru_pallas: `num_warps` must be None or an integer, got {num_warps!r}."
        )
    if num_warps is not None and num_warps not in (1, 2, 4, 8, 16, 32):
        raise ValueError(
            "associative_gru_pallas: `num_warps` must be a power of two from 1 to 32, "
            f"got {num_warps!r}."
        )
    permutations = np.asarray(permutations)
    num_copies, half = permutations.shape
    batch, steps, width = projected.shape
    n = width // 4
    if n != 2 * half:
        raise ValueError(
            f"associative_gru_pallas: `projected` must have 4n = {8 * half} columns for "
            f"permutations of n/2 = {half} entries, got {width}."
        )
    if (source is None) != (dual_kernels is None):
        raise ValueError(
            "associative_gru_pallas: `source` and `dual_kernels` go together; got "
            f"source={'None' if source is None else 'a tensor'}, dual_kernels="
            f"{'None' if dual_kernels is None else 'kernels'}."
        )
    padded_half = _power_of_two(half)
    # Off a GPU the default runs interpreted, yet a program lowered there for CUDA
    # (``jax.export``, ``lower(lowering_platforms=("cuda",))``) takes the compiled kernels:
    # `jax.lax.platform_dependent` leaves the choice to the lowering.
    either = interpret is None and default_interpret() and padded_half <= MAX_GPU_BLOCK
    interpret = default_interpret() if interpret is None else bool(interpret)
    if padded_half > MAX_GPU_BLOCK and not interpret:
        raise ValueError(
            f"associative_gru_pallas: n = {n} units give blocks of mp = {padded_half} "
            f"columns; compiled for a GPU the kernels take at most mp = {MAX_GPU_BLOCK} "
            f"({2 * MAX_GPU_BLOCK} units): a [{padded_half}, {padded_half}] float32 weight "
            "block does not fit in a GPU block's shared memory. Run the layer with "
            "fused_loop=False (Keras's loop)."
        )
    padded_batch = -(-batch // block_rows) * block_rows
    config = _Config(
        num_copies=num_copies,
        copy0_identity=bool((permutations[0] == np.arange(half)).all()),
        zero_output_for_mask=bool(zero_output_for_mask),
        interpret=interpret,
        block_rows=block_rows,
        num_warps=int(num_warps or default_num_warps(block_rows, padded_half)),
        dual=source is not None,
        save=True,
    )
    dtype = projected.dtype

    def flags(x, fill):
        if x is None:
            return jnp.full((steps, padded_batch), fill, jnp.float32)
        x = jnp.transpose(x.astype(jnp.float32))
        return jnp.pad(x, ((0, 0), (0, padded_batch - batch)))

    keep, starts = flags(mask, 1.0), flags(reset, 0.0)
    if go_backwards:
        projected = jnp.flip(projected, 1)
        keep, starts = jnp.flip(keep, 0), jnp.flip(starts, 0)

    def rows(x, parts):  # [B, ..., parts * half] -> [..., parts, Bp, mp]
        x = x.reshape(*x.shape[:-1], parts, half)
        x = jnp.moveaxis(x, 0, -2)
        pad = [(0, 0)] * (x.ndim - 2) + [(0, padded_batch - batch), (0, padded_half - half)]
        return jnp.pad(x, pad)

    def unrows(x, parts):  # inverse of `rows`
        x = jnp.moveaxis(x[..., :batch, :half], -2, 0)
        return x.reshape(*x.shape[:-2], parts * half)

    def blocks(kernel, columns):  # [n, columns * half] -> [2, columns, mp, mp]
        kernel = kernel.reshape(2, half, columns, half).transpose(0, 2, 1, 3)
        pad = padded_half - half
        return jnp.pad(kernel, ((0, 0), (0, 0), (0, pad), (0, pad)))

    matrices = np.zeros((num_copies, padded_half, padded_half), np.float32)
    for copy, permutation in enumerate(permutations):
        matrices[copy, permutation, np.arange(half)] = 1.0
    recurrent, gate_h, candidate_h = kernels
    blocked = [rows(projected, 8), rows(memory, 2 * num_copies)]
    blocked += [rows(output, 2), blocks(recurrent, 8), blocks(gate_h, 4), blocks(candidate_h, 2)]
    if config.dual:
        dual_gate, dual_candidate = dual_kernels
        blocked.append(rows(source, 2 * num_copies))
        blocked += [blocks(dual_gate, 4), blocks(dual_candidate, 2)]
    blocked += [jnp.asarray(matrices), keep, starts]
    if either:
        import jax

        compiled = functools.partial(_loop, config.replace(interpret=False))
        loop = functools.partial(_loop, config)
        outputs, memory, output = jax.lax.platform_dependent(*blocked, cuda=compiled, default=loop)
    else:
        outputs, memory, output = _loop(config, *blocked)
    outputs = unrows(outputs, 2).astype(dtype)  # [T, ...] back to [B, T, n]
    memory = unrows(memory, 2 * num_copies).reshape(batch, -1).astype(dtype)
    return outputs, memory, unrows(output, 2).astype(dtype)


class _Config(tuple):
    """The static settings of a run (hashable, for `jax.custom_vjp`'s nondiff argument)."""

    fields = ("num_copies", "copy0_identity", "zero_output_for_mask", "interpret")
    fields += ("block_rows", "num_warps", "dual", "save")

    def __new__(cls, **values):
        return super().__new__(cls, tuple(values[name] for name in cls.fields))

    def __getattr__(self, name):
        return self[self.fields.index(name)]

    def replace(self, **values):
        return _Config(**{name: values.get(name, self[i]) for i, name in enumerate(self.fields)})


@functools.cache
def _differentiable_loop():
    """The loop as a `jax.custom_vjp` of its padded blocks (the first argument: `_Config`)."""
    import jax

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def run(config, *arguments):  # not differentiated: nothing saved for a backward pass
        return _forward(config.replace(save=False), *arguments)[0]

    def forward(config, *arguments):
        results, saved = _forward(config, *arguments)
        return results, (arguments, saved)

    def backward(config, residuals, cotangents):
        return _backward(config, *residuals, cotangents)

    run.defvjp(forward, backward)
    return run


def _loop(config, *arguments):
    return _differentiable_loop()(config, *arguments)


def _compute_dtype(dtype):
    import jax.numpy as jnp

    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


class _Products:
    """Matrix products at full precision in the compute dtype (Triton's IEEE float32, not
    TF32), ``a @ b`` and ``a @ b^T``."""

    def __init__(self, dtype):
        from jax import lax

        self.lax, self.dtype, self.precision = lax, dtype, lax.Precision.HIGHEST

    def __call__(self, a, b):
        return self.lax.dot(a, b, precision=self.precision, preferred_element_type=self.dtype)

    def transposed(self, a, b):
        numbers = (((1,), (1,)), ((), ()))
        return self.lax.dot_general(
            a, b, numbers, precision=self.precision, preferred_element_type=self.dtype
        )


def _where(condition, x):
    import jax.numpy as jnp

    return jnp.where(condition, x, jnp.zeros_like(x))


def _read(copies, memory, count):
    """``mean_c conj(K_c) (*) S_c`` (eq. 5) as its two blocks."""
    re = sum(k[0] * memory[c] + k[1] * memory[count + c] for c, k in enumerate(copies))
    im = sum(k[0] * memory[count + c] - k[1] * memory[c] for c, k in enumerate(copies))
    return [re / count, im / count]


def _step(config, dot, pre_inputs, previous, memory, refs, keep, source=None):
    """One step on blocks (``[rows, mp]`` each): ``pre_inputs`` the 8 projection blocks,
    ``previous`` the 2 of ``o_{t-1}``, ``memory`` the ``2C`` of the memory (and ``source``
    the source memory's), ``refs`` the kernels' refs by name, ``keep`` ``[rows, 1]`` bool.
    Returns a dict of the step's blocks (``key``, ``bounded``, ``copies``, ``h``, ``h2``
    (the source read, or None), ``gates``, ``rh``, ``candidate``, ``delta``, zero at masked
    rows, and ``output``)."""
    import jax
    import jax.numpy as jnp

    recurrent, gate_h, candidate_h = refs["recurrent"], refs["gate_h"], refs["candidate_h"]
    matrices, count = refs["matrices"], config.num_copies
    # A masked step's input is replaced by zeros, and its key too: its copies are zero, so
    # its read is zero and its write leaves the memory as it is.
    pre = [
        _where(keep, x) + dot(previous[0], recurrent[0, j]) + dot(previous[1], recurrent[1, j])
        for j, x in enumerate(pre_inputs)
    ]
    key = [_where(keep, pre[0]), _where(keep, pre[1])]
    modulus = jnp.sqrt(jnp.maximum(key[0] * key[0] + key[1] * key[1], 1.0))
    bounded = [key[0] / modulus, key[1] / modulus]
    copies = [
        bounded if c == 0 and config.copy0_identity else [dot(b, matrices[c]) for b in bounded]
        for c in range(count)
    ]
    h = _read(copies, memory, count)
    gates = [pre[2 + j] + dot(h[0], gate_h[0, j]) + dot(h[1], gate_h[1, j]) for j in range(4)]
    h2 = None
    if source is not None:  # the Dual AM-GRU reads the source with the same key (eq. 5)
        h2, dual_gate = _read(copies, source, count), refs["dual_gate"]
        gates = [
            g + dot(h2[0], dual_gate[0, j]) + dot(h2[1], dual_gate[1, j])
            for j, g in enumerate(gates)
        ]
    gates = [jax.nn.sigmoid(g) for g in gates]
    rh = [gates[0] * h[0], gates[1] * h[1]]
    candidate = [
        pre[6 + j] + dot(rh[0], candidate_h[0, j]) + dot(rh[1], candidate_h[1, j]) for j in range(2)
    ]
    if source is not None:
        dual_candidate = refs["dual_candidate"]
        candidate = [
            c + dot(h2[0], dual_candidate[0, j]) + dot(h2[1], dual_candidate[1, j])
            for j, c in enumerate(candidate)
        ]
    candidate = [jnp.tanh(c) for c in candidate]
    delta = [_where(keep, gates[2 + i] * (candidate[i] - h[i])) for i in range(2)]
    return dict(
        key=key,
        bounded=bounded,
        modulus=modulus,
        copies=copies,
        h=h,
        h2=h2,
        gates=gates,
        rh=rh,
        candidate=candidate,
        delta=delta,
        output=[h[i] + delta[i] for i in range(2)],
    )


def _flags(keep_ref, start_ref, t):
    """``(keep, start)`` ``[rows, 1]`` bool at step ``t``: a reset counts at kept steps only."""
    keep = keep_ref[t][:, None] > 0
    return keep, (start_ref[t][:, None] > 0) & keep


def _inputs(config, names):
    """``names`` with the Dual AM-GRU's inputs after ``candidate_h`` (``config.dual``)."""
    dual = ("source", "dual_gate", "dual_candidate") if config.dual else ()
    at = names.index("candidate_h") + 1
    return names[:at] + dual + names[at:]


_WEIGHTS = ("recurrent", "gate_h", "candidate_h")
_FORWARD_IN = ("projected", "memory", "output", *_WEIGHTS, "matrices", "keep", "starts")
_FORWARD_OUT = ("outputs", "final_memory", "final_output")
#: What the forward kernel saves per step for the backward kernel (``config.save``).
_SAVED = ("saved_memory", "saved_previous", "saved_copies", "saved_step")
#: The parts of ``saved_step``: each one's first block and its blocks (``h2``: the Dual's).
_STEP = dict(key=(0, 2), h=(2, 2), gates=(4, 4), candidate=(8, 2), h2=(10, 2))


def _step_parts(config):
    return {name: part for name, part in _STEP.items() if config.dual or name != "h2"}


_BACKWARD_IN = ("saved_memory", *_WEIGHTS, "matrices", "keep", "starts", "saved_copies")
_BACKWARD_IN += ("saved_step", "grad_outputs", "grad_final_memory", "grad_final_output")
_BACKWARD_OUT = ("grad_projected", "grad_memory", "grad_output")


def _forward_kernel(config, compute, *refs):
    import jax
    import jax.numpy as jnp

    outputs = _FORWARD_OUT + (_SAVED if config.save else ())
    r = dict(zip(_inputs(config, _FORWARD_IN) + outputs, refs))
    dot, count, steps = _Products(compute), config.num_copies, r["projected"].shape[0]

    def body(t, carry):
        memory, previous, emitted = carry
        keep, start = _flags(r["keep"], r["starts"], t)
        memory = [_where(~start, s) for s in memory]
        previous = [_where(~start, o) for o in previous]
        pre_inputs = [r["projected"][t, j].astype(compute) for j in range(8)]
        source = _source(config, r, compute)
        step = _step(config, dot, pre_inputs, previous, memory, r, keep, source)
        if config.save:
            copies = [k[0] for k in step["copies"]] + [k[1] for k in step["copies"]]
            saved = step["key"] + step["h"] + step["gates"] + step["candidate"]
            saved += step["h2"] if config.dual else []
            for name, blocks in zip(_SAVED, (memory, previous, copies, saved)):
                for i, block in enumerate(blocks):
                    r[name][t, i] = block
        d_re, d_im = step["delta"]
        for c, (k_re, k_im) in enumerate(step["copies"]):  # S_c += K_c (*) delta (eq. 12)
            memory[c] = memory[c] + k_re * d_re - k_im * d_im
            memory[count + c] = memory[count + c] + k_re * d_im + k_im * d_re
        new = step["output"]
        if config.zero_output_for_mask:
            emitted = [_where(keep, x) for x in new]
        else:
            emitted = [jnp.where(keep, x, e) for x, e in zip(new, emitted)]
        previous = [jnp.where(keep, x, o) for x, o in zip(new, previous)]
        for i, e in enumerate(emitted):
            r["outputs"][t, i] = e.astype(r["outputs"].dtype)
        return memory, previous, emitted

    memory = [r["memory"][i].astype(compute) for i in range(2 * count)]
    previous = [r["output"][i].astype(compute) for i in range(2)]
    emitted = [jnp.zeros_like(o) for o in previous]
    memory, previous, _ = jax.lax.fori_loop(0, steps, body, (memory, previous, emitted))
    for i, s in enumerate(memory):
        r["final_memory"][i] = s.astype(r["final_memory"].dtype)
    for i, o in enumerate(previous):
        r["final_output"][i] = o.astype(r["final_output"].dtype)


def _source(config, refs, compute):
    """The source memory's ``2C`` blocks (Dual AM-GRU), or None."""
    if not config.dual:
        return None
    return [refs["source"][i].astype(compute) for i in range(2 * config.num_copies)]


def _read_gradient(grad_read, copies, memory, grad_copies, count):
    """The adjoint of `_read` for its gradient ``grad_read`` (2 blocks): adds the copies'
    gradients to ``grad_copies`` (in place) and returns the memory's (``2C`` blocks)."""
    a_re, a_im = grad_read[0] / count, grad_read[1] / count
    grad_re, grad_im = [], []
    for c, (k_re, k_im) in enumerate(copies):
        s_re, s_im = memory[c], memory[count + c]
        grad_copies[c][0] = grad_copies[c][0] + a_re * s_re + a_im * s_im
        grad_copies[c][1] = grad_copies[c][1] + a_re * s_im - a_im * s_re
        grad_re.append(a_re * k_re - a_im * k_im)
        grad_im.append(a_re * k_im + a_im * k_re)
    return grad_re + grad_im


def _saved_step(config, refs, t, keep):
    """The blocks of `_step` that the backward kernel uses at step ``t``, from what the
    forward kernel saved (``delta``, ``bounded`` and ``modulus`` elementwise from them)."""
    import jax.numpy as jnp

    saved, copies, count = refs["saved_step"], refs["saved_copies"], config.num_copies
    parts = _step_parts(config).items()
    blocks = {name: [saved[t, at + i] for i in range(size)] for name, (at, size) in parts}
    key, gates, h, candidate = blocks["key"], blocks["gates"], blocks["h"], blocks["candidate"]
    modulus = jnp.sqrt(jnp.maximum(key[0] * key[0] + key[1] * key[1], 1.0))
    return dict(
        blocks,
        modulus=modulus,
        bounded=[key[0] / modulus, key[1] / modulus],
        copies=[[copies[t, c], copies[t, count + c]] for c in range(count)],
        delta=[_where(keep, gates[2 + i] * (candidate[i] - h[i])) for i in range(2)],
    )


def _backward_kernel(config, compute, *refs):
    import jax
    import jax.numpy as jnp

    outputs = _BACKWARD_OUT + (("grad_source",) if config.dual else ())
    r = dict(zip(_inputs(config, _BACKWARD_IN) + outputs, refs))
    recurrent, gate_h, candidate_h = r["recurrent"], r["gate_h"], r["candidate_h"]
    dot, count, steps = _Products(compute), config.num_copies, r["keep"].shape[0]

    def body(s, carry):
        t = steps - 1 - s
        grad_memory, grad_output, carried, grad_source = carry
        keep, start = _flags(r["keep"], r["starts"], t)
        memory = [r["saved_memory"][t, i] for i in range(2 * count)]
        source = _source(config, r, compute)
        step = _saved_step(config, r, t, keep)
        # The gradient reaching the emitted output, and the output state o_t of a kept row.
        incoming = [r["grad_outputs"][t, i].astype(compute) + carried[i] for i in range(2)]
        total = [_where(keep, grad_output[i] + incoming[i]) for i in range(2)]
        # The write S_c += K_c (*) delta: gradients of the copies and of delta.
        d_re, d_im = step["delta"]
        grad_copies, grad_d_re, grad_d_im = [], 0.0, 0.0
        for c, (k_re, k_im) in enumerate(step["copies"]):
            g_re, g_im = grad_memory[c], grad_memory[count + c]
            grad_copies.append([g_re * d_re + g_im * d_im, g_im * d_re - g_re * d_im])
            grad_d_re = grad_d_re + g_re * k_re + g_im * k_im
            grad_d_im = grad_d_im + g_im * k_re - g_re * k_im
        grad_delta = [_where(keep, grad_d_re) + total[0], _where(keep, grad_d_im) + total[1]]
        # o = h + delta, delta = u * (c - h), c = tanh(.), [r | u] = sigmoid(.).
        h, gates, cand = step["h"], step["gates"], step["candidate"]
        grad_h = [total[i] - grad_delta[i] * gates[2 + i] for i in range(2)]
        grad_cand = [grad_delta[i] * gates[2 + i] * (1.0 - cand[i] * cand[i]) for i in range(2)]
        grad_rh = [
            dot.transposed(grad_cand[0], candidate_h[i, 0])
            + dot.transposed(grad_cand[1], candidate_h[i, 1])
            for i in range(2)
        ]
        grad_h = [grad_h[i] + grad_rh[i] * gates[i] for i in range(2)]
        grad_gates = [grad_rh[0] * h[0], grad_rh[1] * h[1]]
        grad_gates += [grad_delta[i] * (cand[i] - h[i]) for i in range(2)]
        grad_gates = [g * x * (1.0 - x) for g, x in zip(grad_gates, gates)]
        for i in range(2):
            for j in range(4):
                grad_h[i] = grad_h[i] + dot.transposed(grad_gates[j], gate_h[i, j])
        # The reads h = mean_c conj(K_c) (*) S_c, and h2 of the source alike.
        before = _read_gradient(grad_h, step["copies"], memory, grad_copies, count)
        before = [g + b for g, b in zip(grad_memory, before)]
        if config.dual:
            dual_gate, dual_candidate = r["dual_gate"], r["dual_candidate"]
            grad_h2 = [
                sum(dot.transposed(g, dual_gate[i, j]) for j, g in enumerate(grad_gates))
                + sum(dot.transposed(g, dual_candidate[i, j]) for j, g in enumerate(grad_cand))
                for i in range(2)
            ]
            read = _read_gradient(grad_h2, step["copies"], source, grad_copies, count)
            grad_source = [g + x for g, x in zip(grad_source, read)]
        # The permuted copies (the adjoint of each 0/1 matrix), then bound.
        grad_bounded = [0.0, 0.0]
        for c, grads in enumerate(grad_copies):
            for i in range(2):
                identity = c == 0 and config.copy0_identity
                grad = grads[i] if identity else dot.transposed(grads[i], r["matrices"][c])
                grad_bounded[i] = grad_bounded[i] + grad
        key, bounded, modulus = step["key"], step["bounded"], step["modulus"]
        along = bounded[0] * grad_bounded[0] + bounded[1] * grad_bounded[1]
        clipped = key[0] * key[0] + key[1] * key[1] >= 1.0
        grad_key = [
            jnp.where(clipped, (g - b * along) / modulus, g) for g, b in zip(grad_bounded, bounded)
        ]
        grad_pre = [_where(keep, g) for g in (*grad_key, *grad_gates, *grad_cand)]
        for j, g in enumerate(grad_pre):
            r["grad_projected"][t, j] = g
        grad_previous = [
            sum(dot.transposed(g, recurrent[i, j]) for j, g in enumerate(grad_pre))
            for i in range(2)
        ]
        # A masked row's output state passes its gradient on; none flows through a reset.
        grad_previous = [jnp.where(keep, g, o) for g, o in zip(grad_previous, grad_output)]
        grad_output = [_where(~start, g) for g in grad_previous]
        grad_memory = [_where(~start, g) for g in before]
        if config.zero_output_for_mask:
            carried = [jnp.zeros_like(x) for x in incoming]
        else:
            carried = [_where(~keep, x) for x in incoming]
        return grad_memory, grad_output, carried, grad_source

    grad_memory = [r["grad_final_memory"][i].astype(compute) for i in range(2 * count)]
    grad_output = [r["grad_final_output"][i].astype(compute) for i in range(2)]
    carried = [jnp.zeros_like(g) for g in grad_output]
    grad_source = [jnp.zeros_like(g) for g in grad_memory] if config.dual else []
    carry = (grad_memory, grad_output, carried, grad_source)
    grad_memory, grad_output, _, grad_source = jax.lax.fori_loop(0, steps, body, carry)
    for i, g in enumerate(grad_memory):
        r["grad_memory"][i] = g
    for i, g in enumerate(grad_output):
        r["grad_output"][i] = g
    for i, g in enumerate(grad_source):
        r["grad_source"][i] = g


def _block_index(axis, ndim):
    """The index map of a block that is ``block_rows`` rows along ``axis`` (the batch) and
    whole along the others; ``axis=None``: the whole array (a weight)."""
    return lambda b: tuple(b if a == axis else 0 for a in range(ndim))


def _specs(config, arrays):
    """Each array's block: ``block_rows`` rows of its batch axis (``-2``; ``-1`` of the
    ``[T, Bp]`` flags), whole along every other axis; a weight (no batch axis) whole."""
    from jax.experimental import pallas as pl

    specs = []
    for name, x in arrays:
        weight = name in ("matrices", "dual_gate", "dual_candidate", *_WEIGHTS)
        axis = None if weight else x.ndim - (1 if name in ("keep", "starts") else 2)
        block = tuple(config.block_rows if a == axis else n for a, n in enumerate(x.shape))
        specs.append(pl.BlockSpec(block, _block_index(axis, x.ndim)))
    return specs


def _call(config, kernel, compute, inputs, outputs):
    """``kernel`` as a `pallas_call` over the batch blocks; ``inputs`` and ``outputs`` are
    ``(name, array or shape)`` pairs in the kernel's order of refs."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    batch = inputs[0][1].shape[-2]
    return pl.pallas_call(
        functools.partial(kernel, config, compute),
        out_shape=[x for _, x in outputs],
        grid=(batch // config.block_rows,),
        in_specs=_specs(config, inputs),
        out_specs=_specs(config, outputs),
        interpret=config.interpret,
        compiler_params=pltriton.CompilerParams(num_warps=config.num_warps, num_stages=1),
    )(*(x for _, x in inputs))


def _named(config, names, arguments):
    """The kernels' inputs by name, the weights cast to the compute dtype."""
    compute = _compute_dtype(arguments[0].dtype)
    weights = ("matrices", "dual_gate", "dual_candidate", *_WEIGHTS)
    return {
        name: x.astype(compute) if name in weights else x
        for name, x in zip(_inputs(config, names), arguments)
    }


def _forward(config, *arguments):
    """``(outputs, final memory, final output)``, and `_SAVED` (empty unless ``config.save``)."""
    import jax

    x = _named(config, _FORWARD_IN, arguments)
    projected, memory, output = x["projected"], x["memory"], x["output"]
    dtype, compute = projected.dtype, _compute_dtype(projected.dtype)
    steps, _, batch, half = projected.shape
    shape = lambda *s, d=dtype: jax.ShapeDtypeStruct(s, d)  # noqa: E731
    outputs = [shape(steps, 2, batch, half), shape(*memory.shape), shape(*output.shape)]
    if config.save:  # per step: the memory, the output, the copies, the step's other parts
        parts = sum(size for _, size in _step_parts(config).values())
        outputs += [shape(steps, *x[name].shape, d=compute) for name in ("memory", "output")]
        outputs += [shape(steps, *memory.shape, d=compute)]
        outputs += [shape(steps, parts, batch, half, d=compute)]
    inputs = [(name, x[name]) for name in _inputs(config, _FORWARD_IN)]
    outputs = list(zip(_FORWARD_OUT + _SAVED, outputs))
    results = _call(config, _forward_kernel, compute, inputs, outputs)
    return tuple(results[:3]), tuple(results[3:])


def _backward(config, arguments, saved, cotangents):
    import jax
    import jax.numpy as jnp
    from jax import lax

    x = _named(config, _FORWARD_IN, arguments) | dict(zip(_SAVED, saved))
    x["grad_outputs"], x["grad_final_memory"], x["grad_final_output"] = cotangents
    projected, compute = x["projected"], _compute_dtype(x["projected"].dtype)
    shape = lambda *s: jax.ShapeDtypeStruct(s, compute)  # noqa: E731
    outputs = [shape(*projected.shape), shape(*x["memory"].shape), shape(*x["output"].shape)]
    names = _BACKWARD_OUT
    if config.dual:
        outputs, names = outputs + [shape(*x["source"].shape)], names + ("grad_source",)
    inputs = [(name, x[name]) for name in _inputs(config, _BACKWARD_IN)]
    results = _call(config, _backward_kernel, compute, inputs, list(zip(names, outputs)))
    results = dict(zip(names, results))
    grad_pre, step = results["grad_projected"], x["saved_step"]

    def product(rows, grads):  # sum over steps and rows of rows^T grads, as blocks
        return jnp.einsum("tibm,tjbn->ijmn", rows, grads, precision=lax.Precision.HIGHEST)

    def blocks(name, size=2):  # the first ``size`` blocks of a part of the saved steps
        return step[:, _STEP[name][0] : _STEP[name][0] + size]

    h, reset_gate = blocks("h"), blocks("gates")
    grads = dict(
        projected=grad_pre,
        memory=results["grad_memory"],
        output=results["grad_output"],
        recurrent=product(x["saved_previous"], grad_pre),
        gate_h=product(h, grad_pre[:, 2:6]),
        candidate_h=product(reset_gate * h, grad_pre[:, 6:]),
    )
    if config.dual:
        grads["source"] = results["grad_source"]
        grads["dual_gate"] = product(blocks("h2"), grad_pre[:, 2:6])
        grads["dual_candidate"] = product(blocks("h2"), grad_pre[:, 6:])
    names = _inputs(config, _FORWARD_IN)
    return tuple(
        grads[name].astype(a.dtype) if name in grads else jnp.zeros_like(a)
        for name, a in zip(names, arguments)
    )
