"""The language-model builder with each memory kind of Daniluk et al. (2017), its stateful
models and their resets, and its training step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import ATTENTION_KINDS, KINDS, LAYER_NAMES, language_model, pieces
from tf_memlayers.callbacks import StateResetCallback, reset_language_model_states
from tf_memlayers.layers import NGramConcatCell, SlidingWindowAttention
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights, weight_role
from tf_memlayers.models.language_model import (
    build_language_model,
    compile_language_model,
    make_optimizer,
)

VOCAB = 23
SMALL = dict(units=12, embedding_dim=6, window=3, ngram=4)


# The kinds with a memory, which have a cell form and a parallel form.
WITH_MEMORY = sorted(kind for kind in KINDS if kind != "lstm")


def _tokens(batch, time, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, time)).astype("int32")


def _model(kind, **overrides):
    kwargs = dict(SMALL, kind=kind, batch_size=2, sequence_length=5)
    kwargs.update(overrides)
    return language_model(VOCAB, **kwargs)


@pytest.mark.parametrize(
    "kind, form", [(kind, "parallel") for kind in KINDS] + [(kind, "cell") for kind in WITH_MEMORY]
)
def test_every_kind_starts_near_uniform_and_every_weight_gets_a_gradient(kind, form):
    # A training step of each kind and form, its metrics and a round trip:
    # tests/models/test_builders_on_every_backend.py.
    model = _model(kind, form=form)
    x, y = _tokens(2, 5), _tokens(2, 5, seed=1)
    logits = model(x)
    assert logits.shape == (2, 5, VOCAB)
    loss = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
    np.testing.assert_allclose(np.mean(loss), np.log(VOCAB), rtol=0.05)  # near-uniform at init
    # Every weight takes part: with weights well away from the small initial values (where
    # the attention scores are nearly flat) each one gets a non-zero gradient.
    rng = np.random.default_rng(0)
    for weight in model.trainable_weights:
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    reset_language_model_states(model)
    with tf.GradientTape() as tape:
        loss = keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
    grads = tape.gradient(loss, model.trainable_weights)
    silent = [
        w.path
        for w, g in zip(model.trainable_weights, grads)
        if g is None or not np.abs(tf.convert_to_tensor(g).numpy()).max() > 1e-7
    ]
    assert not silent


@pytest.mark.parametrize("kind", KINDS)
def test_stateful_model_carries_state_across_segments(kind):
    stateful = _model(kind, layers=2)
    stateless = _model(kind, layers=2, stateful=False, batch_size=None, sequence_length=None)
    copy_trainable_weights(stateful, stateless)
    x = _tokens(2, 15)
    whole = stateless(x).numpy()
    pieces = np.concatenate([stateful(x[:, i : i + 5]).numpy() for i in (0, 5, 10)], axis=1)
    np.testing.assert_allclose(pieces, whole, atol=1e-5)
    # After a reset the next segment is computed from scratch again.
    reset_language_model_states(stateful)
    np.testing.assert_allclose(stateful(x[:, :5]).numpy(), whole[:, :5], atol=1e-5)


@pytest.mark.parametrize("kind", WITH_MEMORY)
def test_cell_form_equals_parallel_form(kind):
    cell = _model(kind, form="cell", tie_weights=True, units=12, embedding_dim=6)
    parallel = _model(kind, form="parallel", tie_weights=True, units=12, embedding_dim=6)
    # Larger weights than the U(-0.1, 0.1) init so that differences would show; one generator,
    # so that weights of one shape differ (a form reading the wrong one of two would show).
    rng = np.random.default_rng(0)
    for weight in cell.trainable_weights:
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    copy_trainable_weights(cell, parallel)
    for start in (0, 5):  # the second segment uses the carried state
        x = _tokens(2, 5, seed=start)
        np.testing.assert_allclose(cell(x).numpy(), parallel(x).numpy(), atol=2e-5)


def _memory_options(kind):
    """Every memory option of ``kind`` set away from its default: explicit unequal sizes
    (one per piece, adding up to the hidden width), units, a bias, and for the attention kinds
    the attention width and zero padding."""
    sizes = tuple(range(4, 4 + pieces(kind, SMALL["ngram"])))
    options = dict(sizes=sizes, units=sum(sizes), memory_units=7, use_bias=True)
    if kind in ATTENTION_KINDS:
        options.update(attention_units=5, pad="zeros")
    return options


@pytest.mark.parametrize("kind", WITH_MEMORY)
def test_memory_options_reach_both_forms_alike(kind):
    options = dict(_memory_options(kind), recurrent_dropout=0.3)
    models = {form: _model(kind, form=form, **options) for form in ("cell", "parallel")}
    memory = models["parallel"].get_layer(LAYER_NAMES[kind])
    cell = models["cell"].get_layer("memory_rnn").cell
    lstm = models["parallel"].get_layer("lstm_0").cell
    assert lstm.recurrent_dropout == cell.cell.recurrent_dropout == 0.3
    for layer in (memory, cell):
        assert layer.sizes == options["sizes"] and layer.use_bias and layer.units == 7
        if kind in ATTENTION_KINDS:
            assert layer.pad == "zeros" and tuple(layer.memory_kernel.shape) == (4, 5)
    rng = np.random.default_rng(1)
    for weight in models["cell"].trainable_weights:
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    copy_trainable_weights(models["cell"], models["parallel"])
    for start in (0, 5):  # inference: no recurrent dropout; the second segment carries state
        x = _tokens(2, 5, seed=start)
        np.testing.assert_allclose(
            models["cell"](x).numpy(), models["parallel"](x).numpy(), atol=2e-5
        )


def test_tied_weights_share_the_embedding():
    model = _model("attention", tie_weights=True, stateful=False)
    untied = _model("attention", stateful=False)
    x = _tokens(2, 5)
    embedding = model.get_layer("embedding")
    features = keras.Model(model.input, model.get_layer("window_attention").output)(x)
    expected = features.numpy() @ embedding.embeddings.numpy().T + embedding.output_bias.numpy()
    np.testing.assert_allclose(model(x).numpy(), expected, atol=1e-5)
    count = lambda m: sum(int(np.prod(w.shape)) for w in m.trainable_weights)  # noqa: E731
    # One [vocab, embedding] variable serves as input and output layer.
    shapes = [tuple(w.shape) for w in model.trainable_weights]
    assert shapes.count((VOCAB, SMALL["embedding_dim"])) == 1
    assert (SMALL["embedding_dim"], VOCAB) not in shapes
    # Tying removes the softmax kernel (the output width becomes embedding_dim).
    assert count(untied) - count(model) > 0
    with pytest.raises(ValueError, match="`embedding_dim` \\(6\\) wide; the top LSTM outputs 12"):
        _model("lstm", tie_weights=True)


def test_saved_model_round_trip(tmp_path):
    model = _model("key_value_predict", tie_weights=True, dropout=0.2, variational_dropout=True)
    compile_language_model(model, jit_compile=False)
    x = _tokens(2, 5)
    model.train_on_batch(x, x)
    path = tmp_path / "lm.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    reset_language_model_states(model)
    reset_language_model_states(loaded)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


def test_initialisation_follows_the_paper():
    model = _model("key_value", init_scale=0.05, forget_bias=1.0)
    for weight in model.trainable_weights:
        if "bias" not in weight.path:
            # U(-0.05, 0.05): within the scale, reaching near it, spread as a uniform is.
            values = np.abs(weight.numpy())
            assert values.max() <= 0.05, weight.path
            if values.size >= 100:
                assert values.max() > 0.045, weight.path
                assert np.std(weight.numpy()) == pytest.approx(0.05 / np.sqrt(3), rel=0.2)
    bias = model.get_layer("lstm_0").cell.bias.numpy()
    units = SMALL["units"]
    np.testing.assert_array_equal(bias[units : 2 * units], 1.0)
    np.testing.assert_array_equal(np.delete(bias, np.s_[units : 2 * units]), 0.0)


def test_variational_dropout_uses_one_mask_per_sequence():
    model = _model("lstm", dropout=0.5, variational_dropout=True)
    layer = model.get_layer("embedding_dropout")
    dropped = layer(np.ones((8, 40, 6), "float32"), training=True).numpy()
    # The same units are dropped at every time step, and not the same in every sequence.
    np.testing.assert_array_equal(dropped, np.repeat(dropped[:, :1], 40, axis=1))
    assert 0 < (dropped == 0).mean() < 1
    masks = dropped[:, 0] == 0
    assert any(not np.array_equal(mask, masks[0]) for mask in masks[1:])
    plain = _model("lstm", dropout=0.5).get_layer("embedding_dropout")
    per_step = plain(np.ones((2, 40, 6), "float32"), training=True).numpy()
    assert not np.array_equal(per_step, np.repeat(per_step[:, :1], 40, axis=1))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"window": 0}, "`window` must be >= 1, got 0"),
        ({"sequence_length": 0}, "`sequence_length` must be >= 1, got 0"),
        ({"dropout": 1.5}, "`dropout` must be a finite number in \\[0.0, 1.0\\), got 1.5"),
        ({"batch_size": None}, "`stateful=True` needs a fixed `batch_size`"),
    ],
)
def test_bad_arguments_are_named(overrides, message):
    kwargs = dict(SMALL, kind="attention", batch_size=2, sequence_length=5)
    kwargs.update(overrides)
    with pytest.raises(ValueError, match=message):
        language_model(VOCAB, **kwargs)


def test_sgd_step_on_the_time_summed_cost_equals_the_tutorial_update():
    model = _model("lstm", layers=2, stateful=False)
    before = [w.numpy() for w in model.trainable_weights]
    x, y = _tokens(2, 5), _tokens(2, 5, seed=1)
    # The TensorFlow PTB tutorial's step: cost = sum_t mean_b NLL, global-norm clip 5, SGD.
    with tf.GradientTape() as tape:
        nll = keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
        cost = tf.reduce_sum(tf.reduce_mean(nll, axis=0))
    grads, _ = tf.clip_by_global_norm(tape.gradient(cost, model.trainable_weights), 5.0)
    expected = [b - 0.7 * tf.convert_to_tensor(g).numpy() for b, g in zip(before, grads)]
    compile_language_model(
        model,
        learning_rate=0.7,
        clip_norm=5.0,
        optimizer="sgd",
        loss_reduction="sum_over_time",
        jit_compile=False,
    )
    model.train_on_batch(x, y)
    for weight, want in zip(model.trainable_weights, expected):
        np.testing.assert_allclose(weight.numpy(), want, atol=2e-6, err_msg=weight.path)


def test_make_optimizer_names_bad_arguments():
    assert isinstance(make_optimizer("sgd", 1.0, 5.0), keras.optimizers.SGD)
    assert make_optimizer("adam", 1e-3, 0).global_clipnorm is None
    model = compile_language_model(_model("lstm"), optimizer=None, jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.Adam)
    with pytest.raises(ValueError, match="`optimizer` must be one of .*'rmsprop'"):
        make_optimizer("rmsprop")
    with pytest.raises(ValueError, match="`learning_rate` must be a finite number > 0.0, got -1"):
        make_optimizer("sgd", -1)


@pytest.mark.parametrize(
    "build, compile_, error, fragment",
    [
        (
            {"variational_dropout": "no"},
            {},
            TypeError,
            "`variational_dropout` must be a bool, got 'no'",
        ),
        ({"forget_bias": "1"}, {}, TypeError, "`forget_bias` must be a number, got '1'"),
        ({}, {"perplexity": "no"}, TypeError, "`perplexity` must be a bool, got 'no'"),
        (
            {},
            {"jit_compile": "no"},
            TypeError,
            "`jit_compile` must be a bool or \"auto\", got 'no'",
        ),
        ({}, {"optimizer": ""}, ValueError, "`optimizer` must be one of 'adam', 'sgd'; got ''"),
        (
            {},
            {"loss_reduction": "mean"},
            ValueError,
            "`loss_reduction` must be one of 'token_mean', 'sum_over_time'; got 'mean'",
        ),
    ],
)
def test_build_and_compile_name_a_bad_argument(build, compile_, error, fragment):
    with pytest.raises(error) as raised:
        model = build_language_model(VOCAB, units=4, embedding_dim=4, stateful=False, **build)
        compile_language_model(model, **compile_)
    assert fragment in str(raised.value)


@pytest.mark.parametrize("kind", KINDS)
def test_tiny_model_overfits_a_tiny_corpus(kind):
    # Six fixed 9-word sentences over 20 words, repeated: a model that learns them predicts
    # every word after the first of a sentence (perplexity near 1 there).
    rng = np.random.default_rng(3)
    sentences = rng.integers(1, 21, (6, 9))
    stream = np.concatenate([sentences[i] for i in rng.integers(0, 6, 120)]).astype("int32")
    # Four rows, each a quarter of the stream, in segments of 9: row b of batch i + 1 continues
    # row b of batch i, as the stateful model reads them (in order).
    pairs = 4 * 9 * ((len(stream) - 1) // 36)
    rows = lambda ids: ids[:pairs].reshape(4, -1, 9).swapaxes(0, 1).reshape(-1, 9)  # noqa: E731
    model = language_model(
        22,
        kind=kind,
        units=24,
        embedding_dim=16,
        window=3,
        ngram=3,
        batch_size=4,
        sequence_length=9,
    )
    compile_language_model(model, learning_rate=0.02, jit_compile=False)
    history = model.fit(
        rows(stream[:-1]),
        rows(stream[1:]),
        batch_size=4,
        epochs=30,
        shuffle=False,
        verbose=0,
        callbacks=[StateResetCallback(), _StopBelow("perplexity", 1.5)],
    ).history
    # Uniform guessing is perplexity 22; a memorised corpus leaves only the sentence choice
    # (1 word in 9 is a 1-in-6 guess): 6 ** (1 / 9) = 1.22.
    assert history["perplexity"][-1] < 1.6, history["perplexity"][-5:]


class _StopBelow(keras.callbacks.Callback):
    """Ends training once the epoch's ``metric`` is below ``threshold``."""

    def __init__(self, metric, threshold):
        super().__init__()
        self.metric, self.threshold = metric, threshold

    def on_epoch_end(self, epoch, logs=None):
        if logs[self.metric] < self.threshold:
            self.model.stop_training = True


