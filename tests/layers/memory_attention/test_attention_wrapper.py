"""`AttentionWrapper` against the NumPy reference of Bahdanau et al. and Luong et al. (2015)."""

import functools
import re

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase
from tests.memory_attention_reference import attention_wrapper_reference as reference
from tests.memory_attention_reference import data as _data
from tests.memory_attention_reference import (
    declared_memory,
    masked_softmax,
    named_weights,
    several_mechanisms_reference,
)
from tests.memory_attention_reference import randomize as _randomize
from tests.memory_attention_reference import wrapper_weights as _weights
from tests.support import BACKEND, all_pairs, as_numpy, assert_close, gradients
from tf_memlayers.layers import AttentionMechanism, AttentionRNN, AttentionWrapper
from tf_memlayers.layers.memory_attention.attention_mechanism import MONOTONIC_MODES

# The shapes of `_data`'s arrays, and the wrapped cells' width.
BATCH, STEPS, LENGTH, MEMORY_DIM, UNITS, INPUT_DIM = 3, 5, 6, 8, 8, 4
# Monotonic attention's options in the suites (noise in training, a bias to learn).
MONOTONIC = dict(monotonic_mode="parallel", sigmoid_noise=1.0, score_bias_init=-1.0)
_two = lambda **options: dict(mechanisms=_two_mechanisms(), **options)  # noqa: E731


def _attend_from_hypothesis(premise, hypothesis, **wrapper_kwargs):
    """A ``"pair"`` journey: a GRU reads the hypothesis attending over the premise."""
    cell = AttentionWrapper(keras.layers.GRUCell(6), **wrapper_kwargs)
    return AttentionRNN(cell)(hypothesis, memory=premise)


def keras_checks_of(make_cell, own_weights, **rnn_kwargs):
    """`run_layer_test`'s arguments for `AttentionRNN` over ``make_cell(dtype)`` and a memory of
    width 8 (Keras's training check takes one input: the journeys train with a memory)."""
    return dict(
        layer_cls=lambda **kw: AttentionRNN(make_cell(kw.get("dtype")), **rnn_kwargs, **kw),
        input_shape={"sequences_shape": (2, 3, 4), "memory_shape": (2, 6, 8)},
        expected_num_trainable_weights=3 + own_weights,
        expected_num_seed_generators=1,  # the GRU cell's dropout
        supports_masking=True,
        run_training_check=False,
    )


def _wrapper(dtype=None, built_for=None, **kwargs):
    """A wrapper of a GRU cell; ``built_for``: built for inputs of that width and the memory of
    `declared_memory` (monotonic attention's state sizes need the memory's length)."""
    cell = AttentionWrapper(keras.layers.GRUCell(4, dtype=dtype), dtype=dtype, **kwargs)
    if built_for:
        cell.build((None, built_for), (None, 4, 6))
    return cell


def _two_mechanisms():
    """A monotonic mechanism (its noise in training) and a general score's."""
    return [AttentionMechanism(**MONOTONIC), AttentionMechanism(score="general", scale=True)]


