"""Keras's own tests of the Keras classes the package's classes stand in for pass with ours.

Each suite of the plugin `keras_tests_with_ours` (`keras_tests_with_ours.SUITES`) is one of the
package's classes documented as behaving like a Keras class, with Keras's test files of that
class: `ResettableRNN` for `keras.layers.RNN` (``rnn_test.py``, ``stacked_rnn_cells_test.py``,
``dropout_rnn_cell_test.py``, ``bidirectional_test.py``), `ResettableCell` for Keras's cells
(``simple_rnn_test.py``, ``gru_test.py``, ``lstm_test.py``), `PhiloxDropout` for
`keras.layers.Dropout` (``dropout_test.py``) and `TiedEmbedding` for `keras.layers.Embedding`
(``embedding_test.py``). The files, as shipped in the installed keras wheel, run in pytest
processes of their own on the current backend, with the plugin, which puts our class in the
Keras class's place. Every test must pass, except those that cannot apply, which the plugin
skips with their reason (the suites' ``skipped``), and those that Keras's test files skip
themselves on this backend; and every test that passes must have built our class, so that none
passes without it.
"""

import json
import os
import pathlib
import subprocess
import sys

import keras
import pytest

from tests.layers import keras_tests_with_ours as plugin

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

# The runs, each a pytest process of its own: {id: (suite names, Keras's test files)}. Two
# processes: `ResettableRNN`'s suite replaces ``keras.layers.RNN`` in the whole process, which
# would change what the cell suites build (``keras.layers.RNN`` over a `ResettableCell`). Each
# run's files share its start (TensorFlow's import, Keras's test modules).
RUNS = {
    "ResettableRNN": (("ResettableRNN",), plugin.SUITES["ResettableRNN"].files),
    "ResettableCell-PhiloxDropout-TiedEmbedding": (
        ("ResettableCell", "PhiloxDropout", "TiedEmbedding"),
        tuple(
            file
            for name in ("ResettableCell", "PhiloxDropout", "TiedEmbedding")
            for file in plugin.SUITES[name].files
        ),
    ),
}


def _keras_src_folder():
    import keras.src

    return pathlib.Path(keras.src.__file__).parent


def _run_keras_files(suites, paths, tmp_path):
    """Runs Keras's test files ``paths`` with the plugin's ``suites``; returns the plugin's
    report."""
    report = tmp_path / "report.json"
    # No configuration of this repository's (``-c`` an empty file), the files' common folder
    # as the rootdir (node ids ``rnn_test.py::...`` or ``rnn/gru_test.py::...``), and the
    # current backend, whatever the environment says.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["KERAS_BACKEND"] = keras.backend.backend()
    env[plugin.SUITES_VARIABLE] = ",".join(suites)
    env[plugin.REPORT_VARIABLE] = str(report)
    imports = [str(pathlib.Path(plugin.__file__).parent), str(REPO_ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*imports, env.get("PYTHONPATH")]))
    rootdir = os.path.commonpath([str(path.parent) for path in paths])
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        plugin.__name__,
        "-c",
        str(tmp_path / "pytest.ini"),
        "--rootdir",
        rootdir,
        *map(str, paths),
    ]
    run = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200
    )
    assert report.is_file(), f"no report from the run of {paths}:\n{run.stdout}\n{run.stderr}"
    return run, json.loads(report.read_text())


@pytest.mark.parametrize("run_id", RUNS)
def test_keras_tests_pass_with_ours(tmp_path, record_property, run_id):
    suites, files = RUNS[run_id]
    paths = [_keras_src_folder() / file for file in files]
    absent = [str(path) for path in paths if not path.is_file()]
    if absent:
        pytest.skip(f"the installed keras wheel ({keras.__version__}) does not ship {absent}")
    run, report = _run_keras_files(suites, paths, tmp_path)
    tests = report["tests"]
    assert report["backend"] == keras.backend.backend()
    assert tests, f"no test collected from {files}:\n{run.stdout[-3000:]}"
    counts = {}
    for path in paths:
        of_file = {t: r for t, r in tests.items() if t.split("::", 1)[0] == path.name}
        counts[path.name] = {
            outcome: sum(r["outcome"] == outcome for r in of_file.values())
            for outcome in ("passed", "failed", "skipped")
        }
        suite = plugin.suite_of(path.name)
        print(
            f"{suite} for {plugin.SUITES[suite].keras_class}, {path.name} on "
            f"{report['backend']}: {counts[path.name]}"
        )
        assert of_file, f"no test collected from {path}:\n{run.stdout[-3000:]}"
    record_property("keras_tests", counts)
    failed = sorted(t for t, r in tests.items() if r["outcome"] == "failed")
    assert not failed, f"{counts}, failed: {failed}\n{run.stdout[-6000:]}"
    # Skipped by the plugin with its reason, or by a skip marker of Keras's test file.
    unexpected = {
        t: r["reason"]
        for t, r in tests.items()
        if r["outcome"] == "skipped" and r["skipped_by"] not in ("plugin", "keras")
    }
    assert not unexpected, f"skipped without a reason of the plugin's: {unexpected}"
    unexercised = [
        t for t, r in tests.items() if r["outcome"] == "passed" and not r["constructions"]
    ]
    assert not unexercised, f"passed without building the suite's class: {unexercised}"
    assert run.returncode == 0, run.stdout[-6000:]
