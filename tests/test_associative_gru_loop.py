"""`associative_gru_loop` (hand-written backward, batch shards) against Keras's loop."""

import os

import numpy as np
import pytest
import tensorflow as tf
from keras.src import backend as keras_backend

from tf_memlayers.layers import AssociativeGRUCell, DualAssociativeGRUCell
from tf_memlayers.ops.associative_gru_loop import associative_gru_loop, default_num_shards


def _setup(batch, copies, seed, steps=6, units=8, input_dim=5):
    rng = np.random.default_rng(seed)
    cell = AssociativeGRUCell(units, num_copies=copies, dtype="float64")
    cell.build((batch, input_dim))
    for weight in cell.weights:
        weight.assign(rng.normal(scale=0.4, size=weight.shape))
    xs = tf.constant(rng.normal(size=(batch, steps, input_dim)))
    memory = tf.constant(rng.normal(scale=0.3, size=(batch, units * copies)))
    output = tf.constant(rng.normal(size=(batch, units)))
    mask = rng.random((batch, steps)) > 0.3
    mask[0, :2] = False  # masked before the first real step: emitted zeros
    return cell, xs, memory, output, tf.constant(mask)


def _loss(outputs, memory, output):
    return (tf.reduce_sum(tf.sin(outputs)) + tf.reduce_sum(tf.square(memory))
            + tf.reduce_sum(1.7 * output))


def _keras_loop(cell, xs, memory, output, mask, zero_output_for_mask):
    input_kernel, input_bias, *kernels = cell.projection_kernels()
    projected = tf.matmul(xs, input_kernel) + input_bias
    _, outputs, states = keras_backend.rnn(
        lambda x, s: cell.projected_call(x, s, kernels), projected, [memory, output],
        mask=mask, zero_output_for_mask=zero_output_for_mask,
    )
    return outputs, states[0], states[1]


def _fused_loop(cell, xs, memory, output, mask, zero_output_for_mask, **options):
    input_kernel, input_bias, *kernels = cell.projection_kernels()
    projected = tf.transpose(tf.matmul(xs, input_kernel) + input_bias, (1, 0, 2))
    outputs, memory, output = associative_gru_loop(
        projected, memory, output, *kernels, cell.permutations, mask=tf.transpose(mask),
        zero_output_for_mask=zero_output_for_mask, **options,
    )
    return tf.transpose(outputs, (1, 0, 2)), memory, output


def _values_and_gradients(loop, cell, xs, memory, output, mask, **options):
    with tf.GradientTape() as tape:
        tape.watch([xs, memory, output])
        results = loop(cell, xs, memory, output, mask, **options)
        loss = _loss(*results)
    sources = [xs, memory, output, *cell.trainable_weights]
    return [r.numpy() for r in results], [g.numpy() for g in tape.gradient(loss, sources)]


@pytest.mark.parametrize("batch, num_shards", [(5, 1), (5, 2), (7, 3), (1, 2)])
@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("zero_output_for_mask", [False, True])
def test_fused_loop_equals_keras_loop_in_float64(batch, num_shards, jit_compile,
                                                 zero_output_for_mask):
    cell, xs, memory, output, mask = _setup(batch, copies=3, seed=batch + num_shards)
    expected = _values_and_gradients(
        _keras_loop, cell, xs, memory, output, mask, zero_output_for_mask=zero_output_for_mask
    )
    got = _values_and_gradients(
        _fused_loop, cell, xs, memory, output, mask, zero_output_for_mask=zero_output_for_mask,
        jit_compile=jit_compile, num_shards=num_shards,
    )
    for e, g in zip(expected[0] + expected[1], got[0] + got[1]):
        assert np.abs(e).max() > 0
        np.testing.assert_allclose(g, e, atol=1e-11, rtol=1e-11)