class AttentionWrapperTest(LayerTestCase):
    layer_cls = AttentionWrapper

    @pytest.mark.parametrize("options", [{}, MONOTONIC], ids=["softmax", "monotonic"])
    def test_layer_behaviors(self, options):
        make = lambda dtype: _wrapper(dtype, **options)  # noqa: E731
        checks = keras_checks_of(make, own_weights=4 + bool(options), return_sequences=True)
        checks["expected_num_seed_generators"] += bool(options)
        self.run_layer_test(**checks, expected_output_shape=(2, 3, 4))

    def test_journey(self, tmp_path):
        # Several mechanisms, one monotonic (its noise in training, its alignments a state); one
        # mechanism's journey: test_attention_rnn.py, its normalized score: ..._mechanism.py.
        options = dict(mechanisms=_two_mechanisms(), attention_size=[4, 3])
        build = lambda p, h: _attend_from_hypothesis(p, h, **options)  # noqa: E731
        self.run_journey_test("pair", build, tmp_path)

    def test_config_arguments_and_resets(self):
        options = dict(score="general", position="before", attention_size=7, scale=True)
        flags = dict(output_attention=True, return_attention_scores=True, input_feeding=True)
        config = dict(**options, **flags, kernel_initializer="orthogonal", probability_fn="hardmax")
        self.run_config_test(AttentionWrapper, cell=keras.layers.GRUCell(4), **config)
        unbuilt = AttentionWrapper(keras.layers.GRUCell(4), return_attention_scores=True)
        pytest.raises(ValueError, getattr, unbuilt, "output_size").match("known once the wrapper")
        self.run_config_test(AttentionWrapper, cell=keras.layers.GRUCell(4), **MONOTONIC, seed=3)
        context = AttentionWrapper(keras.layers.GRUCell(4), **BEFORE, attention_layer="context")
        assert AttentionWrapper.from_config(context.get_config()).attention_layer == "context"
        AttentionWrapper.from_config({**context.get_config(), "attention_layer": DENSE()})  # loads
        several = dict(mechanisms=_two_mechanisms(), attention_size=[3, 5])
        self.run_config_test(AttentionWrapper, cell=keras.layers.GRUCell(4), **several)
        names = ["normalize", "output_attention", "return_attention_scores", "input_feeding"]
        self.run_flags_test(_wrapper, names)
        self.run_flags_test(lambda **kw: _wrapper(score="dot", **kw), ["scale"])
        self.run_reset_tests(_wrapper, **declared_memory(3))
        monotonic = lambda **kw: _wrapper(built_for=5, monotonic_mode="recursive", **kw)  # noqa: E731
        self.run_reset_tests(monotonic, **declared_memory(3))
        # (Keras asks AttentionRNN for its spec, not the cell: `direct_spec=False`.)
        general = dict(score="general", position="before")
        for kwargs in [{}, general, dict(monotonic_mode="hard", built_for=4)]:
            self.run_cell_tests(functools.partial(_wrapper, **kwargs), False, **declared_memory(2))

    @pytest.mark.parametrize("input_feeding", [True, False], ids=["step_by_step", "after_the_loop"])
    @pytest.mark.parametrize("policy, atol", [("mixed_float16", 2e-2), ("mixed_bfloat16", 6e-2)])
    def test_mixed_precision_matches_float32(self, policy, atol, input_feeding):
        x, memory, mask = _data(np.random.default_rng(8), "float32")
        make = lambda: _layer(input_feeding=input_feeding)  # noqa: E731
        kwargs = dict(memory=memory, memory_mask=mask)
        self.run_mixed_precision_test(make, x, atol=atol, policy=policy, **kwargs)


def _layer(score="additive", position="after", output_attention=True, cell=None, **kwargs):
    options = dict(score=score, position=position, output_attention=output_attention)
    wrapper = AttentionWrapper(cell or keras.layers.SimpleRNNCell(UNITS), **options, **kwargs)
    return AttentionRNN(wrapper, return_sequences=True)


# The options of the scores by pairs with positions and output_attention (a row's score: its
# name's first word); then more rows (input_feeding=False, the probability functions).
SCORE_OPTIONS = dict(additive={}, additive_normalized=dict(normalize=True), dot={}, general={})
SCORE_OPTIONS.update(dot_scaled=dict(scale=True), general_scaled=dict(scale=True))
SCORES, POSITIONS = sorted(SCORE_OPTIONS), ("after", "before")
MONOTONIC_SCORES = ("additive", "additive_normalized", "general_scaled", "dot")


@keras.saving.register_keras_serializable(package="tf_memlayers_tests")
def sharpened(scores):
    """A probability function of one's own: the softmax of twice the scores."""
    return keras.ops.softmax(2.0 * scores, axis=-1)


# The probability functions beside the softmax and a layer of one's own, and the reference's.
PROBABILITIES = {"hardmax": "hardmax", sharpened: lambda e, mask: masked_softmax(2 * e, mask)}


