"""Bad arguments to the model builders and their compile functions: each refused once, by the
code that owns it, naming the argument, the value and what is allowed."""

import ast
import collections
import pathlib
import sys
import traceback

import keras
import numpy as np
import pytest

import tf_memlayers
from tf_memlayers import _validation
from tf_memlayers.layers import (
    AttentionPooling,
    ConditionalEncoder,
    NGramConcatCell,
    SlidingWindowAttention,
)
from tf_memlayers.models import (
    build_fill_last_word_model,
    build_fixed_length_snli_model,
    build_language_model,
    build_snli_model,
    compile_fill_last_word_model,
    compile_language_model,
    compile_snli_model,
)
from tf_memlayers.models.language_model import make_optimizer
from tf_memlayers.models.snli import paper_encoder

PACKAGE = pathlib.Path(tf_memlayers.__file__).parent


def _lm(memory=None, **kwargs):
    options = dict(units=8, embedding_dim=4, batch_size=2, sequence_length=5)
    return build_language_model(23, memory, **{**options, **kwargs})


def _gru_encoder(layers=2):
    grus = [keras.layers.GRU(4, return_sequences=True, return_state=True)]
    return ConditionalEncoder(grus + [keras.layers.GRU(4, return_state=True)] * (layers - 1))


def _snli(**kwargs):
    return build_snli_model(20, **{"encoder": _gru_encoder(), "embedding_dim": 4, **kwargs})


def _fill(**kwargs):
    options = {"embedding_dim": 4, "units": 4, "pooling": AttentionPooling(4)}
    return build_fill_last_word_model(20, **{**options, **kwargs})


def _fixed(*args, model=None, **kwargs):
    return build_fixed_length_snli_model(model or _snli(), *args, **kwargs)


