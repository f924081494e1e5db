"""SlidingWindowAttention (parallel form) and SlidingWindowAttentionCell (cell form)."""

import re

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import LayerTestCase, masking_checks, rnn_over, user_rnn
from tests.support import (
    BACKEND,
    PassThroughCell,
    all_pairs,
    as_numpy,
    assert_close,
    compiled,
    gradients,
    json_report_of_script,
    keras_lstm,
    split_rows,
    tensorflow_only,
)
from tests.window_reference import window_attention_reference
from tf_memlayers import ResettableRNN, SlidingWindowAttention, SlidingWindowAttentionCell
from tf_memlayers.layers import resettable_rnn
from tf_memlayers.layers.window_attention.key_value_predict_split import key_value_predict_sizes
from tf_memlayers.models._compiling import compile_and_build_optimizer

INITIALIZERS = dict(kernel_initializer="orthogonal", bias_initializer="ones")
ALL_OUTPUTS = dict(return_memory=True, return_attention_scores=True)


def _window(**kwargs):
    return SlidingWindowAttention(3, **kwargs)


class SlidingWindowAttentionTest(LayerTestCase):
    layer_cls = SlidingWindowAttention

    @pytest.mark.parametrize(
        "init_kwargs, input_shape, output_shape, weights",
        [
            ({"mode": "key_value", "use_bias": True}, (2, 3, 6), (2, 3, 3), 7),
            # The loss of the training check sums one tensor; the scores come out too.
            ({"return_attention_scores": True, "return_memory": True}, (2, 3, 4), None, 5),
            ({"stateful": True}, (2, 3, 4), (2, 3, 4), 5),
        ],
        ids=["key_value_bias", "scores_and_memory", "stateful"],
    )
    def test_layer_behaviors(self, init_kwargs, input_shape, output_shape, weights):
        checks = masking_checks(
            output_shape or ((2, 3, 4), (2, 3, 2), (2, 10)),
            weights,
            input_shape,
            expected_num_non_trainable_weights=int(init_kwargs.get("stateful", False)),
            run_training_check=output_shape is not None,
        )
        self.run_layer_test(SlidingWindowAttention, {"window": 2, **init_kwargs}, **checks)

    def test_journey(self, tmp_path):
        def build(embedded):
            states = keras_lstm(8, return_sequences=True)(embedded)
            outputs, scores, _ = SlidingWindowAttention(3, mode="key_value", **ALL_OUTPUTS)(states)
            assert outputs._keras_mask is not None and scores._keras_mask is not None  # passed on
            return outputs

        # XLA's training step on TensorFlow: test_stateful_layer_carries_memory_inside_jit_fit.
        self.run_journey_test("step", build, tmp_path, xla_on_tensorflow=False)

    def test_config_and_arguments(self):
        sizes = dict(mode="key_value_predict", sizes=(4, 3, 3), attention_units=9, units=11)
        flags = dict(return_attention_scores=True, return_memory=True, stateful=True)
        config = dict(**sizes, **flags, **INITIALIZERS, pad="zeros", use_bias=True, name="swa")
        self.run_config_test(SlidingWindowAttention, window=7, **config)
        self.run_flags_test(_window)
        self.run_sizes_test(_window)

    @pytest.mark.parametrize(
        "kwargs, nan_padding_kwargs",
        [
            ({}, {}),
            (dict(mode="key_value", return_memory=True), dict(mode="key_value", pad="zeros")),
            (
                dict(mode="key_value_predict", sizes=(3, 2, 1), units=5, **ALL_OUTPUTS),
                dict(mode="key_value_predict", sizes=(2, 1, 1)),
            ),
        ],
        ids=["attention", "memory_zeros_pad", "key_value_predict_all_outputs"],
    )
    def test_output_spec_and_nan_padding(self, kwargs, nan_padding_kwargs):
        width = sum(kwargs.get("sizes") or (4,))
        self.run_output_spec_test(lambda dtype: _window(dtype=dtype, **kwargs), (2, 5, width))
        self.run_nan_padding_test(lambda: _window(use_bias=True, **nan_padding_kwargs))

    @pytest.mark.parametrize("pad", split_rows(["mask", "zeros"]))  # the same ops on each backend
    def test_empty_input_resets_and_carried_memory(self, pad):
        outputs = dict(return_attention_scores=pad == "mask", return_memory=True)
        make = lambda: SlidingWindowAttention(2, mode="key_value", pad=pad, **outputs)  # noqa: E731
        self.run_empty_input_test(make)
        self.run_reset_tests(lambda **kw: _window(pad=pad, **kw))
        self.run_carried_memory_tests(lambda **kw: SlidingWindowAttention(2, pad=pad, **kw))

    def test_mixed_float16_matches_float32(self):
        inputs = attention_inputs(steps=10, dtype="float32")
        make = lambda: _window(mode="key_value", return_attention_scores=True)  # noqa: E731
        self.run_mixed_precision_test(make, inputs, atol=5e-3, reset=resets(steps=10))