def options_of(kind):
    """`attention_reference`'s score, normalize, scale, monotonic_mode and probability_fn of
    the `AttentionMechanism` arguments ``kind``."""
    flags = (kind.get(name, False) for name in ("normalize", "scale"))
    probability = PROBABILITIES.get(kind.get("probability_fn"), "softmax")
    return kind.get("score", "additive"), *flags, kind.get("monotonic_mode"), probability


DENSE = functools.partial(keras.layers.Dense, 5, activation="relu")
BEFORE = {"position": "before", "output_attention": False}  # a step with no attention vector
SEEDED = keras.initializers.RandomUniform(-0.1, 0.1, seed=keras.random.SeedGenerator(3))
REFERENCE_LAYERS = {DENSE: lambda joined, w: np.maximum(joined @ w["kernel"] + w["bias"], 0)}
MORE_ROWS = {
    "dot_no_input_feeding": dict(input_feeding=False),
    "additive_normalized_no_input_feeding": dict(normalize=True, input_feeding=False),
    "general_hardmax": dict(probability_fn="hardmax"),
    "additive_sharpened_no_input_feeding": dict(probability_fn=sharpened, input_feeding=False),
    "general_context": dict(attention_layer="context"),
    "additive_dense_no_input_feeding": dict(attention_layer=DENSE, input_feeding=False),
}

# A mask of the sequence (padding at the end, a hole) or none.
SEQUENCE_MASK = np.ones((BATCH, STEPS), bool)
SEQUENCE_MASK[0, 3:] = SEQUENCE_MASK[2, 1] = False


def _monotonic_case(mode, score_options, position, rng):
    """A monotonic layer (alignments returned) with random weights, its data, and the
    reference's arguments."""
    score, options = score_options.split("_")[0], SCORE_OPTIONS[score_options]
    x, memory, mask = _data(rng)
    layer = _layer(score, position, return_attention_scores=True, monotonic_mode=mode, **options)
    _randomize(layer, rng, x, memory, mask, scale=1.5)
    kwargs = dict(score=score, position=position, output_attention=True, monotonic_mode=mode)
    return layer, (x, memory, mask), {**kwargs, **options}


@pytest.mark.parametrize(
    "score_options, position, output_attention, masked",
    all_pairs(SCORES, POSITIONS, (True, False), (False, True), split_by_backend=True)
    + [pytest.param(name, "after", True, True, id=f"{name}-after-True-True") for name in MORE_ROWS]
    # Monotonic attention ("mode:score options", output_attention=True) by pairs with the rest.
    + [
        pytest.param(f"{mode}:{score}", position, True, masked, id=row.id)
        for row in all_pairs(
            MONOTONIC_MODES, MONOTONIC_SCORES, POSITIONS, (False, True), split_by_backend=True
        )
        for mode, score, position, masked in [row.values]
    ],
)
@pytest.mark.usefixtures("float64_policy")
def test_matches_the_reference_in_float64(score_options, position, output_attention, masked):
    # The memory has padding, and a row of padding only: its weights and context are zeros.
    mode, _, score_options = score_options.rpartition(":")
    sequence_mask = SEQUENCE_MASK if masked else None
    if mode:
        rng = np.random.default_rng(2)
        layer, (x, memory, mask), extra = _monotonic_case(mode, score_options, position, rng)
        args = _weights(layer)
    else:
        score, extra = score_options.split("_")[0], {**SCORE_OPTIONS, **MORE_ROWS}[score_options]
        own = extra.get("attention_layer", "luong")
        options = {**extra, "attention_layer": own() if own in REFERENCE_LAYERS else own}
        rng = np.random.default_rng(0)
        x, memory, mask = _data(rng)
        # An attention vector of its own width, where the step computes one.
        computes = (position == "after" or output_attention) and own == "luong"
        size = {"attention_size": 7} if computes else {}
        options = {"return_attention_scores": True, **size, **options}
        layer = _layer(score, position, output_attention, **options)
        _randomize(layer, rng, x, memory, mask)
        args = (*_weights(layer), score, position, output_attention)
        # The reference's functions.
        probability = PROBABILITIES.get(extra.get("probability_fn"), "softmax")
        reference_layer = REFERENCE_LAYERS.get(own, own)
        extra = {**extra, "probability_fn": probability, "attention_layer": reference_layer}
    got = layer(x, memory=memory, memory_mask=mask, mask=sequence_mask, training=True)
    want = reference(x, memory, mask, *args, sequence_mask=sequence_mask, **extra)
    assert_close(got, want, atol=1e-10)
    if mode:
        # Never on the padding; the expected attention moves off the first vector, the hard one
        # is one-hot (or, stopping nowhere, zeros: row 2, all padding).
        assert np.all(want[1][1, :, 4:] == 0) and not want[1][2].any()
        if mode == "hard":
            assert set(np.unique(want[1])) == {0.0, 1.0}
        else:
            assert want[1][..., 1:].max() > 0.1
    else:  # Not vacuous: without the memory's padding mask the outputs differ.
        ones = np.ones_like(mask)
        unmasked, _ = reference(x, memory, ones, *args, sequence_mask=sequence_mask, **extra)
        assert np.abs(unmasked - want[0])[1].max() > 1e-3