LM, SNLI, FILL = compile_language_model, compile_snli_model, compile_fill_last_word_model
# (the bad call, "<its exception's type>: <a part of its message>")
CASES = [
    # build_language_model and its memory, make_optimizer, compile_language_model
    (lambda: _lm(sequence_length=0), "ValueError: `sequence_length` must be >= 1, got 0"),
    (lambda: _lm(dropout=1.5), "ValueError: `dropout` must be a finite number in [0.0, 1.0)"),
    (lambda: _lm(batch_size=None), "ValueError: `stateful=True` needs a fixed `batch_size`"),
    (lambda: _lm(variational_dropout="no"), "TypeError: `variational_dropout` must be a bool"),
    (lambda: _lm(forget_bias="1"), "TypeError: `forget_bias` must be a number, got '1'"),
    (lambda: _lm(units=6, tie_weights=True), "ValueError: (4) wide; the top LSTM outputs 6"),
    (lambda: _lm("attention", batch_size=None), "TypeError: `memory` must be None, a Keras"),
    (lambda: _lm(NGramConcatCell(keras.layers.LSTMCell(8), 3, 4)), "TypeError: pass a function"),
    (lambda: _lm(lambda cell: keras.layers.Dense(4)), "TypeError: must return a Keras RNN cell"),
    (lambda: _lm(SlidingWindowAttention(3)), "ValueError: stateful=False but the model has"),
    (lambda: _lm(keras.layers.Dense(4), resets=True), "ValueError: a memory that takes a `reset`"),
    (lambda: _lm(keras.layers.Dense(5), tie_weights=True), "ValueError: the memory outputs 5"),
    (lambda: _lm(kind="window"), "TypeError: `kind` was removed in 0.3: it is the memory layer's"),
    (lambda: _snli(init_scale=0.1), "TypeError: `init_scale` was removed in 0.3: pass kernel_init"),
    (lambda: _fill(hidden_units=8), "TypeError: `hidden_units` was removed in 0.3: the LSTM's"),
    (lambda: _lm(AttentionPooling(4)), "ValueError: AttentionPooling returned shape (2, 8)"),
    (lambda: make_optimizer("rmsprop"), "ValueError: `optimizer` must be one of 'adam', 'sgd'"),
    (lambda: make_optimizer("sgd", -1), "ValueError: `learning_rate` must be a finite number > 0"),
    (lambda: LM(_lm(), optimizer=""), "ValueError: `optimizer` must be one of 'adam', 'sgd'"),
    (lambda: LM(_lm(), perplexity="no"), "TypeError: `perplexity` must be a bool, got 'no'"),
    (lambda: LM(_lm(), jit_compile="no"), 'TypeError: `jit_compile` must be a bool or "auto"'),
    (lambda: LM(_lm(), loss_reduction="mean"), "ValueError: 'sum_over_time'; got 'mean'"),
    # build_snli_model, build_fixed_length_snli_model, compile_snli_model
    (lambda: build_snli_model(10, embeddings=np.zeros((9, 4))), "ValueError: (10, dim), dim >="),
    (lambda: _snli(kernel_initializer="x"), "ValueError: `kernel_initializer` must be a Keras"),
    (lambda: _snli(embeddings=np.zeros((20, 0))), "ValueError: (20, dim), dim >= 1; got (20, 0)"),
    (lambda: _snli(embedding_dim=0), "ValueError: `embedding_dim` must be >= 1, got 0"),
    (lambda: _snli(encoder="dual_am_gru"), "TypeError: `encoder` must be a Keras layer"),
    (lambda: _snli(encoder=_gru_encoder(1)), "ValueError: returned shapes [(None, None, 4), (None"),
    (lambda: _snli(classifier_units=0), "ValueError: `classifier_units` must be >= 1, got 0"),
    (lambda: _snli(dropout=1.5), "ValueError: `dropout` must be a finite number in [0.0, 1.0)"),
    (lambda: _snli(seed=-1), "ValueError: `seed` must be >= 0, got -1"),
    (lambda: _snli(seed=1.5), "TypeError: `seed` must be an integer, got 1.5"),
    (lambda: _snli(train_embeddings="no"), "TypeError: `train_embeddings` must be a bool"),
    (lambda: _fixed(5, 3, unroll=False), "ValueError: `unroll=False` needs a fixed `batch_size`"),
    (lambda: _fixed(0, 3), "ValueError: `premise_length` must be >= 1, got 0"),
    (lambda: _fixed(5, 2.5), "TypeError: `hypothesis_length` must be an integer, got 2.5"),
    (lambda: _fixed(5, 3, batch_size=0), "ValueError: `batch_size` must be >= 1, got 0"),
    (lambda: _fixed(5, 3, model=keras.Sequential()), "ValueError: `model` must be a model"),
    (lambda: SNLI(_snli(), jit_compile="no"), 'TypeError: `jit_compile` must be a bool or "auto"'),
    (lambda: SNLI(_snli(), -1.0), "ValueError: `learning_rate` must be a finite number > 0.0"),
    (lambda: SNLI(_snli(), "fast"), "TypeError: `learning_rate` must be a number, got 'fast'"),
    (lambda: SNLI(_snli(), clip_norm=-5), "ValueError: `clip_norm` must be a finite number >= 0.0"),
    # build_fill_last_word_model, its HeapCacheModel's weight decay, compile_fill_last_word_model
    (lambda: _fill(pooling="attention"), "TypeError: `pooling` must be a Keras layer or None"),
    (lambda: _fill(cache="x"), "TypeError: `cache` must be a Keras layer or None; got 'x'"),
    (lambda: _fill(pooling=keras.layers.Dense(3)), "ValueError: Dense returned shape (None,"),
    (lambda: build_fill_last_word_model(1), "ValueError: `vocabulary_size` must be >= 2, got 1"),
    (lambda: _fill(sequence_length=0), "ValueError: `sequence_length` must be >= 1, got 0"),
    (lambda: _fill(embedding_dim=0), "ValueError: `embedding_dim` must be >= 1, got 0"),
    (lambda: _fill(units=0), "ValueError: `units` must be >= 1, got 0"),
    (lambda: _fill(embeddings=[[1.0]]), "ValueError: (20, dim), dim >= 1; got (1, 1)"),
    (lambda: _fill(faithful_to_code="no"), "TypeError: `faithful_to_code` must be a bool"),
    (lambda: _fill(weight_decay="x"), "TypeError: `weight_decay` must be a number, got 'x'"),
    (lambda: _fill(weight_decay=float("nan")), "ValueError: `weight_decay` must be a finite"),
    (lambda: _fill(weight_decay=-1.0), "ValueError: `weight_decay` must be a finite number >= 0.0"),
    (lambda: FILL(_fill(), jit_compile="x"), 'TypeError: `jit_compile` must be a bool or "auto"'),
    (lambda: FILL(_fill(), learning_rate=float("inf")), "ValueError: finite number > 0.0, got inf"),
    (lambda: FILL(_fill(), learning_rate="fast"), "TypeError: `learning_rate` must be a number"),
    (lambda: FILL(_fill(), clipnorm=-5), "ValueError: `clipnorm` must be a finite number >= 0.0"),
]