@pytest.mark.parametrize("kind", KINDS)
def test_every_memory_kind_builds_both_forms_with_the_same_weight_roles(kind):
    forms = ("parallel", "cell") if kind != "lstm" else ("parallel",)
    models = [
        language_model(
            VOCAB,
            kind=kind,
            units=6,
            embedding_dim=4,
            window=2,
            ngram=3,
            form=form,
            stateful=False,
        )
        for form in forms
    ]
    if kind != "lstm":
        assert LAYER_NAMES[kind] in [layer.name for layer in models[0].layers]
    roles = [sorted(weight_role(w.path) for w in model.trainable_weights) for model in models]
    assert all(r == roles[0] for r in roles)
    assert any(role.startswith("memory/") for role in roles[0]) == (kind != "lstm")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("form", ["parallel", "cell"])
def test_resets_model_on_packed_documents_equals_each_document_alone(kind, form):
    """``resets=True``: a row of documents packed back to back scores each document as the
    same model scores it alone, from fresh states."""
    keras.utils.set_random_seed(4)
    options = dict(
        kind=kind,
        units=12,
        embedding_dim=6,
        window=3,
        ngram=3,
        layers=2,
        stateful=False,
        sequence_length=None,
        form=form,
        init_scale=0.5,
    )
    packed_model = language_model(30, resets=True, **options)
    plain = language_model(30, **options)
    plain.set_weights(packed_model.get_weights())
    rng = np.random.default_rng(1)
    tokens = rng.integers(1, 30, size=(2, 12)).astype("int32")
    reset = np.zeros((2, 12), bool)
    reset[0, [4, 9]] = True
    reset[1, 6] = True
    logits = np.asarray(packed_model({"tokens": tokens, "reset": reset}))
    for row, bounds in ((0, [0, 4, 9, 12]), (1, [0, 6, 12])):
        for start, stop in zip(bounds[:-1], bounds[1:]):
            alone = np.asarray(plain(tokens[row : row + 1, start:stop]))[0]
            np.testing.assert_allclose(logits[row, start:stop], alone, atol=1e-5, rtol=0)
    assert not np.allclose(logits, np.asarray(plain(tokens)), atol=1e-4)