@pytest.mark.parametrize("num_shards", [1, 2])
def test_fused_loop_without_mask_inside_a_tf_function(num_shards):
    cell, xs, memory, output, _ = _setup(4, copies=2, seed=3)
    expected = _values_and_gradients(_keras_loop, cell, xs, memory, output, None,
                                     zero_output_for_mask=False)
    input_kernel, input_bias, *kernels = cell.projection_kernels()

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            tape.watch([xs, memory, output])
            projected = tf.transpose(tf.matmul(xs, input_kernel) + input_bias, (1, 0, 2))
            outputs, new_memory, new_output = associative_gru_loop(
                projected, memory, output, *kernels, cell.permutations, num_shards=num_shards
            )
            loss = _loss(tf.transpose(outputs, (1, 0, 2)), new_memory, new_output)
        return tape.gradient(loss, [xs, memory, output])

    for e, g in zip(expected[1][:3], gradients()):
        np.testing.assert_allclose(g.numpy(), e, atol=1e-11, rtol=1e-11)


def test_default_shards_follow_the_cpu_cores():
    shards = default_num_shards()
    if tf.config.list_logical_devices("GPU"):
        assert shards == 1
    else:
        threads = tf.config.threading.get_inter_op_parallelism_threads() or os.cpu_count()
        assert shards == max(1, min(threads, 8))


def _dual_setup(batch, copies, seed, steps=6, units=8, input_dim=5):
    cell, xs, memory, output, mask = _setup(batch, copies, seed, steps, units, input_dim)
    rng = np.random.default_rng(seed + 100)
    dual = DualAssociativeGRUCell(units, num_copies=copies, premise_cell=cell, dtype="float64")
    dual.build((batch, input_dim))
    for weight in (dual.dual_gate_kernel, dual.dual_candidate_kernel):
        weight.assign(rng.normal(scale=0.4, size=weight.shape))
    source = tf.constant(rng.normal(scale=0.3, size=(batch, units * copies)))
    return dual, xs, memory, output, source, mask


@pytest.mark.parametrize("batch, num_shards", [(5, 1), (5, 2)])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_dual_fused_loop_equals_keras_loop_in_float64(batch, num_shards, jit_compile):
    dual, xs, memory, output, source, mask = _dual_setup(batch, copies=3, seed=7)
    sources = [xs, memory, output, source, *dual.trainable_weights]
    results = []
    for fused in (False, True):
        with tf.GradientTape() as tape:
            tape.watch([xs, memory, output, source])
            input_kernel, input_bias, *kernels = dual.premise_cell.projection_kernels()
            projected = tf.matmul(xs, input_kernel) + input_bias
            if fused:
                outputs, new_memory, new_output = associative_gru_loop(
                    tf.transpose(projected, (1, 0, 2)), memory, output, *kernels,
                    dual.permutations, mask=tf.transpose(mask), jit_compile=jit_compile,
                    num_shards=num_shards, source=source,
                    dual_gate_kernel=dual.dual_gate_kernel,
                    dual_candidate_kernel=dual.dual_candidate_kernel,
                )
                outputs = tf.transpose(outputs, (1, 0, 2))
            else:
                _, outputs, states = keras_backend.rnn(
                    lambda x, s: dual.call(x, s), xs, [memory, output, source], mask=mask
                )
                new_memory, new_output = states[0], states[1]
            loss = _loss(outputs, new_memory, new_output)
        grads = tape.gradient(loss, sources)
        results.append([outputs, new_memory, new_output] + grads)
    assert len(dual.trainable_weights) == 7  # 5 shared AM-GRU weights + 2 dual kernels
    for e, g in zip(*results):
        assert np.abs(e.numpy()).max() > 0
        np.testing.assert_allclose(g.numpy(), e.numpy(), atol=1e-11, rtol=1e-11)


def test_dual_arguments_go_together():
    cell, xs, memory, output, _ = _setup(2, copies=2, seed=1)
    _, _, *kernels = cell.projection_kernels()
    projected = tf.zeros((6, 2, 32), tf.float64)
    with pytest.raises(ValueError, match="source=a tensor, dual_gate_kernel=None"):
        associative_gru_loop(projected, memory, output, *kernels, cell.permutations,
                             source=memory)