@pytest.mark.parametrize("call, expected", CASES, ids=[expected for _, expected in CASES])
def test_a_bad_argument_is_named(call, expected):
    error, _, fragment = expected.partition(": ")
    info = pytest.raises((TypeError, ValueError), call)
    message = str(info.value)
    assert type(info.value).__name__ == error and fragment in message, message
    frames = traceback.extract_tb(info.value.__traceback__)  # the function called names it
    called = [f.name for f in frames if str(PACKAGE) in f.filename and f.name != "wrapper"]
    prefix = f"{called[0]}: " if called else "build_"
    assert message.startswith(prefix) and message.count(prefix) == 1, message  # named once
    assert "output_dim" not in message and "Received" not in message  # no Keras-internal names
    if "must be a number" in message:  # a number of the wrong type: from the one number check
        last = traceback.extract_tb(info.value.__traceback__)[-1]
        assert last.filename.endswith("_validation.py") and last.name == "check_number"


def _checks_during(call):
    """``Counter`` of the argument names that the checks of `tf_memlayers._validation` name
    while ``call()`` runs (a check's own calls of the other checks left out)."""
    names = collections.Counter()

    def profile(frame, event, arg):
        own = frame.f_code.co_filename == _validation.__file__ != frame.f_back.f_code.co_filename
        if event == "call" and own and frame.f_code.co_name.startswith("check_"):
            names[frame.f_locals.get("name")] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


def test_the_snli_builders_memory_arguments_are_checked_once_by_the_layer_that_takes_them():
    # The Dual AM-GRU cell passes the arguments it shares on to the AM-GRU cell inside it,
    # which checks them; the AM-GRU layers leave their RNN flags to `ResettableRNN`.
    checks = _checks_during(lambda: build_snli_model(30, embedding_dim=4))
    assert [checks[name] for name in ("num_copies", "units", "dual_key")] == [1, 1, 1]
    # One check of each flag per pass: the premise's and the hypothesis's.
    assert checks["return_sequences"] == checks["unroll"] == 2
    # Not vacuous: a check's own calls of another check are not counted.
    assert _checks_during(lambda: _validation.check_optional_int("n", 3, 1)) == {"n": 1}
    # That one check is the layer's: its module is the traceback's last frame outside them.
    with pytest.raises(ValueError, match="`num_copies`") as raised:
        paper_encoder(123, "glorot_uniform", num_copies=0)
    frames = [f.filename for f in traceback.extract_tb(raised.value.__traceback__)]
    owner = [f for f in frames if not f.endswith("_validation.py")][-1]
    owner = pathlib.Path(owner).resolve().relative_to(PACKAGE.resolve()).as_posix()
    assert owner == "layers/associative_memory/associative_gru_cell.py"


def test_no_module_has_a_number_check_of_its_own():
    own = [
        f"{path.name}: {node.name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_validation.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and "check_number" in node.name
    ]
    assert own == []