def _cell(cell=None, dtype=None, **kwargs):
    cell = cell or keras.layers.LSTMCell(6, dtype=dtype)
    return SlidingWindowAttentionCell(cell, 3, dtype=dtype, **kwargs)


class SlidingWindowAttentionCellTest(LayerTestCase):
    layer_cls = SlidingWindowAttentionCell

    @pytest.mark.parametrize(
        "inner, kwargs, width, weights",
        [
            (keras.layers.LSTMCell, {}, 6, 3 + 5),
            (keras.layers.GRUCell, dict(mode="key_value"), 3, 3 + 5),
            (keras.layers.LSTMCell, dict(mode="key_value_predict", units=5, use_bias=True), 5, 10),
        ],
        ids=["attention", "key_value", "key_value_predict"],
    )
    def test_layer_and_cell_behaviors(self, inner, kwargs, width, weights):
        make = lambda dtype=None: _cell(inner(6, dtype=dtype), dtype=dtype, **kwargs)  # noqa: E731
        self.run_cell_tests(make)
        checks = masking_checks((2, 3, width), weights, expected_num_seed_generators=1)
        self.run_layer_test(rnn_over(make), **checks)

    def test_journey(self, tmp_path):
        def build(embedded):
            cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(8), window=3)
            return user_rnn(cell, return_sequences=True)(embedded)

        self.run_journey_test("step", build, tmp_path)

    def test_config_arguments_and_resets(self):
        sizes = dict(mode="key_value", sizes=(6, 4), attention_units=3, units=5, pad="zeros")
        config = dict(**sizes, **INITIALIZERS, use_bias=True, window=4)
        self.run_config_test(SlidingWindowAttentionCell, cell=keras.layers.GRUCell(10), **config)
        self.run_flags_test(_cell)
        self.run_reset_tests(_cell)
        self.run_sizes_test(lambda **kw: _cell(keras.layers.LSTMCell(4), **kw))

    def test_mixed_float16_matches_float32(self):
        inputs = attention_inputs(steps=10, width=5, dtype="float32")
        make = lambda: keras.layers.RNN(_cell(mode="key_value"), return_sequences=True)  # noqa: E731
        self.run_mixed_precision_test(make, inputs, atol=5e-3)


RNG = np.random.default_rng(0)
WEIGHT_NAMES = (
    "memory_kernel query_kernel score_vector context_kernel predict_kernel memory_bias output_bias"
).split()


def random_weights(layer, scale=0.5):
    """Sets every weight of ``layer`` to random values; returns them by name."""
    values = {}
    for variable in layer.trainable_weights:
        name = variable.path.split("/")[-1]
        values[name] = RNG.normal(0.0, scale, variable.shape)
        variable.assign(values[name])
    return values


def attention_inputs(batch=2, steps=12, width=12, dtype="float64"):
    return RNG.normal(0.0, 1.0, (batch, steps, width)).astype(dtype)


def holes_and_right_padding(batch=2, steps=9):
    """Row 0 has holes at steps 2 and 5; row 1 is right-padded after 6 steps."""
    mask = np.ones((batch, steps), bool)
    mask[0, [2, 5]] = mask[1, 6:] = False
    return mask


