"""The two time loops of the fused AM-GRU: the forward loop, which saves what the backward
needs, and the hand-written backward loop (`tf_memlayers.ops.associative_gru_loop` wraps
them in one differentiable op).

The forward step is `tf_memlayers.ops.associative_gru_step`. The backward step is its
adjoint, written out: it multiplies only the small per-step activations, and the gradients of
the three recurrent kernels are accumulated after the loop, each as ONE matmul over all
``time * batch`` rows (the cuDNN recipe). The memory is carried as ``[B, 2, C, m]`` (real and
imaginary parts stacked), the layout `tf_memlayers.ops.holographic.split_memory` reads.

Under XLA each per-copy product of a step (``[B, 2, C, m]``) is one loop fusion, and XLA
recomputes a cheap elementwise chain that feeds such a fusion for every element it writes,
i.e. ``C`` times per value, and a select on those products slows them several times over. So
the loops keep the per-copy fusions plain:

* the ``[B, n]`` vectors they read come out of a matmul or a saved tensor, never out of a
  chain: the gradient reaching the retrieved ``h`` is ONE matmul (`stacked_rows`), and
  ``delta`` is saved by the forward loop rather than recomputed;
* a mask acts on ``[B, n]`` tensors only: a masked row's key is zero, so its copies and its
  write are zero and its memory stays as it is, and the backward zeroes that row's ``[B, n]``
  gradients, so its per-copy gradients come out zero;
* the adjoint of the permuted copies is a gather and a sum over the copies
  (`tf_memlayers.ops.holographic.permuted_copies_gradient`), which fuses with the products
  it sums, where a matmul by the permutation matrix would need them written out first.

Measured on CPU (8 copies, n = 100, 25 rows per shard), this takes over a third off the
backward loop, and more with a mask.
"""

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers.ops import holographic
from tf_memlayers.ops.associative_gru_step import SourceMemory, associative_gru_step

tf = require_tensorflow("the fused AM-GRU loop (tf_memlayers.ops.associative_gru_passes)")


def _parts(x):
    """``[B, 2, C, m]`` → the ``(re, im)`` parts of `tf_memlayers.ops.holographic`."""
    return x[:, 0], x[:, 1]


def _forward_step(pre, memory, kernels, source, matrix, num_copies):
    """`associative_gru_step` from ``pre = p_t + o_{t-1} R`` and a ``[B, 2, C, m]`` memory;
    returns the `StepResult` with the new memory as ``[B, 2, C, m]``."""
    gate_h_kernel, candidate_h_kernel, dual_gate_kernel, dual_candidate_kernel = kernels
    n = pre.shape[-1] // 4
    key, gate_pre, candidate_pre = tf.split(pre, [n, 2 * n, n], axis=1)
    if source is not None:
        source = SourceMemory(_parts(source), dual_gate_kernel, dual_candidate_kernel)
    step = associative_gru_step(
        key,
        _parts(memory),
        lambda retrieved: gate_pre + tf.matmul(retrieved, gate_h_kernel),
        lambda reset_retrieved: candidate_pre + tf.matmul(reset_retrieved, candidate_h_kernel),
        matrix,
        num_copies,
        source=source,
    )
    return step._replace(memory=tf.stack(step.memory, axis=1))


# Per-step tensors the forward loop stacks over time: the emitted output, then what the
# backward loop reads (the key before `bound`, memory before the step, o_{t-1}, h, gates,
# candidate, delta (zero at masked steps), and the source read h2 of the Dual form).
_SAVED = ("outputs", "key", "memory", "previous", "h", "g", "c", "delta", "h2")
_STEP = ("key", "memory", "h", "g", "c", "delta")


