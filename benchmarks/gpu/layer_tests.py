"""Steps 2 and 3 of ``benchmarks/gpu/run.sh``: what Keras's backend (JAX or torch) runs on
(``device.json``; exit status 3 without a GPU where required), then every layer's test module on
it under pytest-xdist with a time limit (a rehearsal: every module collected, the first test of
one module a worker run), writing ``layer_tests.xml`` and ``layer_tests.json`` (counts,
failures, the tests left unrun) whatever happens. Also the run's pytest plugin, writing the
collected ids: what a stopped run left."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

import pytest

from benchmarks import ROOT, ArgumentParser, describe_device, positive

OUTCOMES = {"failure": "failed", "error": "errors", "skipped": "skipped"}  # JUnit's tags


def pytest_addoption(parser):
    parser.addoption("--collected-ids-file", help="the file the collected tests' ids go to")


def pytest_configure(config):
    """On torch, with ``JAX_DEFAULT_MATMUL_PRECISION=highest`` (run.sh), float32 products in
    float32 as on JAX: PyTorch lets cuDNN (Keras's LSTM and GRU) compute them in TF32."""
    if torch_in_full_float32():
        import torch

        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def torch_in_full_float32():
    highest = os.environ.get("JAX_DEFAULT_MATMUL_PRECISION") == "highest"
    return highest and os.environ.get("KERAS_BACKEND") == "torch"


def _write_ids(config, ids):
    path = config.getoption("collected_ids_file")
    if path and not hasattr(config, "workerinput"):  # a pytest-xdist worker leaves it
        pathlib.Path(path).write_text("".join(f"{test_id}\n" for test_id in ids), encoding="utf-8")


def pytest_collection_finish(session):
    _write_ids(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _write_ids(node.config, ids)


def read_ids(path):
    """The ids a run wrote to ``path``, or None where it wrote none (collection did not end)."""
    path = pathlib.Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else None
    return text if text is None else [line for line in text.splitlines() if line]


def collect(files):
    """The test ids in ``files`` (under ``tests/``), as pytest collects them."""
    command = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    command += [f"tests/{f}" for f in files]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    if done.returncode != 0 or not ids:
        raise RuntimeError(f"collecting the layer tests failed:\n{done.stdout}\n{done.stderr}")
    return ids


def run(targets, workers, seconds, junit, log, ids_file):
    """``(status, interrupted)`` of pytest on ``targets``; SIGINT (it reports) after ``seconds``."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--disable-warnings"]
    command += ["-p", "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit2"]
    command += ["-p", "benchmarks.gpu.layer_tests", f"--collected-ids-file={ids_file}"]
    command += ["-n", str(workers), "--dist", "loadgroup"] if workers > 1 else []
    command += targets
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            return process.wait(timeout=seconds), False
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                return process.wait(timeout=30), True
            except subprocess.TimeoutExpired:
                process.kill()
                return process.wait(), True


def summarise(junit, collected=()):
    """Counts and failures of a pytest JUnit report, its 20 slowest tests (what to trim when the
    selection outgrows its time), and the ``collected`` test ids it does not report (unrun)."""
    summary = dict(passed=0, failed=0, errors=0, skipped=0, seconds=0, failures=[], per_file={})
    seconds = {}
    cases = ElementTree.parse(junit).getroot().iter("testcase") if os.path.isfile(junit) else ()
    for case in cases:
        if not case.get("name"):  # a test interrupted at the time limit: not reported
            continue
        # classname: the module's dotted path, then the test's classes, if any.
        parts = case.get("classname", "").split(".")
        cut = next((i + 1 for i, part in enumerate(parts) if part.startswith("test_")), len(parts))
        file = "/".join(parts[:cut])
        test_id = "::".join([f"{file}.py", *parts[cut:], case.get("name", "")])
        marks = [child for child in case if child.tag in OUTCOMES]
        outcome = OUTCOMES[marks[0].tag] if marks else "passed"
        if outcome in ("failed", "errors"):
            message = (marks[0].get("message") or marks[0].text or "").strip().splitlines()
            summary["failures"].append({"test": test_id, "message": (message or [""])[0][:500]})
        summary[outcome] += 1
        seconds[test_id] = float(case.get("time") or 0)
        counts = summary["per_file"].setdefault(file, {})
        counts[outcome] = counts.get(outcome, 0) + 1
    summary["seconds"] = sum(seconds.values(), 0.0)
    slowest = sorted(seconds.items(), key=lambda item: -item[1])[:20]
    summary["slowest"] = [{"test": test_id, "seconds": s} for test_id, s in slowest]
    summary["not_run"] = [test_id for test_id in collected if test_id not in seconds]
    return summary


def rerun_targets(earlier, collected):
    """The ``collected`` ids that ``earlier`` (a ``layer_tests.json``) gives as failed or unrun."""
    wanted = {failure["test"] for failure in earlier["failures"]} | set(earlier["not_run"])
    return [test_id for test_id in collected if test_id in wanted]


def main(argv=None):
    from tests.selection import layer_test_modules

    parser = ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--out", required=True, help="the folder the results go to")
    why = "time limit (default: 200; 0: the device alone, no tests)"
    add("--seconds", type=positive(float, zero=True), default=200.0, help=why)
    add("--workers", type=positive(int), default=8, help="pytest-xdist processes (default: 8)")
    add("--mode", choices=("full", "rehearsal"), default="full", help="rehearsal: a test a worker")
    add("--rerun-from", help="an earlier run's layer_tests.json: run what failed or was unrun")
    why = "exit with status 3 unless the backend runs on a GPU (default: yes)"
    add("--require-gpu", choices=("yes", "no"), default="yes", help=why)
    args = parser.parse_args(argv)
    out, files = pathlib.Path(args.out), list(layer_test_modules())
    device = describe_device()
    (out / "device.json").write_text(json.dumps(device, indent=1), encoding="utf-8")
    print(f"the device: {json.dumps(device)}")
    backend = device["default_backend"]
    if args.require_gpu == "yes" and backend != "gpu":
        print(f"the backend's default platform is {backend!r}, not 'gpu'", file=sys.stderr)
        return 3
    if args.seconds == 0:
        print("layer tests: not run (--seconds 0)")
        return 0
    junit, log = out / "layer_tests.xml", out / "layer_tests.log"
    started = time.perf_counter()
    if args.rerun_from:
        earlier = json.loads(pathlib.Path(args.rerun_from).read_text(encoding="utf-8"))
        targets = rerun_targets(earlier, collect(files))
        if not targets:
            print(f"layer tests: nothing to rerun from {args.rerun_from}")
            return 0
    elif args.mode == "rehearsal":
        # Every file is collected (imported, its tests built); the steps' machinery needs only
        # a test for each worker, the first of the last files (the layers' suites come first
        # and take longest): the pass on this backend runs all of them.
        firsts = {}
        for test_id in collect(files):
            firsts.setdefault(test_id.split("::")[0], test_id)
        targets = list(firsts.values())[-args.workers :]
    else:
        targets = [f"tests/{f}" for f in files]
    with tempfile.TemporaryDirectory() as scratch:
        ids_file = pathlib.Path(scratch) / "collected.txt"
        status, interrupted = run(targets, args.workers, args.seconds, junit, log, ids_file)
        # What the run collected; where its time limit came before its collection ended,
        # collected again here (a rerun's or a rehearsal's tests are the targets).
        collected = read_ids(ids_file)
    if collected is None:
        collected = collect(files) if args.mode == "full" and not args.rerun_from else targets
    precision = os.environ.get("JAX_DEFAULT_MATMUL_PRECISION", "default")
    precision += " (TF32 off in cuBLAS and cuDNN)" if torch_in_full_float32() else ""
    summary = dict(mode=args.mode, files=files, collected=len(collected), precision=precision)
    summary |= dict(xla_flags=os.environ.get("XLA_FLAGS", ""), exit_status=status)
    wall_seconds = round(time.perf_counter() - started, 1)
    summary |= dict(interrupted_at_time_limit=interrupted, wall_seconds=wall_seconds)
    summary |= dict(rerun_from=args.rerun_from, **summarise(junit, collected))
    (out / "layer_tests.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    counts = ", ".join(f"{summary[key]} {key}" for key in ("passed", "failed", "errors", "skipped"))
    print(f"layer tests: {counts}, {len(summary['not_run'])} not run, in {wall_seconds} s")
    for failure in summary["failures"]:
        print(f"FAILED {failure['test']}: {failure['message']}")
    return 0 if status == 0 and not interrupted else 1


if __name__ == "__main__":
    sys.exit(main())
