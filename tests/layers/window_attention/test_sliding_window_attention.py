"""SlidingWindowAttention (parallel form) and SlidingWindowAttentionCell (cell form)."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import (
    CELL_SPEC,
    RNN_MASKING,
    CarriedMemoryTests,
    CellTests,
    EmptyInputTests,
    LayerTestCase,
    ResetCellTests,
    ResetSequenceTests,
    SizesTests,
    rnn_case,
    user_rnn,
)
from tests.support import (
    BACKEND,
    PassThroughCell,
    all_pairs,
    compiled,
    gradients,
    json_report_of_script,
    keras_lstm,
    masked_rnn,
    tensorflow_only,
)
from tests.window_reference import window_attention_reference
from tf_memlayers import ResettableRNN, SlidingWindowAttention, SlidingWindowAttentionCell
from tf_memlayers.layers import resettable_rnn
from tf_memlayers.layers.window_attention.key_value_predict_split import key_value_predict_sizes
from tf_memlayers.models._compiling import compile_and_build_optimizer


class SlidingWindowAttentionTest(
    EmptyInputTests, ResetSequenceTests, CarriedMemoryTests, SizesTests, LayerTestCase
):
    """The shared suites of `SlidingWindowAttention` (tests/layer_test_case.py)."""

    layer_cls = SlidingWindowAttention
    # The window's memory with zero padding as well as the default masked padding.
    memory_variants = {"pad_zeros": lambda **kw: SlidingWindowAttention(2, pad="zeros", **kw)}
    make = staticmethod(lambda **kw: SlidingWindowAttention(3, **kw))
    flags = ("use_bias", "return_memory", "return_attention_scores", "stateful")
    reference = "window_reference"
    keras_checks = {
        "window": (
            SlidingWindowAttention,
            {"window": 2, "mode": "key_value", "use_bias": True},
            dict(
                input_shape=(2, 3, 6),
                expected_output_shape=(2, 3, 3),
                expected_num_trainable_weights=7,
                supports_masking=True,
            ),
        ),
        "window_scores_and_memory": (
            SlidingWindowAttention,
            {"window": 2, "return_attention_scores": True, "return_memory": True},
            dict(
                input_shape=(2, 3, 4),
                expected_output_shape=((2, 3, 4), (2, 3, 2), (2, 10)),
                expected_num_trainable_weights=5,
                supports_masking=True,
                # The loss of the training check sums one tensor; the scores come out too.
                run_training_check=False,
            ),
        ),
        "window_stateful": (
            SlidingWindowAttention,
            {"window": 2, "stateful": True},
            dict(
                input_shape=(2, 3, 4),
                expected_output_shape=(2, 3, 4),
                expected_num_trainable_weights=5,
                expected_num_non_trainable_weights=1,
                supports_masking=True,
            ),
        ),
    }
    journeys = {
        "SlidingWindowAttention": (
            "step",
            lambda e: SlidingWindowAttention(3, mode="key_value")(
                keras_lstm(8, return_sequences=True)(e)
            ),
        ),
    }
    nan_padding = {
        "window_attention": lambda: SlidingWindowAttention(2),
        "window_zeros_pad": lambda: SlidingWindowAttention(3, mode="key_value", pad="zeros"),
        "window_key_value_predict": lambda: SlidingWindowAttention(
            2, mode="key_value_predict", sizes=(2, 1, 1), use_bias=True
        ),
    }
    output_spec = {
        "window": (lambda dtype: SlidingWindowAttention(3, dtype=dtype), (2, 5, 4), {}),
        "window_all_outputs": (
            lambda dtype: SlidingWindowAttention(
                2,
                mode="key_value_predict",
                sizes=(3, 2, 1),
                units=5,
                return_attention_scores=True,
                return_memory=True,
                dtype=dtype,
            ),
            (2, 5, 6),
            {},
        ),
        "window_memory": (
            lambda dtype: SlidingWindowAttention(
                2, mode="key_value", return_memory=True, dtype=dtype
            ),
            (2, 5, 4),
            {},
        ),
    }
    empty = {
        "window": lambda: SlidingWindowAttention(
            2, return_attention_scores=True, return_memory=True
        ),
        "window_zeros_pad": lambda: SlidingWindowAttention(
            2, mode="key_value", pad="zeros", return_memory=True
        ),
    }


class SlidingWindowAttentionCellTest(CellTests, ResetCellTests, SizesTests, LayerTestCase):
    """The shared suites of `SlidingWindowAttentionCell` (tests/layer_test_case.py)."""

    layer_cls = SlidingWindowAttentionCell
    make = staticmethod(lambda **kw: SlidingWindowAttentionCell(keras.layers.LSTMCell(4), 3, **kw))
    flags = ("use_bias",)
    reference = "window_reference"
    not_in = {"output_spec": CELL_SPEC, "nan_padding": RNN_MASKING}
    cells = {
        "window_attention": lambda dtype=None: SlidingWindowAttentionCell(
            keras.layers.LSTMCell(6, dtype=dtype), window=3, dtype=dtype
        ),
        "window_key_value": lambda dtype=None: SlidingWindowAttentionCell(
            keras.layers.GRUCell(6, dtype=dtype), window=2, mode="key_value", dtype=dtype
        ),
        "window_key_value_predict": lambda dtype=None: SlidingWindowAttentionCell(
            keras.layers.LSTMCell(6, dtype=dtype),
            window=3,
            mode="key_value_predict",
            units=5,
            use_bias=True,
            dtype=dtype,
        ),
    }
    keras_checks = {
        "rnn_window_attention": rnn_case(cells["window_attention"], 6, 3 + 5, 1),
        "rnn_window_key_value": rnn_case(cells["window_key_value"], 3, 3 + 5, 1),
        "rnn_window_key_value_predict": rnn_case(cells["window_key_value_predict"], 5, 3 + 7, 1),
    }
    journeys = {
        "SlidingWindowAttentionCell": (
            "step",
            lambda e: user_rnn(
                SlidingWindowAttentionCell(keras.layers.LSTMCell(8), window=3),
                return_sequences=True,
            )(e),
        ),
    }


RNG = np.random.default_rng(0)
WEIGHT_NAMES = [
    "memory_kernel",
    "query_kernel",
    "score_vector",
    "context_kernel",
    "predict_kernel",
    "memory_bias",
    "output_bias",
]


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


CONFIGS = [
    ("attention", None),
    ("key_value", None),
    ("key_value_predict", None),
    ("key_value", (7, 5)),
    ("key_value_predict", (6, 4, 2)),
]


def assert_attention_and_output_widths(layer, attention_units, units):
    """W^Y has ``attention_units`` columns and h*_t ``units`` (defaults: key / value size)."""
    key_size, value_size, _ = key_value_predict_sizes(layer.mode, layer.piece_sizes)
    assert layer.memory_kernel.shape[-1] == (attention_units or key_size)
    assert layer.context_kernel.shape[-1] == (units or value_size)


WINDOWS = [1, 3, 10]
# (attention_units, units): the defaults (the key and value sizes), and widths unlike every
# piece size.
WIDTHS = [(None, None), (5, 7)]


# The options' values by pairs (`all_pairs`; the full product of the five lists is 120 cases),
# the backend one more factor: the parallel form is the same Keras operations on each.
@pytest.mark.parametrize(
    "config, window, widths, pad, use_bias",
    all_pairs(CONFIGS, WINDOWS, WIDTHS, ["mask", "zeros"], [False, True], split_by_backend=True),
)
def test_parallel_form_matches_numpy_reference_float64(
    float64_policy, config, window, widths, pad, use_bias
):
    (mode, sizes), (attention_units, units) = config, widths
    x = attention_inputs()
    layer = SlidingWindowAttention(
        window,
        mode=mode,
        sizes=sizes,
        attention_units=attention_units,
        units=units,
        pad=pad,
        use_bias=use_bias,
        return_attention_scores=True,
    )
    layer.build(x.shape)
    assert_attention_and_output_widths(layer, attention_units, units)
    weights = random_weights(layer)
    outputs, scores = compiled(layer)(x)
    expected, expected_scores, _ = window_attention_reference(
        x, weights, mode, layer.piece_sizes, window, pad
    )
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-10, rtol=0)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-10, rtol=0)


@pytest.mark.parametrize(
    "config, window, widths, pad",
    all_pairs(CONFIGS, WINDOWS, WIDTHS, ["mask", "zeros"], split_by_backend=True),
)
def test_cell_form_matches_numpy_reference_float64(float64_policy, config, window, widths, pad):
    (mode, sizes), (attention_units, units) = config, widths
    x = attention_inputs(steps=11)
    # An identity-like base cell: the cell's output h_t is its input x_t.
    cell = SlidingWindowAttentionCell(
        PassThroughCell(12),
        window,
        mode=mode,
        sizes=sizes,
        attention_units=attention_units,
        units=units,
        pad=pad,
        use_bias=True,
    )
    rnn = keras.layers.RNN(cell, return_sequences=True)
    rnn.build(x.shape)
    assert_attention_and_output_widths(cell, attention_units, units)
    weights = random_weights(cell)
    expected, _, _ = window_attention_reference(x, weights, mode, cell.piece_sizes, window, pad)
    np.testing.assert_allclose(np.asarray(compiled(rnn)(x)), expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("mode,sizes", [("attention", None), ("key_value_predict", (6, 4, 2))])
def test_float32_matches_reference_to_1e5(mode, sizes):
    x = attention_inputs(dtype="float32")
    layer = SlidingWindowAttention(3, mode=mode, sizes=sizes, use_bias=True)
    layer.build(x.shape)
    weights = random_weights(layer)
    expected, _, _ = window_attention_reference(
        x.astype("float64"), weights, mode, layer.piece_sizes, 3
    )
    np.testing.assert_allclose(np.asarray(layer(x)), expected, atol=1e-5, rtol=0)


def build_pair(mode, sizes, window, pad, use_bias, units=12, features=5):
    """An LSTM + parallel layer and an RNN(cell form) with identical weights."""
    lstm = keras_lstm(units, return_sequences=True)
    parallel = SlidingWindowAttention(window, mode=mode, sizes=sizes, pad=pad, use_bias=use_bias)
    cell = SlidingWindowAttentionCell(
        keras.layers.LSTMCell(units), window, mode=mode, sizes=sizes, pad=pad, use_bias=use_bias
    )
    rnn = keras.layers.RNN(cell, return_sequences=True)
    shape = (2, 9, features)
    lstm.build(shape)
    parallel.build((2, 9, units))
    rnn.build(shape)
    random_weights(parallel)
    for source, target in zip(lstm.weights, cell.cell.weights):
        target.assign(source)
    for name in WEIGHT_NAMES:
        if hasattr(parallel, name):
            getattr(cell, name).assign(getattr(parallel, name))
    return lstm, parallel, rnn


def loss_and_grads(forward, x, variables, projection):
    """``forward(x)`` and the gradients of ``sum(forward(x) * projection)`` wrt x, variables."""

    def loss_and_outputs(v):
        outputs = forward(v)
        return ops.sum(outputs * projection), outputs

    (_, outputs), variable_grads, (x_grad,) = gradients(
        loss_and_outputs, variables, [x], has_aux=True
    )
    return outputs, [x_grad, *variable_grads]


def holes_and_right_padding(batch=2, steps=9):
    """Row 0 has holes at steps 2 and 5; row 1 is right-padded after 6 steps."""
    mask = np.ones((batch, steps), bool)
    mask[0, [2, 5]] = False
    mask[1, 6:] = False
    return mask


@pytest.mark.parametrize(
    "config, pad, masked",
    all_pairs(CONFIGS, ["mask", "zeros"], [False, True], split_by_backend=True),
)
def test_cell_and_parallel_forms_agree_forward_and_gradients(float64_policy, config, pad, masked):
    mode, sizes = config
    lstm, parallel, rnn = build_pair(mode, sizes, 3, pad, True)
    # Masked steps are left out of the comparison and the loss; on JAX Keras's RNN emits the
    # cell's first state there (KERAS_MASKED_OUTPUT), zeros with zero_output_for_mask.
    rnn.zero_output_for_mask = BACKEND != "tensorflow"
    x = attention_inputs(steps=9, width=5)
    keep = holes_and_right_padding() if masked else np.ones((2, 9), bool)
    mask = ops.convert_to_tensor(keep) if masked else None
    # Masked steps are left out of the loss: there the cell form repeats its previous output.
    projection = ops.convert_to_tensor(
        RNG.normal(size=(2, 9, parallel.output_units)) * keep[..., None]
    )

    own = [name for name in WEIGHT_NAMES if hasattr(parallel, name)]
    out_p, grads_p = loss_and_grads(
        lambda v: parallel(lstm(v, mask=mask), mask=mask),
        x,
        [*lstm.trainable_weights, *(getattr(parallel, name) for name in own)],
        projection,
    )
    cell = rnn.cell
    out_c, grads_c = loss_and_grads(
        lambda v: rnn(v, mask=mask),
        x,
        [*cell.cell.trainable_weights, *(getattr(cell, name) for name in own)],
        projection,
    )
    np.testing.assert_allclose(np.asarray(out_c)[keep], np.asarray(out_p)[keep], atol=1e-12)
    assert len(grads_p) == len(grads_c)
    for gp, gc in zip(grads_p, grads_c):
        assert np.abs(np.asarray(gp)).max() > 0
        np.testing.assert_allclose(np.asarray(gc), np.asarray(gp), atol=1e-11)


def with_loop_cache_recorded(cell):
    """Records, for every step of ``cell``, whether it was given its loop cache."""
    given = []
    plain_call = cell.call

    def call(inputs, states, cache=None, **kwargs):
        given.append(cache is not None)
        if cache is None:
            return plain_call(inputs, states, **kwargs)
        return plain_call(inputs, states, cache=cache, **kwargs)

    cell.call = call
    return given


@pytest.mark.parametrize("mode,sizes", [("attention", None), ("key_value_predict", (6, 4, 2))])
def test_loop_cache_gives_the_plain_steps_outputs_states_and_gradients(
    float64_policy, monkeypatch, mode, sizes
):
    # `ResettableRNN` carries the projected window keys beside the states and passes them to
    # the cell; without a cache (here: the loop finding none) each step projects the window
    # itself. Masked steps (holes, right padding) and a reset inside each row.
    _, _, keras_rnn = build_pair(mode, sizes, 3, "mask", True)
    cell = keras_rnn.cell
    rnn = ResettableRNN(cell, return_sequences=True, return_state=True)
    given = with_loop_cache_recorded(cell)
    x = attention_inputs(steps=9, width=5)
    mask = ops.convert_to_tensor(holes_and_right_padding())
    reset = np.zeros((2, 9), bool)
    reset[0, 4] = reset[1, 3] = True
    projection = ops.convert_to_tensor(RNG.normal(size=(2, 9, cell.output_units)))

    def forward(v):
        return rnn(v, mask=mask, reset=reset)

    results = []
    for cached in (False, True):
        with monkeypatch.context() as patch:
            if not cached:
                patch.setattr(resettable_rnn, "loop_cache", lambda cell, states: [])
            given.clear()
            outputs, *states = forward(ops.convert_to_tensor(x))
            _, grads, (x_grad,) = gradients(
                lambda v: ops.sum(forward(v)[0] * projection), cell.trainable_weights, [x]
            )
        assert set(given) == {cached}
        results.append((outputs, states, [x_grad, *grads]))
    (out_p, states_p, grads_p), (out_c, states_c, grads_c) = results
    np.testing.assert_allclose(np.asarray(out_c), np.asarray(out_p), atol=1e-12)
    assert len(states_c) == len(states_p) == len(cell.state_size)
    for got, expected in zip(states_c, states_p):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-12)
    for got, expected in zip(grads_c, grads_p):
        assert np.abs(np.asarray(expected)).max() > 0
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-11)


def test_a_cache_that_loop_cache_did_not_make_is_refused():
    cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(4), window=3, attention_units=5)
    x = np.zeros((2, 6), "float32")
    states = [np.zeros((2, size), "float32") for size in cell.state_size]
    cell.build(x.shape)
    good = cell.loop_cache(states)
    assert [tuple(item.shape) for item in good] == [(2, 15)]
    cell(x, states, cache=good)
    for bad in ([], [np.zeros((2, 14), "float32")], good + good, np.zeros((2, 3, 5), "float32")):
        with pytest.raises(
            ValueError,
            match=r"`cache` must be what `loop_cache` returns, a "
            r"list of one tensor \[batch, 15\] \(window 3 × attention width 5\)",
        ):
            cell(x, states, cache=bad)


def test_stateful_loop_derives_its_cache_afresh_after_the_weights_change(float64_policy):
    # The cache is never carried from one call to the next: the second segment projects the
    # carried keys with the changed W^Y, as the plain step does.
    x = attention_inputs(batch=2, steps=12, width=5)
    _, _, rnn = build_pair("key_value", None, 4, "mask", False)
    outputs = {}
    for loop in (keras.layers.RNN, ResettableRNN):
        stateful = loop(
            SlidingWindowAttentionCell.from_config(rnn.cell.get_config()),
            return_sequences=True,
            stateful=True,
        )
        stateful.build((2, 6, 5))
        for a, b in zip(rnn.weights, stateful.cell.weights):
            b.assign(a)
        first = stateful(x[:, :6])
        kernel = stateful.cell.memory_kernel
        kernel.assign(kernel + 0.3)
        outputs[loop.__name__] = np.concatenate([first, stateful(x[:, 6:])], axis=1)
    np.testing.assert_allclose(outputs["ResettableRNN"], outputs["RNN"], atol=1e-12)


def test_cell_weights_are_named_like_the_parallel_layer():
    _, parallel, rnn = build_pair("key_value_predict", None, 2, "mask", True, units=12)
    cell_weight_ids = {id(v) for v in rnn.cell.cell.weights}
    own = [v.path.split("/")[-1] for v in rnn.cell.weights if id(v) not in cell_weight_ids]
    assert own == [v.path.split("/")[-1] for v in parallel.weights] == WEIGHT_NAMES


@pytest.mark.parametrize("form", ["parallel", "cell"])
def test_right_padded_batch_equals_unpadded_sequences(float64_policy, form):
    lstm, parallel, rnn = build_pair("key_value", None, 3, "mask", False)
    lengths = [9, 5]
    x = attention_inputs(steps=9, width=5)
    x[1, 5:] = 0.0
    mask = np.arange(9)[None] < np.array(lengths)[:, None]

    # The parallel form with its LSTM as one compiled program on JAX, once for each shape.
    stacked = compiled(lambda inputs, mask: parallel(lstm(inputs, mask=mask), mask=mask))

    def run(inputs, mask=None):
        if form == "parallel":
            return np.asarray(stacked(inputs, mask))
        return masked_rnn(rnn, inputs, mask) if mask is not None else np.asarray(rnn(inputs))

    padded = run(x, ops.convert_to_tensor(mask))
    for row, length in enumerate(lengths):
        alone = run(x[row : row + 1, :length])
        np.testing.assert_allclose(padded[row, :length], alone[0], atol=1e-12)
    if form == "parallel":
        assert np.all(padded[1, 5:] == 0.0)


def test_masked_steps_are_never_written_nor_attended(float64_policy):
    """Holes anywhere in the sequence: matches the reference that skips masked steps."""
    x = attention_inputs(steps=10)
    mask = RNG.random((2, 10)) > 0.35
    layer = SlidingWindowAttention(3, mode="key_value", return_attention_scores=True)
    layer.build(x.shape)
    weights = random_weights(layer)
    call = compiled(lambda x, mask: layer(x, mask=mask))
    outputs, scores = call(x, ops.convert_to_tensor(mask))
    expected, expected_scores, _ = window_attention_reference(
        x, weights, "key_value", layer.piece_sizes, 3, mask=mask
    )
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-10)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-10)
    cell = SlidingWindowAttentionCell(PassThroughCell(12), 3, mode="key_value")
    rnn = keras.layers.RNN(cell, return_sequences=True, zero_output_for_mask=True)
    rnn.build(x.shape)
    for name in [
        "memory_kernel",
        "query_kernel",
        "score_vector",
        "context_kernel",
        "predict_kernel",
    ]:
        getattr(cell, name).assign(weights[name])
    outputs = compiled(lambda x, mask: rnn(x, mask=mask))(x, ops.convert_to_tensor(mask))
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-10)


def test_mask_propagates_to_the_next_layer():
    inputs = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(10, 6, mask_zero=True)(inputs)
    h = keras_lstm(6, return_sequences=True)(h)
    out = SlidingWindowAttention(2)(h)
    assert out._keras_mask is not None


def test_stateful_parallel_two_segments_equal_one_run(float64_policy):
    x = attention_inputs(batch=3, steps=40)
    whole = SlidingWindowAttention(5, mode="key_value_predict", use_bias=True)
    stateful = SlidingWindowAttention(5, mode="key_value_predict", use_bias=True, stateful=True)
    whole.build(x.shape)
    stateful.build((3, 20, 12))
    for a, b in zip(whole.weights, stateful.trainable_weights):
        b.assign(a)
    expected = np.asarray(whole(x))
    first = np.asarray(stateful(x[:, :20]))
    second = np.asarray(stateful(x[:, 20:]))
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=1e-12)
    stateful.reset_state()
    assert np.all(np.asarray(stateful.memory) == 0.0)
    np.testing.assert_allclose(np.asarray(stateful(x[:, :20])), first, atol=1e-12)


def test_explicit_memory_in_and_out_equals_one_run_and_cell_state(float64_policy):
    x = attention_inputs(batch=2, steps=40)
    layer = SlidingWindowAttention(4, mode="key_value", return_memory=True)
    layer.build(x.shape)
    weights = random_weights(layer)
    call = compiled(lambda x, memory: layer(x, initial_memory=memory))
    expected, _ = call(x, None)
    first, memory = call(x[:, :20], None)
    second, _ = call(x[:, 20:], memory)
    np.testing.assert_allclose(
        np.concatenate([first, second], axis=1), np.asarray(expected), atol=1e-12
    )
    # The memory is exactly the cell form's window state after the same 20 steps.
    cell = SlidingWindowAttentionCell(PassThroughCell(12), 4, mode="key_value")
    rnn = keras.layers.RNN(cell, return_state=True)
    rnn.build(x.shape)
    for name, value in weights.items():
        getattr(cell, name).assign(value)
    _, _, cell_memory = compiled(rnn)(x[:, :20])
    np.testing.assert_allclose(np.asarray(cell_memory), np.asarray(memory), atol=1e-12)


def test_stateful_cell_form_two_segments_equal_one_run(float64_policy):
    x = attention_inputs(batch=2, steps=40, width=5)
    _, _, rnn = build_pair("key_value", None, 5, "mask", False)
    expected = np.asarray(rnn(x))
    stateful = keras.layers.RNN(
        SlidingWindowAttentionCell.from_config(rnn.cell.get_config()),
        return_sequences=True,
        stateful=True,
    )
    stateful.build((2, 20, 5))
    for a, b in zip(rnn.weights, stateful.cell.weights):
        b.assign(a)
    first = np.asarray(stateful(x[:, :20]))
    second = np.asarray(stateful(x[:, 20:]))
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected, atol=1e-12)
    stateful.reset_state()
    np.testing.assert_allclose(np.asarray(stateful(x[:, :20])), first, atol=1e-12)


def test_no_gradient_flows_into_carried_memory(float64_policy):
    x = attention_inputs(batch=1, steps=6)
    layer = SlidingWindowAttention(3, return_memory=True)
    memory = RNG.normal(size=(1, layer_memory_size(layer, x)))
    _, _, (memory_grad,) = gradients(
        lambda m: ops.sum(layer(x, initial_memory=m)[0]), inputs=[memory]
    )
    assert np.all(memory_grad == 0.0)


@pytest.mark.parametrize(
    "mode, units",
    [("attention", None), ("key_value", 9)],  # values projected before / after
)
def test_a_fresh_memory_equals_explicit_zeros_forward_and_gradients(float64_policy, mode, units):
    # Without initial_memory the carried part is not projected (zeros project to zeros).
    x = attention_inputs(batch=2, steps=7)
    layer = SlidingWindowAttention(3, mode=mode, units=units, pad="zeros", use_bias=True)
    zeros = np.zeros((2, layer_memory_size(layer, x)))
    random_weights(layer)
    results = [
        gradients(
            lambda h, call=call: ops.sum(layer(h, **call) * np.cos(np.arange(7))[:, None]),
            layer.trainable_weights,
            [x],
        )
        for call in ({}, {"initial_memory": zeros})
    ]
    (fresh_loss, fresh_weights, fresh_inputs), (loss, weight_grads, input_grads) = results
    np.testing.assert_allclose(fresh_loss, loss, atol=1e-12)
    for got, expected in zip(fresh_weights + fresh_inputs, weight_grads + input_grads):
        np.testing.assert_allclose(got, expected, atol=1e-12)
    np.testing.assert_allclose(np.asarray(layer(x)), np.asarray(layer(x, initial_memory=zeros)))


def layer_memory_size(layer, x):
    layer.build(x.shape)
    return layer.memory_size


def test_get_config_round_trips_every_argument():
    layer = SlidingWindowAttention(
        7,
        mode="key_value_predict",
        sizes=(4, 3, 3),
        attention_units=9,
        units=11,
        pad="zeros",
        use_bias=True,
        return_attention_scores=True,
        return_memory=True,
        stateful=True,
        kernel_initializer="orthogonal",
        bias_initializer="ones",
        name="swa",
    )
    config = layer.get_config()
    clone = SlidingWindowAttention.from_config(config)
    assert clone.get_config() == config
    cell = SlidingWindowAttentionCell(
        keras.layers.GRUCell(10),
        4,
        mode="key_value",
        sizes=(6, 4),
        attention_units=3,
        units=5,
        pad="zeros",
        use_bias=True,
    )
    cell_config = cell.get_config()
    clone = SlidingWindowAttentionCell.from_config(cell_config)
    assert clone.get_config() == cell_config
    assert isinstance(clone.cell, keras.layers.GRUCell) and clone.cell.units == 10


def test_keras_file_round_trip_gives_identical_outputs(tmp_path):
    inputs = keras.Input((None, 5))
    h = keras_lstm(12, return_sequences=True)(inputs)
    a = SlidingWindowAttention(3, mode="key_value_predict", use_bias=True)(h)
    b = keras.layers.RNN(
        SlidingWindowAttentionCell(keras.layers.LSTMCell(12), 3, mode="key_value"),
        return_sequences=True,
    )(inputs)
    model = keras.Model(inputs, [a, b])
    x = attention_inputs(steps=8, width=5, dtype="float32")
    before = model(x)
    path = tmp_path / "window.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for expected, got in zip(before, loaded(x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_bidirectional_backward_half_equals_go_backwards_rnn(float64_policy):
    x = attention_inputs(steps=7, width=5)
    cell = SlidingWindowAttentionCell(keras.layers.GRUCell(8), 3, mode="key_value")
    bidirectional = keras.layers.Bidirectional(keras.layers.RNN(cell, return_sequences=True))
    out = np.asarray(bidirectional(x))
    backward = keras.layers.RNN(
        SlidingWindowAttentionCell.from_config(cell.get_config()),
        return_sequences=True,
        go_backwards=True,
    )
    backward.build(x.shape)
    for a, b in zip(bidirectional.backward_layer.weights, backward.weights):
        b.assign(a)
    expected = np.asarray(backward(x))[:, ::-1]
    np.testing.assert_allclose(out[..., 4:], expected, atol=1e-12)
    assert out.shape == (2, 7, 8)


def small_language_model(form, probe=False):
    """Logits; with ``probe`` also h*_t and (parallel form) the attention scores."""
    inputs = keras.Input((10,), dtype="int32")
    h = keras.layers.Embedding(30, 8)(inputs)
    scores = []
    if form == "parallel":
        h = keras_lstm(12, return_sequences=True)(h)
        h = SlidingWindowAttention(3, mode="key_value", return_attention_scores=probe)(h)
        if probe:
            h, *scores = h
    else:
        cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(12), 3, mode="key_value")
        h = keras.layers.RNN(cell, return_sequences=True)(h)
    logits = keras.layers.Dense(30)(h)
    return keras.Model(inputs, [logits, h, *scores] if probe else logits)


@pytest.mark.parametrize("form", ["parallel", "cell"])
def test_fit_with_jit_compile_matches_eager_and_learns(form):
    data = RNG.integers(0, 30, (32, 11))
    model = small_language_model(form)
    eager = model.predict(data[:, :-1], verbose=0)
    compile_and_build_optimizer(
        model,
        keras.optimizers.Adam(1e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    np.testing.assert_allclose(model.predict(data[:, :-1], verbose=0), eager, atol=1e-5)
    history = model.fit(data[:, :-1], data[:, 1:], epochs=3, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def uniform_weights(model, rng, limit=0.8):
    """Sets every weight to U(-limit, limit): at the Glorot init alpha is almost uniform."""
    for variable in model.weights:
        variable.assign(rng.uniform(-limit, limit, variable.shape))


@pytest.mark.parametrize("form", ["parallel", "cell"])
def test_mixed_float16_matches_float32(form):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 30, (16, 10))
    model = small_language_model(form, probe=True)
    uniform_weights(model, rng)
    expected = model.predict(data, verbose=0)
    keras.config.set_dtype_policy("mixed_float16")
    half = small_language_model(form, probe=True)
    half.set_weights(model.get_weights())
    got = half.predict(data, verbose=0)
    # Outputs come in the policy's compute dtype.
    assert [g.dtype for g in got[:2]] == [np.float16, np.float16]
    logits, h_star = expected[:2]
    np.testing.assert_allclose(got[0], logits, atol=5e-3 * max(1.0, np.abs(logits).max()))
    np.testing.assert_allclose(got[1], h_star, atol=5e-3)
    if form == "parallel":
        scores = expected[2]
        assert got[2].dtype == np.float32  # the softmax's dtype, as AttentionPooling's weights
        assert np.abs(scores[:, 3:] - 1 / 3).max() > 0.05  # not uniform: 10x the tolerance
        np.testing.assert_allclose(got[2], scores, atol=5e-3)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"window": 0}, r"`window` must be >= 1, got 0"),
        ({"window": 2.5}, r"`window` must be an integer"),
        ({"window": 2, "mode": "keyvalue"}, r"`mode` must be one of .*'keyvalue'"),
        ({"window": 2, "pad": "same"}, r"`pad` must be one of 'mask', 'zeros'; got 'same'"),
        ({"window": 2, "units": 0}, r"`units` must be >= 1"),
    ],
)
def test_bad_constructor_arguments(kwargs, match):
    error = TypeError if isinstance(kwargs.get("window"), float) else ValueError
    with pytest.raises(error, match=match):
        SlidingWindowAttention(**kwargs)


def test_bad_shapes_are_rejected_with_clear_messages():
    with pytest.raises(ValueError, match=r"sizes.*sum to 9, but the input width is 12"):
        SlidingWindowAttention(2, mode="key_value", sizes=(5, 4))(np.zeros((1, 3, 12), "float32"))
    with pytest.raises(ValueError, match=r"width 10 does not divide into 3.*sizes="):
        SlidingWindowAttention(2, mode="key_value_predict")(np.zeros((1, 3, 10), "float32"))
    with pytest.raises(ValueError, match=r"`inputs` must have rank 3, got shape \(4, 12\)"):
        SlidingWindowAttention(2)(np.zeros((4, 12), "float32"))
    with pytest.raises(ValueError, match=r"stateful=True. needs a fixed batch size"):
        SlidingWindowAttention(2, stateful=True)(keras.Input((None, 12)))
    with pytest.raises(ValueError, match=r"width 7 does not divide into 2"):
        SlidingWindowAttentionCell(keras.layers.GRUCell(7), 2, mode="key_value")
    with pytest.raises(TypeError, match=r"`cell` must be a Keras RNN cell"):
        SlidingWindowAttentionCell("lstm", 2)
    with pytest.raises(ValueError, match=r"`initial_memory` must have width 39 .*\(2, 5\)"):
        SlidingWindowAttention(3)(
            np.zeros((2, 4, 12), "float32"), initial_memory=np.zeros((2, 5), "float32")
        )


def test_returned_memory_has_a_static_width():
    layer = SlidingWindowAttention(3, mode="key_value", return_memory=True)
    _, memory = layer(keras.Input((5, 12)))
    assert tuple(memory.shape) == (None, layer.memory_size)
    keras.layers.Dense(2)(memory)  # a probe on the memory can be built


def test_stateful_layer_carries_memory_inside_jit_fit():
    """In a compiled train step the memory variable is written, and reset clears it."""
    batch, steps = 4, 6
    inputs = keras.Input((steps,), batch_size=batch, dtype="int32")
    h = keras.layers.Embedding(20, 6)(inputs)
    h = keras_lstm(8, return_sequences=True, stateful=True)(h)
    window = SlidingWindowAttention(3, mode="key_value", stateful=True)
    model = keras.Model(inputs, keras.layers.Dense(20)(window(h)))
    compile_and_build_optimizer(
        model,
        "adam",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    data = RNG.integers(0, 20, (batch * 2, steps + 1))
    model.fit(data[:, :-1], data[:, 1:], batch_size=batch, shuffle=False, verbose=0)
    # The flat memory is [keys | values | validity] (`memory_size`): L keys of the key width
    # (the first of the LSTM output's two pieces) first, one validity flag per slot last.
    memory, key_size = np.asarray(window.memory), window.piece_sizes[0]
    assert memory.shape == (batch, window.memory_size) and window.piece_sizes == (4, 4)
    keys, valid = memory[:, : window.window * key_size], memory[:, -window.window :]
    assert np.all(valid == 1.0) and np.any(keys != 0.0)
    window.reset_state()
    assert np.all(np.asarray(window.memory) == 0.0)


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
    """300 calls of one step each, carrying the memory, give the one call's outputs, in a
    process of their own: on TensorFlow's CPU kernels, a batched product over [8, 1, L, a]
    broadcast against the score vector corrupted the heap and aborted the process."""
    assert json_report_of_script(ONE_STEP_SCRIPT) < 1e-5
