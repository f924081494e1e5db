"""TensorFlow's graph optimiser, Grappler, which the tests turn off (tests/conftest.py), leaves
each model's loss and gradients as the traced graph computes them."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import language_model
from tests.last_word_models import small_model
from tests.pair_encoders import snli_model
from tests.support import graph_optimizations, tensorflow_only
from tf_memlayers import AssociativeMemoryCell, AttentionRNN, AttentionWrapper, ResettableRNN

pytestmark = tensorflow_only("Grappler is TensorFlow's graph optimiser")

VOCAB = 30


def _tokens(rng, shape, low=1):
    return rng.integers(low, VOCAB, shape).astype("int32")


def _snli(rng, kind, fused_loop="auto"):
    model = snli_model(VOCAB, kind, units=8, embedding_dim=6, num_copies=2, fused_loop=fused_loop)
    return model, (_tokens(rng, (4, 7)), _tokens(rng, (4, 4))), rng.integers(0, 3, 4)


def _language_model(rng, kind, form="parallel", resets=False):
    options = dict(units=12, embedding_dim=6, window=3, ngram=3, stateful=False, resets=resets)
    model = language_model(VOCAB, kind, form, sequence_length=6, **options)
    tokens = _tokens(rng, (2, 6))
    inputs = {"tokens": tokens, "reset": rng.random((2, 6)) < 0.3} if resets else tokens
    return model, inputs, _tokens(rng, (2, 6))


def _last_word_model(rng):
    """The last-word model with its heap cache (holding entries to read) and attention pooling."""
    model = small_model(pooling="attention", cache_size=12)
    cache = model.get_layer("cache_attention")
    entries = np.random.default_rng(5).normal(size=(12, cache.cache.shape[-1]))
    cache.insert(entries.astype("float32"))
    return model, _tokens(rng, (8, 10), low=0), _tokens(rng, (8,))


def _memory_cell(rng):
    """An LSTM with an associative memory, run with resets."""
    tokens, reset = keras.Input((6,), dtype="int32"), keras.Input((6,), dtype="bool")
    embedded = keras.layers.Embedding(VOCAB, 8)(tokens)
    cell = AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2)
    states = ResettableRNN(cell, return_sequences=True)(embedded, reset=reset)
    model = keras.Model([tokens, reset], keras.layers.Dense(VOCAB)(states))
    return model, (_tokens(rng, (2, 6)), rng.random((2, 6)) < 0.3), _tokens(rng, (2, 6))


def _attention_rnn(rng):
    tokens, memory = keras.Input((6,), dtype="int32"), keras.Input((4, 8))
    embedded = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(tokens)
    wrapper = AttentionWrapper(keras.layers.GRUCell(8), score="general")
    states = AttentionRNN(wrapper, return_sequences=True)(embedded, memory=memory)
    model = keras.Model([tokens, memory], keras.layers.Dense(VOCAB)(states))
    memories = rng.normal(size=(3, 4, 8)).astype("float32")
    return model, (_tokens(rng, (3, 6), low=0), memories), _tokens(rng, (3, 6))


# {case: the model, inputs and targets of one batch from a generator}. Every memory layer, in
# both forms where it has two, and each AM-GRU loop (the Dual's encoder runs one on premises).
CASES = {
    "dual_am_gru_keras_loop": lambda rng: _snli(rng, "dual_am_gru", fused_loop=False),
    "dual_am_gru_fused_loop": lambda rng: _snli(rng, "dual_am_gru", fused_loop=True),
    "snli_word_by_word": lambda rng: _snli(rng, "word_by_word"),
    "lm_key_value_predict_parallel": lambda rng: _language_model(
        rng, "key_value_predict", resets=True
    ),
    "lm_attention_cell": lambda rng: _language_model(rng, "attention", "cell"),
    "lm_ngram_cell": lambda rng: _language_model(rng, "ngram", "cell"),
    "lm_ngram_parallel": lambda rng: _language_model(rng, "ngram"),
    "last_word_cache_and_pooling": _last_word_model,
    "memory_cell_with_resets": _memory_cell,
    "attention_wrapper": _attention_rnn,
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
    rng = np.random.default_rng(3)
    model, inputs, targets = CASES[case](rng)
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
