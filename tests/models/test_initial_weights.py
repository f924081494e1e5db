"""No two randomly drawn weights of a builder's model or of a layer with several kernels
start equal; a seeded builder draws the same weights again."""

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
    paths = sorted(flat)
    return [
        (a, b)
        for i, a in enumerate(paths)
        for b in paths[i + 1 :]
        if np.array_equal(flat[a][:PREFIX], flat[b][:PREFIX])
    ]


LANGUAGE_MODELS = {
    "lstm": lambda: None,
    "window_attention": lambda: SlidingWindowAttention(window=3, mode="key_value"),
    "ngram": lambda: NGramConcat(3, 8),
    "cell_form": lambda: lambda cell: SlidingWindowAttentionCell(cell, window=3),
}


@pytest.mark.parametrize("memory", sorted(LANGUAGE_MODELS))
def test_language_model_weights_start_independent(memory):
    # Two LSTM layers as wide as the embedding: every LSTM kernel has the same shape.
    options = dict(layers=2, stateful=False, sequence_length=None)
    model = build_language_model(30, LANGUAGE_MODELS[memory](), 16, 16, **options)
    model.build((None, None))
    assert len(_random_weights(model.weights)) >= 5
    assert _alike(model.weights) == []


@pytest.mark.parametrize("kind", ["gru", "am_gru", "dual_am_gru", "default"])
def test_snli_model_weights_start_independent_and_reproducible(kind):
    def build(seed):
        if kind == "default":  # the builder's own kernels, unseeded
            return build_snli_model(20, embedding_dim=8)
        return snli_model(20, kind=kind, units=8, embedding_dim=8, num_copies=2, seed=seed)

    model = build(3)
    assert len(_random_weights(model.weights)) >= 7
    assert _alike(model.weights) == []
    if kind == "default":
        return
    again, other = build(3), build(4)
    for a, b, _ in zip(model.weights, again.weights, other.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert any(
        not np.array_equal(np.asarray(a), np.asarray(c))
        for a, c in zip(model.weights, other.weights)
    )


LAYERS = {
    "SlidingWindowAttention": (
        lambda: SlidingWindowAttention(window=3, mode="key_value_predict", units=4),
        (2, 5, 12),
    ),
    "AssociativeGRUCell": (lambda: AssociativeGRUCell(8, num_copies=2), (2, 8)),
    "DualAssociativeGRUCell": (lambda: DualAssociativeGRUCell(8, num_copies=2), (2, 8)),
    "DualAssociativeEncoder": (
        lambda: DualAssociativeEncoder(8, num_copies=2),
        [(2, 5, 8), (2, 3, 8)],
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_a_layers_kernels_from_one_initializer_start_independent(name):
    make, shape = LAYERS[name]
    layer = make()
    layer.build(shape)
    assert len(_random_weights(layer.weights)) >= 3
    assert _alike(layer.weights) == []
