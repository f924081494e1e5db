"""A user's journey with every public layer and cell: a functional model trained with `fit`
on data whose last batch is partial, with and without a Keras mask and under
``mixed_float16``, then saved to ``.keras`` and loaded back with the same predictions."""

import keras
import numpy as np
import pytest
from conftest import BACKEND, FUSED_LOOP, tensorflow_only

from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    AssociativeMemoryCell,
    AttentionPooling,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
    HeapCacheAttention,
    KeyValuePredictSplit,
    NGramConcat,
    NGramConcatCell,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
    TiedEmbedding,
)

VOCAB, STEPS, SAMPLES, BATCH, CLASSES = 11, 6, 5, 2, 3  # 5 samples: the last batch has 1


def _rnn(cell, **kwargs):
    """``keras.layers.RNN`` over one of the package's cells, as a user of the backend writes it:
    on JAX with ``zero_output_for_mask=True``, since Keras's JAX loop emits the cell's first
    state at a masked step (conftest.KERAS_MASKED_OUTPUT; docs/backends.rst, "Backends")."""
    return keras.layers.RNN(cell, zero_output_for_mask=BACKEND != "tensorflow", **kwargs)


def _tokens(rng, masked, steps=STEPS):
    """``[SAMPLES, steps]`` token ids; with ``masked`` some rows are padded with 0 (the
    Embedding's mask value), at the end and in a hole."""
    tokens = rng.integers(1, VOCAB, size=(SAMPLES, steps))
    if masked:
        tokens[1, steps - 2 :] = 0
        tokens[3, 1] = 0
        tokens[4, steps - 1 :] = 0
    return tokens


def _embedded(inputs, masked):
    return keras.layers.Embedding(VOCAB, 4, mask_zero=masked)(inputs)


# Per-step memories: a language-model head on every step.
STEP_LAYERS = {
    "SlidingWindowAttention": lambda e: SlidingWindowAttention(3, mode="key_value")(
        keras.layers.LSTM(8, return_sequences=True)(e)
    ),
    "SlidingWindowAttentionCell": lambda e: _rnn(
        SlidingWindowAttentionCell(keras.layers.LSTMCell(8), window=3), return_sequences=True
    )(e),
    "NGramConcat": lambda e: NGramConcat(3, 6)(keras.layers.LSTM(8, return_sequences=True)(e)),
    "NGramConcatCell": lambda e: _rnn(
        NGramConcatCell(keras.layers.GRUCell(8), n=3, units=6), return_sequences=True
    )(e),
    "KeyValuePredictSplit": lambda e: keras.layers.Concatenate()(
        list(
            KeyValuePredictSplit("key_value_predict", sizes=(4, 2, 2))(
                keras.layers.LSTM(8, return_sequences=True)(e)
            )[1:]
        )
    ),
    "AssociativeGRU": lambda e: AssociativeGRU(8, num_copies=2, return_sequences=True)(e),
    "AssociativeGRU_fused_loop": lambda e: AssociativeGRU(
        8, num_copies=2, return_sequences=True, fused_loop=True
    )(e),
    "AssociativeGRUCell": lambda e: _rnn(
        AssociativeGRUCell(8, num_copies=2), return_sequences=True
    )(e),
    "AssociativeMemoryCell": lambda e: _rnn(
        AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2), return_sequences=True
    )(e),
}

def _tied_language_model(tokens, masked):
    """Embedding, LSTM, and the embedding's transpose as the output layer (weight tying)."""
    embedding = TiedEmbedding(VOCAB, 4, mask_zero=masked)
    features = keras.layers.LSTM(4, return_sequences=True)(embedding(tokens))
    return keras.layers.Activation("linear", dtype="float32")(embedding(features, reverse=True))


# Language models whose layer reads the tokens itself: (tokens, masked) -> logits.
TOKEN_LAYERS = {"TiedEmbedding": _tied_language_model}


# Sequence-level memories: a classifier.
POOLED_LAYERS = {
    "AttentionPooling": lambda e: AttentionPooling(4)(
        keras.layers.LSTM(8, return_sequences=True)(e)
    ),
    "HeapCacheAttention": lambda e: HeapCacheAttention(4, 3)(keras.layers.LSTM(8)(e)),
}