def resets(steps=9):
    """New documents in row 0 at steps 5 (a hole of `holes_and_right_padding`, where the
    reset is ignored) and 7, in row 1 at steps 0 and 3."""
    reset = np.zeros((2, steps), bool)
    reset[0, [5, 7]] = reset[1, [0, 3]] = True
    return reset


MODES = ("attention", "key_value", "key_value_predict")
CONFIGS = [(mode, None) for mode in MODES] + [("key_value", (7, 5)), (MODES[2], (6, 4, 2))]
# (attention_units, units): the defaults (the key and value sizes), and widths of their own.
WIDTHS = [(None, None), (5, 7)]


# The options (window, pad, bias, mask with holes and padding, resets) by pairs, the backend one
# more factor. With resets the cell form runs in `ResettableRNN`'s loop (its cache), else Keras's.
@pytest.mark.parametrize(
    "config, window, widths, pad, use_bias, masked, reset",
    all_pairs(
        CONFIGS, [1, 3, 10], WIDTHS, ["mask", "zeros"], *[[False, True]] * 3, split_by_backend=True
    ),
)
def test_both_forms_match_numpy_reference_float64(
    float64_policy, config, window, widths, pad, use_bias, masked, reset
):
    (mode, sizes), (attention_units, units) = config, widths
    x, mask = attention_inputs(), holes_and_right_padding(steps=12) if masked else None
    reset = resets(steps=12) if reset else None
    options = dict(mode=mode, sizes=sizes, attention_units=attention_units, units=units, pad=pad)
    options["use_bias"] = use_bias
    layer = SlidingWindowAttention(window, **options, return_attention_scores=True)
    # The cell's output h_t is its input x_t.
    cell = SlidingWindowAttentionCell(PassThroughCell(12), window, **options)
    loop = keras.layers.RNN if reset is None else ResettableRNN
    rnn = loop(cell, return_sequences=True, zero_output_for_mask=True)
    layer.build(x.shape)
    rnn.build(x.shape)
    key_size, value_size, _ = key_value_predict_sizes(mode, layer.piece_sizes)
    for form in (layer, cell):  # W^Y's columns and h*_t's width (defaults: key / value size)
        assert form.memory_kernel.shape[-1] == (attention_units or key_size)
        assert form.context_kernel.shape[-1] == (units or value_size)
    weights = random_weights(layer)
    for name, value in weights.items():
        getattr(cell, name).assign(value)
    expected, expected_scores, _ = window_attention_reference(
        x, weights, mode, layer.piece_sizes, window, pad, mask=mask, reset=reset
    )
    call = compiled(lambda x, mask, reset: layer(x, mask=mask, reset=reset))
    outputs, scores = call(x, mask, reset)
    assert_close([outputs, scores], [expected, expected_scores], 1e-10)
    extra = {} if reset is None else {"reset": reset}
    outputs = compiled(lambda x, mask: rnn(x, mask=mask, **extra))(x, mask)
    np.testing.assert_allclose(as_numpy(outputs), expected, atol=1e-10, rtol=0)
    if reset is not None and window > 1:  # not vacuous: the rows with resets differ without
        assert not np.allclose(as_numpy(call(x, mask, None)[0])[:, 8:], expected[:, 8:])


@pytest.mark.parametrize("mode,sizes", [("attention", None), ("key_value_predict", (6, 4, 2))])
def test_float32_matches_reference_to_1e5(mode, sizes):
    x = attention_inputs(dtype="float32")
    layer = SlidingWindowAttention(3, mode=mode, sizes=sizes, use_bias=True)
    layer.build(x.shape)
    weights = random_weights(layer)
    want = window_attention_reference(x.astype("float64"), weights, mode, layer.piece_sizes, 3)[0]
    np.testing.assert_allclose(as_numpy(layer(x)), want, atol=1e-5, rtol=0)


