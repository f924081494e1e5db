"""The GPU run (``benchmarks/gpu/``): its rehearsal on a CPU, the layer tests' summary and
reruns, and the results page's rows and goals from the runs."""

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

from benchmarks.gpu import layer_tests
from benchmarks.speed import page, tables
from tests.selection import layer_test_modules
from tests.support import BACKEND, REPO_ROOT

RUN_SH = REPO_ROOT / "benchmarks" / "gpu" / "run.sh"


def _read(path):
    return json.loads(path.read_text(encoding="utf-8"))


# The GPU run runs Keras on JAX or torch without TensorFlow, as the JAX and torch passes do.
@pytest.mark.skipif(BACKEND == "tensorflow", reason="run in the passes on JAX and torch")
def test_the_rehearsal_runs_every_step_of_the_gpu_run(tmp_path):
    """``run.sh --rehearse --backend BACKEND``: the GPU run's steps on this CPU, at tiny sizes
    and one length."""
    pytest.importorskip("setuptools", minversion="77", reason="its install builds the package")
    pytest.importorskip("xdist", reason="runs pytest-xdist")
    out, wheels, jax = tmp_path / "out", tmp_path / "no-wheels", BACKEND == "jax"
    wheels.mkdir()  # those of .whl/ are for the GPU machine's Python; this one has Keras
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"OUT": str(out)}
    env.update(PYTHON=sys.executable, GPU_RUN_WHEELS=str(wheels), GPU_RUN_SPEED_ARGS="--lengths 20")
    cmd = ["bash", str(RUN_SH), "--rehearse", "--backend", BACKEND]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, timeout=900, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "done, status 0" in (out / "run.log").read_text(encoding="utf-8")
    device, tests = _read(out / "device.json"), _read(out / "layer_tests.json")
    assert device["backend"] == BACKEND and (device["devices"] or not jax)
    # Every layer test file selected and collected; a worker ran one of the last files' first.
    assert tests["failed"] == tests["errors"] == 0 and tests["not_run"] == []
    assert tests["files"] == list(layer_test_modules()) and tests["passed"] + tests["skipped"] == 2
    assert {f"tests/{name[:-3]}" for name in tests["files"][-2:]} == set(tests["per_file"])
    assert (out / "layer_tests.xml").is_file()
    # The tests compile without autotuning, their matrix products in cuBLAS (on a GPU).
    flags = {"--xla_gpu_autotune_level=0", "--xla_gpu_enable_triton_gemm=false"}
    assert flags <= set(tests["xla_flags"].split())
    measured, long = _read(out / "speed.json"), _read(out / "speed_long.json")
    assert measured["errors"] == {} and set(measured["tables"]) == set(tables.GPU_TABLES)
    assert all(peak > 0 for peak in measured["peak_gflops"].values())
    # On JAX a rehearsal compiles without LLVM's optimisation passes; torch runs eagerly; 1 round.
    step, rounds = measured["settings"]["step"], measured["settings"]["rounds"]
    assert "--xla_backend_optimization_level=0" in measured["device"]["xla_flags"]
    assert step.endswith("``jax.jit``" if jax else "eager") and rounds == 1, (step, rounds)
    for table, rows in measured["tables"].items():
        assert rows and not any("status" in row or "error" in row for row in rows), table
    for row in measured["tables"]["window_attention"]:
        assert row["T"] == 20
        for variant in ("ours", "floor", "mha"):  # XLA's buffers: on JAX only
            assert row[f"{variant}_ms"] > 0 and (not jax or row[f"{variant}_buffers_mib"] > 0)
        # T = 20 is within the rehearsal's parts_max_length: each part's cost is measured.
        for variant, (part, _) in tables.PARTS.items():
            assert row[f"{variant}_ms"] > 0 and isinstance(row[f"{part}_over_floor"], float)
        assert isinstance(row["rest_over_floor"], float)
    dtypes = {"float32", "mixed_bfloat16"}
    assert {row["dtype"] for row in measured["tables"]["language_model"]} == dtypes
    layers = [row["layer"] for row in measured["tables"]["associative_memory"]]
    assert layers.count(tables.FLOOR_LAYER) == len(dtypes)
    # On JAX the Pallas kernels' rows (minutes to compile) come last, each beside its dtype's GRU.
    kernels = [f"GRU ({tables.KERNELS})", tables.PALLAS_FLOOR, "AssociativeGRU C=8 fused_loop"]
    assert layers[-6:] == kernels * 2 if jax else kernels[0] not in layers
    assert list(measured["tables"])[-1] == "associative_memory"
    assert all(row["compile_s"] > 0 for row in measured["tables"]["associative_memory"])
    # Step 5: the long lengths, alone, XLA's constant folding off, no parts (> parts_max_length).
    assert "constant_folding" in long["device"]["xla_flags"] and long["errors"] == {}
    # Its shares of peak are of the peaks step 4 measured.
    assert long["peaks_from"] == str(out / "speed.json")
    for key in ("peak_gflops", "peak_gflops_float32_highest"):
        assert long.get(key) == measured.get(key)
    window = long["tables"]["window_attention"]
    assert [(row["dtype"], row["T"]) for row in window] == [("float32", 40), ("mixed_bfloat16", 40)]
    for row in window:
        assert row["ours_ms"] > 0 and row["mha_ms"] > 0 and "attention_over_floor" not in row