@pytest.mark.parametrize(
    "position, extra", [("after", {}), ("before", {}), ("before", dict(monotonic_mode="parallel"))]
)
def test_matches_the_reference_in_float32(position, extra):
    rng = np.random.default_rng(1)
    x, memory, mask = _data(rng, "float32")
    noise = {"sigmoid_noise": 1.0} if extra else {}  # monotonic attention's, in training only
    layer = _layer("additive", position, **extra, **noise)
    _randomize(layer, rng, x, memory, mask)
    got = as_numpy(layer(x, memory=memory, memory_mask=mask))
    x64, memory64 = x.astype(np.float64), memory.astype(np.float64)
    want, _ = reference(x64, memory64, mask, *_weights(layer), "additive", position, True, **extra)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    if noise:  # drawn anew in each training call, on every output of the rows with a memory
        training = [layer(x, memory=memory, memory_mask=mask, training=True) for _ in range(2)]
        first, second = (as_numpy(t)[:2] for t in training)
        assert np.abs(first - second).min() > 0 < np.abs(first - got[:2]).min()
    # A reset at step 2 gives the rows of the steps from 2 alone (not those of one sequence).
    reset = np.zeros(x.shape[:2], bool)
    reset[:, 2] = True
    packed = as_numpy(layer(x, memory=memory, memory_mask=mask, reset=reset))
    alone = as_numpy(layer(x[:, 2:], memory=memory, memory_mask=mask))
    np.testing.assert_allclose(packed[:, 2:], alone, atol=1e-6)
    assert np.abs(got[:, 2:] - alone).max() > 1e-3


def _monotonic_gradients(mode, position, seen):
    """The gradients of ``sum(outputs * seen)`` for the wrapped cell's weights, the wrapper's
    and the memory, and what the reference needs."""
    rng = np.random.default_rng(3)
    layer, (x, memory, mask), options = _monotonic_case(mode, "additive", position, rng)
    variables = [*layer.cell.cell.weights]
    variables += [v for v in layer.cell.weights if all(v is not c for c in variables)]

    def loss(memory):
        return keras.ops.sum(keras.ops.multiply(layer(x, memory=memory, memory_mask=mask)[0], seen))

    _, grads, memory_grad = gradients(loss, variables, [memory])
    return grads + memory_grad, (x, memory, mask), _weights(layer), options


@pytest.mark.parametrize("position", ["after", "before"])
def test_monotonic_gradients_match_the_reference_and_each_other(float64_policy, position):
    seen = np.random.default_rng(4).normal(size=(BATCH, STEPS, 8))
    parallel = _monotonic_gradients("parallel", position, seen)
    found, (x, memory, mask), (cell_weights, own), options = parallel
    assert_close(found, _monotonic_gradients("recursive", position, seen)[0], atol=1e-10)

    # The reference's derivatives by complex steps, exact to rounding: f' = Im f(v + ih) / h.
    def reference_loss(arrays):
        weights = (tuple(arrays[:3]), dict(zip(own, arrays[3:-1])))
        outputs, _ = reference(x, arrays[-1], mask, *weights, **options)
        return np.sum(outputs * seen)

    arrays = [*cell_weights, *own.values(), memory]
    for index, grad in enumerate(found):
        want = np.zeros_like(grad)
        for at in np.ndindex(*grad.shape):
            moved = [a.astype(complex) for a in arrays]
            moved[index][at] += 1e-30j
            want[at] = reference_loss(moved).imag / 1e-30
        np.testing.assert_allclose(grad, want, atol=1e-10, rtol=0)
    assert abs(found[3 + list(own).index("sigmoid_bias")]) > 1e-3  # the bias learns


