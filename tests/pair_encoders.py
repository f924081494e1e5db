"""The sentence-pair encoders of Weissenborn (2016)'s Table 1 and the paper's comparator, built
from the package's layers, for the tests of the layers and builders that run them.

``kind`` names the encoder: ``"gru"`` (a GRU, then a GRU), ``"am_gru"`` (an `AssociativeGRU`,
then a GRU), ``"dual_am_gru"`` (a `DualAssociativeEncoder`, then a GRU) or ``"word_by_word"``
(a `ConditionalAttentionEncoder`: an LSTM over the premise, an LSTM with `WordByWordAttention`
over the hypothesis)."""

import keras

from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionRNN,
    ConditionalAttentionEncoder,
    ConditionalEncoder,
    DualAssociativeEncoder,
    WordByWordAttention,
)
from tf_memlayers.models import build_snli_model


def pair_encoder(kind, units, init="glorot_uniform", **memory_options):
    """The `ConditionalEncoder` ``kind`` names, ``units`` wide, every kernel from ``init``;
    ``memory_options`` (``num_copies``, ``seed``, ``fused_loop``, ``dual_key``) go to the
    associative layer."""
    kernels = dict(kernel_initializer=init, recurrent_initializer=init)
    if kind == "word_by_word":
        premise = keras.layers.LSTM(units, return_sequences=True, return_state=True, **kernels)
        cell = WordByWordAttention(keras.layers.LSTMCell(units, **kernels), kernel_initializer=init)
        return ConditionalEncoder([ConditionalAttentionEncoder(premise, AttentionRNN(cell))])
    if kind == "gru":
        first = keras.layers.GRU(units, return_sequences=True, return_state=True, **kernels)
    elif kind == "am_gru":
        memory_options.pop("dual_key", None)
        sequences = dict(return_sequences=True, return_state=True)
        first = AssociativeGRU(units, kernel_initializer=init, **sequences, **memory_options)
    else:
        first = DualAssociativeEncoder(
            units, kernel_initializer=init, return_sequences=True, **memory_options
        )
    return ConditionalEncoder([first, keras.layers.GRU(units, return_state=True, **kernels)])


def snli_model(vocabulary_size, kind="dual_am_gru", units=8, seed=123, init_scale=0.05, **options):
    """`build_snli_model` with the encoder ``kind`` names, every kernel uniform in
    ±``init_scale`` from one generator seeded by ``seed``. ``options``: the associative
    layer's (``num_copies``, ``fused_loop``, ``dual_key``) and the builder's."""
    generator = keras.random.SeedGenerator(seed)
    init = keras.initializers.RandomUniform(-init_scale, init_scale, seed=generator)
    memory = {k: options.pop(k) for k in ("num_copies", "fused_loop", "dual_key") if k in options}
    memory = dict(memory, seed=seed) if kind in ("am_gru", "dual_am_gru") else {}
    encoder = pair_encoder(kind, units, init, **memory)
    options.setdefault("name", f"snli_{kind}")
    return build_snli_model(vocabulary_size, encoder, seed=seed, kernel_initializer=init, **options)