BAD_OPTIONS = """bash benchmarks/gpu/run.sh --fast
bash benchmarks/gpu/run.sh --backend tensorflow
-m benchmarks.speed --python torch
-m benchmarks.speed --no-jit --backend jax
-m benchmarks.gpu.layer_tests --workers 0 --out .
-m benchmarks.gpu.layer_tests --require-gpu maybe --out x.json
-m benchmarks.speed --rounds 0
-m benchmarks.speed --tables all
-m benchmarks.speed --lengths 20 x
-m benchmarks.speed --device gpu --backend tensorflow"""


@pytest.mark.parametrize("command", BAD_OPTIONS.splitlines())
def test_a_bad_option_is_one_line_naming_it_and_status_2(command, tmp_path):
    argv = command.split()
    argv = argv if argv[0] == "bash" else [sys.executable, *argv]
    env = {**os.environ, "OUT": str(tmp_path), "KERAS_BACKEND": "jax"}
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    named = next(word for word in argv if word.startswith("--"))
    assert done.stderr.count("\n") == 1 and named in done.stderr, done.stderr
    assert not (REPO_ROOT / "x.json").exists()


def test_zero_seconds_of_layer_tests_describe_the_device_and_run_none(tmp_path, capsys):
    assert layer_tests.main(["--out", str(tmp_path), "--seconds", "0", "--require-gpu", "no"]) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["device.json"]
    assert _read(tmp_path / "device.json")["backend"] == BACKEND
    assert "layer tests: not run" in capsys.readouterr().out


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.layers.test_a" name="test_one" time="1.5"/>
<testcase classname="tests.layers.test_a.TestGroup" name="test_two[x]" time="0.5">
  <failure message="ValueError: bad&#10;second line">trace</failure></testcase>
<testcase classname="tests.layers.window.test_b" name="test_three" time="0.25">
  <skipped message="TensorFlow only"/></testcase>
<testcase classname="tests.layers.window.test_b" name="test_four" time="0.25">
  <error message="RuntimeError: setup">trace</error></testcase>
