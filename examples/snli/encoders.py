"""The SNLI example's ``--model`` choices, as encoders for `build_snli_model`.

`tf_memlayers.models.build_snli_model` takes the encoder itself. The rows of Weissenborn's
(2016) Table 1 that the example trains are `tf_memlayers.ConditionalEncoder` stacks of
two layers, the second a GRU of ``top_units``:

* ``"gru"``: a GRU (the paper: 126 units);
* ``"am_gru"``: an `AssociativeGRU` (108 units), whose hypothesis pass continues the premise's
  memory;
* ``"dual_am_gru"``: the `DualAssociativeEncoder` (100 units), whose hypothesis pass reads the
  premise's final memory.

Beside them, the paper's comparator (its "LSTM-Attention", Rocktäschel et al. 2016):

* ``"word_by_word"``: a `tf_memlayers.ConditionalAttentionEncoder`, an LSTM over the
  premise and an LSTM with `WordByWordAttention` over the premise's outputs reading the
  hypothesis (100 units, the paper's k), each with its own weights, and no second layer. Its
  outputs are the premise LSTM's last output and :math:`h^*`, which the classifier reads as
  ``[p, h*, |p - h*|]``, as for the other rows (Rocktäschel et al. classify from
  :math:`h^*` alone).

`make_encoder` makes the one a name stands for; `snli_model` builds a classifier from the names
and sizes the command line gives (for the example, its benchmarks and tests).
"""

import keras

from tf_memlayers.layers import (
    AssociativeGRU,
    AttentionRNN,
    ConditionalAttentionEncoder,
    ConditionalEncoder,
    DualAssociativeEncoder,
    WordByWordAttention,
)
from tf_memlayers.layers.associative_memory.associative_gru import check_fused_loop
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES
from tf_memlayers.models import build_snli_model
from tf_memlayers.models.snli import PAPER_UNITS

KINDS = ("gru", "am_gru", "dual_am_gru", "word_by_word")


def make_encoder(
    kind="dual_am_gru",
    units=PAPER_UNITS,
    top_units=None,
    num_copies=NUM_COPIES,
    dual_key="paper",
    seed=123,
    kernel_initializer="glorot_uniform",
    fused_loop="auto",
):
    """The `ConditionalEncoder` ``kind`` names (see the module docstring).

    Args:
        kind: One of `KINDS`.
        units: The size of layer 1 (checked by its layer: even for the associative kinds).
        top_units: The size of the layer-2 GRU; `None`: ``units``. The word-by-word model
            has no layer 2: a ``top_units`` with it is an error.
        num_copies, dual_key, seed, fused_loop: The associative layers' options (``seed``
            seeds their permutations), checked there. The GRU and the word-by-word model
            have no fused loop: ``fused_loop=True`` with them is an error.
        kernel_initializer: The initializer of every kernel.

    Returns:
        A `ConditionalEncoder`.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}; got {kind!r}.")
    init = kernel_initializer
    if kind in ("gru", "word_by_word") and check_fused_loop(fused_loop, "make_encoder") is True:
        raise ValueError(
            f"`fused_loop=True` runs the AM-GRU loop; the {kind} model has none (use the "
            "am_gru or dual_am_gru model)."
        )
    if kind == "word_by_word":
        if top_units is not None:
            raise ValueError(
                f"`top_units` sizes layer 2, which the word_by_word model does not have (its "
                f"attention gives the pair's representation); got top_units={top_units!r}."
            )
        return ConditionalEncoder(
            [
                ConditionalAttentionEncoder(
                    keras.layers.LSTM(
                        units,
                        kernel_initializer=init,
                        recurrent_initializer=init,
                        return_sequences=True,
                        return_state=True,
                        name="premise_lstm",
                    ),
                    AttentionRNN(
                        WordByWordAttention(
                            keras.layers.LSTMCell(
                                units,
                                kernel_initializer=init,
                                recurrent_initializer=init,
                            ),
                            kernel_initializer=init,
                        ),
                        name="hypothesis_lstm_attention",
                    ),
                )
            ]
        )
    if kind == "gru":
        first = keras.layers.GRU(
            units,
            kernel_initializer=init,
            recurrent_initializer=init,
            return_sequences=True,
            return_state=True,
        )
    elif kind == "am_gru":
        first = AssociativeGRU(
            units,
            num_copies=num_copies,
            seed=seed,
            kernel_initializer=init,
            fused_loop=fused_loop,
            return_sequences=True,
            return_state=True,
        )
    else:
        first = DualAssociativeEncoder(
            units,
            num_copies=num_copies,
            dual_key=dual_key,
            seed=seed,
            kernel_initializer=init,
            fused_loop=fused_loop,
            return_sequences=True,
        )
    top = keras.layers.GRU(
        units if top_units is None else top_units,
        kernel_initializer=init,
        recurrent_initializer=init,
        return_state=True,
    )
    return ConditionalEncoder([first, top])


def snli_model(
    vocabulary_size,
    kind="dual_am_gru",
    units=PAPER_UNITS,
    top_units=None,
    num_copies=NUM_COPIES,
    dual_key="paper",
    seed=123,
    init_scale=0.05,
    fused_loop="auto",
    **builder_arguments,
):
    """`build_snli_model` with the encoder ``kind`` names (`make_encoder`), every kernel
    uniform in ``±init_scale`` from one generator seeded by ``seed``.

    ``builder_arguments`` (``embedding_dim``, ``embeddings``, ``train_embeddings``,
    ``dropout``, ``classifier_units``, ``name``) go to `build_snli_model`.
    """
    # One generator for the encoder and the classifier: each draw advances it, so no two
    # kernels start alike.
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator(seed)
    )
    encoder = make_encoder(kind, units, top_units, num_copies, dual_key, seed, init, fused_loop)
    builder_arguments.setdefault("name", f"snli_{kind}")
    return build_snli_model(
        vocabulary_size, encoder, seed=seed, kernel_initializer=init, **builder_arguments
    )
