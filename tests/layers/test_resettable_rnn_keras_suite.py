"""Keras's own RNN tests pass with `ResettableRNN` in place of `keras.layers.RNN`.

Each of Keras's test files below, as shipped in the installed keras wheel, runs in a pytest
process of its own on the current backend, with the plugin `resettable_rnn_as_keras_rnn`:
there ``keras.layers.RNN`` (and ``SimpleRNN``, ``GRU`` and ``LSTM`` in the Bidirectional
tests) build `ResettableRNN` layers. Every test must pass, except the few that cannot apply,
which the plugin skips with their reason (`resettable_rnn_as_keras_rnn.SKIPPED`); and every
test that passes must have built a `ResettableRNN`, so that none passes without it.
"""

import json
import os
import pathlib
import subprocess
import sys

import keras
import pytest

import resettable_rnn_as_keras_rnn as plugin

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
KERAS_FILES = (
    "rnn_test.py",
    "stacked_rnn_cells_test.py",
    "dropout_rnn_cell_test.py",
    "bidirectional_test.py",
)


def _keras_tests_folder():
    import keras.src.layers.rnn

    return pathlib.Path(keras.src.layers.rnn.__file__).parent


def _run_keras_file(path, tmp_path):
    """Runs Keras's test file ``path`` with the plugin; returns the plugin's report."""
    report = tmp_path / "report.json"
    # No configuration of this repository's (``-c`` an empty file), Keras's folder as the
    # rootdir (node ids ``rnn_test.py::...``), and the current backend, whatever the
    # environment says.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["KERAS_BACKEND"] = keras.backend.backend()
    env[plugin.REPORT_VARIABLE] = str(report)
    paths = [str(pathlib.Path(plugin.__file__).parent), str(REPO_ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, env.get("PYTHONPATH")]))
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-p", plugin.__name__, "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(path.parent),
        str(path),
    ]  # fmt: skip
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200
    )
    assert report.is_file(), f"no report from the run of {path}:\n{run.stdout}\n{run.stderr}"
    return run, json.loads(report.read_text())


@pytest.mark.parametrize("name", KERAS_FILES)
def test_keras_rnn_tests_pass_with_resettable_rnn(tmp_path, record_property, name):
    path = _keras_tests_folder() / name
    if not path.is_file():
        pytest.skip(f"the installed keras wheel ({keras.__version__}) does not ship {path}")
    run, report = _run_keras_file(path, tmp_path)
    tests = report["tests"]
    assert report["backend"] == keras.backend.backend()
    outcomes = {outcome: sorted(t for t, r in tests.items() if r["outcome"] == outcome)
                for outcome in ("passed", "failed", "skipped")}  # fmt: skip
    counts = {outcome: len(names) for outcome, names in outcomes.items()}
    print(f"{name} on {report['backend']}: {counts}")
    record_property("keras_tests", counts)
    assert tests, f"no test collected from {path}:\n{run.stdout[-3000:]}"
    assert not outcomes["failed"], f"{counts}, failed: {outcomes['failed']}\n{run.stdout[-6000:]}"
    unexpected = {t: tests[t]["reason"] for t in outcomes["skipped"]
                  if plugin.SKIPPED.get(t) != tests[t]["reason"]}  # fmt: skip
    assert not unexpected, f"skipped without a reason of the plugin's: {unexpected}"
    unexercised = [t for t in outcomes["passed"] if tests[t]["constructions"] == 0]
    assert not unexercised, f"passed without building a ResettableRNN: {unexercised}"
    assert run.returncode == 0, run.stdout[-6000:]
