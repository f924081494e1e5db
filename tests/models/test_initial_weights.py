"""No two randomly drawn weights of a builder's model or of a layer with several kernels
start equal; a seeded builder draws the same weights again."""

import itertools

import keras
import numpy as np
import pytest

from tests.pair_encoders import snli_model
from tf_memlayers.layers import (
    AssociativeGRUCell,
    DualAssociativeEncoder,
    DualAssociativeGRUCell,
    NGramConcat,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.models import build_language_model, build_snli_model

PREFIX = 8  # entries compared: stateless draws from one seed agree on their first entries


def _random_weights(weights):
    """``{path: flat values}`` of the weights drawn at random (not from a few constants, as
    the biases are)."""
    flat = {w.path: np.asarray(keras.ops.convert_to_numpy(w)).ravel() for w in weights}
    return {path: v for path, v in flat.items() if len(np.unique(v)) > PREFIX}


def _alike(weights):
    flat = _random_weights(weights)
    pairs = itertools.combinations(sorted(flat), 2)
    return [(a, b) for a, b in pairs if np.array_equal(flat[a][:PREFIX], flat[b][:PREFIX])]


@pytest.mark.parametrize("kind", ["gru", "am_gru", "dual_am_gru", "default"])
def test_snli_model_weights_start_independent_and_reproducible(kind):
    def build(seed):
        if kind == "default":  # the builder's own kernels, unseeded
            return build_snli_model(20, embedding_dim=8)
        return snli_model(20, kind=kind, units=8, embedding_dim=8, num_copies=2, seed=seed)

    model = build(3)
    assert len(_random_weights(model.weights)) >= 7 and _alike(model.weights) == []
    if kind == "default":
        return
    again, other = build(3), build(4)
    for a, b, _ in zip(model.weights, again.weights, other.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert any(not np.array_equal(a, c) for a, c in zip(model.weights, other.weights))


def _language_model(memory):
    # Two LSTM layers as wide as the embedding: every LSTM kernel has the same shape.
    options = dict(num_layers=2, stateful=False, sequence_length=None)
    return build_language_model(30, memory, 16, 16, **options)


def _built(layer, shape):
    layer.build(shape)
    return layer


# {case: a language model with each kind of memory, or a layer with several kernels}
BUILT = {
    "lm_lstm": lambda: _language_model(None),
    "lm_window_attention": lambda: _language_model(SlidingWindowAttention(3, mode="key_value")),
    "lm_ngram": lambda: _language_model(NGramConcat(3, 8)),
    "lm_cell_form": lambda: _language_model(lambda cell: SlidingWindowAttentionCell(cell, 3)),
    "SlidingWindowAttention": lambda: _built(
        SlidingWindowAttention(window=3, mode="key_value_predict", units=4), (2, 5, 12)
    ),
    "AssociativeGRUCell": lambda: _built(AssociativeGRUCell(8, num_copies=2), (2, 8)),
    "DualAssociativeGRUCell": lambda: _built(DualAssociativeGRUCell(8, num_copies=2), (2, 8)),
    "DualAssociativeEncoder": lambda: _built(
        DualAssociativeEncoder(8, num_copies=2), [(2, 5, 8), (2, 3, 8)]
    ),
}


@pytest.mark.parametrize("case", sorted(BUILT))
def test_a_models_or_layers_kernels_from_one_initializer_start_independent(case):
    built = BUILT[case]()
    assert len(_random_weights(built.weights)) >= (5 if case.startswith("lm_") else 3)
    assert _alike(built.weights) == []