# -- the builder composes what it is given ----------------------------------------------------


def test_any_keras_layer_is_a_memory_without_an_edit_of_the_builder():
    # A layer the builder knows nothing of: a projection of every step of the top LSTM.
    memory = keras.layers.Dense(5, name="projection")
    model = build_language_model(
        VOCAB, memory, units=8, embedding_dim=4, batch_size=2, sequence_length=5
    )
    assert model.get_layer("projection") is memory
    assert tuple(model.get_layer("softmax").kernel.shape) == (5, VOCAB)
    assert model(_tokens(2, 5)).shape == (2, 5, VOCAB)


def test_a_memory_cell_wraps_the_builders_top_lstm_cell():
    seen = []

    def memory(cell):
        seen.append(cell)
        return NGramConcatCell(cell, 3, 4)

    model = build_language_model(
        VOCAB, memory, units=8, embedding_dim=4, layers=2, batch_size=2, sequence_length=5
    )
    (cell,) = seen
    assert isinstance(cell, keras.layers.LSTMCell) and cell.units == 8 and cell.name == "lstm_1"
    assert model.get_layer("memory_rnn").cell.cell is cell
    assert model(_tokens(2, 5)).shape == (2, 5, VOCAB)


def test_a_memorys_other_outputs_are_the_models():
    memory = SlidingWindowAttention(window=3, return_attention_scores=True)
    model = build_language_model(
        VOCAB, memory, units=8, embedding_dim=4, stateful=False, sequence_length=None
    )
    logits, scores = model(_tokens(2, 6))
    assert logits.shape == (2, 6, VOCAB) and scores.shape == (2, 6, 3)


