"""TensorFlow's graph optimiser, Grappler, which the tests turn off (tests/conftest.py), leaves
each model's loss and gradients as the traced graph computes them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import language_model
from tests.models.test_fill_last_word import small_model
from tests.pair_encoders import snli_model
from tests.support import graph_optimizations, tensorflow_only
from tf_memlayers import AssociativeMemoryCell, AttentionRNN, AttentionWrapper, ResettableRNN

pytestmark = tensorflow_only("Grappler is TensorFlow's graph optimiser")

VOCAB = 30


def _tokens(rng, shape, low=1):
    return rng.integers(low, VOCAB, shape).astype("int32")


def _snli(kind, fused_loop="auto"):
    return snli_model(VOCAB, kind, units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop)


def _last_word_model():
    """The last-word model with its heap cache (holding entries to read) and attention pooling."""
    model = small_model(pooling="attention", cache_size=12)
    cache = model.get_layer("cache_attention")
    entries = np.random.default_rng(5).normal(size=(12, cache.cache.shape[-1]))
    cache.insert(entries.astype("float32"))
    return model


def _memory_cell():
    """An LSTM with an associative memory, run with resets."""
    tokens, reset = keras.Input((6,), dtype="int32"), keras.Input((6,), dtype="bool")
    embedded = keras.layers.Embedding(VOCAB, 8)(tokens)
    cell = AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2)
    states = ResettableRNN(cell, return_sequences=True)(embedded, reset=reset)
    return keras.Model([tokens, reset], keras.layers.Dense(VOCAB)(states))


def _attention_rnn():
    tokens, memory = keras.Input((6,), dtype="int32"), keras.Input((4, 8))
    embedded = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(tokens)
    wrapper = AttentionWrapper(keras.layers.GRUCell(8), score="general")
    states = AttentionRNN(wrapper, return_sequences=True)(embedded, memory=memory)
    return keras.Model([tokens, memory], keras.layers.Dense(VOCAB)(states))


def _language_model(kind, form="parallel", **options):
    options = dict(units=12, embedding_dim=6, window=3, ngram=3, stateful=False, **options)
    return language_model(VOCAB, kind, form, sequence_length=6, **options)


def _pair_batch(rng):
    return (_tokens(rng, (4, 7)), _tokens(rng, (4, 4))), rng.integers(0, 3, 4)


def _lm_batch(rng):
    return _tokens(rng, (2, 6)), _tokens(rng, (2, 6))


# {case: (model builder, inputs and targets of one batch from a generator)}. Every memory
# layer, in both forms where it has two, and each AM-GRU loop (the Dual AM-GRU's encoder runs
# an AM-GRU over the premise).
CASES = {
    "dual_am_gru_keras_loop": (lambda: _snli("dual_am_gru", fused_loop=False), _pair_batch),
    "dual_am_gru_fused_loop": (lambda: _snli("dual_am_gru", fused_loop=True), _pair_batch),
    "snli_word_by_word": (lambda: _snli("word_by_word"), _pair_batch),
    "lm_key_value_predict_parallel": (
        lambda: _language_model("key_value_predict", resets=True),
        lambda rng: (
            {"tokens": _tokens(rng, (2, 6)), "reset": rng.random((2, 6)) < 0.3},
            _tokens(rng, (2, 6)),
        ),
    ),
    "lm_attention_cell": (lambda: _language_model("attention", "cell"), _lm_batch),
    "lm_ngram_cell": (lambda: _language_model("ngram", "cell"), _lm_batch),
    "lm_ngram_parallel": (lambda: _language_model("ngram"), _lm_batch),
    "last_word_cache_and_pooling": (
        _last_word_model,
        lambda rng: (_tokens(rng, (8, 10), low=0), _tokens(rng, (8,))),
    ),
    "memory_cell_with_resets": (
        _memory_cell,
        lambda rng: ((_tokens(rng, (2, 6)), rng.random((2, 6)) < 0.3), _tokens(rng, (2, 6))),
    ),
    "attention_wrapper": (
        _attention_rnn,
        lambda rng: (
            (_tokens(rng, (3, 6), low=0), rng.normal(size=(3, 4, 8)).astype("float32")),
            _tokens(rng, (3, 6)),
        ),
    ),
}


def _loss_and_gradients(model):
    """A new graph function: the model's loss (the mean cross-entropy of its last output, as
    logits or probabilities) and its gradients for one batch."""
    from_logits = model.layers[-1].get_config().get("activation") != "softmax"

    @tf.function
    def step(inputs, targets):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=False)
            loss = keras.losses.sparse_categorical_crossentropy(targets, outputs, from_logits)
            loss = tf.reduce_mean(loss)
        return loss, tape.gradient(loss, model.trainable_weights)

    return step


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_optimised_step_computes_what_the_traced_step_does(case):
    build, batch = CASES[case]
    rng = np.random.default_rng(3)
    model = build()
    inputs, targets = batch(rng)
    # Weights away from the small initial values, so that every weight shows in the loss.
    for weight in model.trainable_weights:
        weight.assign(rng.uniform(-0.5, 0.5, weight.shape).astype(weight.dtype))
    plain_loss, plain_grads = _loss_and_gradients(model)(inputs, targets)
    with graph_optimizations(True):
        loss, grads = _loss_and_gradients(model)(inputs, targets)
    np.testing.assert_allclose(loss.numpy(), plain_loss.numpy(), rtol=1e-5)
    assert len(grads) == len(plain_grads) == len(model.trainable_weights)
    for weight, got, want in zip(model.trainable_weights, grads, plain_grads):
        # (An embedding's gradient is IndexedSlices.)
        got, want = (tf.convert_to_tensor(g).numpy() for g in (got, want))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=weight.path)
        assert np.abs(want).max() > 0, weight.path
