"""One declaration per public layer: what the suites over every layer need to know about it.

Each `keras.layers.Layer` subclass exported by ``tf_memlayers`` is declared here once, with

* ``make``: a small instance (keyword arguments are passed on, so a suite can set a flag or
  a ``dtype``);
* ``flags``: its boolean constructor arguments, each checked to refuse a non-bool;
* ``tests``: the test module of its mechanism (NumPy reference and mechanism tests), as a
  path under ``tests/``; it runs on every Keras backend;
* ``reference``: the module of its NumPy reference, where it has one;
* ``not_in``: the suites of `SUITES` that do not apply to it, each with the reason;
* its cases of the suites over every layer (Keras's layer checks, the user journeys, masked
  padding, exact output specs, and empty inputs where the layer takes them; for a cell, the
  cells those use).

The suites draw their cases from here (`suite_cases`); `tests/layers/test_layer_registry.py`
checks that every exported layer is declared and that each declaration has cases of its own
class in each suite of `SUITES`, unless it says why not. The test selection of the other backends
(`backend_neutral_files`) comes from here too. A new layer is one declaration.
"""

import dataclasses
from typing import Callable

import keras

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
    ResettableCell,
    ResettableRNN,
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
    TiedEmbedding,
)

# The suites with one case per layer, by the name `not_in` uses.
SUITES = ("keras_checks", "journeys", "nan_padding", "output_spec", "flags")

# The tests of what every layer shares (the cell wrapper, the holographic ops, the backends'
# own checks) and the suites over every layer, which run on every backend with the mechanisms'
# own test modules.
SHARED_SUITES = (
    "layers/associative_memory/test_am_resets.py",
    "layers/test_layer_conformance.py",
    "layers/test_layer_journeys.py",
    "layers/test_layer_registry.py",
    "layers/test_memory_cell_wrapper.py",
    "layers/test_resets.py",
    "ops/test_holographic.py",
    "test_backends.py",
)

_RNN_LAYER_FLAGS = (
    "return_retrievals", "return_sequences", "return_state", "go_backwards", "stateful",
    "unroll", "zero_output_for_mask",
)  # fmt: skip
_CELL_SPEC = "a cell: its step spec is checked by test_cell_step_spec_is_exact"
_NO_SEQUENCE = "maps single vectors or ids, with no sequence and so no padded steps"
_RNN_MASKING = (
    "a cell: keras.layers.RNN handles its masked steps, and promises nothing about NaN there"
)


@dataclasses.dataclass(frozen=True)
class Declaration:
    cls: type
    make: Callable[..., keras.layers.Layer]
    tests: str
    flags: tuple = ()
    reference: str | None = None
    not_in: dict = dataclasses.field(default_factory=dict)
    # The cases of the suites over every layer, by name (pytest ids). A name with "fused" in
    # it runs the fused AM-GRU loop, which is TensorFlow only.
    #: cells: ``name -> factory(dtype=None)`` of a cell (cells only);
    cells: dict = dataclasses.field(default_factory=dict)
    #: keras_checks: ``name -> (layer_cls, init_kwargs, run_layer_test arguments)``;
    keras_checks: dict = dataclasses.field(default_factory=dict)
    #: journeys: ``name -> (role, builder)``: ``"step"`` (embedded tokens -> features per
    #: step), ``"pooled"`` (-> one vector), ``"dual"`` (() -> premise and hypothesis layers)
    #: or ``"token"`` ((tokens, masked, vocabulary) -> logits);
    journeys: dict = dataclasses.field(default_factory=dict)
    #: nan_padding: ``name -> factory()`` of a layer promising zero (or unread) padded steps;
    nan_padding: dict = dataclasses.field(default_factory=dict)
    #: output_spec: ``name -> (factory(dtype), input shape, call keyword arguments)``;
    output_spec: dict = dataclasses.field(default_factory=dict)
    #: empty: ``name -> factory()`` of a layer called on empty sequences and batches.
    empty: dict = dataclasses.field(default_factory=dict)


# The width of the call inputs of the cases (``[2, 3, INPUT_DIM]`` sequences, unless a case
# says otherwise).
INPUT_DIM = 4