def test_hard_monotonic_decoding_step_by_step_never_moves_back():
    rng, length, steps = np.random.default_rng(5), 12, 10
    memory = rng.normal(size=(BATCH, length, MEMORY_DIM)).astype("float32")
    memory[:, -2:] = np.nan  # masked padding, read as zeros (its NaN nowhere in the outputs)
    options = dict(monotonic_mode="hard", return_attention_scores=True)
    cell = AttentionWrapper(keras.layers.GRUCell(UNITS), **options)
    cell.build((None, INPUT_DIM), memory.shape)
    cell.set_weights([rng.uniform(-0.7, 0.7, np.shape(v)) for v in cell.get_weights()])
    states, positions = [np.zeros((BATCH, size), "float32") for size in cell.state_size], []
    for _ in range(steps):
        x = rng.normal(size=(BATCH, INPUT_DIM)).astype("float32")
        output, states = cell(x, states, memory=memory, memory_mask=~np.isnan(memory[..., 0]))
        assert np.isfinite(as_numpy(output)).all()
        alignment = as_numpy(output)[:, -length:]
        assert np.all(np.isin(alignment, [0.0, 1.0])) and np.all(alignment.sum(-1) <= 1)
        positions.append(np.where(alignment.any(-1), alignment.argmax(-1), length))
    positions = np.stack(positions, 1)
    assert np.all(np.diff(positions, axis=1) >= 0) and np.any(np.diff(positions, axis=1) > 0)