# Conditional encoding: (premise layer, hypothesis layer) returning the final states.
DUAL_LAYERS = {
    "DualAssociativeGRUCell": lambda: (
        _rnn(AssociativeGRUCell(8, num_copies=2), return_state=True),
        _rnn(DualAssociativeGRUCell(8, num_copies=2)),
    ),
    **{
        name: lambda fused=fused: (
            AssociativeGRU(8, num_copies=2, return_state=True, fused_loop=fused),
            DualAssociativeGRU(8, num_copies=2, fused_loop=fused),
        )
        for name, fused in (("DualAssociativeGRU", False), ("DualAssociativeGRU_fused_loop", True))
    },
}


def _model(name, masked, rng):
    """``(model, inputs, targets)`` for the layer ``name``."""
    if name in DUAL_LAYERS:
        # Conditional encoding: the hypothesis reads the premise's final memory.
        premise = keras.Input((STEPS,), dtype="int32")
        hypothesis = keras.Input((STEPS - 2,), dtype="int32")
        embedding = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)
        premise_layer, hypothesis_layer = DUAL_LAYERS[name]()
        _, memory, last = premise_layer(embedding(premise))
        encoded = hypothesis_layer(
            embedding(hypothesis),
            initial_state=[keras.ops.zeros_like(memory), last, memory],
        )
        logits = keras.layers.Dense(CLASSES, dtype="float32")(encoded)
        inputs = [_tokens(rng, masked), _tokens(rng, masked, STEPS - 2)]
        model = keras.Model([premise, hypothesis], logits)
        return model, inputs, rng.integers(0, CLASSES, size=SAMPLES)
    tokens = keras.Input((STEPS,), dtype="int32")
    embedded = _embedded(tokens, masked)
    if name in TOKEN_LAYERS:
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = TOKEN_LAYERS[name](tokens, masked)
    elif name in STEP_LAYERS:
        features = STEP_LAYERS[name](embedded)
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = keras.layers.Dense(VOCAB, dtype="float32")(features)
    else:
        features = POOLED_LAYERS[name](embedded)
        targets = rng.integers(0, CLASSES, size=SAMPLES)
        logits = keras.layers.Dense(CLASSES, dtype="float32")(features)
    return keras.Model(tokens, logits), _tokens(rng, masked), targets


NAMES = [
    pytest.param(name, marks=tensorflow_only(FUSED_LOOP)) if "fused_loop" in name else name
    for name in sorted([*STEP_LAYERS, *POOLED_LAYERS, *DUAL_LAYERS, *TOKEN_LAYERS])
]
# Without a mask in float32; with a mask under mixed precision (and XLA, the default path).
VARIANTS = [("float32", False), ("mixed_float16", True)]


@pytest.mark.parametrize("policy, masked", VARIANTS, ids=["no_mask", "mask_mixed_float16"])
@pytest.mark.parametrize("name", NAMES)
def test_fit_on_a_partial_batch_then_save_and_load(name, policy, masked, tmp_path):
    keras.config.set_dtype_policy(policy)  # restored by the autouse fixture
    rng = np.random.default_rng(7)
    model, inputs, targets = _model(name, masked, rng)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # XLA (the default) in one variant; on TensorFlow the other skips its compile time.
        # On JAX both compile: there the step run op by op takes longer than its compilation
        # (about 1.6x over these layers). The partial batch retraces `fit` with an unknown
        # batch size either way.
        jit_compile="auto" if masked or BACKEND == "jax" else False,
    )
    history = model.fit(inputs, targets, batch_size=BATCH, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    if name == "HeapCacheAttention":
        # Fill the cache, so that the saved model has something to read.
        cache = next(layer for layer in model.layers if isinstance(layer, HeapCacheAttention))
        cache.insert(rng.normal(size=(4, cache.width)).astype("float32"))
        assert int(cache.fill_count()) > 0

    predictions = keras.ops.convert_to_numpy(model(inputs))
    assert np.isfinite(predictions).all()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(inputs)), predictions, rtol=0, atol=1e-6
    )
