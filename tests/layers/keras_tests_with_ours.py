"""pytest plugin: Keras's own tests of a Keras class, with the package's class in its place.

Loaded with ``-p keras_tests_with_ours`` by a pytest process of its own, which
`test_keras_tests_with_ours.py` starts on Keras's test files (as shipped in the installed keras
wheel); the environment variable ``KERAS_TESTS_SUITES`` names the suites of `SUITES` it runs,
by the name of the package's class. Nothing here is patched in any other process.

* ``ResettableRNN`` for `keras.layers.RNN`: ``keras.layers.RNN`` and ``keras.src.layers.RNN``
  (the name Keras's tests use, as ``layers.RNN`` after ``from keras.src import layers``) are
  `ResettableRNN`. In ``bidirectional_test.py``, which builds no ``layers.RNN`` but its
  subclasses ``SimpleRNN``, ``GRU`` and ``LSTM``, those names build `ResettableRNN` over the
  same cell (``keras.layers.SimpleRNN(units, ...)`` is ``keras.layers.RNN(SimpleRNNCell(units,
  ...), ...)``, and likewise for the others), so the Bidirectional tests wrap `ResettableRNN`.
* ``ResettableCell`` for a Keras cell: in ``simple_rnn_test.py``, ``gru_test.py`` and
  ``lstm_test.py`` (Keras has no test files of its cells alone: these test them inside their
  layers), ``layers.SimpleRNN``, ``GRU`` and ``LSTM`` build ``keras.layers.RNN`` over a
  `ResettableCell` wrapping the same cell.
* ``PhiloxDropout`` for `keras.layers.Dropout` and ``TiedEmbedding`` for
  `keras.layers.Embedding`, in their test files: both take every argument of the Keras class
  as it does, so ``layers.Dropout`` and ``layers.Embedding`` are the package's classes
  themselves, no factory between.

The replacements of ``layers.<name>`` are made in the named Keras test modules only (their
``layers`` is a `_TestLayers`), except `ResettableRNN`'s, which replaces ``keras.layers.RNN``
everywhere in the process. The tests in the suites' ``skipped`` are skipped with their reason.

At the end it writes, as JSON to the file named by the environment variable
``KERAS_TESTS_REPORT``, each test's outcome, skip reason, who skipped it (`skipped_by`) and the
number of layers of its suite's class constructed while it ran.
"""

import dataclasses
import json
import os
import pathlib
import types
from collections.abc import Callable

import keras
import keras.src.layers
import pytest

from tf_memlayers import PhiloxDropout, ResettableCell, ResettableRNN, TiedEmbedding
from tf_memlayers.layers.resettable_rnn import RNN_FLAGS

SUITES_VARIABLE = "KERAS_TESTS_SUITES"
REPORT_VARIABLE = "KERAS_TESTS_REPORT"

# The RNN layer of Keras, before `ResettableRNN`'s suite replaces it.
_KERAS_RNN = keras.layers.RNN


@dataclasses.dataclass(frozen=True)
class Suite:
    """One of the package's classes, with Keras's test files of the Keras class it stands in
    for and how it is put in that class's place."""

    ours: type  # the package's class; a test passes only if it built one
    keras_class: str  # what it stands in for, in words
    files: tuple  # Keras's test files, relative to the ``keras/src`` folder of the wheel
    # {test module name: {name in its ``layers``: what it builds instead}}
    replaced: dict = dataclasses.field(default_factory=dict)
    # The Keras tests that cannot apply to our class, by test name (the part of the node id
    # after the file's folder), with why.
    skipped: dict = dataclasses.field(default_factory=dict)
    install: Callable[[], None] | None = None  # replacements made everywhere in the process


# The arguments of `keras.layers.SimpleRNN`, `GRU` and `LSTM` that belong to the RNN layer;
# the others are their cell's.
_LAYER_ARGUMENTS = (*RNN_FLAGS, "name", "dtype", "trainable", "activity_regularizer")


def _layer_over_cell(cell_class, rnn):
    """``keras.layers.<cell_class's layer>(units, ...)`` as ``rnn(cell, ...)`` over the same
    cell, built from the cell's arguments."""

    def make(units, **kwargs):
        layer_kwargs = {name: kwargs.pop(name) for name in _LAYER_ARGUMENTS if name in kwargs}
        cell = cell_class(
            units,
            dtype=layer_kwargs.get("dtype"),
            trainable=layer_kwargs.get("trainable", True),
            **kwargs,
        )
        return rnn(cell, **layer_kwargs)

    return make