<testcase time="0.001"/>
</testsuite></testsuites>
"""


def test_the_summary_counts_each_outcome_names_what_did_not_run_and_what_to_rerun(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT, encoding="utf-8")
    a, b = "tests/layers/test_a.py::", "tests/layers/window/test_b.py::"
    collected = [f"{a}test_one", f"{a}TestGroup::test_two[x]"]
    collected += [f"{b}test_{n}" for n in ("three", "four", "five")]
    summary = layer_tests.summarise(junit, collected)
    assert [summary[key] for key in ("passed", "failed", "errors", "skipped")] == [1, 1, 1, 1]
    # The placeholder of a test interrupted at the time limit counts as nothing.
    assert summary["not_run"] == ["tests/layers/window/test_b.py::test_five"]
    assert summary["failures"] == [
        {"test": "tests/layers/test_a.py::TestGroup::test_two[x]", "message": "ValueError: bad"},
        {"test": "tests/layers/window/test_b.py::test_four", "message": "RuntimeError: setup"},
    ]
    assert summary["per_file"]["tests/layers/test_a"] == {"passed": 1, "failed": 1}
    assert summary["seconds"] == pytest.approx(2.5)
    assert summary["slowest"][0] == {"test": "tests/layers/test_a.py::test_one", "seconds": 1.5}
    assert [entry["seconds"] for entry in summary["slowest"]] == [1.5, 0.5, 0.25, 0.25]
    # A rerun takes the failed and the unrun tests, in collection order.
    expected = [collected[4], collected[3], collected[1]]
    assert layer_tests.rerun_targets(summary, collected[::-1]) == expected


TOY_TESTS = "import pytest\ntest_one = lambda: None\n@pytest.mark.parametrize('x', [1, 2])\n"
TOY_TESTS += "def test_two(x):\n    assert x < 2\n"


@pytest.mark.parametrize("workers", [1, 2])
def test_the_run_writes_the_ids_of_the_tests_it_collected(pytester, monkeypatch, workers):
    """The collected ids, in order, written by the process that collects or xdist's controller."""
    if workers > 1:
        pytest.importorskip("xdist", reason="needs pytest-xdist")
    pytester.makepyfile(test_toy=TOY_TESTS)
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    ids = pytester.path / "collected.txt"
    command = ["-p", layer_tests.__name__, f"--collected-ids-file={ids}", "-p", "no:cacheprovider"]
    result = pytester.runpytest_subprocess(*command, *(["-n", str(workers)] if workers > 1 else []))
    result.assert_outcomes(passed=2, failed=1)
    expected = ["test_toy.py::test_one", "test_toy.py::test_two[1]", "test_toy.py::test_two[2]"]
    assert layer_tests.read_ids(ids) == expected
    assert layer_tests.read_ids(pytester.path / "elsewhere.txt") is None


def _write_run(folder, number, tables, errors=None, device=None):
    (folder / f"run-{number}").mkdir(parents=True)
    speed = json.dumps({"tables": tables, "errors": errors or {}, "device": device or {}})
    (folder / f"run-{number}" / "speed.json").write_text(speed, encoding="utf-8")


def test_a_later_run_replaces_rows_it_measured_and_keeps_the_others(tmp_path):
    row = lambda t, **fields: {"dtype": "float32", "T": t, **fields}  # noqa: E731
    first = [row(20, ours_ms=1.0), row(4000, status="not run"), row(100, ours_ms=2.0)]
    _write_run(tmp_path, 2, {"window_attention": [row(4000, ours_ms=3.0), row(100, status="-")]})
    _write_run(tmp_path, 10, {})  # read after run-2, not before
    _write_run(tmp_path, 1, {"window_attention": first}, {"snli": "ValueError: x"})
    runs = page.load_runs(tmp_path)
    assert [run["name"] for run in runs] == ["run-1", "run-2", "run-10"]
    rows = {row["T"]: row for row in page.merged_rows(runs, "window_attention")}
    assert rows[20] == {"dtype": "float32", "T": 20, "ours_ms": 1.0, "run": "run-1"}
    assert rows[4000]["ours_ms"] == 3.0 and rows[4000]["run"] == "run-2"
    assert rows[100]["ours_ms"] == 2.0  # a row a later run skipped keeps its measurement
    assert page.merged_rows(runs, "snli") == [{"status": "failed: ValueError: x", "run": "run-1"}]
    # A later run that measures the failed table takes its error row away.
    _write_run(tmp_path, 11, {"snli": [{"dtype": "float32", "kind": "gru", "median_ms": 1.0}]})
    measured = {"dtype": "float32", "kind": "gru", "median_ms": 1.0, "run": "run-11"}
    assert page.merged_rows(page.load_runs(tmp_path), "snli") == [measured]