def build_twins(layer_cls, cell_cls, *args, resettable=False, **options):
    """An LSTM of 12 units then ``layer_cls(*args, **options)`` (the parallel form), and an RNN
    over ``cell_cls(LSTMCell(12), *args, **options)`` (the cell form) with the same random
    weights, for 5 features; ``resettable``: both loops `ResettableRNN`'s."""
    loop = ResettableRNN if resettable else keras.layers.RNN
    lstm = loop(keras.layers.LSTMCell(12), return_sequences=True)
    parallel = layer_cls(*args, **options)
    cell = cell_cls(keras.layers.LSTMCell(12), *args, **options)
    rnn = loop(cell, return_sequences=True)
    lstm.build((2, 9, 5))
    parallel.build((2, 9, 12))
    rnn.build((2, 9, 5))
    random_weights(parallel)
    # Copied as arrays: a JAX variable assigned another variable shares its buffer, which a
    # compiled predict of the other model may then donate.
    for source, target in zip(lstm.weights, cell.cell.weights):
        target.assign(as_numpy(source))
    for weight in parallel.weights:
        getattr(cell, weight.path.split("/")[-1]).assign(as_numpy(weight))
    return lstm, parallel, rnn


def window_twins(mode="key_value_predict", sizes=None, window=3, **options):
    options = {"mode": mode, "sizes": sizes, "use_bias": True, **options}
    return build_twins(SlidingWindowAttention, SlidingWindowAttentionCell, window, **options)


def assert_twins_agree(twins, masked, reset=False, steps=9):
    """`build_twins`'s forms give the same outputs and gradients (of the inputs and of every
    weight) in float64, with or without a mask (`holes_and_right_padding`) and `resets`."""
    lstm, parallel, rnn = twins
    # Masked steps are left out of the comparison and the loss (KERAS_MASKED_OUTPUT).
    rnn.zero_output_for_mask = BACKEND != "tensorflow"
    x = attention_inputs(steps=steps, width=5)
    keep = holes_and_right_padding(steps=steps) if masked else np.ones((2, steps), bool)
    mask = ops.convert_to_tensor(keep) if masked else None
    extra = {"reset": resets(steps)} if reset else {}
    width = rnn.cell.output_size
    projection = ops.convert_to_tensor(RNG.normal(size=(2, steps, width)) * keep[..., None])

    def run(forward, variables):
        def loss(v):
            outputs = forward(v)
            return ops.sum(outputs * projection), outputs

        (_, outputs), variable_grads, input_grads = gradients(loss, variables, [x], has_aux=True)
        return outputs, input_grads + variable_grads

    out_p, grads_p = run(
        lambda v: parallel(lstm(v, mask=mask, **extra), mask=mask, **extra),
        [*lstm.trainable_weights, *parallel.weights],
    )
    cell = rnn.cell
    own = [getattr(cell, weight.path.split("/")[-1]) for weight in parallel.weights]
    out_c, grads_c = run(lambda v: rnn(v, mask=mask, **extra), [*cell.cell.trainable_weights, *own])
    np.testing.assert_allclose(out_c[keep], out_p[keep], atol=1e-12)
    assert all(np.abs(gp).max() > 0 for gp in grads_p)
    assert_close(grads_c, grads_p, atol=1e-11, rtol=1e-10)  # as many gradients, each close


@pytest.mark.parametrize(
    "config, pad, masked, reset",
    all_pairs(CONFIGS, ["mask", "zeros"], [False, True], [False, True], split_by_backend=True),
)
@pytest.mark.usefixtures("float64_policy")
def test_cell_and_parallel_forms_agree_forward_and_gradients(config, pad, masked, reset):
    assert_twins_agree(window_twins(*config, pad=pad, resettable=reset), masked, reset)


class ScaledDotScores:
    """A score of one's own: the scaled dot product of the projected keys and query."""

    def build_scores(self, attention_units):
        pass  # no weight

    def scores(self, window_keys, query):
        products = ops.sum(window_keys * ops.expand_dims(query, -2), axis=-1)
        return products / window_keys.shape[-1] ** 0.5


register = keras.saving.register_keras_serializable(package="tests")
DotWindow = register(type("DotWindow", (ScaledDotScores, SlidingWindowAttention), {}))
DotWindowCell = register(type("DotWindowCell", (ScaledDotScores, SlidingWindowAttentionCell), {}))


