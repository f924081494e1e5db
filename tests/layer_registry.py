"""One declaration per public layer: what the suites over every layer need to know about it.

Each `keras.layers.Layer` subclass exported by ``tf_memlayers`` is declared here once, with

* ``make``: a small instance (keyword arguments are passed on, so a suite can set a flag or
  a ``dtype``);
* ``flags``: its boolean constructor arguments, each checked to refuse a non-bool;
* ``tests``: the test module of its mechanism (NumPy reference and mechanism tests), as a
  path under ``tests/``; it runs on every Keras backend;
* ``reference``: the module of its NumPy reference, where it has one;
* ``not_in``: the suites that do not apply to it, each with the reason.

The suites over every layer (Keras's layer checks, the user journeys, masked padding, exact
output specs, argument checks) hold their cases in tables; `tests/test_layer_registry.py`
checks that every declared layer has a case in each of them, unless its declaration says why
not, and that every exported layer is declared. The test selection of the other backends
(`backend_neutral_files`) comes from here too.
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
    "layers/test_layer_conformance.py",
    "layers/test_layer_journeys.py",
    "layers/test_layer_registry.py",
    "layers/test_memory_cell_wrapper.py",
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


LAYERS = (
    Declaration(
        SlidingWindowAttention,
        lambda **kw: SlidingWindowAttention(3, **kw),
        "layers/window_attention/test_sliding_window_attention.py",
        flags=("use_bias", "return_memory", "return_attention_scores", "stateful"),
        reference="window_reference",
    ),
    Declaration(
        SlidingWindowAttentionCell,
        lambda **kw: SlidingWindowAttentionCell(keras.layers.LSTMCell(4), 3, **kw),
        "layers/window_attention/test_sliding_window_attention.py",
        flags=("use_bias",),
        reference="window_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
    ),
    Declaration(
        NGramConcat,
        lambda **kw: NGramConcat(3, 4, **kw),
        "layers/window_attention/test_ngram.py",
        flags=("use_bias", "return_memory", "stateful"),
    ),
    Declaration(
        NGramConcatCell,
        lambda **kw: NGramConcatCell(keras.layers.LSTMCell(4), 3, 4, **kw),
        "layers/window_attention/test_ngram.py",
        flags=("use_bias",),
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
    ),
    Declaration(
        KeyValuePredictSplit,
        lambda **kw: KeyValuePredictSplit("key_value_predict", **kw),
        "layers/window_attention/test_key_value_predict_split.py",
        not_in={
            "nan_padding": "splits each step's features on its own: a NaN stays in its step",
            "flags": "has no boolean arguments",
        },
    ),
    Declaration(
        AttentionPooling,
        lambda **kw: AttentionPooling(3, **kw),
        "layers/cache_attention/test_attention_pooling.py",
        not_in={"flags": "has no boolean arguments"},
    ),
    Declaration(
        HeapCacheAttention,
        lambda **kw: HeapCacheAttention(4, 3, **kw),
        "layers/cache_attention/test_heap_cache_attention.py",
        flags=("mask_empty",),
        reference="heap_reference",
        not_in={"nan_padding": _NO_SEQUENCE},
    ),
    Declaration(
        AssociativeMemoryCell,
        lambda **kw: AssociativeMemoryCell(keras.layers.GRUCell(4), **kw),
        "layers/associative_memory/test_memory_cell.py",
        flags=("return_retrievals",),
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
    ),
    Declaration(
        AssociativeGRUCell,
        lambda **kw: AssociativeGRUCell(4, **kw),
        "layers/associative_memory/test_am_gru_cell.py",
        flags=("return_retrievals",),
        reference="am_gru_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
    ),
    Declaration(
        AssociativeGRU,
        lambda **kw: AssociativeGRU(4, **kw),
        "layers/associative_memory/test_am_gru.py",
        flags=_RNN_LAYER_FLAGS,
        reference="am_gru_reference",
    ),
    Declaration(
        DualAssociativeGRUCell,
        lambda **kw: DualAssociativeGRUCell(4, **kw),
        "layers/associative_memory/test_am_gru_cell.py",
        flags=("return_retrievals",),
        reference="am_gru_reference",
        not_in={"output_spec": _CELL_SPEC, "nan_padding": _RNN_MASKING},
    ),
    Declaration(
        DualAssociativeGRU,
        lambda **kw: DualAssociativeGRU(4, **kw),
        "layers/associative_memory/test_dual_am_gru.py",
        flags=_RNN_LAYER_FLAGS,
        reference="am_gru_reference",
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
    ),
)

BY_CLASS = {declaration.cls: declaration for declaration in LAYERS}


def applies(declaration, suite):
    """Whether ``suite`` (one of `SUITES`) must have a case of ``declaration``'s layer."""
    assert suite in SUITES, suite
    return suite not in declaration.not_in


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