def forward_loop(
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
    if mask is not None:
        # A masked step writes 0 (*) delta (below), which keeps the memory only if delta is
        # finite: a masked step's input is replaced by zeros.
        projected = tf.where(mask[:, :, None], projected, tf.zeros_like(projected))
    steps = tf.shape(projected)[0]
    names = _SAVED if source is not None else _SAVED[:-1]
    # Each list's element shape given up front (the batch's, static where the batch is):
    # TFLite's built-in operators convert a loop's tensor lists only with static shapes.
    rows = projected.shape[1]
    widths = {"memory": tuple(memory.shape[1:]), "g": (2 * units,)}
    arrays = {
        name: tf.TensorArray(
            projected.dtype, size=steps, element_shape=(rows, *widths.get(name, (units,)))
        )
        for name in names
    }

    def body(t, memory, output, emitted, arrays):
        pre = projected[t] + tf.matmul(output, recurrent_kernel)
        if mask is not None:
            keep = mask[t][:, None]
            # A masked row's key is zero, so are its copies K (they come out of a matmul),
            # and its write K (*) delta leaves the memory as it is: the select acts on the
            # [B, n] key, not on the [B, 2, C, m] memory (a select in the per-copy fusions
            # slows them several times over).
            key = tf.where(keep, pre[:, :units], tf.zeros_like(pre[:, :units]))
            pre = tf.concat([key, pre[:, units:]], axis=1)
        step = _forward_step(pre, memory, kernels, source, matrix, num_copies)
        new_output, new_memory = step.output, step.memory
        if mask is not None:
            new_emitted = tf.where(
                keep, new_output, tf.zeros_like(new_output) if zero_output_for_mask else emitted
            )
            new_output = tf.where(keep, new_output, output)
            # The backward reads a masked row's delta as zero.
            delta = tf.where(keep, step.delta, tf.zeros_like(step.delta))
        else:
            new_emitted, delta = new_output, step.delta
        saved = (
            new_emitted,
            pre[:, :units],
            memory,
            output,
            step.retrieved,
            step.gates,
            step.candidate,
            delta,
            step.source_read,
        )
        arrays = {name: arrays[name].write(t, x) for name, x in zip(names, saved)}
        return t + 1, new_memory, new_output, new_emitted, arrays

    _, memory, output, _, arrays = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        (tf.constant(0), memory, output, tf.zeros_like(output), arrays),
        maximum_iterations=steps,
    )
    return memory, output, {name: array.stack() for name, array in arrays.items()}


def stacked_rows(kernel, units):
    """``[kernel^T ; I]`` ``[k + n, n]``: ``[x | y] @ it = x kernel^T + y`` in ONE matmul, so the
    sum comes out of the matmul already formed (see the module docstring)."""
    identity = tf.eye(units, dtype=kernel.dtype)
    return tf.concat([tf.transpose(kernel), identity], axis=0)


def _backward_step(
    saved, grad_memory, grad_output, kernels, source, matrix, unpermute, num_copies, keep=None
):
    """Gradients of one step: returns ``(d pre [B, 4n], d memory before the step (read part
    only), d source (read part; None without a source))``. ``grad_output`` is the gradient
    reaching ``o_t``, ``grad_memory`` the one reaching the memory after the step.
    ``kernels`` is ``(stacked_rows(G_h), C_h, [W_dg^T ; W_dc^T] or None)``.

    ``keep`` (``[B, 1]`` bool, with a mask) marks the rows that took the step; in the others
    ``grad_output`` and the saved ``delta`` must be zero, and the gradient that the write
    passes to ``delta`` is set to zero here, so every gradient of a masked row comes out zero
    without a select on the ``[B, 2, C, m]`` products."""
    gate_h_rows, candidate_h_kernel, dual_rows = kernels
    key, memory, retrieved, gates, candidate, delta = (saved[name] for name in _STEP)
    n = key.shape[-1]
    k_re, k_im = holographic.bounded_copies(key, matrix, num_copies)
    reset, update = gates[:, :n], gates[:, n:]
    gap = candidate - retrieved
    d_re, d_im = (d[:, None, :] for d in holographic.complexify(delta))
    # Write S_c += K_c (*) delta: gradients of the key copies and of delta.
    g_re, g_im = _parts(grad_memory)
    grad_copies = [g_re * d_re + g_im * d_im, g_im * d_re - g_re * d_im]
    grad_delta = holographic.uncomplexify(
        tf.reduce_sum(g_re * k_re + g_im * k_im, axis=1),
        tf.reduce_sum(g_im * k_re - g_re * k_im, axis=1),
    )
    if keep is not None:
        grad_delta = tf.where(keep, grad_delta, tf.zeros_like(grad_delta))
    grad_delta += grad_output
    # o = h + delta, delta = u * (c - h).
    grad_h = grad_output - grad_delta * update
    grad_candidate_pre = grad_delta * update * (1.0 - tf.square(candidate))
    grad_reset_h = tf.matmul(grad_candidate_pre, candidate_h_kernel, transpose_b=True)
    grad_h += grad_reset_h * reset
    grad_gates = tf.concat([grad_reset_h * retrieved, grad_delta * gap], axis=1)
    grad_gate_pre = grad_gates * gates * (1.0 - gates)
    # grad_h + grad_gate_pre G_h^T, formed by the matmul.
    grad_h = tf.matmul(tf.concat([grad_gate_pre, grad_h], axis=1), gate_h_rows)
    # Reads h = mean_c conj(K_c) (*) S_c, and h2 from the source alike.
    copies = (k_re, k_im)
    grad_memory_read = _read_gradient(grad_h, copies, memory, grad_copies, num_copies)
    grad_source_read = None
    if source is not None:
        # grad_gate_pre W_dg^T + grad_candidate_pre W_dc^T in one matmul.
        grad_source = tf.matmul(tf.concat([grad_gate_pre, grad_candidate_pre], axis=1), dual_rows)
        grad_source_read = _read_gradient(grad_source, copies, source, grad_copies, num_copies)
    # Permuted copies, then bound.
    grad_bounded = holographic.permuted_copies_gradient(*grad_copies, unpermute, num_copies)
    grad_key = holographic.bound_gradient(key, grad_bounded)
    grad_pre = tf.concat([grad_key, grad_gate_pre, grad_candidate_pre], axis=1)
    return grad_pre, grad_memory_read, grad_source_read