def _layers_over_cells(rnn):
    """``SimpleRNN``, ``GRU`` and ``LSTM`` as ``rnn`` over their cells."""
    return {
        "SimpleRNN": _layer_over_cell(keras.layers.SimpleRNNCell, rnn),
        "GRU": _layer_over_cell(keras.layers.GRUCell, rnn),
        "LSTM": _layer_over_cell(keras.layers.LSTMCell, rnn),
    }


def _keras_rnn_over_resettable_cell(cell, **kwargs):
    return _KERAS_RNN(ResettableCell(cell), **kwargs)


def _install_resettable_rnn():
    keras.layers.RNN = ResettableRNN
    keras.src.layers.RNN = ResettableRNN


_CUDNN = (
    "a ResettableRNN has no cuDNN kernel and no `use_cudnn` argument: the test is about "
    "keras.layers.LSTM and GRU themselves"
)
# The Keras tests of keras.layers.RNN that cannot apply to `ResettableRNN`.
_RNN_SKIPPED = {
    "bidirectional_test.py::SimpleRNNTest::test_keeps_use_cudnn": (
        f"checks that Bidirectional copies the `use_cudnn` attribute of LSTM and GRU; {_CUDNN}"
    ),
    "bidirectional_test.py::SimpleRNNTest::test_fused_lstm_eligibility": (
        "checks when Bidirectional may run the fused cuDNN LSTM kernel (an LSTM layer, its "
        f"`use_cudnn`, dropout, mask); {_CUDNN}"
    ),
    "bidirectional_test.py::SimpleRNNTest::test_fused_lstm_matches_unfused": (
        "compares Bidirectional(LSTM) with use_cudnn=False and use_cudnn='auto' (the fused "
        f"cuDNN kernel); {_CUDNN}"
    ),
    "bidirectional_test.py::SimpleRNNTest::test_fused_gru_eligibility": (
        "checks when Bidirectional may run the fused cuDNN GRU kernel (a GRU layer, its "
        f"`use_cudnn`, `reset_after`); {_CUDNN}"
    ),
    "bidirectional_test.py::SimpleRNNTest::test_fused_gru_matches_unfused": (
        "compares Bidirectional(GRU) with use_cudnn=False and use_cudnn='auto' (the fused "
        f"cuDNN kernel); {_CUDNN}"
    ),
    "bidirectional_test.py::SimpleRNNTest::test_torch_cudnn_bidirectional_gru_dispatch_fires": (
        f"checks that torch's cuDNN GRU kernel runs under Bidirectional(GRU) on a GPU; {_CUDNN}"
    ),
}
_CELL_DROPOUT = (
    "trains the layer with `dropout` and `recurrent_dropout`: keras.layers.RNN draws the "
    "dropout masks before its loop only of the cells it knows (Keras's private DropoutRNNCell "
    "and stacks of them), not of one inside a ResettableCell, which ResettableCell's docstring "
    "states (ResettableRNN draws them; on JAX the masks drawn inside the loop escape its trace, "
    "on TensorFlow the first call's masks would stay for every later call)"
)
_EMBEDDING_WEIGHTS = (
    "counts the layer's weights: a TiedEmbedding has one more trainable weight than "
    "keras.layers.Embedding, the output bias b of its reverse=True logits"
)
_EMBEDDING_QUANTIZED = (
    "quantizes the layer (`quantize`, an int8 or int4 dtype policy): TiedEmbedding is not "
    "quantized, as its docstring states (its reverse=True logits read the float embedding "
    "matrix; keras.layers.Embedding.quantize refuses its subclasses, and TiedEmbedding refuses "
    "a quantized dtype)"
)
_EMBEDDING_SIZES = (
    "expects keras.layers.Embedding's own errors for bad sizes: TiedEmbedding checks "
    "`input_dim` and `output_dim` as every argument of the package (a non-integer is a "
    "TypeError, an integer below 1 a ValueError, each naming TiedEmbedding)"
)


