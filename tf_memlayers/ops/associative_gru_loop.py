"""The AM-GRU time loop with a hand-written backward pass (one fused sequence op).

`associative_gru_loop` runs the AM-GRU step of `tf_memlayers.layers.AssociativeGRUCell` over a
whole sequence whose input projections are precomputed, and defines its gradient by a second,
reverse loop written out by hand instead of TensorFlow's automatic differentiation of the
``while_loop``. The reverse loop multiplies only the small per-step activations; the gradients
of the three recurrent kernels are accumulated after the loop, each as ONE matmul over all
``time * batch`` rows (the cuDNN recipe). Both loops may be compiled with XLA, and the batch
may be split into shards that run as independent loops (concurrently, on CPU cores).

Step (Weissenborn 2016, eqs. 4-5 and 9-12; ``m = n/2`` complex entries, ``C`` copies)::

    pre    = p_t + o_{t-1} R                     p_t = x_t W_x + b, precomputed
    k      = bound(pre[:, :n]),  K_c = perm_c(k) # bounded key, permuted copies
    h      = mean_c conj(K_c) (*) S_c            # retrieval
    [r|u]  = sigmoid(pre[:, n:3n] + h G_h)
    c      = tanh(pre[:, 3n:] + (r*h) C_h)
    delta  = u * (c - h);  o_t = h + delta
    S_c   += K_c (*) delta

With a ``source`` memory ``S^x`` (the Dual AM-GRU's premise memory, paper key layout) the
step also reads ``h2 = mean_c conj(K_c) (*) S^x_c`` and adds ``h2 W_dg`` to the gate and
``h2 W_dc`` to the candidate pre-activations.

Masked steps keep the states and emit the previous emitted output (zeros before the first
unmasked step), or zeros with ``zero_output_for_mask`` — the semantics of `keras.layers.RNN`.
"""

import os

import tensorflow as tf

from tf_memlayers.ops.holographic import permutation_matrix