def _rnn(cell, **kwargs):
    """``keras.layers.RNN`` over one of the package's cells, as a user of the backend writes it:
    on JAX with ``zero_output_for_mask=True``, since Keras's JAX loop emits the cell's first
    state at a masked step (conftest.KERAS_MASKED_OUTPUT; docs/backends.rst, "Backends")."""
    return keras.layers.RNN(
        cell, zero_output_for_mask=keras.backend.backend() != "tensorflow", **kwargs
    )


def rnn_over(cell_name, **rnn_kwargs):
    """A `layer_cls` for `run_layer_test`: `keras.layers.RNN` over a fresh cell of the
    ``cells`` case ``cell_name``, made under the same dtype policy as the RNN."""

    def make(**kwargs):
        cell = suite_cases("cells")[cell_name](dtype=kwargs.get("dtype"))
        return keras.layers.RNN(cell, **rnn_kwargs, **kwargs)

    return make


def _rnn_resettable(cell):
    """`ResettableRNN` over ``cell``, written as `_rnn` writes `keras.layers.RNN`."""
    return ResettableRNN(
        cell, return_sequences=True, zero_output_for_mask=keras.backend.backend() != "tensorflow"
    )


def _tied_language_model(tokens, masked, vocabulary):
    """Embedding, LSTM, and the embedding's transpose as the output layer (weight tying)."""
    embedding = TiedEmbedding(vocabulary, 4, mask_zero=masked)
    features = keras.layers.LSTM(4, return_sequences=True)(embedding(tokens))
    return keras.layers.Activation("linear", dtype="float32")(embedding(features, reverse=True))