def _embedding_skips():
    skipped = {
        "test_embedding_basics": _EMBEDDING_WEIGHTS,
        "test_sparse": _EMBEDDING_WEIGHTS,
        "test_ragged": _EMBEDDING_WEIGHTS,
        "test_lora_rank_argument": _EMBEDDING_WEIGHTS,
        "test_enable_lora": _EMBEDDING_WEIGHTS,
        "test_legacy_load_own_variables": (
            "loads a store holding only the embedding matrix (then int8 and int4 ones): a "
            "TiedEmbedding also has its output bias, and is not quantized"
        ),
        "test_invalid_input_dim": _EMBEDDING_SIZES,
        "test_invalid_output_dim": _EMBEDDING_SIZES,
        "test_embedding_int8_custom_quantizer": _EMBEDDING_QUANTIZED,
        "test_int4_grouped_vs_perchannel_scale_shapes": _EMBEDDING_QUANTIZED,
        "test_int4_perchannel_no_g_idx": _EMBEDDING_QUANTIZED,
        "test_int4_subchannel_g_idx_serialization": _EMBEDDING_QUANTIZED,
    }
    quantized = {
        "test_embedding_quantize_config": ("int8", "int8_custom", "int4"),
        "test_quantize_int": ("int8", "int4"),
        "test_quantize_when_already_quantized": ("int8", "int4"),
        "test_quantize_by_setting_dtype_policy": ("int8", "int4"),
        "test_quantize_dtype_argument": ("int8", "int4"),
        "test_quantize_lora_integration": ("int8", "int4"),
        "test_int4_quantization_block_size": (
            "per_channel_none",
            "per_channel_neg1",
            "grouped_block_64",
            "grouped_block_128",
        ),
        "test_int4_block_size_serialization": (
            "per_channel_none",
            "grouped_block_64",
            "grouped_block_128",
        ),
        "test_int4_block_size_with_lora": ("per_channel", "grouped_block_64"),
        "test_int4_subchannel_g_idx_created": ("grouped_block_4", "grouped_block_8"),
    }
    for test, cases in quantized.items():
        skipped.update({f"{test}_{case}": _EMBEDDING_QUANTIZED for case in cases})
    return {f"embedding_test.py::EmbeddingTest::{t}": r for t, r in skipped.items()}


SUITES = {
    "ResettableRNN": Suite(
        ours=ResettableRNN,
        keras_class="keras.layers.RNN",
        files=(
            "layers/rnn/rnn_test.py",
            "layers/rnn/stacked_rnn_cells_test.py",
            "layers/rnn/dropout_rnn_cell_test.py",
            "layers/rnn/bidirectional_test.py",
        ),
        replaced={"bidirectional_test": _layers_over_cells(ResettableRNN)},
        skipped=_RNN_SKIPPED,
        install=_install_resettable_rnn,
    ),
    "ResettableCell": Suite(
        ours=ResettableCell,
        keras_class="keras.layers.SimpleRNNCell, GRUCell and LSTMCell",
        files=(
            "layers/rnn/simple_rnn_test.py",
            "layers/rnn/gru_test.py",
            "layers/rnn/lstm_test.py",
        ),
        replaced={
            name: _layers_over_cells(_keras_rnn_over_resettable_cell)
            for name in ("simple_rnn_test", "gru_test", "lstm_test")
        },
        skipped={
            "simple_rnn_test.py::SimpleRNNTest::test_basics": _CELL_DROPOUT,
            "gru_test.py::GRUTest::test_basics": _CELL_DROPOUT,
            "lstm_test.py::LSTMTest::test_basics": _CELL_DROPOUT,
            "gru_test.py::GRUTest::test_legacy_implementation_argument": (
                "rebuilds keras.layers.GRU with GRU.from_config from a config given its legacy "
                "`implementation` key: a test of keras.layers.GRU's own flat config, which the "
                "keras.layers.RNN over a ResettableCell has not (the cell is nested in it)"
            ),
        },
    ),
    "PhiloxDropout": Suite(
        ours=PhiloxDropout,
        keras_class="keras.layers.Dropout",
        files=("layers/regularization/dropout_test.py",),
        replaced={"dropout_test": {"Dropout": PhiloxDropout}},
    ),
    "TiedEmbedding": Suite(
        ours=TiedEmbedding,
        keras_class="keras.layers.Embedding",
        files=("layers/core/embedding_test.py",),
        replaced={"embedding_test": {"Embedding": TiedEmbedding}},
        skipped=_embedding_skips(),
    ),
}

