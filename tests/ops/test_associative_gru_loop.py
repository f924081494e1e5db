"""`associative_gru_loop` (hand-written backward, batch shards) against Keras's loop."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src import backend as keras_backend

from tests.support import all_pairs, assert_close
from tf_memlayers.layers import AssociativeGRU, AssociativeGRUCell, DualAssociativeGRUCell
from tf_memlayers.ops.associative_gru_loop import associative_gru_loop, shard_sizes

BOTH = [False, True]


def _setup(batch, copies, seed, steps=6, units=8, input_dim=5, dual=False):
    """A float64 cell (a Dual AM-GRU cell with ``dual``) with weights N(0, 0.4), inputs, states
    (``[memory, output]``, and the source memory with ``dual``) and a mask."""
    rng = np.random.default_rng(seed)
    cell_cls = DualAssociativeGRUCell if dual else AssociativeGRUCell
    cell = cell_cls(units, num_copies=copies, dtype="float64")
    cell.build((batch, input_dim))
    for weight in cell.weights:
        weight.assign(rng.normal(scale=0.4, size=weight.shape))
    xs = tf.constant(rng.normal(size=(batch, steps, input_dim)))
    memory = lambda: tf.constant(rng.normal(scale=0.3, size=(batch, units * copies)))  # noqa: E731
    states = [memory(), tf.constant(rng.normal(size=(batch, units))), *([memory()] if dual else [])]
    mask = rng.random((batch, steps)) > 0.3
    mask[0, :2] = False  # masked before the first real step: emitted zeros
    return cell, xs, states, tf.constant(mask)


def _loss(outputs, memory, output):
    return tf.reduce_sum(tf.sin(outputs)) + tf.reduce_sum(memory**2) + tf.reduce_sum(1.7 * output)


def _projection(cell, xs):
    input_kernel, input_bias, *kernels = getattr(cell, "premise_cell", cell)._projection_kernels()
    return tf.matmul(xs, input_kernel) + input_bias, kernels


def _keras_loop(cell, xs, states, mask, zero_output_for_mask):
    if len(states) == 3:  # the Dual cell's own step
        step, inputs = cell.call, xs
    else:
        inputs, kernels = _projection(cell, xs)
        step = lambda x, s: cell._projected_call(x, s, kernels)  # noqa: E731
    _, outputs, states = keras_backend.rnn(
        step, inputs, states, mask=mask, zero_output_for_mask=zero_output_for_mask
    )
    return outputs, states[0], states[1]


def _fused_loop(cell, xs, states, mask, zero_output_for_mask, **options):
    projected, kernels = _projection(cell, xs)
    if len(states) == 3:
        options.update(source=states[2], dual_gate_kernel=cell.dual_gate_kernel)
        options.update(dual_candidate_kernel=cell.dual_candidate_kernel)
    options.update(mask=tf.transpose(mask), zero_output_for_mask=zero_output_for_mask)
    outputs, memory, output = associative_gru_loop(
        tf.transpose(projected, (1, 0, 2)), *states[:2], *kernels, cell.permutations, **options
    )
    return tf.transpose(outputs, (1, 0, 2)), memory, output


def _values_and_gradients(loop, cell, xs, states, mask, **options):
    with tf.GradientTape() as tape:
        tape.watch([xs, *states])
        results = loop(cell, xs, states, mask, **options)
        loss = _loss(*results)
    return [*results, *tape.gradient(loss, [xs, *states, *cell.trainable_weights])]


# The AM-GRU and the Dual AM-GRU (its source memory and kernels), each batch and shard count
# (1 example in 2 shards: one is empty) with and without XLA, under both masked-output rules,
# with 3 or the benchmark's 8 copies (each step's copies read from a ``[B, 2, 8, m]`` memory),
# eagerly or traced with the batch and time unknown, by pairs (`all_pairs`).
@pytest.mark.parametrize(
    "dual, batch_and_shards, jit_compile, zero_output_for_mask, copies_and_units, traced",
    all_pairs(BOTH, [(5, 1), (5, 2), (7, 3), (1, 2)], BOTH, BOTH, [(3, 8), (8, 12)], BOTH),
)
def test_fused_loop_equals_keras_loop_in_float64(
    dual, batch_and_shards, jit_compile, zero_output_for_mask, copies_and_units, traced
):
    (batch, num_shards), (copies, units) = batch_and_shards, copies_and_units
    cell, xs, states, mask = _setup(batch, copies, batch + num_shards, units=units, dual=dual)
    options = dict(zero_output_for_mask=zero_output_for_mask)
    expected = _values_and_gradients(_keras_loop, cell, xs, states, mask, **options)
    options.update(jit_compile=jit_compile, num_shards=num_shards)

    def values_and_gradients(xs, states, mask):
        return _values_and_gradients(_fused_loop, cell, xs, states, mask, **options)

    if traced:  # (any mask dtype is cast to bool)
        unknown = [tf.TensorSpec((None, None, 5), tf.float64)]
        unknown += [[tf.TensorSpec((None, s.shape[1]), tf.float64) for s in states]]
        unknown += [tf.TensorSpec((None, None), tf.int32)]
        values_and_gradients = tf.function(values_and_gradients, input_signature=unknown)
        mask = tf.cast(mask, tf.int32)
    got = values_and_gradients(xs, states, mask)
    assert len(got) == 3 + 3 + dual + 5 + 2 * dual  # values; inputs, states; weights
    assert all(np.abs(e).max() > 0 for e in expected)
    assert_close(got, expected, atol=1e-11, rtol=1e-11)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_masked_step_ignores_non_finite_projections(jit_compile):
    """A masked step writes K (*) 0 to the memory, so its K must not see the step's input."""
    cell, xs, states, mask = _setup(3, copies=4, seed=31)
    projected, kernels = _projection(cell, xs)
    projected, time_mask = tf.transpose(projected, (1, 0, 2)), tf.transpose(mask)
    poisoned, results = tf.where(time_mask[:, :, None], projected, np.nan), []
    for inputs in (projected, poisoned):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            options = dict(mask=time_mask, jit_compile=jit_compile, num_shards=2)
            values = associative_gru_loop(inputs, *states, *kernels, cell.permutations, **options)
            loss = _loss(*values)
        grad = tf.where(time_mask[:, :, None], tape.gradient(loss, inputs), 0.0)
        results.append([*values, grad])
    for e, g in zip(*results):
        assert np.isfinite(g).all()
        np.testing.assert_array_equal(g, e)


