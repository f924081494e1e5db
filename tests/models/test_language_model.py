"""`build_language_model` with each memory kind: its forms, state, resets, options and step.
(Every backend: test_builders_on_every_backend.py; bad arguments: test_bad_arguments.py.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import ATTENTION_KINDS, KINDS, LAYER_NAMES, language_model, pieces
from tf_memlayers.callbacks import StateResetCallback, reset_language_model_states
from tf_memlayers.layers import NGramConcatCell
from tf_memlayers.models import build_language_model, compile_language_model
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights
from tf_memlayers.models.language_model import make_optimizer

VOCAB, SMALL = 23, dict(units=12, embedding_dim=6, window=3, ngram=4)
WITH_MEMORY = [kind for kind in KINDS if kind != "lstm"]
# Each memory layer in both forms, and each kind.
RESETS_CASES = [("lstm", "parallel"), ("attention", "cell"), ("key_value", "parallel")]
RESETS_CASES += [("key_value_predict", "cell"), ("ngram", "parallel"), ("ngram", "cell")]


def _tokens(batch, time, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, time)).astype("int32")


def _model(kind, **overrides):
    options = {**SMALL, "batch_size": 2, "sequence_length": 5, **overrides}
    return language_model(VOCAB, kind, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_stateful_model_starts_as_the_paper_and_carries_state_across_segments(kind):
    stateful = _model(kind=kind, num_layers=2, init_scale=0.05, forget_bias=1.0)
    for weight in stateful.trainable_weights:
        if "bias" not in weight.path:
            # U(-0.05, 0.05): within the scale, reaching near it, spread as a uniform is.
            values = np.abs(weight.numpy())
            assert values.max() <= 0.05, weight.path
            if values.size >= 100:
                assert values.max() > 0.045, weight.path
                assert np.std(weight.numpy()) == pytest.approx(0.05 / np.sqrt(3), rel=0.2)
    bias, units = stateful.get_layer("lstm_0").cell.bias.numpy(), SMALL["units"]
    np.testing.assert_array_equal(bias[units : 2 * units], 1.0)
    np.testing.assert_array_equal(np.delete(bias, np.s_[units : 2 * units]), 0.0)
    stateless = _model(kind, num_layers=2, stateful=False, batch_size=None, sequence_length=None)
    copy_trainable_weights(stateful, stateless)
    x = _tokens(2, 15)
    whole = stateless(x).numpy()
    nll = keras.losses.sparse_categorical_crossentropy(_tokens(2, 15, 1), whole, from_logits=True)
    np.testing.assert_allclose(np.mean(nll), np.log(VOCAB), rtol=0.05)  # near-uniform at init
    segments = [stateful(x[:, i : i + 5]).numpy() for i in (0, 5, 10)]
    np.testing.assert_allclose(np.concatenate(segments, axis=1), whole, atol=1e-5)
    # After a reset the next segment is computed from scratch again.
    reset_language_model_states(stateful)
    np.testing.assert_allclose(stateful(x[:, :5]).numpy(), whole[:, :5], atol=1e-5)


@pytest.mark.parametrize("options", ["tied_weights", "memory_options"])
@pytest.mark.parametrize("kind", WITH_MEMORY)
def test_cell_form_equals_parallel_form(kind, options):
    if options == "memory_options":  # each away from its default, and recurrent dropout
        sizes = tuple(range(4, 4 + pieces(kind, SMALL["ngram"])))  # unequal, adding up to units
        options = dict(sizes=sizes, units=sum(sizes), memory_units=7, use_bias=True)
        options.update(recurrent_dropout=0.3)
        if kind in ATTENTION_KINDS:
            options.update(attention_units=5, pad="zeros")
    else:
        options = {"tie_weights": True}
    cell, parallel = (_model(kind=kind, form=form, **options) for form in ("cell", "parallel"))
    if "sizes" in options:  # the options reach both forms' layers alike
        memories = (parallel.get_layer(LAYER_NAMES[kind]), cell.get_layer("memory_rnn").cell)
        assert parallel.get_layer("lstm_0").cell.recurrent_dropout == 0.3
        assert memories[1].cell.recurrent_dropout == 0.3
        for layer in memories:
            assert layer.sizes == options["sizes"] and layer.use_bias and layer.units == 7
            if kind in ATTENTION_KINDS:
                assert layer.pad == "zeros" and tuple(layer.memory_kernel.shape) == (4, 5)
    rng = np.random.default_rng(0)  # weights far from the init, where the scores are flat
    for weight in cell.trainable_weights:
        weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
    copy_trainable_weights(cell, parallel)
    for start in (0, 5):  # inference: no recurrent dropout; the second segment carries state
        x = _tokens(2, 5, seed=start)
        np.testing.assert_allclose(cell(x).numpy(), parallel(x).numpy(), atol=2e-5)
    # Tied weights: one [vocab, embedding] variable is the input and the output layer (no
    # softmax kernel); the logits are the memory's features times its transpose, plus a bias.
    softmax = [w for w in parallel.trainable_weights if tuple(w.shape)[1:] == (VOCAB,)]
    assert len(softmax) == (0 if "tie_weights" in options else 1)
    if "tie_weights" in options:
        assert [tuple(w.shape) for w in parallel.trainable_weights].count((VOCAB, 6)) == 1
        outputs = [parallel.get_layer(LAYER_NAMES[kind]).output, parallel.output]
        features, logits = (y.numpy() for y in keras.Model(parallel.input, outputs)(x))
        embedding = parallel.get_layer("embedding")
        expected = features @ embedding.embeddings.numpy().T + embedding.output_bias.numpy()
        np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_sgd_step_on_the_time_summed_cost_equals_the_tutorial_update():
    with pytest.warns(DeprecationWarning, match="`layers` is deprecated") as caught:  # 0.2's
        model = _model(kind="lstm", layers=2, stateful=False)
    assert caught[0].filename.endswith("language_models.py")  # the caller's line
    assert [layer.name for layer in model.layers if "lstm" in layer.name] == ["lstm_0", "lstm_1"]
    before = [w.numpy() for w in model.trainable_weights]
    x, y = _tokens(2, 5), _tokens(2, 5, seed=1)
    # The TensorFlow PTB tutorial's step: cost = sum_t mean_b NLL, global-norm clip 5, SGD.
    with tf.GradientTape() as tape:
        nll = keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
        cost = tf.reduce_sum(tf.reduce_mean(nll, axis=0))
    grads, _ = tf.clip_by_global_norm(tape.gradient(cost, model.trainable_weights), 5.0)
    expected = [b - 0.7 * tf.convert_to_tensor(g).numpy() for b, g in zip(before, grads)]
    options = dict(optimizer="sgd", loss_reduction="sum_over_time", jit_compile=False)
    compile_language_model(model, learning_rate=0.7, clip_norm=5.0, **options)
    model.train_on_batch(x, y)
    for weight, want in zip(model.trainable_weights, expected):
        np.testing.assert_allclose(weight.numpy(), want, atol=2e-6, err_msg=weight.path)
    # The optimizers by name, without clipping at 0, and Adam for None.
    assert isinstance(make_optimizer("sgd", 1.0, 5.0), keras.optimizers.SGD)
    assert make_optimizer("adam", 1e-3, 0).global_clipnorm is None
    compile_language_model(model, optimizer=None, jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.Adam)


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
    sizes = dict(units=24, embedding_dim=16, window=3, ngram=3, batch_size=4, sequence_length=9)
    model = language_model(22, kind, **sizes)
    compile_language_model(model, learning_rate=0.05, jit_compile=False)
    stop = lambda epoch, logs: setattr(model, "stop_training", logs["perplexity"] < 1.5)  # noqa: E731
    callbacks = [StateResetCallback(), keras.callbacks.LambdaCallback(on_epoch_end=stop)]
    fit = dict(batch_size=4, epochs=20, shuffle=False, verbose=0, callbacks=callbacks)
    history = model.fit(rows(stream[:-1]), rows(stream[1:]), **fit).history
    # Uniform guessing is perplexity 22; a memorised corpus leaves only the sentence choice
    # (1 word in 9 is a 1-in-6 guess): 6 ** (1 / 9) = 1.22.
    assert history["perplexity"][-1] < 1.6, history["perplexity"][-5:]


@pytest.mark.parametrize("kind, form", RESETS_CASES)
def test_resets_model_on_packed_documents_equals_each_document_alone(kind, form):
    keras.utils.set_random_seed(4)
    options = dict(SMALL, ngram=3, num_layers=2, stateful=False, init_scale=0.5)
    options.update(kind=kind, form=form, sequence_length=None)
    packed_model, plain = language_model(30, resets=True, **options), language_model(30, **options)
    plain.set_weights(packed_model.get_weights())
    tokens = np.random.default_rng(1).integers(1, 30, size=(2, 12)).astype("int32")
    reset = np.zeros((2, 12), bool)
    reset[0, [4, 9]] = reset[1, 6] = True
    logits = np.asarray(packed_model({"tokens": tokens, "reset": reset}))
    for row, bounds in ((0, [0, 4, 9, 12]), (1, [0, 6, 12])):
        for start, stop in zip(bounds[:-1], bounds[1:]):
            alone = np.asarray(plain(tokens[row : row + 1, start:stop]))[0]
            np.testing.assert_allclose(logits[row, start:stop], alone, atol=1e-5, rtol=0)
    assert not np.allclose(logits, np.asarray(plain(tokens)), atol=1e-4)


def test_variational_dropout_uses_one_mask_per_sequence_and_any_keras_layer_is_a_memory():
    model = _model(kind="lstm", dropout=0.5, variational_dropout=True)
    layer = model.get_layer("embedding_dropout")
    dropped = layer(np.ones((8, 40, 6), "float32"), training=True).numpy()
    # The same units are dropped at every time step, and not the same in every sequence.
    np.testing.assert_array_equal(dropped, np.repeat(dropped[:, :1], 40, axis=1))
    assert 0 < (dropped == 0).mean() < 1
    masks = dropped[:, 0] == 0
    assert any(not np.array_equal(mask, masks[0]) for mask in masks[1:])
    plain = _model(kind="lstm", dropout=0.5).get_layer("embedding_dropout")
    per_step = plain(np.ones((2, 40, 6), "float32"), training=True).numpy()
    assert not np.array_equal(per_step, np.repeat(per_step[:, :1], 40, axis=1))
    # A layer the builder knows nothing of: a projection of every step of the top LSTM.
    memory = keras.layers.Dense(5, name="projection")
    model = build_language_model(VOCAB, memory, 8, 4, batch_size=2, sequence_length=5)
    assert model.get_layer("projection") is memory
    assert tuple(model.get_layer("softmax").kernel.shape) == (5, VOCAB)
    assert model(_tokens(2, 5)).shape == (2, 5, VOCAB)
    # A function of a cell: called once, with the top LSTM cell, which its memory cell wraps.
    seen = []
    wrap = lambda c: seen.append(c) or NGramConcatCell(c, 3, 4)  # noqa: E731
    model = build_language_model(VOCAB, wrap, 8, 4, num_layers=2, batch_size=2, sequence_length=5)
    (cell,) = seen
    assert isinstance(cell, keras.layers.LSTMCell) and cell.units == 8 and cell.name == "lstm_1"
    assert model.get_layer("memory_rnn").cell.cell is cell
    assert model(_tokens(2, 5)).shape == (2, 5, VOCAB)
