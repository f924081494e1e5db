"""pytest plugin: Keras's own RNN tests with `ResettableRNN` in place of `keras.layers.RNN`.

Loaded with ``-p resettable_rnn_as_keras_rnn`` by a pytest process of its own, which
`test_resettable_rnn_keras_suite.py` starts on Keras's test files; nothing here is patched in
any other process.

* ``keras.layers.RNN`` and ``keras.src.layers.RNN`` (the name Keras's tests use, as
  ``layers.RNN`` after ``from keras.src import layers``) are `ResettableRNN`.
* In ``bidirectional_test.py``, which builds no ``layers.RNN`` but its subclasses
  ``SimpleRNN``, ``GRU`` and ``LSTM``, those names build `ResettableRNN` over the same cell
  (``keras.layers.SimpleRNN(units, ...)`` is ``keras.layers.RNN(SimpleRNNCell(units, ...),
  ...)``, and likewise for the others), so the Bidirectional tests wrap `ResettableRNN`.
* The tests in `SKIPPED` are skipped with their reason.

At the end it writes, as JSON to the file named by the environment variable
``RESETTABLE_RNN_SUITE_REPORT``, each test's outcome, skip reason and the number of
`ResettableRNN` layers constructed while it ran.
"""

import json
import os
import types

import keras
import keras.src.layers
import pytest

from tf_memlayers import ResettableRNN

REPORT_VARIABLE = "RESETTABLE_RNN_SUITE_REPORT"

_CUDNN = (
    "a ResettableRNN has no cuDNN kernel and no `use_cudnn` argument: the test is about "
    "keras.layers.LSTM and GRU themselves"
)

# The Keras tests that cannot apply to `ResettableRNN`, by test name (the part of the node id
# after the file name), with why.
SKIPPED = {
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
        "checks that torch's cuDNN GRU kernel runs under Bidirectional(GRU) on a GPU; "
        f"{_CUDNN}"
    ),
}

# The arguments of `keras.layers.SimpleRNN`, `GRU` and `LSTM` that belong to the RNN layer;
# the others are their cell's.
_LAYER_ARGUMENTS = (
    "return_sequences",
    "return_state",
    "go_backwards",
    "stateful",
    "unroll",
    "zero_output_for_mask",
    "name",
    "dtype",
    "trainable",
    "activity_regularizer",
)

_current = None  # the node id of the test running
_results = {}  # node id -> {"outcome", "reason", "constructions"}
_keras_new = ResettableRNN.__new__


def _counting_new(cls, *args, **kwargs):
    # Counted in `__new__`: Keras reads the signature of `__init__` to make a layer's config.
    if _current is not None:
        _results[_current]["constructions"] += 1
    return _keras_new(cls, *args, **kwargs)


def _resettable_layer(cell_class):
    """``keras.layers.<cell_class's layer>(units, ...)`` as a `ResettableRNN` over the cell."""

    def make(units, **kwargs):
        layer_kwargs = {name: kwargs.pop(name) for name in _LAYER_ARGUMENTS if name in kwargs}
        cell = cell_class(
            units,
            dtype=layer_kwargs.get("dtype"),
            trainable=layer_kwargs.get("trainable", True),
            **kwargs,
        )
        return ResettableRNN(cell, **layer_kwargs)

    return make


class _BidirectionalTestLayers(types.ModuleType):
    """``keras.src.layers`` as ``bidirectional_test.py`` sees it: its RNN layers are
    `ResettableRNN` layers over the same cells."""

    SimpleRNN = staticmethod(_resettable_layer(keras.layers.SimpleRNNCell))
    GRU = staticmethod(_resettable_layer(keras.layers.GRUCell))
    LSTM = staticmethod(_resettable_layer(keras.layers.LSTMCell))

    def __getattr__(self, name):
        return getattr(keras.src.layers, name)


def _test_name(nodeid):
    """The test's name after its file's folder: ``rnn_test.py::RNNTest::test_basics``."""
    return nodeid.rsplit("/", 1)[-1]


def pytest_configure(config):
    keras.layers.RNN = ResettableRNN
    keras.src.layers.RNN = ResettableRNN
    ResettableRNN.__new__ = staticmethod(_counting_new)


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        module = item.module
        if module.__name__.rsplit(".", 1)[-1] == "bidirectional_test":
            module.layers = _BidirectionalTestLayers("keras.src.layers")
        reason = SKIPPED.get(_test_name(item.nodeid))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_logstart(nodeid, location):
    global _current
    _current = nodeid
    _results[nodeid] = {"outcome": "passed", "reason": None, "constructions": 0}


def pytest_runtest_logreport(report):
    result = _results[report.nodeid]
    if report.failed:
        result["outcome"] = "failed"
    elif report.skipped and result["outcome"] != "failed":
        result["outcome"] = "skipped"
        # A skip's longrepr is (file, line, "Skipped: <reason>").
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        result["reason"] = str(reason).removeprefix("Skipped: ")


def pytest_runtest_logfinish(nodeid, location):
    global _current
    _current = None


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(REPORT_VARIABLE)
    if path:
        tests = {_test_name(nodeid): result for nodeid, result in _results.items()}
        with open(path, "w") as file:
            json.dump({"backend": keras.backend.backend(), "tests": tests}, file, indent=1)