@pytest.mark.parametrize(
    "memory, overrides, error, message",
    [
        ("attention", {}, TypeError, "`memory` must be None, a Keras layer"),
        (
            lambda: NGramConcatCell(keras.layers.LSTMCell(8), 3, 4),
            {},
            TypeError,
            "pass a function of that cell",
        ),
        (lambda: lambda cell: keras.layers.Dense(4), {}, TypeError, "must return a Keras RNN cell"),
        (
            lambda: SlidingWindowAttention(window=3),
            {},
            ValueError,
            "stateful=False but the model has stateful=True",
        ),
        (
            lambda: keras.layers.Dense(4),
            {"resets": True},
            ValueError,
            "`resets=True` needs a memory that takes a `reset`",
        ),
        (
            lambda: keras.layers.Dense(5),
            {"tie_weights": True},
            ValueError,
            "`tie_weights=True` needs the softmax input to be `embedding_dim` \\(4\\) wide; the "
            "memory outputs 5",
        ),
    ],
    ids=[
        "a_name",
        "a_cell",
        "a_function_without_a_cell",
        "another_stateful",
        "no_reset",
        "tied_width",
    ],
)
def test_a_memory_that_does_not_fit_is_named(memory, overrides, error, message):
    memory = memory() if callable(memory) else memory
    with pytest.raises(error, match=message):
        build_language_model(
            VOCAB, memory, units=8, embedding_dim=4, batch_size=2, sequence_length=5, **overrides
        )
