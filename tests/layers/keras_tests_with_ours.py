"""pytest plugin: Keras's own tests of a Keras class with the package's class in its place, in a
process of its own (`test_keras_tests_with_ours.py`) running the `SUITES` that
``KERAS_TESTS_SUITES`` names (each `Suite` says what it replaces where), or with Keras's own classes
where ``KERAS_TESTS_KERAS_OWN`` is set (a reference run). It writes to ``KERAS_TESTS_REPORT`` each
test's outcome, failure message, skip reason, skipper and constructions of ours."""

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

SUITES_VARIABLE, REPORT_VARIABLE = "KERAS_TESTS_SUITES", "KERAS_TESTS_REPORT"
KERAS_OWN_VARIABLE = "KERAS_TESTS_KERAS_OWN"

# The RNN layer of Keras, before `ResettableRNN`'s suite replaces it.
_KERAS_RNN = keras.layers.RNN


@dataclasses.dataclass(frozen=True)
class Suite:
    ours: type  # the package's class; a test passes only if it built one
    keras_class: str  # what it stands in for, in words
    files: tuple  # Keras's test files, relative to ``keras/src``
    # {test module name: {name in its ``layers``: what it builds instead}}
    replaced: dict = dataclasses.field(default_factory=dict)
    skipped: dict = dataclasses.field(default_factory=dict)  # {test name: why it cannot apply}
    install: Callable[[], None] | None = None  # replacements made everywhere in the process


# The arguments of `keras.layers.SimpleRNN`, `GRU`, `LSTM` that are the RNN's, not the cell's.
_LAYER_ARGUMENTS = (*RNN_FLAGS, "name", "dtype", "trainable", "activity_regularizer")


def _layer_over_cell(cell_class, rnn):
    """``keras.layers.<cell_class's layer>(units, ...)`` as ``rnn(cell_class(units, ...))``."""

    def make(units, **kwargs):
        layer_kwargs = {name: kwargs.pop(name) for name in _LAYER_ARGUMENTS if name in kwargs}
        dtype, trainable = layer_kwargs.get("dtype"), layer_kwargs.get("trainable", True)
        cell = cell_class(units, dtype=dtype, trainable=trainable, **kwargs)
        return rnn(cell, **layer_kwargs)

    return make


def _layers_over_cells(rnn):
    """``SimpleRNN``, ``GRU`` and ``LSTM`` as ``rnn`` over their cells."""
    layers = ("SimpleRNN", "GRU", "LSTM")
    return {name: _layer_over_cell(getattr(keras.layers, f"{name}Cell"), rnn) for name in layers}


def _install_resettable_rnn():
    keras.layers.RNN = ResettableRNN
    keras.src.layers.RNN = ResettableRNN


# What Keras's tests say in their body when they skip for a device this machine lacks.
_MACHINE_SKIPS = ("Requires a CUDA device.",)
_CUDNN = "a test of the cuDNN kernels of keras.layers.LSTM and GRU, which ResettableRNN has not"
_RNN_SKIPPED = {
    f"bidirectional_test.py::SimpleRNNTest::test_{test}": _CUDNN
    for test in """keeps_use_cudnn fused_lstm_eligibility fused_lstm_matches_unfused
    fused_gru_eligibility fused_gru_matches_unfused torch_cudnn_bidirectional_gru_dispatch_fires
    """.split()
}
_CELL_DROPOUT = (
    "trains with `dropout` and `recurrent_dropout`: keras.layers.RNN draws the masks before its "
    "loop only of the cells it knows, not of one inside a ResettableCell (ResettableRNN does)"
)
_CELL_TESTS = ("simple_rnn_test", "gru_test", "lstm_test")  # Keras's tests of the cells' layers
_EMBEDDING_WEIGHTS = "counts weights: TiedEmbedding has one more, the bias of its logits"
_EMBEDDING_QUANTIZED = "quantizes the layer: TiedEmbedding is not quantized (its docstring)"
_EMBEDDING_SIZES = "expects Embedding's own errors for bad sizes; TiedEmbedding's name it"

