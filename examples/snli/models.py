"""The SNLI example's models: the rows of Weissenborn (2016)'s Table 1 and the paper's
comparator, built from the package's layers and `tf_memlayers.models.build_snli_model`.

``--model`` names the encoder of the sentence pair (`make_encoder`):

* ``"gru"``: a GRU, then a GRU of ``top_units`` (the paper: 126 units); every GRU is the
  original code's (``reset_after=False``, gate biases from `GRUGateBias`);
* ``"am_gru"``: an `AssociativeGRU` whose hypothesis pass continues the premise's memory, then
  a GRU (108 units);
* ``"dual_am_gru"``: the `DualAssociativeEncoder`, whose hypothesis pass reads the premise's
  final memory, then a GRU (100 units, the paper's model);
* ``"word_by_word"``: the comparator, "LSTM-Attention" (Rocktäschel et al. 2016): an LSTM over
  the premise and an LSTM with `WordByWordAttention` over the premise's outputs reading the
  hypothesis (100 units, the paper's k), with no second layer; the classifier reads
  ``[p, h*, |p - h*|]`` as for the other rows.
"""

import math
import numbers

import keras

from tf_memlayers.initializers import GRUGateBias
from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionRNN,
    ConditionalAttentionEncoder,
    ConditionalEncoder,
    DualAssociativeEncoder,
    WordByWordAttention,
)
from tf_memlayers.models import build_snli_model

KINDS = ("gru", "am_gru", "dual_am_gru", "word_by_word")
# The kinds whose first layer has an associative memory, and with it a fused loop.
ASSOCIATIVE = ("am_gru", "dual_am_gru")
# The options that only some kinds read, and those kinds; every kind reads the others.
READERS = {
    "top_units": ("gru", *ASSOCIATIVE),  # layer 2
    "num_copies": ASSOCIATIVE,
    "fused_loop": ASSOCIATIVE,
    "dual_key": ("dual_am_gru",),
}


def make_encoder(kind, units, top_units=None, init="glorot_uniform", **memory_options):
    """The `ConditionalEncoder` that ``kind`` names (the module's docstring).

    Args:
        kind: One of `KINDS`.
        units: The width of layer 1.
        top_units: The width of layer 2, an integer >= 1 (not for ``"word_by_word"``, which
            has none). Default: `None`, ``units``.
        init: The initializer of every kernel.
        **memory_options: The associative layers' options (``num_copies``, ``seed``,
            ``fused_loop``, and ``dual_key`` for ``"dual_am_gru"``), checked there.
    """
    if kind not in KINDS:
        raise ValueError(f"make_encoder: `kind` must be one of {KINDS}, got {kind!r}.")
    if top_units is not None:
        if isinstance(top_units, bool) or not isinstance(top_units, numbers.Integral):
            raise TypeError(f"make_encoder: `top_units` must be an integer, got {top_units!r}.")
        if top_units < 1:
            raise ValueError(f"make_encoder: `top_units` must be >= 1, got {top_units}.")
        if kind == "word_by_word":
            raise ValueError(
                f"make_encoder: `top_units` sizes layer 2, which 'word_by_word' has not; got "
                f"{top_units} (leave it None)."
            )
    rnn = dict(kernel_initializer=init, recurrent_initializer=init)
    gru = dict(rnn, reset_after=False, bias_initializer=GRUGateBias(1.0))
    sequences = dict(return_sequences=True, return_state=True)
    if kind == "word_by_word":
        premise = keras.layers.LSTM(units, name="premise_lstm", **rnn, **sequences)
        cell = keras.layers.LSTMCell(units, **rnn)
        hypothesis = AttentionRNN(
            WordByWordAttention(cell, kernel_initializer=init), name="hypothesis_lstm_attention"
        )
        return ConditionalEncoder([ConditionalAttentionEncoder(premise, hypothesis)])
    if kind == "gru":
        first = keras.layers.GRU(units, **gru, **sequences)
    elif kind == "am_gru":
        memory_options.pop("dual_key", None)
        first = AssociativeGRU(units, kernel_initializer=init, **sequences, **memory_options)
    else:
        first = DualAssociativeEncoder(
            units, kernel_initializer=init, return_sequences=True, **memory_options
        )
    top = keras.layers.GRU(top_units or units, return_state=True, **gru)
    return ConditionalEncoder([first, top])


def build_model(vocabulary_size, kind, units, top_units=None, init_scale=0.05, seed=123, **options):
    """`build_snli_model` with the encoder ``kind`` names, every kernel uniform in
    ``±init_scale`` (a finite number > 0) from one generator seeded by ``seed`` (each draw
    advances it, so no two kernels start alike).

    ``options`` holds the associative layers' options (``num_copies``, ``dual_key``,
    ``fused_loop``: `make_encoder`) and the builder's (``embedding_dim``, ``embeddings``,
    ``train_embeddings``, ``dropout``).

    >>> model = build_model(20, "gru", units=4, embedding_dim=3)
    >>> model.name, model.output_shape
    ('snli_gru', (None, 3))
    """
    if isinstance(init_scale, bool) or not isinstance(init_scale, numbers.Real):
        raise TypeError(f"build_model: `init_scale` must be a number, got {init_scale!r}.")
    if not (math.isfinite(init_scale) and init_scale > 0):
        raise ValueError(
            f"build_model: `init_scale` must be a finite number > 0, got {init_scale!r}."
        )
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator(seed)
    )
    memory = {k: options.pop(k) for k in ("num_copies", "dual_key", "fused_loop") if k in options}
    memory = dict(memory, seed=seed) if kind in ASSOCIATIVE else {}
    encoder = make_encoder(kind, units, top_units, init, **memory)
    return build_snli_model(
        vocabulary_size, encoder, seed=seed, kernel_initializer=init, name=f"snli_{kind}", **options
    )


def runs_fused_loop(model):
    """Whether every loop of the model's associative layer runs fused, as its layers chose
    (`False` for the models without one)."""
    first = model.get_layer("encoder").encoder_layers[0]
    passes = [getattr(first, name, None) for name in ("premise_layer", "hypothesis_layer")]
    layers = passes if all(passes) else [first]  # the Dual AM-GRU's encoder has two passes
    return all(getattr(layer, "uses_fused_loop", False) for layer in layers)
