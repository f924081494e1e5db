"""Keras's own tests of the classes ours stand in for pass with ours (`keras_tests_with_ours`),
or are skipped with a reason, and every passing test built our class."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import keras
import keras.src
import pytest

from tests.layers import keras_tests_with_ours as plugin

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
KERAS_SRC = pathlib.Path(keras.src.__file__).parent  # Keras's test files lie in it

# {id: suite names}, each a pytest process: `ResettableRNN`'s suite replaces
# ``keras.layers.RNN`` in its whole process, which the cell suites build.
RUNS = {
    "-".join(run): run
    for run in [("ResettableRNN",), ("ResettableCell", "PhiloxDropout", "TiedEmbedding")]
}


def _run_keras_files(suites, paths, tmp_path, keras_own=False):
    """Runs Keras's test files ``paths`` with the plugin's ``suites`` (with Keras's own classes
    if ``keras_own``); returns the run and its report."""
    tmp_path.mkdir(exist_ok=True)
    report = tmp_path / "report.json"
    # No configuration of ours (``-c`` an empty file), the files' common folder as the rootdir
    # (node ids ``rnn_test.py::...``), and the current backend.
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["KERAS_BACKEND"] = keras.backend.backend()
    env[plugin.SUITES_VARIABLE] = ",".join(suites)
    env[plugin.REPORT_VARIABLE] = str(report)
    if keras_own:
        env[plugin.KERAS_OWN_VARIABLE] = "1"
    imports = [str(pathlib.Path(plugin.__file__).parent), str(REPO_ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*imports, env.get("PYTHONPATH")]))
    rootdir = os.path.commonpath([str(path.parent) for path in paths])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    cmd += ["-p", plugin.__name__, "-c", str(tmp_path / "pytest.ini"), "--rootdir", rootdir]
    cmd += [str(path) for path in paths]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert report.is_file(), f"no report from the run of {paths}:\n{run.stdout}\n{run.stderr}"
    return run, json.loads(report.read_text())


@pytest.mark.parametrize("run_id", RUNS)
def test_keras_tests_pass_with_ours(tmp_path, record_property, run_id):
    suites = RUNS[run_id]
    files = [file for name in suites for file in plugin.SUITES[name].files]
    paths = [KERAS_SRC / file for file in files]
    absent = [str(path) for path in paths if not path.is_file()]
    if absent:
        pytest.skip(f"the installed keras wheel ({keras.__version__}) does not ship {absent}")
    run, report = _run_keras_files(suites, paths, tmp_path)
    tests = report["tests"]
    assert report["backend"] == keras.backend.backend()
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
    unbuilt = [t for t, r in tests.items() if r["outcome"] == "passed" and not r["constructions"]]
    assert not unbuilt, f"passed without building the suite's class: {unbuilt}"
    assert run.returncode == 0, run.stdout[-6000:]


# What Keras's loader does with a class it cannot import by module path does not depend on
# the backend: the outcomes are compared once, in the TensorFlow pass.
@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the loader's outcomes are the same on every backend: compared on TensorFlow",
)
def test_unregistered_cells_load_as_with_keras_rnn(tmp_path):
    """Keras's RNN test files that define cells of their own, copied out of Keras: top-level
    modules, whose classes Keras's loading cannot import by module path, as a user's own
    unregistered cells. Every test ends as with `keras.layers.RNN` (a refused class with its
    error), and the others pass with `ResettableRNN`."""
    paths = [KERAS_SRC / file for file in plugin.SUITES["ResettableRNN"].files]
    own_cells = [p for p in paths if re.search(r"^class \w+\(layers\.Layer", p.read_text(), re.M)]
    copies = [pathlib.Path(shutil.copy(path, tmp_path)) for path in own_cells]
    assert copies, f"no cell of its own in {paths}"
    _, ours = _run_keras_files(["ResettableRNN"], copies, tmp_path / "ours")
    _, theirs = _run_keras_files(["ResettableRNN"], copies, tmp_path / "keras", True)
    ends = [
        {t: (r["outcome"], r["message"]) for t, r in x["tests"].items()} for x in (ours, theirs)
    ]
    assert ends[0] == ends[1]
    assert all(r["constructions"] for r in ours["tests"].values() if r["outcome"] == "passed")