@pytest.mark.usefixtures("float64_policy")
def test_a_subclass_scoring_its_own_way_is_both_forms_score_saved_and_loaded(tmp_path):
    twins = build_twins(DotWindow, DotWindowCell, 3, mode="key_value")
    assert_twins_agree(twins, masked=True)
    layer = twins[1]
    weights = {w.path.split("/")[-1]: as_numpy(w) for w in layer.weights}
    assert "score_vector" not in weights and len(weights) == 4
    x, mask = attention_inputs(), holes_and_right_padding(steps=12)
    want = window_attention_reference(
        x, weights, "key_value", (6, 6), 3, mask=mask, score=lambda k, q: k @ q / len(q) ** 0.5
    )[0]
    assert_close(layer(x, mask=mask), want, 1e-10)
    keras.Sequential([keras.Input((None, 12)), layer]).save(tmp_path / "dot.keras")
    loaded = keras.saving.load_model(tmp_path / "dot.keras").layers[-1]
    assert type(loaded) is DotWindow and not hasattr(loaded, "score_vector")
    assert_close(loaded(x, mask=mask), want, 1e-10)


@pytest.mark.parametrize("mode,sizes", [("attention", None), ("key_value_predict", (6, 4, 2))])
@pytest.mark.usefixtures("float64_policy")
def test_loop_cache_gives_the_plain_steps_outputs_states_and_gradients(monkeypatch, mode, sizes):
    # `ResettableRNN` carries the projected window keys beside the states; without them each
    # step projects the window itself. With holes, right padding and resets.
    _, parallel, keras_rnn = window_twins(mode, sizes)
    cell = keras_rnn.cell
    # The cell's own weights are named as the parallel layer's.
    cell_weight_ids = {id(v) for v in cell.cell.weights}
    own = [v.path.split("/")[-1] for v in cell.weights if id(v) not in cell_weight_ids]
    assert own == [v.path.split("/")[-1] for v in parallel.weights] == WEIGHT_NAMES
    rnn = ResettableRNN(cell, return_sequences=True, return_state=True)
    given, plain_call = [], cell.call  # whether each step was given its loop cache

    def call(inputs, states, cache=None, **kwargs):
        given.append(cache is not None)
        return plain_call(inputs, states, **kwargs, **({} if cache is None else {"cache": cache}))

    cell.call = call
    x, mask = attention_inputs(steps=9, width=5), ops.convert_to_tensor(holes_and_right_padding())
    projection = ops.convert_to_tensor(RNG.normal(size=(2, 9, cell.output_units)))

    def loss(v):
        outputs, *states = rnn(v, mask=mask, reset=resets())
        return ops.sum(outputs * projection), [outputs, *states]

    results = []
    for cached in (False, True):
        with monkeypatch.context() as patch:
            if not cached:
                patch.setattr(resettable_rnn, "loop_cache", lambda cell, states: [])
            given.clear()
            (_, values), grads, (dx,) = gradients(loss, cell.trainable_weights, [x], has_aux=True)
        assert set(given) == {cached}
        results.append((values, [dx, *grads]))
    (values_p, grads_p), (values_c, grads_c) = results
    assert len(values_c) == len(values_p) == 1 + len(cell.state_size)
    assert_close(values_c, values_p, atol=1e-12, rtol=1e-10)  # the outputs, then the states
    assert all(np.abs(expected).max() > 0 for expected in grads_p)
    assert_close(grads_c, grads_p, atol=1e-11, rtol=1e-10)


def test_a_cache_that_loop_cache_did_not_make_is_refused():
    cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(4), window=3, attention_units=5)
    x = np.zeros((2, 6), "float32")
    states = [np.zeros((2, size), "float32") for size in cell.state_size]
    cell.build(x.shape)
    good = cell.loop_cache(states)
    assert [tuple(item.shape) for item in good] == [(2, 15)]
    cell(x, states, cache=good)
    message = "`cache` must be what `loop_cache` returns, a list of one tensor [batch, 15] "
    for bad in ([], [np.zeros((2, 14), "float32")], good + good, np.zeros((2, 3, 5), "float32")):
        with pytest.raises(ValueError, match=re.escape(message + "(window 3 × attention width 5)")):
            cell(x, states, cache=bad)