def test_the_goals_take_the_worst_measured_row_and_say_why_a_missed_one_is_missed(tmp_path):
    short = dict(ours_over_mha=1.1, ours_over_floor=1.2, ours_ms=1.1, floor_ms=0.95, mha_ms=1.0)
    long = dict(ours_over_mha=0.4, ours_over_floor=1.05, ours_memory_over_mha=0.04, ours_ms=4.0)
    window = [
        {"dtype": "float32", "T": 20, "ours_share_of_peak": 0.01, **short},
        {"dtype": "float32", "T": 16000, "floor_ms": 3.8, "mha_ms": 10.0, **long},
        {"dtype": "mixed_bfloat16", "T": 16000, "status": "not run"},
    ]
    am = [
        dict(dtype="float32", layer=layer, ratio_to_gru=r)
        for layer, r in (("AssociativeGRU C=8", 2.0), (tables.FLOOR_LAYER, 1.8))
    ]
    _write_run(tmp_path, 1, {"window_attention": window, "associative_memory": am})
    # A run on torch: its rows stand beside JAX's, with goals of their own.
    on_torch = [dict(dtype="float32", layer="AssociativeGRU C=8", ratio_to_gru=1.25)]
    failed = {"window_attention": "RuntimeError: x"}
    _write_run(tmp_path, 2, {"associative_memory": on_torch}, failed, {"torch": "2.11"})
    fused = {"dtype": "float32", "status": "compiling AssociativeGRU C=8 fused_loop when ..."}
    _write_run(tmp_path, 3, {"associative_memory": [fused]})
    assert len(page.merged_rows(page.load_runs(tmp_path), "associative_memory")) == 4
    goals = {row["goal"]: row for row in page.goal_rows(page.load_runs(tmp_path))}
    torch = goals["AM-GRU (C = 8) / GRU on torch"]
    assert (torch["worst"], torch["met"]) == (1.25, "yes")
    assert "AM-GRU Pallas kernels (C = 8) / GRU on torch" not in goals  # JAX's kernels
    # A goal not measured says why: the failed table of its backend, the row left compiling.
    torch = goals["window attention / floor on torch"]
    assert (torch["met"], torch["why"]) == ("not measured", "run-2: failed: RuntimeError: x")
    assert goals["AM-GRU Pallas kernels (C = 8) / GRU"]["why"] == f"run-3: {fused['status']}"
    mha = goals["window attention / MHA, every T"]
    assert (mha["worst"], mha["where"], mha["met"]) == (1.1, "T = 20, float32", "no")
    assert mha["why"].startswith("floor alone: 0.95 × MHA")
    floor = goals["window attention / floor"]
    assert (floor["worst"], floor["met"], floor["why"]) == (1.2, "yes", "")
    assert goals["window attention memory / MHA, T = 16000"]["worst"] == 0.04
    assert goals["AM-GRU (C = 8) / GRU"]["why"] == "floor (memory by stand-ins): 1.80 × GRU"
    assert goals["LM step / bare LSTM, cell form"]["met"] == "not measured"


@pytest.mark.skipif(BACKEND != "torch", reason="PyTorch's settings")
def test_the_layer_tests_on_torch_take_float32_products_in_float32(monkeypatch):
    """As JAX's 'highest' precision does: PyTorch's default lets cuDNN's GRU use TF32."""
    import torch

    settings = (torch.backends.cudnn, torch.backends.cuda.matmul)
    before = [setting.allow_tf32 for setting in settings]
    try:
        for highest in (False, True):
            precision = "highest" if highest else "default"
            monkeypatch.setenv("JAX_DEFAULT_MATMUL_PRECISION", precision)
            for setting in settings:
                setting.allow_tf32 = True
            layer_tests.pytest_configure(None)
            assert [setting.allow_tf32 for setting in settings] == [not highest] * 2
    finally:
        for setting, value in zip(settings, before):
            setting.allow_tf32 = value


def test_the_wheels_are_pinned_and_the_gpu_run_needs_no_tensorflow():
    """The GPU machine has no TensorFlow: no module the run imports imports it at its top
    (a table's TensorFlow-only variants import it where they run)."""
    text = (REPO_ROOT / "benchmarks" / "gpu" / "wheels.txt").read_text()
    lines = [line.strip() for line in text.splitlines() if line.strip()[:1] not in ("", "#")]
    assert lines and all("==" in line for line in lines)
    assert {line.split("==")[0] for line in lines} >= {"keras", "namex", "optree"}
    for path in (REPO_ROOT / "benchmarks").rglob("*.py"):
        if "papers" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        names = [getattr(node, "module", None) or node.names[0].name for node in top]
        assert not any(name.startswith("tensorflow") for name in names), path
    assert pathlib.Path(RUN_SH).stat().st_mode & 0o111