LAYERS = (
    Declaration(
        SlidingWindowAttention,
        lambda **kw: SlidingWindowAttention(3, **kw),
        "layers/window_attention/test_sliding_window_attention.py",
        flags=("use_bias", "return_memory", "return_attention_scores", "stateful"),
        reference="window_reference",
        keras_checks={
            "window": (
                SlidingWindowAttention,
                {"window": 2, "mode": "key_value", "use_bias": True},
                dict(
                    input_shape=(2, 3, 6),
                    expected_output_shape=(2, 3, 3),
                    expected_num_trainable_weights=7,
                    supports_masking=True,
                ),
            ),
            "window_scores_and_memory": (
                SlidingWindowAttention,
                {"window": 2, "return_attention_scores": True, "return_memory": True},
                dict(
                    input_shape=(2, 3, 4),
                    expected_output_shape=((2, 3, 4), (2, 3, 2), (2, 10)),
                    expected_num_trainable_weights=5,
                    supports_masking=True,
                    # The loss of the training check sums one tensor; the scores come out too.
                    run_training_check=False,
                ),
            ),
            "window_stateful": (
                SlidingWindowAttention,
                {"window": 2, "stateful": True},
                dict(
                    input_shape=(2, 3, 4),
                    expected_output_shape=(2, 3, 4),
                    expected_num_trainable_weights=5,
                    expected_num_non_trainable_weights=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "SlidingWindowAttention": (
                "step",
                lambda e: SlidingWindowAttention(3, mode="key_value")(
                    keras.layers.LSTM(8, return_sequences=True)(e)
                ),
            ),
        },
        nan_padding={
            "window_attention": lambda: SlidingWindowAttention(2),
            "window_zeros_pad": lambda: SlidingWindowAttention(3, mode="key_value", pad="zeros"),
            "window_key_value_predict": lambda: SlidingWindowAttention(
                2, mode="key_value_predict", sizes=(2, 1, 1), use_bias=True
            ),
        },
        output_spec={
            "window": (lambda dtype: SlidingWindowAttention(3, dtype=dtype), (2, 5, 4), {}),
            "window_all_outputs": (
                lambda dtype: SlidingWindowAttention(
                    2,
                    mode="key_value_predict",
                    sizes=(3, 2, 1),
                    units=5,
                    return_attention_scores=True,
                    return_memory=True,
                    dtype=dtype,
                ),
                (2, 5, 6),
                {},
            ),
            "window_memory": (
                lambda dtype: SlidingWindowAttention(
                    2, mode="key_value", return_memory=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
        },
        empty={
            "window": lambda: SlidingWindowAttention(
                2, return_attention_scores=True, return_memory=True
            ),
            "window_zeros_pad": lambda: SlidingWindowAttention(
                2, mode="key_value", pad="zeros", return_memory=True
            ),
        },
    ),
    Declaration(
        SlidingWindowAttentionCell,
        lambda **kw: SlidingWindowAttentionCell(keras.layers.LSTMCell(4), 3, **kw),
        "layers/window_attention/test_sliding_window_attention.py",
        flags=("use_bias",),
        reference="window_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
        cells={
            "window_attention": lambda dtype=None: SlidingWindowAttentionCell(
                keras.layers.LSTMCell(6, dtype=dtype), window=3, dtype=dtype
            ),
            "window_key_value": lambda dtype=None: SlidingWindowAttentionCell(
                keras.layers.GRUCell(6, dtype=dtype), window=2, mode="key_value", dtype=dtype
            ),
            "window_key_value_predict": lambda dtype=None: SlidingWindowAttentionCell(
                keras.layers.LSTMCell(6, dtype=dtype),
                window=3,
                mode="key_value_predict",
                units=5,
                use_bias=True,
                dtype=dtype,
            ),
        },
        keras_checks={
            "rnn_window_attention": (
                rnn_over("window_attention", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6),
                    expected_num_trainable_weights=3 + 5,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
            "rnn_window_key_value": (
                rnn_over("window_key_value", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 3),
                    expected_num_trainable_weights=3 + 5,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
            "rnn_window_key_value_predict": (
                rnn_over("window_key_value_predict", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=3 + 7,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "SlidingWindowAttentionCell": (
                "step",
                lambda e: _rnn(
                    SlidingWindowAttentionCell(keras.layers.LSTMCell(8), window=3),
                    return_sequences=True,
                )(e),
            ),
        },
    ),
    Declaration(
        NGramConcat,
        lambda **kw: NGramConcat(3, 4, **kw),
        "layers/window_attention/test_ngram.py",
        flags=("use_bias", "return_memory", "stateful"),
        keras_checks={
            "ngram": (
                NGramConcat,
                {"n": 3, "units": 5, "use_bias": True},
                dict(
                    input_shape=(2, 3, 6),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=2,
                    supports_masking=True,
                ),
            ),
            "ngram_stateful": (
                NGramConcat,
                {"n": 4, "units": 5, "stateful": True},
                dict(
                    input_shape=(2, 3, 6),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=1,
                    expected_num_non_trainable_weights=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "NGramConcat": (
                "step",
                lambda e: NGramConcat(3, 6)(keras.layers.LSTM(8, return_sequences=True)(e)),
            ),
        },
        nan_padding={
            "ngram": lambda: NGramConcat(3, 5, use_bias=True),
        },
        output_spec={
            "ngram": (lambda dtype: NGramConcat(3, 5, dtype=dtype), (2, 5, 4), {}),
            "ngram_memory": (
                lambda dtype: NGramConcat(4, 5, sizes=(2, 1, 3), return_memory=True, dtype=dtype),
                (2, 5, 6),
                {},
            ),
            "ngram_2_memory": (
                lambda dtype: NGramConcat(2, 5, return_memory=True, dtype=dtype),
                (2, 5, 4),
                {},
            ),
        },
        empty={
            "ngram": lambda: NGramConcat(3, 5, return_memory=True),
        },
    ),
    Declaration(
        NGramConcatCell,
        lambda **kw: NGramConcatCell(keras.layers.LSTMCell(4), 3, 4, **kw),
        "layers/window_attention/test_ngram.py",
        flags=("use_bias",),
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
        cells={
            "ngram_2": lambda dtype=None: NGramConcatCell(
                keras.layers.GRUCell(6, dtype=dtype), n=2, units=5, dtype=dtype
            ),
            "ngram_4": lambda dtype=None: NGramConcatCell(
                keras.layers.LSTMCell(6, dtype=dtype), n=4, units=5, use_bias=True, dtype=dtype
            ),
        },
        keras_checks={
            "rnn_ngram_2": (
                rnn_over("ngram_2", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=3 + 1,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
            "rnn_ngram_4": (
                rnn_over("ngram_4", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=3 + 2,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "NGramConcatCell": (
                "step",
                lambda e: _rnn(
                    NGramConcatCell(keras.layers.GRUCell(8), n=3, units=6), return_sequences=True
                )(e),
            ),
        },
    ),
    Declaration(
        KeyValuePredictSplit,
        lambda **kw: KeyValuePredictSplit("key_value_predict", **kw),
        "layers/window_attention/test_key_value_predict_split.py",
        not_in={
            "nan_padding": "splits each step's features on its own: a NaN stays in its step",
            "flags": "has no boolean arguments",
        },
        keras_checks={
            "split": (
                KeyValuePredictSplit,
                {"mode": "key_value_predict", "sizes": (2, 2, 2)},
                dict(
                    input_shape=(2, 3, 6),
                    expected_output_shape=((2, 3, 2), (2, 3, 2), (2, 3, 2)),
                    expected_num_trainable_weights=0,
                    supports_masking=True,
                    # No weights to train.
                    run_training_check=False,
                ),
            ),
        },
        journeys={
            "KeyValuePredictSplit": (
                "step",
                lambda e: keras.layers.Concatenate()(
                    list(
                        KeyValuePredictSplit("key_value_predict", sizes=(4, 2, 2))(
                            keras.layers.LSTM(8, return_sequences=True)(e)
                        )[1:]
                    )
                ),
            ),
        },
        output_spec={
            "split_attention": (lambda dtype: KeyValuePredictSplit(dtype=dtype), (2, 5, 4), {}),
            "split_key_value_predict": (
                lambda dtype: KeyValuePredictSplit(
                    "key_value_predict", sizes=(3, 2, 1), dtype=dtype
                ),
                (2, 5, 6),
                {},
            ),
            "split_rank_2": (
                lambda dtype: KeyValuePredictSplit("key_value", dtype=dtype),
                (2, 4),
                {},
            ),
        },
    ),
    Declaration(
        AttentionPooling,
        lambda **kw: AttentionPooling(3, **kw),
        "layers/cache_attention/test_attention_pooling.py",
        not_in={"flags": "has no boolean arguments"},
        keras_checks={
            "pooling": (
                AttentionPooling,
                {"units": 3},
                dict(
                    input_shape=(2, 3, 4),
                    expected_output_shape=(2, 4),
                    expected_num_trainable_weights=2,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "AttentionPooling": (
                "pooled",
                lambda e: AttentionPooling(4)(keras.layers.LSTM(8, return_sequences=True)(e)),
            ),
        },
        nan_padding={
            "pooling": lambda: AttentionPooling(3),
        },
        output_spec={
            "pooling": (lambda dtype: AttentionPooling(3, dtype=dtype), (2, 5, 4), {}),
            "pooling_scores": (
                lambda dtype: AttentionPooling(3, dtype=dtype),
                (2, 5, 4),
                {"return_attention_scores": True},
            ),
        },
        empty={
            "pooling": lambda: AttentionPooling(3),
        },
    ),
    Declaration(
        HeapCacheAttention,
        lambda **kw: HeapCacheAttention(4, 3, **kw),
        "layers/cache_attention/test_heap_cache_attention.py",
        flags=("mask_empty",),
        reference="heap_reference",
        not_in={"nan_padding": _NO_SEQUENCE},
        keras_checks={
            "cache": (
                HeapCacheAttention,
                {"cache_size": 3, "attention_units": 2, "query": "additive"},
                dict(
                    input_shape=(2, 4),
                    expected_output_shape=(2, 4),
                    expected_num_trainable_weights=4,
                    expected_num_non_trainable_weights=1,
                    supports_masking=False,
                ),
            ),
        },
        journeys={
            "HeapCacheAttention": (
                "pooled",
                lambda e: HeapCacheAttention(4, 3)(keras.layers.LSTM(8)(e)),
            ),
        },
        output_spec={
            "cache": (lambda dtype: HeapCacheAttention(3, 2, dtype=dtype), (2, 4), {}),
            "cache_scores": (
                lambda dtype: HeapCacheAttention(3, 2, dtype=dtype),
                (2, 4),
                {"return_attention_scores": True},
            ),
            "cache_additive_scores": (
                lambda dtype: HeapCacheAttention(3, 2, query="additive", dtype=dtype),
                (2, 4),
                {"return_attention_scores": True},
            ),
        },
    ),
    Declaration(
        AssociativeMemoryCell,
        lambda **kw: AssociativeMemoryCell(keras.layers.GRUCell(4), **kw),
        "layers/associative_memory/test_memory_cell.py",
        flags=("return_retrievals",),
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
        cells={
            "associative_memory_lstm": lambda dtype=None: AssociativeMemoryCell(
                keras.layers.LSTMCell(6, dtype=dtype), num_copies=2, dtype=dtype
            ),
            "associative_memory_gru": lambda dtype=None: AssociativeMemoryCell(
                keras.layers.GRUCell(6, dtype=dtype),
                num_copies=3,
                return_retrievals=True,
                dtype=dtype,
            ),
        },
        keras_checks={
            "rnn_associative_memory_lstm": (
                rnn_over("associative_memory_lstm", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6),
                    expected_num_trainable_weights=3 + 1,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
            "rnn_associative_memory_gru": (
                rnn_over("associative_memory_gru", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6 + 2 * 6),
                    expected_num_trainable_weights=3 + 1,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "AssociativeMemoryCell": (
                "step",
                lambda e: _rnn(
                    AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2),
                    return_sequences=True,
                )(e),
            ),
        },
    ),
    Declaration(
        AssociativeGRUCell,
        lambda **kw: AssociativeGRUCell(4, **kw),
        "layers/associative_memory/test_am_gru_cell.py",
        flags=("return_retrievals",),
        reference="am_gru_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
        cells={
            "am_gru": lambda dtype=None: AssociativeGRUCell(6, num_copies=2, dtype=dtype),
            "am_gru_retrievals": lambda dtype=None: AssociativeGRUCell(
                6, num_copies=1, return_retrievals=True, dtype=dtype
            ),
        },
        keras_checks={
            "rnn_am_gru": (
                rnn_over("am_gru", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6),
                    expected_num_trainable_weights=5,
                    expected_num_seed_generators=0,
                    supports_masking=True,
                ),
            ),
            "rnn_am_gru_retrievals": (
                rnn_over("am_gru_retrievals", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 18),
                    expected_num_trainable_weights=5,
                    expected_num_seed_generators=0,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "AssociativeGRUCell": (
                "step",
                lambda e: _rnn(AssociativeGRUCell(8, num_copies=2), return_sequences=True)(e),
            ),
        },
    ),
    Declaration(
        AssociativeGRU,
        lambda **kw: AssociativeGRU(4, **kw),
        "layers/associative_memory/test_am_gru.py",
        flags=_RNN_LAYER_FLAGS,
        reference="am_gru_reference",
        keras_checks={
            **{
                f"am_gru_{loop}": (
                    AssociativeGRU,
                    {"units": 4, "num_copies": 2, "return_sequences": True, "fused_loop": fused},
                    dict(
                        input_shape=(2, 3, 4),
                        expected_output_shape=(2, 3, 4),
                        expected_num_trainable_weights=5,
                        supports_masking=True,
                    ),
                )
                for loop, fused in (("keras_loop", False), ("fused_loop", True))
            },
        },
        journeys={
            "AssociativeGRU": (
                "step",
                lambda e: AssociativeGRU(8, num_copies=2, return_sequences=True)(e),
            ),
            "AssociativeGRU_fused_loop": (
                "step",
                lambda e: AssociativeGRU(8, num_copies=2, return_sequences=True, fused_loop=True)(
                    e
                ),
            ),
        },
        nan_padding={
            "am_gru_keras_loop": lambda: AssociativeGRU(
                4, num_copies=2, return_sequences=True, zero_output_for_mask=True
            ),
            "am_gru_fused_loop": lambda: AssociativeGRU(
                4, num_copies=2, return_sequences=True, zero_output_for_mask=True, fused_loop=True
            ),
        },
        output_spec={
            "am_gru_states": (
                lambda dtype: AssociativeGRU(
                    4, num_copies=2, return_sequences=True, return_state=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
            "am_gru_fused_last": (
                lambda dtype: AssociativeGRU(4, num_copies=3, fused_loop=True, dtype=dtype),
                (2, 5, 4),
                {},
            ),
            "am_gru_retrievals": (
                lambda dtype: AssociativeGRU(
                    4, num_copies=1, return_retrievals=True, return_sequences=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
        },
    ),
    Declaration(
        DualAssociativeGRUCell,
        lambda **kw: DualAssociativeGRUCell(4, **kw),
        "layers/associative_memory/test_am_gru_cell.py",
        flags=("return_retrievals",),
        reference="am_gru_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
        cells={
            "dual_am_gru_paper": lambda dtype=None: DualAssociativeGRUCell(
                6, num_copies=2, dtype=dtype
            ),
            "dual_am_gru_released": lambda dtype=None: DualAssociativeGRUCell(
                6, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
            ),
        },
        keras_checks={
            "rnn_dual_am_gru_paper": (
                rnn_over("dual_am_gru_paper", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6),
                    expected_num_trainable_weights=5 + 2,
                    expected_num_seed_generators=0,
                    supports_masking=True,
                ),
            ),
            "rnn_dual_am_gru_released": (
                rnn_over("dual_am_gru_released", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 24),
                    expected_num_trainable_weights=5 + 3,
                    expected_num_seed_generators=0,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "DualAssociativeGRUCell": (
                "dual",
                lambda: (
                    _rnn(AssociativeGRUCell(8, num_copies=2), return_state=True),
                    _rnn(DualAssociativeGRUCell(8, num_copies=2)),
                ),
            ),
        },
    ),
    Declaration(
        DualAssociativeGRU,
        lambda **kw: DualAssociativeGRU(4, **kw),
        "layers/associative_memory/test_dual_am_gru.py",
        flags=_RNN_LAYER_FLAGS,
        reference="am_gru_reference",
        keras_checks={
            **{
                f"dual_am_gru_{key}_{loop}": (
                    DualAssociativeGRU,
                    {
                        "units": 4,
                        "num_copies": 2,
                        "dual_key": key,
                        "return_sequences": True,
                        "fused_loop": fused,
                    },
                    dict(
                        input_shape=(2, 3, 4),
                        expected_output_shape=(2, 3, 4),
                        expected_num_trainable_weights=5 + 2 + (key == "released"),
                        supports_masking=True,
                    ),
                )
                for key, loop, fused in (
                    ("paper", "keras_loop", False),
                    ("released", "keras_loop", False),
                    ("paper", "fused_loop", True),
                )
            },
        },
        journeys={
            **{
                name: (
                    "dual",
                    lambda fused=fused: (
                        AssociativeGRU(8, num_copies=2, return_state=True, fused_loop=fused),
                        DualAssociativeGRU(8, num_copies=2, fused_loop=fused),
                    ),
                )
                for name, fused in (
                    ("DualAssociativeGRU", False),
                    ("DualAssociativeGRU_fused_loop", True),
                )
            },
        },
        nan_padding={
            **{
                f"dual_am_gru_{loop}": lambda fused=fused: DualAssociativeGRU(
                    4,
                    num_copies=2,
                    return_sequences=True,
                    zero_output_for_mask=True,
                    fused_loop=fused,
                )
                for loop, fused in (("keras_loop", False), ("fused_loop", True))
            },
        },
        output_spec={
            "dual_am_gru_states": (
                lambda dtype: DualAssociativeGRU(
                    4, num_copies=2, return_sequences=True, return_state=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
            "dual_am_gru_fused_last": (
                lambda dtype: DualAssociativeGRU(4, num_copies=3, fused_loop=True, dtype=dtype),
                (2, 5, 4),
                {},
            ),
            "dual_am_gru_retrievals": (
                lambda dtype: DualAssociativeGRU(
                    4, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
        },
    ),
    Declaration(
        ResettableCell,
        lambda **kw: ResettableCell(keras.layers.GRUCell(4), **kw),
        "layers/test_resettable_rnn.py",
        not_in={
            "output_spec": _CELL_SPEC,
            "nan_padding": _RNN_MASKING,
            "flags": "has no boolean arguments",
        },
        cells={
            "resettable_lstm": lambda dtype=None: ResettableCell(
                keras.layers.LSTMCell(6, dtype=dtype), dtype=dtype
            ),
        },
        keras_checks={
            "rnn_resettable_lstm": (
                rnn_over("resettable_lstm", return_sequences=True),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 6),
                    expected_num_trainable_weights=3,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "ResettableCell": (
                "step",
                lambda e: _rnn(ResettableCell(keras.layers.LSTMCell(8)), return_sequences=True)(e),
            ),
        },
    ),
    Declaration(
        ResettableRNN,
        lambda **kw: ResettableRNN(keras.layers.GRUCell(4), **kw),
        "layers/test_resettable_rnn.py",
        flags=_RNN_LAYER_FLAGS[1:],
        not_in={"nan_padding": "keras.layers.RNN's masking, which promises nothing about NaN"},
        keras_checks={
            "resettable_rnn": (
                lambda **kw: ResettableRNN(
                    keras.layers.LSTMCell(5, dtype=kw.get("dtype")), return_sequences=True, **kw
                ),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=(2, 3, 5),
                    expected_num_trainable_weights=3,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
            "resettable_rnn_window_cell": (
                lambda **kw: ResettableRNN(
                    SlidingWindowAttentionCell(
                        keras.layers.LSTMCell(6, dtype=kw.get("dtype")),
                        window=2,
                        mode="key_value",
                        dtype=kw.get("dtype"),
                    ),
                    return_state=True,
                    **kw,
                ),
                {},
                dict(
                    input_shape=(2, 3, INPUT_DIM),
                    expected_output_shape=((2, 3), (2, 6), (2, 6), (2, 2 * 7)),
                    expected_num_trainable_weights=3 + 5,
                    expected_num_seed_generators=1,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "ResettableRNN": (
                "step",
                lambda e: _rnn_resettable(keras.layers.LSTMCell(8))(e),
            ),
        },
        output_spec={
            "resettable_rnn": (
                lambda dtype: ResettableRNN(
                    keras.layers.GRUCell(5, dtype=dtype), return_sequences=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
            "resettable_rnn_state": (
                lambda dtype: ResettableRNN(
                    keras.layers.LSTMCell(5, dtype=dtype), return_state=True, dtype=dtype
                ),
                (2, 5, 4),
                {},
            ),
        },
    ),
    Declaration(
        TiedEmbedding,
        lambda **kw: TiedEmbedding(10, 4, **kw),
        "layers/test_tied_embedding.py",
        not_in={
            "nan_padding": "reads integer ids, which cannot be NaN",
            "output_spec": "keras.layers.Embedding's spec, checked in test_tied_embedding.py",
            "flags": "has no boolean arguments of its own",
        },
        keras_checks={
            "tied_embedding": (
                TiedEmbedding,
                {"input_dim": 10, "output_dim": 4, "mask_zero": True},
                dict(
                    input_shape=(2, 3),
                    input_dtype="int32",
                    expected_output_shape=(2, 3, 4),
                    expected_num_trainable_weights=2,
                    supports_masking=True,
                ),
            ),
        },
        journeys={
            "TiedEmbedding": ("token", _tied_language_model),
        },
    ),
)

BY_CLASS = {declaration.cls: declaration for declaration in LAYERS}


def applies(declaration, suite):
    """Whether ``suite`` (one of `SUITES`) must have a case of ``declaration``'s layer."""
    assert suite in SUITES, suite
    return suite not in declaration.not_in


def suite_cases(suite):
    """Every declared layer's cases of ``suite`` (a field of `Declaration` holding cases), in
    one dict by name."""
    merged = {}
    for declaration in LAYERS:
        cases = getattr(declaration, suite)
        clash = set(cases) & set(merged)
        assert not clash, f"case names used twice in {suite!r}: {sorted(clash)}"
        merged.update(cases)
    return merged


def backend_neutral_files():
    """The test files that run on every backend (paths under ``tests/``): the suites over
    every layer, the shared parts, and each declared layer's own test module."""
    return frozenset(SHARED_SUITES) | {declaration.tests for declaration in LAYERS}


def layer_classes(layer):
    """The package's layer classes in ``layer``: itself, the cell of an RNN, the layers of a
    model (recursively)."""
    found = set()
    stack = [layer]
    while stack:
        item = stack.pop()
        found.add(type(item))
        if isinstance(item, keras.layers.RNN):
            stack.append(item.cell)
        if isinstance(item, keras.Model):
            stack.extend(item.layers)
    return {cls for cls in found if cls in BY_CLASS}
