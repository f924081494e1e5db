"""The AM-GRU time loop with a hand-written backward pass (one fused sequence op).

`associative_gru_loop` runs the AM-GRU step (`tf_memlayers.ops.associative_gru_step`) over a
whole sequence whose input projections ``p_t = x_t W_x + b`` are precomputed, so that each step
starts from ``pre = p_t + o_{t-1} R``, and defines its gradient by a second, reverse loop
written out by hand instead of TensorFlow's automatic differentiation of the ``while_loop``
(both loops are in `tf_memlayers.ops.associative_gru_passes`). Both loops may be compiled with
XLA, and the batch may be split into shards that run as independent loops (concurrently, on
CPU cores). With a ``source`` memory (the Dual AM-GRU's premise memory, paper key layout)
every step also reads the source with the same key.

Masked steps keep the states and emit the previous emitted output (zeros before the first
unmasked step), or zeros with ``zero_output_for_mask`` — the semantics of `keras.layers.RNN`.
"""

import os

from tf_memlayers._tensorflow import require_tensorflow

# Before the passes' import, which asks for TensorFlow too: the error names this module.
tf = require_tensorflow("the fused AM-GRU loop (tf_memlayers.ops.associative_gru_loop)")

from tf_memlayers.ops import holographic  # noqa: E402
from tf_memlayers.ops.associative_gru_passes import backward_loop, forward_loop  # noqa: E402

_compiled = {}


def _function(fn, jit_compile, exact_shapes=False):
    """``fn`` as a `tf.function`; one that relaxes its shapes after two different calls,
    unless ``exact_shapes`` (a trace per shape: every shape inside stays static). Without
    AutoGraph: the loops are written with `tf.while_loop`, and converting their source took
    about a tenth of a small model's first training step."""
    key = (fn, jit_compile, exact_shapes)
    if key not in _compiled:
        _compiled[key] = tf.function(
            fn, jit_compile=jit_compile, reduce_retracing=not exact_shapes, autograph=False
        )
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
    exact_shapes=False,
    source=None,
    dual_gate_kernel=None,
    dual_candidate_kernel=None,
):
    """Runs the AM-GRU (or the Dual AM-GRU) over precomputed input projections (time-major).

    Args:
        projected: ``[T, B, 4n]`` ``x_t W_x + b`` with columns ``[key | gates | candidate]``
            (`AssociativeGRUCell._projection_kernels`).
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
        exact_shapes: trace the forward loop for these shapes alone, never relaxing them
            (a model with a fixed batch size to convert with TFLite's built-in operators,
            which need every shape in a loop static).
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
            "together; got "
            + ", ".join(
                f"{name}={'None' if x is None else 'a tensor'}"
                for name, x in zip(("source", "dual_gate_kernel", "dual_candidate_kernel"), dual)
            )
            + "."
        )
    num_copies = len(permutations)
    if num_copies == 1 and list(permutations[0]) != sorted(permutations[0]):
        raise ValueError(
            "associative_gru_loop: with one copy the permutation must be the identity (copy 0 "
            "is never permuted, as in `make_permutations`)."
        )
    if not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(
            f"associative_gru_loop: `num_shards` must be an int >= 1, got {num_shards!r}."
        )
    batch = output.shape[0]
    if batch is not None:
        num_shards = max(1, min(num_shards, batch))  # no empty shards
    if mask is not None:
        mask = tf.cast(mask, tf.bool)
    n = output.shape[-1]
    zero_output_for_mask = bool(zero_output_for_mask)
    backward = _function(backward_loop, jit_compile)
    forward = _function(forward_loop, jit_compile, exact_shapes)
    matrix = tf.constant(holographic.permutation_matrix(permutations), dtype=projected.dtype)
    unpermute = tf.constant(holographic.unpermuting_indices(permutations))
    constants = (num_copies, zero_output_for_mask, n)
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
        shards, sizes = _shards(output, num_shards)

        def shard(x, axis=0):
            if x is None:
                return [None] * shards
            return tf.split(x, sizes, axis=axis) if shards > 1 else [x]

        parts = as_parts(memory)
        masks = shard(mask, 1)
        sources = shard(source)
        # The gradient is `gradient` below: no tape may record the loops themselves (their
        # automatic gradient would also need the loops' internal TensorLists out of XLA).
        # Independent shards of the batch run concurrently outside XLA.
        stopped = lambda x: None if x is None else tf.stop_gradient(x)  # noqa: E731
        step_kernels = tuple(map(stopped, kernels))
        results = [
            forward(
                p, m, s, o, stopped(recurrent_kernel), step_kernels, stopped(x), matrix, *constants
            )
            for p, m, s, o, x in zip(
                shard(stopped(projected), 1),
                masks,
                shard(stopped(parts)),
                shard(stopped(output)),
                sources,
            )
        ]
        saved = [r[2] for r in results]
        outputs = _join([s.pop("outputs") for s in saved], 1)
        final_memory = tf.reshape(_join([r[0] for r in results], 0), tf.shape(memory))
        final_output = _join([r[1] for r in results], 0)

        def gradient(grad_outputs, grad_memory, grad_output):
            grad_outputs, grad_memory, grad_output = (
                tf.zeros_like(like) if grad is None else grad
                for grad, like in (
                    (grad_outputs, outputs),
                    (grad_memory, memory),
                    (grad_output, output),
                )
            )
            grads = [
                backward(
                    s, m, go, gm, gl, recurrent_kernel, kernels, x, matrix, unpermute, *constants
                )
                for s, m, go, gm, gl, x in zip(
                    saved,
                    masks,
                    shard(grad_outputs, 1),
                    shard(as_parts(grad_memory)),
                    shard(grad_output),
                    sources,
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
    projected,
    memory,
    output,
    kernels,
    permutations,
    mask=None,
    go_backwards=False,
    jit_compile=True,
    num_shards=None,
    **options,
):
    """`associative_gru_loop` on batch-major tensors, as the layers call it.

    Args:
        projected: ``[B, T, 4n]`` input projections; mask: optional ``[B, T]``.
        memory, output, permutations: as in `associative_gru_loop`.
        kernels: ``(R, G_h, C_h)`` (`AssociativeGRUCell._projection_kernels` after the input
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
        projected,
        memory,
        output,
        *kernels,
        permutations,
        mask=mask,
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


def shard_sizes(batch, num_shards):
    """Sizes of ``num_shards`` contiguous batch shards, differing by at most one.

    `associative_gru_loop` splits the batch into these shards with ``num_shards > 1``.

    Args:
        batch: Integer scalar tensor, the batch size.
        num_shards: Positive integer, the number of shards.

    Returns:
        An integer tensor ``[num_shards]`` (the dtype of ``batch``) that sums to ``batch``, the
        first ``batch % num_shards`` shards one larger than the others.
    """
    shards = tf.range(num_shards)
    return batch // num_shards + tf.cast(shards < batch % num_shards, batch.dtype)


def _shards(output, num_shards):
    """``(count, sizes)`` of the batch shards of ``output`` ``[B, n]``: static sizes and no
    empty shard for a static batch, else sizes computed in the graph."""
    batch = output.shape[0]
    if batch is None:
        return num_shards, shard_sizes(tf.shape(output)[0], num_shards)
    count = max(1, min(num_shards, batch))
    return count, [batch // count + int(i < batch % count) for i in range(count)]


def _join(pieces, axis):
    return pieces[0] if len(pieces) == 1 else tf.concat(pieces, axis)
