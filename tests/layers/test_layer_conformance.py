"""What holds across the layers beyond their suites (tests/layer_test_case.py): no private Keras
API, and bad arguments and call inputs raise errors naming the argument (and the shapes)."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import INPUT_DIM, X, called_twice, zeros
from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    AssociativeMemoryCell,
    AttentionMechanism,
    AttentionPooling,
    AttentionRNN,
    AttentionWrapper,
    DualAssociativeEncoder,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
    HeapCacheAttention,
    KeyValuePredictSplit,
    NGramConcat,
    NGramConcatCell,
    PhiloxDropout,
    ResettableCell,
    ResettableRNN,
    SlidingWindowAttentionCell,
    TiedEmbedding,
)


def test_the_package_uses_no_private_keras_api():
    # `keras.src` and Keras's underscore attributes may change in any release.
    import ast
    import pathlib

    import tf_memlayers

    # The underscore (non-dunder) names of the Keras classes layers deal with, and of instances
    # (Keras sets most of its private attributes in `__init__`).
    things = [keras.layers.Layer, keras.layers.RNN, keras.layers.InputSpec, keras.Model]
    things += [keras.Variable, keras.KerasTensor, keras.initializers.Initializer]
    things += [keras.regularizers.Regularizer, keras.layers.GRUCell(2)]
    things.append(keras.layers.RNN(keras.layers.GRUCell(2)))
    private = {n for t in things for n in dir(t) if n.startswith("_") and not n.endswith("__")}
    root, found = pathlib.Path(tf_memlayers.__file__).parent, []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', '?')}"
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            found += [f"{where} imports {m}" for m in modules if m.startswith("keras.src")]
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{where} uses .{node.attr}")
            if isinstance(node, ast.Constant) and node.value in private:
                found.append(f"{where} names {node.value!r}")
    assert not found, found


GRU, GRU7, DENSE = keras.layers.GRUCell(4), keras.layers.GRUCell(7), keras.layers.Dense(3)
RNN = keras.layers.RNN
PREMISE, INDEX = {"premise_cell": AssociativeGRUCell(8)}, {"memory_state_index": 1}
INT8 = {"dtype": "int8_from_float32"}  # Keras would run its quantized call, without `reverse`
KERAS_INIT = r"`kernel_initializer` must be a Keras initializer, its name \(such as .*\) or its .*"
# (the layer, its arguments, the error, a pattern of its message). Each layer's test module
# holds the tables of its options; sizes and flags are `run_sizes_test`'s, `run_flags_test`'s.
BAD_ARGUMENTS = [
    (AssociativeGRUCell, [7], {}, ValueError, "units.*even.*7"),
    (AssociativeGRUCell, [8], {"num_copies": 0}, ValueError, "num_copies.*>= 1.*0"),
    (AssociativeGRUCell, [8], {"num_copies": 2.5}, TypeError, "num_copies"),
    (DualAssociativeGRUCell, [9], {}, ValueError, "units.*even"),
    (DualAssociativeGRUCell, [8], {"dual_key": "x"}, ValueError, "dual_key.*'x'"),
    (DualAssociativeGRUCell, [8], PREMISE, TypeError, "premise_cell.*DualAssociativeEncoder"),
    (DualAssociativeGRU, [8], PREMISE, TypeError, "premise_cell.*DualAssociativeEncoder"),
    (DualAssociativeEncoder, [5], {}, ValueError, "units.*even"),
    (DualAssociativeEncoder, [4], {"dual_key": "both"}, ValueError, "dual_key"),
    (DualAssociativeEncoder, [4], {"num_copies": 0}, ValueError, "num_copies.*>= 1"),
    (AssociativeGRU, [7], {}, ValueError, "units.*even.*7"),
    (AssociativeGRU, [4], {"dropout": 1.0}, ValueError, r"`dropout` .* in \[0.0, 1.0\), got 1.0"),
    (DualAssociativeGRU, [4], {"recurrent_dropout": "0"}, TypeError, "`recurrent_dropout` must"),
    (DualAssociativeGRU, [4], {"dropout_seed": -1}, ValueError, "`dropout_seed` must be >= 0"),
    # fused_loop=True refuses recurrent_dropout=0.1: on torch, first the backend ('torch').
    (AssociativeGRU, [4], {"recurrent_dropout": 0.1, "fused_loop": True}, ValueError, "1: |orc"),
    (AssociativeMemoryCell, [keras.layers.GRUCell(5)], {}, ValueError, "even.*5"),
    (AssociativeMemoryCell, [GRU], {"num_copies": 0}, ValueError, "num_copies.*>= 1"),
    (AssociativeMemoryCell, [GRU], INDEX, ValueError, "memory_state_index.*< 1.*got 1"),
    (AssociativeMemoryCell, ["gru"], {}, TypeError, "cell"),
    (ResettableCell, [DENSE], {}, TypeError, "`cell` must be a Keras RNN cell"),
    (NGramConcat, [1, 4], {}, ValueError, "`n` must be >= 2, got 1"),
    (NGramConcat, [3, 0], {}, ValueError, "`units` must be >= 1, got 0"),
    (SlidingWindowAttentionCell, [GRU7, 2, "key_value"], {}, ValueError, "width 7 .*into 2"),
    (SlidingWindowAttentionCell, ["lstm", 2], {}, TypeError, "`cell` must be a Keras RNN cell"),
    (HeapCacheAttention, [0, 4], {}, ValueError, "cache_size"),
    (HeapCacheAttention, [2.5, 4], {}, TypeError, "cache_size"),
    (HeapCacheAttention, [3, 0], {}, ValueError, "attention_units"),
    (HeapCacheAttention, [3, 4], {"policy": "lru"}, ValueError, "'lru'"),
    (HeapCacheAttention, [3, 4], {"query": "cosine"}, ValueError, "'cosine'"),
    (AttentionPooling, [0], {}, ValueError, "`attention_units`"),
    (AttentionPooling, ["8"], {}, TypeError, "units"),
    (TiedEmbedding, [0, 2], {}, ValueError, "input_dim"),
    (TiedEmbedding, [3, 2.0], {}, TypeError, "output_dim"),
    (TiedEmbedding, [3, 4], INT8, ValueError, "`dtype`.*int8_from_float32"),
    (PhiloxDropout, [-0.1], {}, ValueError, "rate"),
    (PhiloxDropout, [1.5], {}, ValueError, "rate"),
    # Keras compares a string with 0 and fails with an unrelated message; the type is ours.
    (PhiloxDropout, ["0.5"], {}, TypeError, r"`rate` must be a number in \[0, 1\], got '0.5'"),
    (PhiloxDropout, [None], {}, TypeError, r"`rate` must be a number in \[0, 1\], got None"),
    (PhiloxDropout, [True], {}, TypeError, r"`rate` must be a number in \[0, 1\], got True"),
    (PhiloxDropout, [0.5], {"seed": -1}, ValueError, "`seed` must be >= 0, got -1"),
    (AssociativeGRU, [4], {"kernel_initializer": "glorot"}, ValueError, KERAS_INIT + "got 'glo"),
    (AssociativeMemoryCell, [GRU], {"key_initializer": 5}, TypeError, "`key_initializer`.*got 5"),
    (DualAssociativeGRUCell, [8], {"kernel_regularizer": "l3"}, ValueError, "regularizer.*'l2'"),
    (AttentionMechanism, [], {"kernel_initializer": "x"}, ValueError, KERAS_INIT + "got 'x'"),
    (AttentionPooling, [4], {"score_initializer": "x"}, ValueError, "`score_initializer`"),
    (HeapCacheAttention, [3, 4], {"query_initializer": "x"}, ValueError, "`query_initializer`"),
    (TiedEmbedding, [3, 4], {"output_bias_initializer": "x"}, ValueError, "`output_bias_init"),
    (NGramConcat, [2, 4], {"bias_initializer": "x"}, ValueError, "`bias_initializer` must be"),
    (SlidingWindowAttentionCell, [GRU, 2], {"bias_initializer": "x"}, ValueError, "`bias_init"),
]


@pytest.mark.parametrize(
    "layer_cls, args, kwargs, error, pattern",
    BAD_ARGUMENTS,
    ids=[f"{row[0].__name__}_{i}" for i, row in enumerate(BAD_ARGUMENTS)],
)
def test_bad_arguments_are_named_errors(layer_cls, args, kwargs, error, pattern):
    # Ours name the class called, not a layer it makes (Keras's range check of `rate` none).
    called = "" if layer_cls is PhiloxDropout else f"^{layer_cls.__name__}: .*"
    pytest.raises(error, layer_cls, *args, **kwargs).match(called + pattern)


_MASK = ["`mask`", "(2, 6)", "(2, 5, 4)"]
_NO_STEPS = ["`sequences` must have at least one time step", "(2, 0, 4)"]
_WIDTH = ["`inputs`", "width 4", "(2, 5, 6)"]
_KT = [keras.Input((5, INPUT_DIM)), keras.Input((8,)), keras.Input((3,))]  # symbolic

# (the bad call, fragments of its ValueError). The AM-GRU layers check their arguments before
# choosing a loop; the carried memories' checks are `run_carried_memory_tests`'.
_am_gru = lambda: AssociativeGRU(4, num_copies=2)  # noqa: E731
(_MECH := AttentionMechanism(score="general"))(X[:, 0], zeros(2, 3, 5))  # called directly

BAD_CALLS = [
    (lambda: _am_gru()(X, mask=np.ones((2, 6), bool)), _MASK),
    (lambda: _am_gru()(X, mask=np.ones((3, 5), bool)), ["`mask`", "(3, 5)", "(2, 5, 4)"]),
    (lambda: _am_gru()(X[:, :0]), ["`sequences`", *_NO_STEPS[1:]]),
    (lambda: _am_gru()(_KT[0], initial_state=_KT[1:]), ["`initial_state[1]`", "(None, 3)"]),
    (lambda: DualAssociativeGRU(4, num_copies=2)(X, mask=np.ones((2, 6), bool)), _MASK),
    (lambda: ResettableRNN(GRU)(X[:, :0]), ["ResettableRNN: " + _NO_STEPS[0], _NO_STEPS[1]]),
    (lambda: ResettableRNN(GRU)(X, mask=np.ones((2, 6), bool)), ["ResettableRNN: ", *_MASK]),
    (lambda: ResettableRNN(GRU)(X[:, 0]), ["ResettableRNN: `sequences` must have rank 3"]),
    (lambda: called_twice(ResettableRNN(GRU), X, zeros(2, 5, 6)), ["axis -1", "value 4"]),
    (
        lambda: AttentionRNN(AttentionWrapper(GRU))(X[:, :0], memory=zeros(2, 3, 5)),
        ["AttentionRNN: " + _NO_STEPS[0], _NO_STEPS[1]],
    ),
    (lambda: AttentionPooling(3)(X, mask=np.ones((2, 6), bool)), _MASK),
    (lambda: called_twice(AttentionPooling(3), X, zeros(2, 5, 6)), _WIDTH),
    (lambda: called_twice(KeyValuePredictSplit("key_value"), X, zeros(2, 5, 6)), _WIDTH),
    (lambda: called_twice(HeapCacheAttention(3, 2), X[:, 0], zeros(2, 6)), [*_WIDTH[:2], "(2, 6)"]),
    (lambda: _MECH(X[:, 0, :3], zeros(2, 3, 5)), ["AttentionMechanism: `query` must have width 4"]),
    (lambda: _MECH(X[:, 0], zeros(2, 3, 6)), ["AttentionMechanism: `memory` must have width 5"]),
    (lambda: _MECH(X[:, 0], zeros(2, 3, 5), memory_mask=zeros(2, 4)), ["`memory_mask` must be"]),
    (lambda: _MECH(X[:, 0], zeros(2, 3, 5), previous=zeros(2, 4)), ["`previous` must be [batch,"]),
]
# (a cell, or an RNN over one; its inputs, its states' shapes, fragments of its ValueError).
_G, _ONE, _AM = keras.layers.GRUCell, X[:, 0], AssociativeGRUCell(4, num_copies=2)
STEPS = [
    (_AM, _ONE, [(2, 8), (2, 5)], "AssociativeGRUCell: `states[1]`|4 (the previous output"),
    (AssociativeMemoryCell(_G(4), 2), _ONE, [(3, 8), (3, 4)], "(3, 8) has batch size 3|(2, 4)"),
    (NGramConcatCell(_G(4), 3, 4), _ONE, [(2, 4)], "NGramConcatCell: `states` must be a list of 2"),
    (ResettableCell(_G(4)), _ONE, [(2, 4, 1)], "ResettableCell: `states[0]` must have rank 2"),
    (RNN(SlidingWindowAttentionCell(_G(4), 2)), X, [(2, 4), (2, 3)], "Cell: `states[1]`|10"),
    (RNN(DualAssociativeGRUCell(4, 2)), X, [(2, 8), (2, 4), (2, 4)], "8 (the source memory"),
    (ResettableRNN(_G(4)), X, [(2, 5)], "ResettableRNN: `initial_state[0]` must have width 4"),
    (ResettableRNN([_G(4), _G(7)]), X, [(2, 4), (2, 4)], "`initial_state[1]` must have width 7"),
    (AssociativeGRU(4, 2), X, [(3, 8), (3, 4)], "`initial_state[0]`|(3, 8)|(2, 5, 4)"),
    (DualAssociativeGRU(4, 2), X, [(2, 8), (2, 4)], "`initial_state`|3 tensors|source memory"),
    (DualAssociativeGRU(4, 2), X, [(2, 8), (2, 4), (2, 12)], "[2]`|8 (the source memory"),
]
BAD_CALLS += [
    (lambda m=m, x=x, s=s: m(x, [zeros(*shape) for shape in s]), f.split("|"))
    for m, x, s, f in STEPS
] + [(lambda: called_twice(RNN(_AM), X, zeros(2, 5, 6)), ["Cell: `inputs` must have width 4"])]


@pytest.mark.parametrize("bad_call, fragments", BAD_CALLS)
def test_bad_call_inputs_and_initial_states_are_named_errors(bad_call, fragments):
    info = pytest.raises(ValueError, bad_call)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
