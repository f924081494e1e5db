"""`associative_gru_loop` (hand-written backward, batch shards) against Keras's loop."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src import backend as keras_backend

from tests.support import all_pairs
from tf_memlayers.layers import AssociativeGRU, AssociativeGRUCell, DualAssociativeGRUCell
from tf_memlayers.ops.associative_gru_loop import associative_gru_loop, shard_sizes


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
    return (
        tf.reduce_sum(tf.sin(outputs))
        + tf.reduce_sum(tf.square(memory))
        + tf.reduce_sum(1.7 * output)
    )


def _keras_loop(cell, xs, memory, output, mask, zero_output_for_mask):
    input_kernel, input_bias, *kernels = cell._projection_kernels()
    projected = tf.matmul(xs, input_kernel) + input_bias
    _, outputs, states = keras_backend.rnn(
        lambda x, s: cell._projected_call(x, s, kernels),
        projected,
        [memory, output],
        mask=mask,
        zero_output_for_mask=zero_output_for_mask,
    )
    return outputs, states[0], states[1]


def _fused_loop(cell, xs, memory, output, mask, zero_output_for_mask, **options):
    input_kernel, input_bias, *kernels = cell._projection_kernels()
    projected = tf.transpose(tf.matmul(xs, input_kernel) + input_bias, (1, 0, 2))
    outputs, memory, output = associative_gru_loop(
        projected,
        memory,
        output,
        *kernels,
        cell.permutations,
        mask=tf.transpose(mask),
        zero_output_for_mask=zero_output_for_mask,
        **options,
    )
    return tf.transpose(outputs, (1, 0, 2)), memory, output


def _values_and_gradients(loop, cell, xs, memory, output, mask, **options):
    with tf.GradientTape() as tape:
        tape.watch([xs, memory, output])
        results = loop(cell, xs, memory, output, mask, **options)
        loss = _loss(*results)
    sources = [xs, memory, output, *cell.trainable_weights]
    return [r.numpy() for r in results], [g.numpy() for g in tape.gradient(loss, sources)]


# Each batch and shard count with and without XLA, under both masked-output rules and with 3 or
# the benchmark's 8 copies (each step's copies read from a ``[B, 2, 8, m]`` memory), the options
# together by pairs (`all_pairs`: 8 cases of the product's 32).
@pytest.mark.parametrize(
    "batch_and_shards, jit_compile, zero_output_for_mask, copies_and_units",
    all_pairs([(5, 1), (5, 2), (7, 3), (1, 2)], [False, True], [False, True], [(3, 8), (8, 12)]),
)
def test_fused_loop_equals_keras_loop_in_float64(
    batch_and_shards, jit_compile, zero_output_for_mask, copies_and_units
):
    (batch, num_shards), (copies, units) = batch_and_shards, copies_and_units
    cell, xs, memory, output, mask = _setup(batch, copies, batch + num_shards, units=units)
    options = dict(zero_output_for_mask=zero_output_for_mask)
    expected = _values_and_gradients(_keras_loop, cell, xs, memory, output, mask, **options)
    options.update(jit_compile=jit_compile, num_shards=num_shards)
    got = _values_and_gradients(_fused_loop, cell, xs, memory, output, mask, **options)
    for e, g in zip(expected[0] + expected[1], got[0] + got[1]):
        assert np.abs(e).max() > 0
        np.testing.assert_allclose(g, e, atol=1e-11, rtol=1e-11)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_masked_step_ignores_non_finite_projections(jit_compile):
    """A masked step writes K (*) 0 to the memory, so its K must not see the step's input."""
    cell, xs, memory, output, mask = _setup(3, copies=4, seed=31)
    input_kernel, input_bias, *kernels = cell._projection_kernels()
    projected = tf.transpose(tf.matmul(xs, input_kernel) + input_bias, (1, 0, 2))
    time_mask = tf.transpose(mask)
    poisoned = tf.where(time_mask[:, :, None], projected, np.nan)
    results = []
    for inputs in (projected, poisoned):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            values = associative_gru_loop(
                inputs,
                memory,
                output,
                *kernels,
                cell.permutations,
                mask=time_mask,
                jit_compile=jit_compile,
                num_shards=2,
            )
            loss = _loss(*values)
        grad = tape.gradient(loss, inputs)
        results.append(
            [v.numpy() for v in values] + [tf.where(time_mask[:, :, None], grad, 0.0).numpy()]
        )
    for e, g in zip(*results):
        assert np.isfinite(g).all()
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("batch, num_shards", [(4, 2), (2, 3)])
def test_fused_loop_with_unknown_shapes_inside_a_tf_function(batch, num_shards):
    """Batch and time unknown when traced; with 3 shards and 2 examples one shard is empty."""
    cell, xs, memory, output, mask = _setup(batch, copies=2, seed=3)
    int_mask = tf.cast(mask, tf.int32)  # any mask dtype is cast to bool
    expected = _values_and_gradients(
        _keras_loop, cell, xs, memory, output, mask, zero_output_for_mask=False
    )
    spec = lambda *shape: tf.TensorSpec(shape, tf.float64)  # noqa: E731

    @tf.function(
        input_signature=[
            spec(None, None, 5),
            spec(None, 16),
            spec(None, 8),
            tf.TensorSpec((None, None), tf.int32),
        ]
    )
    def values_and_gradients(xs, memory, output, int_mask):
        with tf.GradientTape() as tape:
            tape.watch([xs, memory, output])
            input_kernel, input_bias, *kernels = cell._projection_kernels()
            projected = tf.transpose(tf.matmul(xs, input_kernel) + input_bias, (1, 0, 2))
            outputs, new_memory, new_output = associative_gru_loop(
                projected,
                memory,
                output,
                *kernels,
                cell.permutations,
                mask=tf.transpose(int_mask),
                num_shards=num_shards,
            )
            results = [tf.transpose(outputs, (1, 0, 2)), new_memory, new_output]
            loss = _loss(*results)
        sources = [xs, memory, output, *cell.trainable_weights]
        return results, tape.gradient(loss, sources)

    results, grads = values_and_gradients(xs, memory, output, int_mask)
    for e, g in zip(expected[0] + expected[1], list(results) + list(grads)):
        np.testing.assert_allclose(g.numpy(), e, atol=1e-11, rtol=1e-11)