def test_layers_of_different_widths_share_the_compiled_loops():
    """Two fused layers of different widths in one model (the loops are traced per width)."""
    xs, models = tf.constant(np.random.default_rng(4).normal(size=(3, 5, 6)), tf.float32), []
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
    assert_close(results[1], results[0], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_fused_loop_in_half_precision_matches_the_cell_form(policy):
    xs = np.random.default_rng(5).normal(size=(4, 6, 5)).astype("float32")
    keras.config.set_dtype_policy(policy)
    try:
        layers = [AssociativeGRU(8, 4, return_sequences=True, fused_loop=f) for f in (False, True)]
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
    cell, _, states, _ = _setup(2, copies=1, seed=1)
    kernels = _projection(cell, tf.zeros((2, 6, 5), tf.float64))[1]
    projected = tf.zeros((6, 2, 32), tf.float64)
    with pytest.raises(ValueError, match="one copy the permutation must be the identity"):
        associative_gru_loop(projected, *states, *kernels, [[1, 0, 2, 3]])
    with pytest.raises(ValueError, match="num_shards.*int >= 1.*0"):
        associative_gru_loop(projected, *states, *kernels, cell.permutations, num_shards=0)
    with pytest.raises(ValueError, match="source=a tensor, dual_gate_kernel=None"):
        associative_gru_loop(projected, *states, *kernels, cell.permutations, source=states[0])