@pytest.mark.usefixtures("float64_policy")
def test_stateful_cell_forms_over_segments_equal_one_run_and_derive_their_caches_afresh():
    # Both loops carry the window over segments; after W^Y changes, the next segment projects
    # the carried keys with the new W^Y (the loop cache is never carried between calls).
    x = attention_inputs(batch=2, steps=18, width=5)
    _, _, rnn = window_twins("key_value", window=4, use_bias=False)
    expected, outputs = as_numpy(rnn(x[:, :12])), {}
    for loop in (keras.layers.RNN, ResettableRNN):
        cell = SlidingWindowAttentionCell.from_config(rnn.cell.get_config())
        stateful = loop(cell, return_sequences=True, stateful=True)
        stateful.build((2, 6, 5))
        for a, b in zip(rnn.weights, stateful.cell.weights):
            b.assign(a)
        first, second = as_numpy(stateful(x[:, :6])), as_numpy(stateful(x[:, 6:12]))
        np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=1e-12)
        kernel = stateful.cell.memory_kernel
        kernel.assign(kernel + 0.3)
        outputs[loop.__name__] = as_numpy(stateful(x[:, 12:]))
    np.testing.assert_allclose(outputs["ResettableRNN"], outputs["RNN"], atol=1e-12)


def assert_memory_carries_over(layer, cell, x, cut, mask=None):
    """``layer`` (built, ``return_memory``) run to step ``cut``, then on from its memory, gives
    one run's outputs, and that memory is the state of ``cell`` (the cell form over a
    `PassThroughCell`, given the layer's weights) after the same steps; returns the memory."""
    call = compiled(lambda x, mask, memory: layer(x, mask=mask, initial_memory=memory))
    part = lambda a, b: (x[:, a:b], None if mask is None else mask[:, a:b])  # noqa: E731
    expected, _ = call(*part(0, None), None)
    first, memory = call(*part(0, cut), None)
    second, _ = call(*part(cut, None), memory)
    assert_close(np.concatenate([as_numpy(first), as_numpy(second)], 1), expected, atol=1e-12)
    rnn = keras.layers.RNN(cell, return_state=True)
    rnn.build(x.shape)
    for weight in layer.weights:
        getattr(cell, weight.path.split("/")[-1]).assign(as_numpy(weight))
    _, _, cell_memory = compiled(lambda x, mask: rnn(x, mask=mask))(*part(0, cut))
    assert_close(cell_memory, memory, atol=1e-12)
    return as_numpy(memory)