def test_bad_calls_are_named_and_a_memory_of_another_batch_size_is_refused_in_fit():
    x, m, k = _data(np.random.default_rng(9), "float32")
    layer = _layer(return_attention_scores=True)  # built for a memory of length 6
    layer(x, memory=m, memory_mask=k)
    symbolic = keras.Input(batch_shape=x.shape)
    of_unknown_length = lambda **kw: _layer(**kw)(symbolic, memory=keras.Input((None, 8)))  # noqa: E731
    for call, fragment in [
        (lambda: layer(x), "no `memory` given"),
        (lambda: layer(x[:, 0], memory=m), "`sequences` must have rank 3, got shape (3, 4)"),
        (lambda: layer(x, memory=m, mask=k), "`mask` must have shape (batch, time) = (3, 5)"),
        (lambda: layer(x, memory=m[:, :, :4]), "[batch, length, 8]"),
        (lambda: layer(x, memory=m[0]), "`memory` must be"),
        (lambda: layer(x, memory=[m, m]), "a list of one per memory needs `mechanisms`"),
        (lambda: layer(x, memory=m, memory_mask=k[:, :3]), "must be [batch, length] = (3, 6)"),
        # Batch sizes unlike the inputs' (3): eagerly, symbolically, in one step of the cell.
        (lambda: layer(x, memory=m[:1]), "(1, 6, 8) has batch size 1, but `sequences` of shape"),
        (lambda: layer(x, memory=m[:2], memory_mask=k[:2]), "(2, 6, 8) has batch"),
        (lambda: layer(x, memory=m, memory_mask=k[:1]), "`memory_mask` of shape (1, 6) has batch"),
        (lambda: layer(x, memory=m, initial_state=[m[:2, 0]] * 2), "(2, 8) has batch size 2"),
        (lambda: layer(x, memory=m, initial_state=[x[:, 0]] * 2), "[0]` must have width 8"),
        (lambda: layer(x, memory=m, initial_state=[m[:, 0]]), "2 tensors [cell state 0 (batch, 8)"),
        (lambda: _layer()(x, memory=m[0]), "AttentionRNN: `memory` must be a 3D tensor"),
        (lambda: layer(symbolic, memory=keras.Input(batch_shape=(2, 6, 8))), "(2, 6, 8) has batch"),
        (lambda: layer(x, memory=m[:, :4]), "[batch, 6, 8] (the length the cell was built with"),
        (lambda: of_unknown_length(return_attention_scores=True), "outputs its weights over it"),
        (lambda: of_unknown_length(**MONOTONIC), "the previous alignments over it are a state"),
        (lambda: layer.cell(x[:, 0], [m[:, 0]] * 2, memory=m[:1]), "1, but `inputs` of shape (3,"),
        (lambda: layer.cell(x[:, 0], [m[:, 0], m[:2, 0]], memory=m), "`states[1]` of shape (2, 8)"),
        (lambda: layer.cell(x[:, 0], [m[:, 0]] * 2, memory=m[..., :4]), "Wrapper: `memory` must"),
        (lambda: layer.cell(x[:, 0], [m[:, 0]] * 2, memory=m, memory_mask=k[:, :3]), "(3, 6), its"),
        (lambda: _layer("dot", cell=keras.layers.GRUCell(5))(x, memory=m), "'dot' needs the query"),
        # Keras's RNN passes no memory, to the build or to the steps.
        (lambda: keras.layers.RNN(AttentionWrapper(keras.layers.GRUCell(3)))(x), "Run it with"),
        (lambda: keras.layers.RNN(layer.cell)(x), "passes none: run the wrapper with `Attention"),
    ]:
        pytest.raises(ValueError, call).match(re.escape(fragment))
    # A memory held by the model (batch 2) in fit: the batches of 2 train, the last batch of 1
    # is refused. JAX and torch know its size when tracing the step; TensorFlow retraces its
    # step for a batch of any size and checks it as the step runs (`check_batch`).
    inputs = keras.Input(x.shape[1:])
    model = keras.Model(inputs, _layer()(inputs, memory=m[:2]))
    model.compile("sgd", "mse", jit_compile=False)
    tensorflow = BACKEND == "tensorflow"
    error = __import__("tensorflow").errors.InvalidArgumentError if tensorflow else ValueError
    sizes = r"of `sequences`.*\[2\].*\[1\]" if tensorflow else "2, but `sequences`.* size 1"
    with pytest.raises(error, match=f"(?s)`memory`.*batch size {sizes}"):
        model.fit(x, np.zeros((3, STEPS, UNITS)), batch_size=2, verbose=0)