# The quantizing tests of `_embedding_skips`: each line a test, then its cases (none: alone).
_QUANTIZED = """embedding_int8_custom_quantizer
int4_grouped_vs_perchannel_scale_shapes
int4_perchannel_no_g_idx
int4_subchannel_g_idx_serialization
embedding_quantize_config int8 int8_custom int4
quantize_int int8 int4
quantize_when_already_quantized int8 int4
quantize_by_setting_dtype_policy int8 int4
quantize_dtype_argument int8 int4
quantize_lora_integration int8 int4
int4_quantization_block_size per_channel_none per_channel_neg1 grouped_block_64 grouped_block_128
int4_block_size_serialization per_channel_none grouped_block_64 grouped_block_128
int4_block_size_with_lora per_channel grouped_block_64
int4_subchannel_g_idx_created grouped_block_4 grouped_block_8"""


def _embedding_skips():
    skipped = dict.fromkeys(
        "test_embedding_basics test_sparse test_ragged test_lora_rank_argument test_enable_lora "
        "test_legacy_load_own_variables".split(),
        _EMBEDDING_WEIGHTS,
    )
    skipped |= {f"test_invalid_{side}_dim": _EMBEDDING_SIZES for side in ("input", "output")}
    for test, *cases in (line.split() for line in _QUANTIZED.splitlines()):
        names = [f"test_{test}_{case}" for case in cases] or [f"test_{test}"]
        skipped |= dict.fromkeys(names, _EMBEDDING_QUANTIZED)
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
        files=tuple(f"layers/rnn/{name}.py" for name in _CELL_TESTS),
        replaced={
            name: _layers_over_cells(lambda cell, **kw: _KERAS_RNN(ResettableCell(cell), **kw))
            for name in _CELL_TESTS
        },
        skipped={
            "simple_rnn_test.py::SimpleRNNTest::test_basics": _CELL_DROPOUT,
            "gru_test.py::GRUTest::test_basics": _CELL_DROPOUT,
            "lstm_test.py::LSTMTest::test_basics": _CELL_DROPOUT,
            "gru_test.py::GRUTest::test_legacy_implementation_argument": (
                "a test of keras.layers.GRU's own flat config (GRU.from_config)"
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
    """``keras.src.layers`` with some names replaced, as a Keras test module sees it."""

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
        # In `__new__`: Keras reads the signature of `__init__` for a layer's config.
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
    if not os.environ.get(KERAS_OWN_VARIABLE):  # else nothing replaced; the skips stay
        _suites.extend(SUITES[n] for n in names)
    for suite in _suites:
        if suite.install is not None:
            suite.install()
        suite.ours.__new__ = _counting_new(suite.ours)


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        module, replaced = item.module, {}
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
    _current, ours = nodeid, SUITES[suite_of(_test_name(nodeid))].ours
    _results[nodeid] = dict(
        outcome="passed", message=None, reason=None, skipped_by=None, constructions=0, ours=ours
    )


def pytest_runtest_logreport(report):
    result = _results[report.nodeid]
    if report.failed:
        result["outcome"] = "failed"
        crash = getattr(report.longrepr, "reprcrash", None)
        result["message"] = (crash.message if crash else str(report.longrepr)).partition("\n")[0]
    elif report.skipped and result["outcome"] != "failed":
        result["outcome"] = "skipped"
        # A skip's longrepr is (file, line, "Skipped: <reason>").
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        result["reason"] = str(reason).removeprefix("Skipped: ")
        if result["reason"] == SKIPPED.get(_test_name(report.nodeid)):
            result["skipped_by"] = "plugin"
        elif (report.when == "setup" and report.nodeid in _keras_skip_markers) or result[
            "reason"
        ] in _MACHINE_SKIPS:
            # A skip or skipif marker of Keras's test file, or a skip of its test for a device
            # this machine lacks (such as the tests of another backend's kernels or of torch's
            # cuDNN): Keras's choice, not our class's.
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