@pytest.mark.parametrize(
    "mode, units, pad",
    [("attention", None, "zeros"), ("key_value", 9, "zeros"), ("key_value", 9, "mask")],
)  # values projected before / after
def test_a_fresh_memory_is_explicit_zeros_and_a_carried_one_is_one_run_and_the_cell_state(
    float64_policy, mode, units, pad
):
    # Without initial_memory the carried part is not projected (zeros project to zeros).
    x = attention_inputs(batch=2, steps=7)
    options = dict(mode=mode, units=units, pad=pad, use_bias=True)
    layer = SlidingWindowAttention(3, **options, return_memory=True)
    layer.build(x.shape)
    weights = random_weights(layer)

    def loss(h, **call):
        outputs, _ = layer(h, **call)
        return ops.sum(outputs * ops.cos(ops.arange(7, dtype="float64"))[:, None]), outputs

    fresh, explicit = (
        gradients(lambda h, c=call: loss(h, **c), layer.trainable_weights, [x], has_aux=True)
        for call in ({}, {"initial_memory": np.zeros((2, layer.memory_size))})
    )
    assert_close(fresh, explicit, atol=1e-12, rtol=1e-10)  # loss, outputs, gradients
    cell = SlidingWindowAttentionCell(PassThroughCell(12), 3, **options)
    memory = assert_memory_carries_over(layer, cell, x, 4)
    # The reference's window after those steps: its keys, values (not in "attention"), validity.
    histories = window_attention_reference(x[:, :4], weights, mode, layer.piece_sizes, 3, pad)[2]
    rows = [[np.hstack(part) for part in zip(*history)] for history in histories]
    expected = [np.concatenate(r[::2] if mode == "attention" else r) for r in rows]
    assert_close(memory, np.stack(expected), 1e-12)


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile: jit_compile on torch")
@pytest.mark.parametrize("route", ["stateful call", "stateless_call"])
def test_torch_compile_gives_the_eager_steps_outputs_memory_and_gradients(route):
    import torch

    x, found = ops.convert_to_tensor(RNG.normal(size=(2, 5, 6)).astype("float32")), []
    for use_compile in (True, False):  # compiled first: before the window's products ran
        keras.utils.set_random_seed(0)
        layer = SlidingWindowAttention(13, mode="key_value", stateful=route == "stateful call")
        layer.build(x.shape)
        weights = [weight.value for weight in layer.trainable_weights]

        def call(x, layer=layer, weights=weights):
            return layer(x) if route == "stateful call" else layer.stateless_call(weights, [], x)[0]

        call = torch.compile(call, backend="aot_eager") if use_compile else call
        outputs = [call(x), call(x)]  # the second from the first's memory when stateful
        loss = sum(ops.sum(ops.square(output)) for output in outputs)
        found.append([*outputs, *torch.autograd.grad(loss, weights), *layer.non_trainable_weights])
    for traced, eager in zip(*found):
        np.testing.assert_allclose(as_numpy(traced), as_numpy(eager), rtol=1e-5, atol=1e-6)


def test_stateful_layer_carries_memory_inside_jit_fit():
    batch, steps = 4, 6
    inputs = keras.Input((steps,), batch_size=batch, dtype="int32")
    h = keras.layers.Embedding(20, 6)(inputs)
    # (On torch an eager step, Keras's default there: torch.compile takes most of a minute.)
    h = keras_lstm(8, return_sequences=True, stateful=True)(h)
    window = SlidingWindowAttention(3, mode="key_value", stateful=True)
    model = keras.Model(inputs, keras.layers.Dense(20)(window(h)))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compile_and_build_optimizer(model, "adam", loss, jit_compile=BACKEND != "torch")
    data = RNG.integers(0, 20, (batch * 2, steps + 1))
    model.fit(data[:, :-1], data[:, 1:], batch_size=batch, shuffle=False, verbose=0)
    # The flat memory is [L keys | L values | L validity flags] (`memory_size`).
    memory, key_size = keras.ops.convert_to_numpy(window.memory), window.piece_sizes[0]
    assert memory.shape == (batch, window.memory_size) and window.piece_sizes == (4, 4)
    keys, valid = memory[:, : window.window * key_size], memory[:, -window.window :]
    assert np.all(valid == 1.0) and np.any(keys != 0.0)
    window.reset_state()
    assert np.all(keras.ops.convert_to_numpy(window.memory) == 0.0)


ONE_STEP_SCRIPT = """
import json
import numpy as np
from tf_memlayers import SlidingWindowAttention

layer = SlidingWindowAttention(window=5, mode="key_value", return_memory=True)
inputs = np.random.default_rng(0).normal(size=(8, 300, 32)).astype("float32")
whole, _ = layer(inputs)
memory, steps = None, []
for t in range(inputs.shape[1]):
    output, memory = layer(inputs[:, t : t + 1], initial_memory=memory)
    steps.append(np.asarray(output))
print(json.dumps(float(np.abs(np.concatenate(steps, 1) - np.asarray(whole)).max())))
"""


@tensorflow_only(
    "guards against a TensorFlow CPU kernel that corrupted the heap; on every "
    "backend the stateful tests carry the memory across calls"
)
def test_one_step_calls_at_batch_eight_match_the_whole_sequence():
    """300 one-step calls give one call's outputs (in a process of their own)."""
    assert json_report_of_script(ONE_STEP_SCRIPT) < 1e-5