@pytest.mark.parametrize("kw", [{}, dict(attention_layer="context"), dict(monotonic_mode="hard")])
def test_the_initial_state_is_the_zeros_attention_rnn_starts_from(kw):
    x, m, k = _data(np.random.default_rng(4), "float32")
    cell = AttentionWrapper(keras.layers.LSTMCell(UNITS), **kw)
    if kw:  # a width the memory sets: known once built
        pytest.raises(ValueError, cell.get_initial_state, BATCH).match("known once the wrapper")
    expected = (layer := AttentionRNN(cell, return_sequences=True))(x, memory=m, memory_mask=k)
    state = cell.get_initial_state(BATCH)
    assert [tuple(s.shape) for s in state] == [(BATCH, size) for size in cell.state_size]
    assert len(state) == 3 + ("monotonic_mode" in kw)
    assert not any(np.any(as_numpy(s)) for s in state)
    assert_close(layer(x, memory=m, memory_mask=k, initial_state=state), expected, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"score": "concat"}, "`score` must be one of 'additive', 'dot', 'general'"),
        ({"position": "inside"}, "`position` must be one of"),
        ({"score": "dot", "normalize": True}, "`normalize=True`"),
        ({"scale": True}, "`scale=True`"),
        ({"attention_size": 0}, "`attention_size` must be >= 1"),
        ({"position": "before", "input_feeding": False}, "`input_feeding=False`"),
        ({"score": "dot", "attention_units": 32}, "got attention_units=32 with score='dot'"),
        ({"score": "general", "attention_units": 32}, "attention_units=32 with score='general'"),
        ({**BEFORE, "attention_size": 32}, "False and position='before'; got attention_size=32"),
        ({**BEFORE, "attention_layer": DENSE()}, "`attention_layer` computes the attention vector"),
        ({"monotonic_mode": "soft"}, "`monotonic_mode` must be one of 'parallel', 'recursive'"),
        ({"sigmoid_noise": 1.0}, "sigmoid_noise=1.0 shapes the monotonic attention's"),
        ({"monotonic_mode": "hard", "sigmoid_noise": -1}, "`sigmoid_noise` must be a finite"),
        ({"monotonic_mode": "hard", "seed": 1}, "`seed` seeds the noise of `sigmoid_noise`"),
        ({"probability_fn": "sparsemax"}, "`probability_fn` must be one of 'softmax', 'hard"),
        ({"probability_fn": "hardmax", "monotonic_mode": "hard"}, "not a `probability_fn`"),
        ({"attention_layer": "bahdanau"}, "`attention_layer` must be one of 'luong', 'context'"),
        ({"attention_layer": "context", "attention_size": 3}, "attention_size=3 with attention_"),
    ],
)
def test_bad_arguments_are_named(kwargs, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        AttentionWrapper(keras.layers.GRUCell(4), **kwargs)


@pytest.mark.parametrize(
    "options",
    [
        lambda: dict(probability_fn=sharpened, attention_layer=DENSE()),
        lambda: dict(attention_layer="context"),
        lambda: dict(mechanisms=_two_mechanisms(), attention_layer=[DENSE(), DENSE()]),
    ],
    ids=["probability_fn_and_attention_layer", "context", "mechanisms"],
)
def test_the_options_save_and_load(tmp_path, options):
    x, memory, mask = _data(np.random.default_rng(11), "float32")
    inputs = [keras.Input(x.shape[1:]), keras.Input(memory.shape[1:])]
    model = keras.Model(inputs, _layer(**options())(inputs[0], memory=inputs[1]))
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    # (Loaded with the default options instead, the outputs would differ.)
    np.testing.assert_array_equal(as_numpy(loaded([x, memory])), as_numpy(model([x, memory])))


@pytest.mark.parametrize(
    "initializer", ["glorot_uniform", SEEDED], ids=["unseeded", "seed_generator"]
)
def test_kernels_drawn_from_one_initializer_start_independent(initializer):
    # Query and memory kernels of one shape: a stateless initializer would start them equal.
    cell = AttentionWrapper(keras.layers.GRUCell(UNITS), kernel_initializer=initializer)
    cell.build((None, INPUT_DIM), (None, LENGTH, UNITS))
    query, memory = (keras.ops.convert_to_numpy(k) for k in (cell.query_kernel, cell.memory_kernel))
    assert query.shape == memory.shape and not np.allclose(query, memory)


# Several mechanisms at once: two memories of their own widths and lengths, each scored by its
# mechanism from the same query. Rows: position, output_attention, the wrapper's options, and
# the mechanisms' (`AttentionMechanism` arguments).
SEVERAL = {
    "after_luong": (
        ("after", True, lambda: dict(attention_size=[7, 3])),
        [dict(normalize=True), dict(score="general", monotonic_mode="recursive")],
    ),
    "before_context": (
        ("before", True, lambda: dict(attention_layer="context")),
        [dict(score="dot", scale=True, probability_fn="hardmax"), dict(monotonic_mode="recursive")],
    ),
    "after_layers_no_input_feeding": (
        ("after", True, lambda: dict(attention_layer=[DENSE(), DENSE()], input_feeding=False)),
        [dict(probability_fn=sharpened), dict(score="general")],
    ),
    "before_cell_output": (
        ("before", False, dict),
        [dict(score="general", monotonic_mode="hard"), {}],
    ),
}


@pytest.mark.parametrize("row", sorted(SEVERAL))
def test_several_mechanisms_match_the_reference_in_float64(float64_policy, row):
    (position, output_attention, options), kinds = SEVERAL[row]
    masked = output_attention and position == "after"  # (the sequence's mask: two rows)
    rng = np.random.default_rng(13)
    x, memory, mask = _data(rng)
    # A second memory [batch, 4, 5], its first row padded from position 3.
    memories, masks = [memory, rng.normal(size=(BATCH, 4, 5))], [mask, np.ones((BATCH, 4), bool)]
    masks[1][0, 3:] = False
    mechanisms = [AttentionMechanism(**kind) for kind in kinds]
    wrapper_options = dict(return_attention_scores=True, mechanisms=mechanisms, **options())
    layer = _layer(position=position, output_attention=output_attention, **wrapper_options)
    _randomize(layer, rng, x, memories, masks, scale=1.5)
    sequence_mask = SEQUENCE_MASK if masked else None
    got, alignments = layer(x, memory=memories, memory_mask=masks, mask=sequence_mask)
    wrapper = layer.cell

    def attention_of(contexts, h):
        parts = []
        for index, context in enumerate(contexts):
            joined = np.concatenate([context, h], -1)
            if wrapper.attention_layer == "context":
                parts.append(context)
            elif wrapper.attention_layer == "luong":
                kernel = as_numpy(getattr(wrapper, f"attention_kernel_{index}"))
                parts.append(np.tanh(joined @ kernel))
            else:
                kernel, bias = (as_numpy(v) for v in wrapper.attention_layer[index].weights)
                parts.append(np.maximum(joined @ kernel + bias, 0))
        return np.concatenate(parts, -1)

    scored = [(named_weights(m.weights), options_of(k)) for m, k in zip(mechanisms, kinds)]
    cell_weights = tuple(as_numpy(v) for v in wrapper.cell.weights)
    args = (x, memories, masks, cell_weights, scored, attention_of, position, output_attention)
    want, want_alignments = several_mechanisms_reference(
        *args, input_feeding=options().get("input_feeding", True), sequence_mask=sequence_mask
    )
    np.testing.assert_allclose(as_numpy(got), want, atol=1e-10, rtol=0)
    assert [a.shape[-1] for a in alignments] == [LENGTH, 4]
    assert_close(alignments, want_alignments, atol=1e-10)
    assert want_alignments[1][0, :, 3:].max() == 0  # the second memory's padding
    if not masked:  # the same weights, from a layer built without returning them
        assert_close(layer.attention_scores(x, memories, masks), want_alignments, atol=1e-10)
    # Bad memories are named.
    for memory, fragment in [
        (memories * 2, "`memory` must be one per mechanism (2) or one for all; got a list of 4"),
        ([memories[0], memories[1][:2]], "`memory[1]` of shape (2, 4, 5) has batch size 2"),
        ([memories[0], memories[1][..., :3]], "`memory[1]` must be [batch, length, 5]"),
    ]:
        pytest.raises(ValueError, layer, x, memory=memory).match(re.escape(fragment))


@pytest.mark.parametrize(
    "make, error, fragment",
    [
        (lambda: dict(mechanisms=[]), TypeError, "non-empty list of AttentionMechanism"),
        (lambda: dict(mechanisms=[AttentionMechanism(), "dot"]), TypeError, "`mechanisms[1]` must"),
        (lambda: dict(mechanisms=[AttentionMechanism()] * 2), ValueError, "more than once"),
        (lambda: dict(attention_size=[3]), TypeError, "width per mechanism needs `mechanisms`"),
        (lambda: _two(score="dot", seed=1), ValueError, "got score='dot', seed=1 for the wrapper"),
        (lambda: _two(attention_size=[3]), ValueError, "mechanism (2); got attention_size=[3]"),
        (lambda: _two(attention_layer=DENSE()), TypeError, "'context' or a list of 2 Keras layers"),
        (lambda: _two(attention_layer=[DENSE()]), TypeError, "2 Keras layers (one per mechanism)"),
        (lambda: dict(probability_fn=3), TypeError, "'hardmax' or a function of the scores"),
    ],
)
def test_bad_mechanisms_are_named(make, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        AttentionWrapper(keras.layers.GRUCell(4), **make())
