"""The AM-GRU time loop as two Pallas kernels (JAX): the whole forward loop in one kernel,
the whole backward loop in another, tied by `jax.custom_vjp`.

`associative_gru_pallas` runs the step of `tf_memlayers.ops.associative_gru_step` over a
sequence whose input projections ``p_t = x_t W_x + b`` are precomputed (as
`tf_memlayers.ops.associative_gru_loop` does on TensorFlow), with the masks and resets of
`AssociativeGRU`: a masked step keeps the states and emits the previous emitted output (zeros
with ``zero_output_for_mask``), and a reset (at an unmasked step) sets the row's memory and
previous output to zero before the step, no gradient flowing back through it.

The layout the kernels work on. A program owns ``block_rows`` rows of the batch and every
copy of their memory, so programs never synchronise. Each ``n``-vector of the step is kept as
its two halves (``[re | im]``, or the two halves of a gate), each ``[rows, mp]``, ``mp`` the
power of two at or above ``max(16, n/2)`` (zero columns pad them, and stay zero through the
step: the padded weights' rows and columns are zero). The memory is ``2C`` such blocks
(real parts of the ``C`` copies, then imaginary ones), carried through the loop. Every
product is a ``[rows, mp] x [mp, mp]`` matrix product: the recurrent kernel ``R`` as
``2 x 8`` blocks, ``G_h`` as ``2 x 4``, ``C_h`` as ``2 x 2``, and each copy's permutation as a
0/1 matrix (exact). So every block is a power of two and every product's sizes are at least
16, as Triton's lowering of Pallas needs.

The forward kernel saves, per step, the memory and the previous output the step read (after
a reset); the backward kernel recomputes the rest of the step from them and the projections,
and returns the gradient of the projections, of the initial states, and the retrieved ``h``
and ``r * h`` of every step, from which the kernels' gradients are one product each over all
``time * batch`` rows (outside the kernels). Inside the kernels the arithmetic is float32
(float64 for float64 inputs); the outputs have the inputs' dtype.
"""

import functools

import numpy as np

#: The smallest size of a block side: Triton's matrix product needs at least 16.
MIN_BLOCK = 16