def test_layers_of_different_widths_share_the_compiled_loops():
    """Two fused layers of different widths in one model (the loops are traced per width)."""
    rng = np.random.default_rng(4)
    xs = tf.constant(rng.normal(size=(3, 5, 6)), tf.float32)
    models = []
    for fused in (False, True):
        keras.utils.set_random_seed(2)
        inputs = keras.Input((None, 6))
        hidden = AssociativeGRU(10, num_copies=2, return_sequences=True, fused_loop=fused)(inputs)
        top = AssociativeGRU(6, num_copies=2, fused_loop=fused)  # same copies, another width
        models.append(keras.Model(inputs, top(hidden)))
    models[1].set_weights(models[0].get_weights())
    results = []
    for model in models:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sin(model(xs)))
        results.append([loss] + tape.gradient(loss, model.trainable_weights))
    for e, g in zip(*results):
        np.testing.assert_allclose(g.numpy(), e.numpy(), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_fused_loop_in_half_precision_matches_the_cell_form(policy):
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(4, 6, 5)).astype("float32")
    keras.config.set_dtype_policy(policy)
    try:
        layers = [
            AssociativeGRU(8, num_copies=4, return_sequences=True, fused_loop=f)
            for f in (False, True)
        ]
        for layer in layers:
            layer.build((None, None, 5))
        layers[1].cell.set_weights(layers[0].cell.get_weights())
        results = []
        for layer in layers:
            with tf.GradientTape() as tape:
                outputs = layer(xs)
                loss = tf.reduce_sum(tf.cast(outputs, tf.float32) ** 2)
            results.append([outputs] + tape.gradient(loss, layer.trainable_weights))
    finally:
        keras.config.set_dtype_policy("float32")
    assert results[1][0].dtype == results[0][0].dtype == policy.split("_")[1]
    # bfloat16 keeps 8 significant bits (a step of 2^-7 just below 2): the two loops round in
    # different orders over six steps, and differ by up to about 0.022 of the largest value
    # over initializer seeds 0-7 (at seed 5, in the first weight's gradient).
    tolerance = 4e-2 if policy == "mixed_bfloat16" else 3e-3
    for e, g in zip(*results):
        e, g = (tf.cast(x, tf.float32).numpy() for x in (e, g))
        np.testing.assert_allclose(g, e, atol=tolerance * max(1.0, np.abs(e).max()), rtol=0)


def test_shards_differ_in_size_by_at_most_one():
    for batch, shards in ((15, 8), (16, 2), (3, 3), (7, 4)):
        sizes = shard_sizes(tf.constant(batch), shards).numpy()
        assert sizes.sum() == batch and sizes.max() - sizes.min() <= 1 and len(sizes) == shards


def test_bad_loop_arguments():
    cell, xs, memory, output, _ = _setup(2, copies=1, seed=1)
    _, _, *kernels = cell._projection_kernels()
    projected = tf.zeros((6, 2, 32), tf.float64)
    with pytest.raises(ValueError, match="one copy the permutation must be the identity"):
        associative_gru_loop(projected, memory, output, *kernels, [[1, 0, 2, 3]])
    with pytest.raises(ValueError, match="num_shards.*int >= 1.*0"):
        associative_gru_loop(projected, memory, output, *kernels, cell.permutations, num_shards=0)


def _dual_setup(batch, copies, seed, steps=6, units=8, input_dim=5):
    cell, xs, memory, output, mask = _setup(batch, copies, seed, steps, units, input_dim)
    rng = np.random.default_rng(seed + 100)
    dual = DualAssociativeGRUCell(units, num_copies=copies, dtype="float64")
    dual.build((batch, input_dim))
    dual.premise_cell.set_weights(cell.get_weights())
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
            input_kernel, input_bias, *kernels = dual.premise_cell._projection_kernels()
            projected = tf.matmul(xs, input_kernel) + input_bias
            if fused:
                outputs, new_memory, new_output = associative_gru_loop(
                    tf.transpose(projected, (1, 0, 2)),
                    memory,
                    output,
                    *kernels,
                    dual.permutations,
                    mask=tf.transpose(mask),
                    jit_compile=jit_compile,
                    num_shards=num_shards,
                    source=source,
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
    _, _, *kernels = cell._projection_kernels()
    projected = tf.zeros((6, 2, 32), tf.float64)
    with pytest.raises(ValueError, match="source=a tensor, dual_gate_kernel=None"):
        associative_gru_loop(projected, memory, output, *kernels, cell.permutations, source=memory)