def _read_gradient(grad_read, copies, memory, grad_copies, num_copies):
    """Adjoint of the read ``mean_c conj(K_c) (*) S_c`` for ``grad_read`` ``[B, n]``: adds
    the key copies' gradient to ``grad_copies`` (``[re, im]`` list, in place) and returns the
    memory's ``[B, 2, C, m]``."""
    scale = tf.cast(num_copies, grad_read.dtype)
    h_re, h_im = (h[:, None, :] / scale for h in holographic.complexify(grad_read))
    m_re, m_im = _parts(memory)
    k_re, k_im = copies
    grad_copies[0] += h_re * m_re + h_im * m_im
    grad_copies[1] += h_re * m_im - h_im * m_re
    return tf.stack([h_re * k_re - h_im * k_im, h_re * k_im + h_im * k_re], axis=1)


def backward_loop(
    saved,
    mask,
    grad_outputs,
    grad_memory,
    grad_output,
    recurrent_kernel,
    kernels,
    source,
    matrix,
    unpermute,
    num_copies,
    zero_output_for_mask,
    units,
):
    """The reverse loop (``unpermute``: `holographic.unpermuting_indices` of the copies);
    returns the gradients of (projected, memory, output, R, G_h, C_h)
    and, with a source, of (source, W_dg, W_dc)."""
    grad_outputs = tf.ensure_shape(grad_outputs, (None, None, units))
    steps = tf.shape(grad_outputs)[0]
    gate_h_kernel, candidate_h_kernel, dual_gate_kernel, dual_candidate_kernel = kernels
    dual_rows = None
    if source is not None:
        dual_rows = tf.transpose(tf.concat([dual_gate_kernel, dual_candidate_kernel], axis=1))
    step_kernels = (stacked_rows(gate_h_kernel, units), candidate_h_kernel, dual_rows)
    grad_pre_array = tf.TensorArray(
        grad_outputs.dtype, size=steps, element_shape=(grad_outputs.shape[1], 4 * units)
    )
    grad_source = tf.zeros_like(grad_memory) if source is not None else tf.zeros(())

    def body(t, grad_memory, grad_output, carried, grad_source, grad_pre_array):
        step = {name: saved[name][t] for name in _STEP}
        incoming = grad_outputs[t] + carried
        grad_total = grad_output + incoming
        keep = None
        if mask is not None:
            keep = mask[t][:, None]
            grad_total = tf.where(keep, grad_total, tf.zeros_like(grad_total))
        # Masked rows have zero incoming gradients, so their step gradients are zero (and the
        # memory's gradient passes through them unchanged).
        grad_pre, grad_memory_read, grad_source_read = _backward_step(
            step,
            grad_memory,
            grad_total,
            step_kernels,
            source,
            matrix,
            unpermute,
            num_copies,
            keep,
        )
        if source is not None:
            grad_source = grad_source + grad_source_read
        grad_previous = tf.matmul(grad_pre, recurrent_kernel, transpose_b=True)
        grad_memory = grad_memory + grad_memory_read
        if mask is not None:
            grad_pre = tf.where(keep, grad_pre, tf.zeros_like(grad_pre))
            passed = tf.where(keep, tf.zeros_like(grad_output), grad_output)
            grad_previous = tf.where(keep, grad_previous, passed)
            carried = (
                tf.zeros_like(incoming)
                if zero_output_for_mask
                else tf.where(keep, tf.zeros_like(incoming), incoming)
            )
        return (
            t - 1,
            grad_memory,
            grad_previous,
            carried,
            grad_source,
            grad_pre_array.write(t, grad_pre),
        )

    _, grad_memory, grad_output, _, grad_source, grad_pre_array = tf.while_loop(
        lambda t, *_: t >= 0,
        body,
        (
            steps - 1,
            grad_memory,
            grad_output,
            tf.zeros_like(grad_output),
            grad_source,
            grad_pre_array,
        ),
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