# Every suite's skips, by test name.
SKIPPED = {name: reason for suite in SUITES.values() for name, reason in suite.skipped.items()}


def suite_of(test_name):
    """The name of the suite whose files hold the test ``test_name`` (``file.py::...``)."""
    file = test_name.split("::", 1)[0]
    return next(n for n, s in SUITES.items() if file in {pathlib.Path(f).name for f in s.files})


class _TestLayers(types.ModuleType):
    """``keras.src.layers`` as one of Keras's test modules sees it, with some names
    replaced."""

    def __init__(self, replaced):
        super().__init__("keras.src.layers")
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(keras.src.layers, name)


_suites = []  # the suites of this run
_current = None  # the node id of the test running
# node id -> {"outcome", "reason", "skipped_by", "constructions", "ours": the class counted}
_results = {}
_keras_skip_markers = set()  # the node ids of the tests with a skip marker of Keras's own


def _counting_new(ours):
    keras_new = ours.__new__

    def new(cls, *args, **kwargs):
        # Counted in `__new__`: Keras reads the signature of `__init__` to make a layer's
        # config. Only the class of the running test's suite counts.
        if _current is not None and issubclass(cls, _results[_current]["ours"]):
            _results[_current]["constructions"] += 1
        return keras_new(cls, *args, **kwargs)

    return staticmethod(new)


def _test_name(nodeid):
    """The test's name after its file's folder: ``rnn_test.py::RNNTest::test_basics``."""
    return nodeid.rsplit("/", 1)[-1]


def pytest_configure(config):
    names = [n for n in os.environ.get(SUITES_VARIABLE, "").split(",") if n]
    unknown = sorted(set(names) - set(SUITES))
    if not names or unknown:
        raise pytest.UsageError(
            f"{SUITES_VARIABLE} must name suites of {sorted(SUITES)}, got {names} ({unknown})"
        )
    _suites.extend(SUITES[n] for n in names)
    for suite in _suites:
        if suite.install is not None:
            suite.install()
        suite.ours.__new__ = _counting_new(suite.ours)


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        module = item.module
        replaced = {}
        for suite in _suites:
            replaced.update(suite.replaced.get(module.__name__.rsplit(".", 1)[-1], {}))
        if replaced and not isinstance(module.layers, _TestLayers):
            module.layers = _TestLayers(replaced)
        if any(item.iter_markers("skip")) or any(item.iter_markers("skipif")):
            _keras_skip_markers.add(item.nodeid)
        reason = SKIPPED.get(_test_name(item.nodeid))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_logstart(nodeid, location):
    global _current
    _current = nodeid
    _results[nodeid] = {
        "outcome": "passed",
        "reason": None,
        "skipped_by": None,
        "constructions": 0,
        "ours": SUITES[suite_of(_test_name(nodeid))].ours,
    }


def pytest_runtest_logreport(report):
    result = _results[report.nodeid]
    if report.failed:
        result["outcome"] = "failed"
    elif report.skipped and result["outcome"] != "failed":
        result["outcome"] = "skipped"
        # A skip's longrepr is (file, line, "Skipped: <reason>").
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        result["reason"] = str(reason).removeprefix("Skipped: ")
        if result["reason"] == SKIPPED.get(_test_name(report.nodeid)):
            result["skipped_by"] = "plugin"
        elif report.when == "setup" and report.nodeid in _keras_skip_markers:
            # A skip or skipif marker of Keras's test file, for this backend or machine (such
            # as the tests of another backend's kernels): Keras's choice, not our class's.
            result["skipped_by"] = "keras"
        else:
            result["skipped_by"] = "test"  # while running, by the test itself


def pytest_runtest_logfinish(nodeid, location):
    global _current
    _current = None


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(REPORT_VARIABLE)
    if path:
        tests = {
            _test_name(nodeid): {k: v for k, v in result.items() if k != "ours"}
            for nodeid, result in _results.items()
        }
        with open(path, "w") as file:
            json.dump({"backend": keras.backend.backend(), "tests": tests}, file, indent=1)