def _power_of_two(size, minimum=MIN_BLOCK):
    return max(minimum, 1 << max(0, int(size) - 1).bit_length())


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
    num_warps=4,
):
    """Runs the AM-GRU over precomputed input projections (batch-major) with the Pallas
    kernels; differentiable with respect to ``projected``, ``memory``, ``output`` and
    ``kernels``.

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
        interpret: run the kernels in Pallas's interpret mode; default `default_interpret()`.
        block_rows: rows of the batch per program, a power of two of at least 16.
        num_warps: warps per program on a GPU (Triton).

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
    permutations = np.asarray(permutations)
    num_copies, half = permutations.shape
    batch, steps, width = projected.shape
    n = width // 4
    if n != 2 * half:
        raise ValueError(
            f"associative_gru_pallas: `projected` must have 4n = {8 * half} columns for "
            f"permutations of n/2 = {half} entries, got {width}."
        )
    padded_half = _power_of_two(half)
    padded_batch = -(-batch // block_rows) * block_rows
    config = _Config(
        num_copies=num_copies,
        copy0_identity=bool((permutations[0] == np.arange(half)).all()),
        zero_output_for_mask=bool(zero_output_for_mask),
        interpret=default_interpret() if interpret is None else bool(interpret),
        block_rows=block_rows,
        num_warps=int(num_warps),
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
    outputs, memory, output = _loop(
        config,
        rows(projected, 8),
        rows(memory.reshape(batch, 2 * num_copies * half), 2 * num_copies),
        rows(output, 2),
        blocks(recurrent, 8),
        blocks(gate_h, 4),
        blocks(candidate_h, 2),
        jnp.asarray(matrices),
        keep,
        starts,
    )
    outputs = unrows(outputs, 2).astype(dtype)  # [T, ...] back to [B, T, n]
    return outputs, unrows(memory, 2 * num_copies).astype(dtype), unrows(output, 2).astype(dtype)


class _Config(tuple):
    """The static settings of a run (hashable, for `jax.custom_vjp`'s nondiff argument)."""

    fields = ("num_copies", "copy0_identity", "zero_output_for_mask", "interpret")
    fields += ("block_rows", "num_warps")

    def __new__(cls, **values):
        return super().__new__(cls, tuple(values[name] for name in cls.fields))

    def __getattr__(self, name):
        return self[self.fields.index(name)]


@functools.cache
def _differentiable_loop():
    """The loop as a `jax.custom_vjp` of its padded blocks (the first argument: `_Config`)."""
    import jax

    @functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
    def run(config, *arguments):
        return _forward(config, *arguments)[0]

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


def _step(config, dot, pre_inputs, previous, memory, weights, keep):
    """One step on blocks (``[rows, mp]`` each): ``pre_inputs`` the 8 projection blocks,
    ``previous`` the 2 of ``o_{t-1}``, ``memory`` the ``2C`` of the memory, ``weights`` the
    refs ``(R, G_h, C_h, permutations)``, ``keep`` ``[rows, 1]`` bool. Returns a dict of the
    step's blocks (``key``, ``bounded``, ``copies``, ``h``, ``gates``, ``rh``, ``candidate``,
    ``delta``, zero at masked rows, and ``output``)."""
    import jax
    import jax.numpy as jnp

    recurrent, gate_h, candidate_h, matrices = weights
    count = config.num_copies
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
    h_re = sum(k[0] * memory[c] + k[1] * memory[count + c] for c, k in enumerate(copies))
    h_im = sum(k[0] * memory[count + c] - k[1] * memory[c] for c, k in enumerate(copies))
    h = [h_re / count, h_im / count]
    gates = [
        jax.nn.sigmoid(pre[2 + j] + dot(h[0], gate_h[0, j]) + dot(h[1], gate_h[1, j]))
        for j in range(4)
    ]
    rh = [gates[0] * h[0], gates[1] * h[1]]
    candidate = [
        jnp.tanh(pre[6 + j] + dot(rh[0], candidate_h[0, j]) + dot(rh[1], candidate_h[1, j]))
        for j in range(2)
    ]
    delta = [_where(keep, gates[2 + i] * (candidate[i] - h[i])) for i in range(2)]
    return dict(
        key=key,
        bounded=bounded,
        modulus=modulus,
        copies=copies,
        h=h,
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


def _forward_kernel(config, compute, *refs):
    import jax
    import jax.numpy as jnp

    (projected, keep_ref, start_ref, memory_ref, output_ref, *weights) = refs[:9]
    outputs_ref, final_memory_ref, final_output_ref, saved_memory, saved_previous = refs[9:]
    dot, count, steps = _Products(compute), config.num_copies, projected.shape[0]

    def body(t, carry):
        memory, previous, emitted = carry
        keep, start = _flags(keep_ref, start_ref, t)
        memory = [_where(~start, s) for s in memory]
        previous = [_where(~start, o) for o in previous]
        for i, s in enumerate(memory):
            saved_memory[t, i] = s
        for i, o in enumerate(previous):
            saved_previous[t, i] = o
        pre_inputs = [projected[t, j].astype(compute) for j in range(8)]
        step = _step(config, dot, pre_inputs, previous, memory, weights, keep)
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
            outputs_ref[t, i] = e.astype(outputs_ref.dtype)
        return memory, previous, emitted

    memory = [memory_ref[i].astype(compute) for i in range(2 * count)]
    previous = [output_ref[i].astype(compute) for i in range(2)]
    emitted = [jnp.zeros_like(o) for o in previous]
    memory, previous, _ = jax.lax.fori_loop(0, steps, body, (memory, previous, emitted))
    for i, s in enumerate(memory):
        final_memory_ref[i] = s.astype(final_memory_ref.dtype)
    for i, o in enumerate(previous):
        final_output_ref[i] = o.astype(final_output_ref.dtype)


def _backward_kernel(config, compute, *refs):
    import jax
    import jax.numpy as jnp

    projected, keep_ref, start_ref, saved_memory, saved_previous = refs[:5]
    grad_outputs, grad_final_memory, grad_final_output = refs[5:8]
    weights = refs[8:12]
    grad_pre_ref, grad_memory_ref, grad_output_ref, h_ref, rh_ref = refs[12:]
    recurrent, gate_h, candidate_h, matrices = weights
    dot, count, steps = _Products(compute), config.num_copies, projected.shape[0]

    def body(s, carry):
        t = steps - 1 - s
        grad_memory, grad_output, carried = carry
        keep, start = _flags(keep_ref, start_ref, t)
        memory = [saved_memory[t, i] for i in range(2 * count)]
        previous = [saved_previous[t, i] for i in range(2)]
        pre_inputs = [projected[t, j].astype(compute) for j in range(8)]
        step = _step(config, dot, pre_inputs, previous, memory, weights, keep)
        for i in range(2):
            h_ref[t, i] = step["h"][i]
            rh_ref[t, i] = step["rh"][i]
        # The gradient reaching the emitted output, and the output state o_t of a kept row.
        incoming = [grad_outputs[t, i].astype(compute) + carried[i] for i in range(2)]
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
        # The read h = mean_c conj(K_c) (*) S_c.
        a_re, a_im = grad_h[0] / count, grad_h[1] / count
        before = []
        for c, (k_re, k_im) in enumerate(step["copies"]):
            s_re, s_im = memory[c], memory[count + c]
            grad_copies[c][0] = grad_copies[c][0] + a_re * s_re + a_im * s_im
            grad_copies[c][1] = grad_copies[c][1] + a_re * s_im - a_im * s_re
            before.append(grad_memory[c] + a_re * k_re - a_im * k_im)
        for c, (k_re, k_im) in enumerate(step["copies"]):
            before.append(grad_memory[count + c] + a_re * k_im + a_im * k_re)
        # The permuted copies (the adjoint of each 0/1 matrix), then bound.
        grad_bounded = [0.0, 0.0]
        for c, grads in enumerate(grad_copies):
            for i in range(2):
                identity = c == 0 and config.copy0_identity
                grad = grads[i] if identity else dot.transposed(grads[i], matrices[c])
                grad_bounded[i] = grad_bounded[i] + grad
        key, bounded, modulus = step["key"], step["bounded"], step["modulus"]
        along = bounded[0] * grad_bounded[0] + bounded[1] * grad_bounded[1]
        clipped = key[0] * key[0] + key[1] * key[1] >= 1.0
        grad_key = [
            jnp.where(clipped, (g - b * along) / modulus, g) for g, b in zip(grad_bounded, bounded)
        ]
        grad_pre = [_where(keep, g) for g in (*grad_key, *grad_gates, *grad_cand)]
        for j, g in enumerate(grad_pre):
            grad_pre_ref[t, j] = g
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
        return grad_memory, grad_output, carried

    grad_memory = [grad_final_memory[i].astype(compute) for i in range(2 * count)]
    grad_output = [grad_final_output[i].astype(compute) for i in range(2)]
    carried = [jnp.zeros_like(g) for g in grad_output]
    grad_memory, grad_output, _ = jax.lax.fori_loop(
        0, steps, body, (grad_memory, grad_output, carried)
    )
    for i, g in enumerate(grad_memory):
        grad_memory_ref[i] = g
    for i, g in enumerate(grad_output):
        grad_output_ref[i] = g


def _block_index(axis, ndim):
    """The index map of a block that is ``block_rows`` rows along ``axis`` (the batch) and
    whole along the others; ``axis=None``: the whole array (a weight)."""
    return lambda b: tuple(b if a == axis else 0 for a in range(ndim))


def _specs(config, arrays):
    """Each ``(shape, batch axis)``'s block: ``block_rows`` rows of the batch axis, whole
    along every other axis (and whole without a batch axis)."""
    from jax.experimental import pallas as pl

    specs = []
    for shape, axis in arrays:
        block = tuple(config.block_rows if a == axis else size for a, size in enumerate(shape))
        specs.append(pl.BlockSpec(block, _block_index(axis, len(shape))))
    return specs


def _call(config, kernel, inputs, input_axes, outputs, output_axes, compute):
    """``kernel`` as a `pallas_call` over the batch blocks."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    batch = inputs[0].shape[-2]
    in_specs = _specs(config, [(x.shape, a) for x, a in zip(inputs, input_axes)])
    out_specs = _specs(config, [(x.shape, a) for x, a in zip(outputs, output_axes)])
    return pl.pallas_call(
        functools.partial(kernel, config, compute),
        out_shape=outputs,
        grid=(batch // config.block_rows,),
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=config.interpret,
        compiler_params=pltriton.CompilerParams(num_warps=config.num_warps, num_stages=1),
    )(*inputs)


def _forward(config, projected, memory, output, recurrent, gate_h, candidate_h, *constants):
    import jax

    dtype, compute = projected.dtype, _compute_dtype(projected.dtype)
    matrices, keep, starts = constants
    steps, _, batch, half = projected.shape
    weights = [w.astype(compute) for w in (recurrent, gate_h, candidate_h)]
    weights.append(matrices.astype(compute))
    shape = lambda *s, d=dtype: jax.ShapeDtypeStruct(s, d)  # noqa: E731
    outputs = [
        shape(steps, 2, batch, half),
        shape(*memory.shape),
        shape(*output.shape),
        shape(steps, *memory.shape, d=compute),
        shape(steps, *output.shape, d=compute),
    ]
    inputs = [projected, keep, starts, memory, output, *weights]
    results = _call(
        config,
        _forward_kernel,
        inputs,
        [2, 1, 1, 1, 1] + [None] * 4,
        outputs,
        [2, 1, 1, 2, 2],
        compute,
    )
    return tuple(results[:3]), tuple(results[3:])


def _backward(config, arguments, saved, cotangents):
    import jax
    import jax.numpy as jnp
    from jax import lax

    projected, memory, output, recurrent, gate_h, candidate_h, *constants = arguments
    matrices, keep, starts = constants
    saved_memory, saved_previous = saved
    compute = _compute_dtype(projected.dtype)
    weights = [w.astype(compute) for w in (recurrent, gate_h, candidate_h)]
    weights.append(matrices.astype(compute))
    steps, _, batch, half = projected.shape
    shape = lambda *s: jax.ShapeDtypeStruct(s, compute)  # noqa: E731
    outputs = [
        shape(*projected.shape),
        shape(*memory.shape),
        shape(*output.shape),
        shape(steps, 2, batch, half),
        shape(steps, 2, batch, half),
    ]
    inputs = [projected, keep, starts, saved_memory, saved_previous, *cotangents, *weights]
    axes = [2, 1, 1, 2, 2, 2, 1, 1] + [None] * 4
    grad_pre, grad_memory, grad_output, h, rh = _call(
        config, _backward_kernel, inputs, axes, outputs, [2, 1, 1, 2, 2], compute
    )

    def product(rows, grads):  # sum over steps and rows of rows^T grads, as blocks
        return jnp.einsum("tibm,tjbn->ijmn", rows, grads, precision=lax.Precision.HIGHEST)

    grads = [
        grad_pre,
        grad_memory,
        grad_output,
        product(saved_previous, grad_pre),
        product(h, grad_pre[:, 2:6]),
        product(rh, grad_pre[:, 6:]),
    ]
    grads = [g.astype(x.dtype) for g, x in zip(grads, arguments)]
    return (*grads, *(jnp.zeros_like(x) for x in constants))