def _split_key(key):
    """``[B, n]`` key in ``[re | im]`` layout → ``[B, 2, m]``."""
    return tf.reshape(key, (-1, 2, key.shape[-1] // 2))


def _bounded_key(key):
    """``[B, 2, m]`` raw key → ``(bounded key, squared modulus, modulus)`` (eqs. 9-10), all
    in float32 for a half-precision key (its squared modulus overflows float16 above 256)."""
    wide = tf.cast(key, tf.float32) if key.dtype in (tf.float16, tf.bfloat16) else key
    squared = tf.reduce_sum(tf.square(wide), axis=1, keepdims=True)  # [B, 1, m]
    modulus = tf.sqrt(tf.maximum(squared, 1.0))
    return wide / modulus, squared, modulus


def _copies(bounded, matrix, num_copies):
    """``[B, 2, m]`` → permuted copies ``[B, 2, C, m]`` (eq. 4): one matmul with the 0/1
    matrix ``P`` ``[m, C*m]`` of `tf_memlayers.ops.holographic.permutation_matrix`."""
    num_complex = bounded.shape[-1]
    if num_copies == 1:
        return bounded[:, :, None, :]
    copies = tf.matmul(tf.reshape(bounded, (-1, num_complex)), matrix)
    return tf.reshape(copies, (-1, 2, num_copies, num_complex))


def _copies_gradient(grad_copies, matrix, num_copies):
    """Adjoint of `_copies`: ``[B, 2, C, m]`` → ``[B, 2, m]``; multiplying by ``P^T``
    undoes each copy's permutation and sums over the copies."""
    num_complex = grad_copies.shape[-1]
    if num_copies == 1:
        return grad_copies[:, :, 0, :]
    rows = tf.reshape(grad_copies, (-1, num_copies * num_complex))
    return tf.reshape(tf.matmul(rows, matrix, transpose_b=True), (-1, 2, num_complex))


def _read(copies, memory):
    """``mean_c conj(K_c) (*) S_c`` on ``[B, 2, C, m]`` parts → ``[B, 2, m]`` (eq. 5)."""
    key_re, key_im = copies[:, 0], copies[:, 1]
    memory_re, memory_im = memory[:, 0], memory[:, 1]
    read_re = tf.reduce_mean(key_re * memory_re + key_im * memory_im, axis=1)
    read_im = tf.reduce_mean(key_re * memory_im - key_im * memory_re, axis=1)
    return tf.stack([read_re, read_im], axis=1)


def _written(copies, delta):
    """``K_c (*) delta`` for every copy: ``[B, 2, C, m]`` (eq. 12)."""
    key_re, key_im = copies[:, 0], copies[:, 1]
    delta_re, delta_im = delta[:, 0, None, :], delta[:, 1, None, :]
    return tf.stack(
        [key_re * delta_re - key_im * delta_im, key_re * delta_im + key_im * delta_re], axis=1
    )


def _forward_step(pre, memory, kernels, source, matrix, num_copies):
    """One step from ``pre = p_t + o_{t-1} R``; returns ``(h, h2, gates, candidate, delta,
    memory increment)`` (``h2`` None without a source)."""
    gate_h_kernel, candidate_h_kernel, dual_gate_kernel, dual_candidate_kernel = kernels
    n = pre.shape[-1] // 4
    bounded, _, _ = _bounded_key(_split_key(pre[:, :n]))
    copies = _copies(tf.cast(bounded, pre.dtype), matrix, num_copies)
    retrieved = tf.reshape(_read(copies, memory), (-1, n))
    gate_pre = pre[:, n : 3 * n] + tf.matmul(retrieved, gate_h_kernel)
    candidate_pre = pre[:, 3 * n :]
    source_read = None
    if source is not None:
        source_read = tf.reshape(_read(copies, source), (-1, n))
        gate_pre += tf.matmul(source_read, dual_gate_kernel)
        candidate_pre += tf.matmul(source_read, dual_candidate_kernel)
    gates = tf.sigmoid(gate_pre)
    reset, update = gates[:, :n], gates[:, n:]
    candidate = tf.tanh(candidate_pre + tf.matmul(reset * retrieved, candidate_h_kernel))
    delta = update * (candidate - retrieved)
    increment = _written(copies, _split_key(delta))
    return retrieved, source_read, gates, candidate, delta, increment


# Per-step tensors the forward loop stacks over time: the emitted output, then what the
# backward loop reads (pre-activations, memory before the step, o_{t-1}, h, gates, candidate,
# and the source read h2 of the Dual form).
_SAVED = ("outputs", "pre", "memory", "previous", "h", "g", "c", "h2")
_STEP = ("pre", "memory", "h", "g", "c")


def _forward(
    projected,
    mask,
    memory,
    output,
    recurrent_kernel,
    kernels,
    source,
    matrix,
    num_copies,
    zero_output_for_mask,
    units,
):
    """The forward loop; also returns what the backward loop needs, stacked over time."""
    # `units` (a Python int, so part of the trace key) keeps the feature sizes static when a
    # retrace relaxes the shapes seen so far.
    projected = tf.ensure_shape(projected, (None, None, 4 * units))
    steps = tf.shape(projected)[0]
    names = _SAVED if source is not None else _SAVED[:-1]
    arrays = {name: tf.TensorArray(projected.dtype, size=steps) for name in names}

    def body(t, memory, output, emitted, arrays):
        pre = projected[t] + tf.matmul(output, recurrent_kernel)
        retrieved, source_read, gates, candidate, delta, increment = _forward_step(
            pre, memory, kernels, source, matrix, num_copies
        )
        new_output = retrieved + delta
        new_memory = memory + increment
        if mask is not None:
            keep = mask[t][:, None]
            new_emitted = tf.where(keep, new_output, tf.zeros_like(new_output) if
                                   zero_output_for_mask else emitted)
            new_output = tf.where(keep, new_output, output)
            new_memory = tf.where(keep[:, :, None, None], new_memory, memory)
        else:
            new_emitted = new_output
        saved = (new_emitted, pre, memory, output, retrieved, gates, candidate, source_read)
        arrays = {name: arrays[name].write(t, x) for name, x in zip(names, saved)}
        return t + 1, new_memory, new_output, new_emitted, arrays

    _, memory, output, _, arrays = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        (tf.constant(0), memory, output, tf.zeros_like(output), arrays),
        maximum_iterations=steps,
    )
    return memory, output, {name: array.stack() for name, array in arrays.items()}


def _backward_step(saved, grad_memory, grad_output, kernels, source, matrix, num_copies):
    """Gradients of one step: returns ``(d pre [B, 4n], d memory before the step (read part
    only), d source (read part; None without a source))``. ``grad_output`` is the gradient
    reaching ``o_t``, ``grad_memory`` the one reaching the memory after the step."""
    gate_h_kernel, candidate_h_kernel, dual_gate_kernel, dual_candidate_kernel = kernels
    pre, memory, retrieved, gates, candidate = (saved[name] for name in _STEP)
    n = pre.shape[-1] // 4
    key = _split_key(pre[:, :n])
    bounded, squared, modulus = _bounded_key(key)
    copies = _copies(tf.cast(bounded, pre.dtype), matrix, num_copies)
    reset, update = gates[:, :n], gates[:, n:]
    gap = candidate - retrieved
    delta = _split_key(update * gap)
    # Write S_c += K_c (*) delta: gradients of the key copies and of delta.
    g_re, g_im = grad_memory[:, 0], grad_memory[:, 1]
    d_re, d_im = delta[:, 0, None, :], delta[:, 1, None, :]
    k_re, k_im = copies[:, 0], copies[:, 1]
    grad_copies_re = g_re * d_re + g_im * d_im
    grad_copies_im = g_im * d_re - g_re * d_im
    grad_delta = tf.reshape(
        tf.stack(
            [tf.reduce_sum(g_re * k_re + g_im * k_im, axis=1),
             tf.reduce_sum(g_im * k_re - g_re * k_im, axis=1)],
            axis=1,
        ),
        (-1, n),
    ) + grad_output
    # o = h + delta, delta = u * (c - h).
    grad_h = grad_output - grad_delta * update
    grad_candidate_pre = grad_delta * update * (1.0 - tf.square(candidate))
    grad_reset_h = tf.matmul(grad_candidate_pre, candidate_h_kernel, transpose_b=True)
    grad_h += grad_reset_h * reset
    grad_gates = tf.concat([grad_reset_h * retrieved, grad_delta * gap], axis=1)
    grad_gate_pre = grad_gates * gates * (1.0 - gates)
    grad_h += tf.matmul(grad_gate_pre, gate_h_kernel, transpose_b=True)
    # Reads h = mean_c conj(K_c) (*) S_c, and h2 from the source alike.
    grad_copies = [grad_copies_re, grad_copies_im]
    grad_memory_read = _read_gradient(grad_h, copies, memory, grad_copies, num_copies)
    grad_source_read = None
    if source is not None:
        grad_source = tf.matmul(grad_gate_pre, dual_gate_kernel, transpose_b=True) + tf.matmul(
            grad_candidate_pre, dual_candidate_kernel, transpose_b=True
        )
        grad_source_read = _read_gradient(grad_source, copies, source, grad_copies, num_copies)
    # Permuted copies, then bound (k / max(1, |k|)).
    grad_bounded = _copies_gradient(tf.stack(grad_copies, axis=1), matrix, num_copies)
    # d(k / |k|) for |k| >= 1 (the branch tf.maximum's gradient takes at |k| = 1), else identity.
    grad_bounded = tf.cast(grad_bounded, squared.dtype)
    along = tf.reduce_sum(bounded * grad_bounded, axis=1, keepdims=True)
    shrunk = (grad_bounded - bounded * along) / modulus
    grad_key = tf.cast(tf.where(squared >= 1.0, shrunk, grad_bounded), pre.dtype)
    grad_pre = tf.concat(
        [tf.reshape(grad_key, (-1, n)), grad_gate_pre, grad_candidate_pre], axis=1
    )
    return grad_pre, grad_memory_read, grad_source_read


def _read_gradient(grad_read, copies, memory, grad_copies, num_copies):
    """Adjoint of `_read` for ``grad_read`` ``[B, n]``: adds the key copies' gradient to
    ``grad_copies`` (``[re, im]`` list, in place) and returns the memory's ``[B, 2, C, m]``."""
    grad_read = _split_key(grad_read) / tf.cast(num_copies, grad_read.dtype)
    h_re, h_im = grad_read[:, 0, None, :], grad_read[:, 1, None, :]
    m_re, m_im = memory[:, 0], memory[:, 1]
    k_re, k_im = copies[:, 0], copies[:, 1]
    grad_copies[0] += h_re * m_re + h_im * m_im
    grad_copies[1] += h_re * m_im - h_im * m_re
    return tf.stack([h_re * k_re - h_im * k_im, h_re * k_im + h_im * k_re], axis=1)


def _backward(
    saved,
    mask,
    grad_outputs,
    grad_memory,
    grad_output,
    recurrent_kernel,
    kernels,
    source,
    matrix,
    num_copies,
    zero_output_for_mask,
    units,
):
    """The reverse loop; returns the gradients of (projected, memory, output, R, G_h, C_h)
    and, with a source, of (source, W_dg, W_dc)."""
    grad_outputs = tf.ensure_shape(grad_outputs, (None, None, units))
    steps = tf.shape(grad_outputs)[0]
    grad_pre_array = tf.TensorArray(grad_outputs.dtype, size=steps)
    grad_source = tf.zeros_like(grad_memory) if source is not None else tf.zeros(())

    def body(t, grad_memory, grad_output, carried, grad_source, grad_pre_array):
        step = {name: saved[name][t] for name in _STEP}
        incoming = grad_outputs[t] + carried
        grad_total = grad_output + incoming
        if mask is not None:
            keep = mask[t][:, None]
            keep4 = keep[:, :, None, None]
            zero_memory = tf.zeros_like(grad_memory)
            grad_total = tf.where(keep, grad_total, tf.zeros_like(grad_total))
            step_memory = tf.where(keep4, grad_memory, zero_memory)
        else:
            step_memory = grad_memory
        # Masked rows have zero incoming gradients, so their step gradients are zero.
        grad_pre, grad_memory_read, grad_source_read = _backward_step(
            step, step_memory, grad_total, kernels, source, matrix, num_copies
        )
        if source is not None:
            grad_source = grad_source + grad_source_read
        grad_previous = tf.matmul(grad_pre, recurrent_kernel, transpose_b=True)
        if mask is not None:
            grad_pre = tf.where(keep, grad_pre, tf.zeros_like(grad_pre))
            grad_memory = grad_memory + tf.where(keep4, grad_memory_read, zero_memory)
            passed = tf.where(keep, tf.zeros_like(grad_output), grad_output)
            grad_previous = tf.where(keep, grad_previous, passed)
            carried = (
                tf.zeros_like(incoming) if zero_output_for_mask
                else tf.where(keep, tf.zeros_like(incoming), incoming)
            )
        else:
            grad_memory = grad_memory + grad_memory_read
        return (t - 1, grad_memory, grad_previous, carried, grad_source,
                grad_pre_array.write(t, grad_pre))

    _, grad_memory, grad_output, _, grad_source, grad_pre_array = tf.while_loop(
        lambda t, *_: t >= 0,
        body,
        (steps - 1, grad_memory, grad_output, tf.zeros_like(grad_output), grad_source,
         grad_pre_array),
        maximum_iterations=steps,
    )
    grad_pre = grad_pre_array.stack()  # [T, B, 4n]
    n = grad_pre.shape[-1] // 4
    grad_rows = _rows(grad_pre)
    retrieved = _rows(saved["h"])
    reset_retrieved = _rows(saved["g"][..., :n]) * retrieved
    # The kernels' gradients: one matmul each over all time * batch rows.
    grad_recurrent = tf.matmul(_rows(saved["previous"]), grad_rows, transpose_a=True)
    grad_gate_h = tf.matmul(retrieved, grad_rows[:, n : 3 * n], transpose_a=True)
    grad_candidate_h = tf.matmul(reset_retrieved, grad_rows[:, 3 * n :], transpose_a=True)
    grads = [grad_pre, grad_memory, grad_output, grad_recurrent, grad_gate_h, grad_candidate_h]
    if source is not None:
        source_read = _rows(saved["h2"])
        grad_dual_gate = tf.matmul(source_read, grad_rows[:, n : 3 * n], transpose_a=True)
        grad_dual_candidate = tf.matmul(source_read, grad_rows[:, 3 * n :], transpose_a=True)
        grads += [grad_source, grad_dual_gate, grad_dual_candidate]
    return grads


def _rows(x):
    """``[T, B, k]`` → ``[T * B, k]``."""
    return tf.reshape(x, (-1, x.shape[-1]))


_compiled = {}


def _function(fn, jit_compile):
    key = (fn, jit_compile)
    if key not in _compiled:
        _compiled[key] = tf.function(fn, jit_compile=jit_compile, reduce_retracing=True)
    return _compiled[key]


def associative_gru_loop(
    projected,
    memory,
    output,
    recurrent_kernel,
    gate_h_kernel,
    candidate_h_kernel,
    permutations,
    mask=None,
    zero_output_for_mask=False,
    jit_compile=False,
    num_shards=1,
    source=None,
    dual_gate_kernel=None,
    dual_candidate_kernel=None,
):
    """Runs the AM-GRU (or the Dual AM-GRU) over precomputed input projections (time-major).

    Args:
        projected: ``[T, B, 4n]`` ``x_t W_x + b`` with columns ``[key | gates | candidate]``
            (`AssociativeGRUCell.projection_kernels`).
        memory: ``[B, n * C]`` initial memory (layout of `AssociativeGRUCell`).
        output: ``[B, n]`` initial fed-back output ``o_0``.
        recurrent_kernel: ``R`` ``[n, 4n]`` (rows of ``o_{t-1}``).
        gate_h_kernel: ``G_h`` ``[n, 2n]``; candidate_h_kernel: ``C_h`` ``[n, n]``.
        permutations: the copies' permutations ``[C, n/2]``, copy 0 the identity
            (`tf_memlayers.ops.holographic.make_permutations`).
        mask: optional ``[T, B]``; a False step neither reads nor writes.
        zero_output_for_mask: emit zeros (not the previous output) at masked steps.
        jit_compile: compile the forward and the backward loop with XLA.
        num_shards: split the batch into this many independent loops (at most one per
            example), which TensorFlow runs concurrently (one core each).
        source: optional ``[B, n * C]`` source memory read at every step with the same key
            (`DualAssociativeGRUCell` with ``dual_key="paper"``); needs
            ``dual_gate_kernel`` ``[n, 2n]`` and ``dual_candidate_kernel`` ``[n, n]``.

    All tensors share one float dtype (the bound is computed in float32 for float16 and
    bfloat16). The sequence needs at least one step; ``mask`` is cast to bool.

    Returns:
        ``(outputs [T, B, n], final memory [B, n * C], final output [B, n])``, differentiable
        with respect to every tensor argument except ``mask`` (the source memory is read,
        never changed).
    """
    dual = (source, dual_gate_kernel, dual_candidate_kernel)
    if any(x is None for x in dual) and not all(x is None for x in dual):
        raise ValueError(
            "associative_gru_loop: `source`, `dual_gate_kernel` and `dual_candidate_kernel` go "
            "together; got " + ", ".join(
                f"{name}={'None' if x is None else 'a tensor'}"
                for name, x in zip(("source", "dual_gate_kernel", "dual_candidate_kernel"), dual)
            ) + "."
        )
    num_copies = len(permutations)
    if num_copies == 1 and list(permutations[0]) != sorted(permutations[0]):
        raise ValueError(
            "associative_gru_loop: with one copy the permutation must be the identity (copy 0 "
            "is never permuted, as in `make_permutations`)."
        )
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"associative_gru_loop: `num_shards` must be an int >= 1, got "
                         f"{num_shards!r}.")
    batch = output.shape[0]
    if batch is not None:
        num_shards = max(1, min(num_shards, batch))  # no empty shards
    if mask is not None:
        mask = tf.cast(mask, tf.bool)
    n = output.shape[-1]
    zero_output_for_mask = bool(zero_output_for_mask)
    forward = _function(_forward, jit_compile)
    backward = _function(_backward, jit_compile)
    matrix = tf.constant(permutation_matrix(permutations), dtype=projected.dtype)
    constants = (matrix, num_copies, zero_output_for_mask, n)
    has_source = source is not None
    arguments = [projected, memory, output, recurrent_kernel, gate_h_kernel, candidate_h_kernel]
    if has_source:
        arguments += [source, dual_gate_kernel, dual_candidate_kernel]
    # Variables are read here, so the custom gradient sees tensors only.
    arguments = [tf.convert_to_tensor(x) for x in arguments]

    def as_parts(x):
        return tf.reshape(x, (-1, 2, num_copies, n // 2))

    @tf.custom_gradient
    def run(*arguments):
        projected, memory, output, recurrent_kernel, *kernels = arguments
        source = as_parts(kernels.pop(2)) if has_source else None
        kernels = tuple(kernels) + (None, None) * (not has_source)
        sizes = _shard_sizes(tf.shape(output)[0], num_shards)

        def shard(x, axis=0):
            if x is None:
                return [None] * num_shards
            return tf.split(x, sizes, axis=axis) if num_shards > 1 else [x]

        parts = as_parts(memory)
        masks = shard(mask, 1)
        sources = shard(source)
        # The gradient is `gradient` below: no tape may record the loops themselves (their
        # automatic gradient would also need the loops' internal TensorLists out of XLA).
        # Independent shards of the batch run concurrently outside XLA.
        stopped = lambda x: None if x is None else tf.stop_gradient(x)  # noqa: E731
        step_kernels = tuple(map(stopped, kernels))
        results = [
            forward(p, m, s, o, stopped(recurrent_kernel), step_kernels, stopped(x), *constants)
            for p, m, s, o, x in zip(
                shard(stopped(projected), 1), masks, shard(stopped(parts)),
                shard(stopped(output)), sources,
            )
        ]
        saved = [r[2] for r in results]
        outputs = _join([s.pop("outputs") for s in saved], 1)
        final_memory = tf.reshape(_join([r[0] for r in results], 0), tf.shape(memory))
        final_output = _join([r[1] for r in results], 0)

        def gradient(grad_outputs, grad_memory, grad_output):
            grad_outputs, grad_memory, grad_output = (
                tf.zeros_like(like) if grad is None else grad
                for grad, like in ((grad_outputs, outputs), (grad_memory, memory),
                                   (grad_output, output))
            )
            grads = [
                backward(s, m, go, gm, gl, recurrent_kernel, kernels, x, *constants)
                for s, m, go, gm, gl, x in zip(
                    saved, masks, shard(grad_outputs, 1), shard(as_parts(grad_memory)),
                    shard(grad_output), sources,
                )
            ]
            result = [
                _join([g[0] for g in grads], 1),
                tf.reshape(_join([g[1] for g in grads], 0), tf.shape(memory)),
                _join([g[2] for g in grads], 0),
            ]
            result += [tf.add_n([g[i] for g in grads]) for i in (3, 4, 5)]
            if has_source:
                grad_source = _join([g[6] for g in grads], 0)
                result.append(tf.reshape(grad_source, tf.shape(memory)))
                result += [tf.add_n([g[i] for g in grads]) for i in (7, 8)]
            return result

        return (outputs, final_memory, final_output), gradient

    return run(*arguments)


def batch_major_associative_gru_loop(
    projected, memory, output, kernels, permutations, mask=None, go_backwards=False,
    jit_compile=True, num_shards=None, **options
):
    """`associative_gru_loop` on batch-major tensors, as the layers call it.

    Args:
        projected: ``[B, T, 4n]`` input projections; mask: optional ``[B, T]``.
        memory, output, permutations: as in `associative_gru_loop`.
        kernels: ``(R, G_h, C_h)`` (`AssociativeGRUCell.projection_kernels` after the input
            kernel and bias).
        go_backwards: run the sequence in reverse (outputs in processing order, as Keras).
        jit_compile: as in `associative_gru_loop` (here XLA by default).
        num_shards: default `default_num_shards()`.
        **options: other `associative_gru_loop` arguments (``zero_output_for_mask``,
            ``source``, ``dual_gate_kernel``, ``dual_candidate_kernel``).

    Returns:
        ``(outputs [B, T, n], final memory, final output)``.
    """
    projected = tf.transpose(projected, (1, 0, 2))
    if mask is not None:
        mask = tf.transpose(mask)
    if go_backwards:
        projected = tf.reverse(projected, [0])
        mask = None if mask is None else tf.reverse(mask, [0])
    outputs, memory, output = associative_gru_loop(
        projected, memory, output, *kernels, permutations, mask=mask,
        jit_compile=jit_compile,
        num_shards=default_num_shards() if num_shards is None else num_shards,
        **options,
    )
    return tf.transpose(outputs, (1, 0, 2)), memory, output


def default_num_shards():
    """Batch shards for `associative_gru_loop`: 1 when a GPU is visible, else one per CPU
    core TensorFlow may run ops on concurrently (at most 8)."""
    if tf.config.list_logical_devices("GPU"):
        return 1
    threads = tf.config.threading.get_inter_op_parallelism_threads() or _usable_cores()
    return max(1, min(int(threads), 8))


def _usable_cores():
    """CPU cores this process may run on (its affinity), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _shard_sizes(batch, num_shards):
    """Sizes of ``num_shards`` contiguous batch shards, differing by at most one."""
    shards = tf.range(num_shards)
    return batch // num_shards + tf.cast(shards < batch % num_shards, batch.dtype)


def _join(pieces, axis):
    return pieces[0] if len(pieces) == 1 else tf.concat(pieces, axis)
