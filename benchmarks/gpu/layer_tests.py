"""The layer tests of the GPU run (step 3 of ``benchmarks/gpu/run.sh``): which, and what came out.

The selection is every layer's test module (its test class with the suites of Keras's layer
protocol, its NumPy-reference exactness tests and mechanism tests: the modules of
``tests.selection.layer_test_modules``), on Keras's JAX backend. They run
under pytest-xdist with a time limit; whatever happens, ``layer_tests.xml`` (JUnit) and
``layer_tests.json`` (counts, the failures with their messages, the tests that the time limit
left unrun) are written. A rehearsal runs the first test of each selected file only, through
the same steps.

Usage::

    JAX_DEFAULT_MATMUL_PRECISION=highest KERAS_BACKEND=jax \\
        python -m benchmarks.gpu.layer_tests --out results/ --seconds 170 --workers 8
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

from benchmarks import ArgumentParser, positive
from benchmarks.gpu import collected_ids

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: How many of the longest tests a summary names (what to trim when the selection outgrows
#: its time).
SLOWEST = 20


def selected_files():
    """The test files of the GPU run, as paths under ``tests/``: each layer's test module
    (`tests.selection.layer_test_modules`, found from paths, without importing them)."""
    from tests.selection import layer_test_modules

    return list(layer_test_modules())


def pytest_command(targets, workers, junit, ids_file):
    """The pytest command over ``targets`` (files or test ids under the repository), which
    writes the ids of the tests it collects to ``ids_file`` (`collected_ids`)."""
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "--disable-warnings"]
    command += ["-p", "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit2"]
    command += ["-p", collected_ids.__name__, f"--collected-ids-file={ids_file}"]
    if workers > 1:
        command += ["-n", str(workers), "--dist", "loadgroup"]
    return command + list(targets)


def collect(files):
    """The test ids in ``files`` (paths under ``tests/``), as pytest collects them (for a
    rerun or a rehearsal, which choose their tests from them before they run)."""
    command = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    command += [f"tests/{f}" for f in files]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    if done.returncode != 0 or not ids:
        raise RuntimeError(f"collecting the layer tests failed:\n{done.stdout}\n{done.stderr}")
    return ids


def run(targets, workers, seconds, junit, log, ids_file):
    """Runs pytest over ``targets``; interrupts it (SIGINT, so that it still writes its
    report) after ``seconds``. Returns ``(exit status, whether it was interrupted)``."""
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            pytest_command(targets, workers, junit, ids_file),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
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
    """Counts and failures of a pytest JUnit report, the `SLOWEST` longest tests with their
    seconds, and the ``collected`` test ids it does not report (left unrun)."""
    summary = dict(passed=0, failed=0, errors=0, skipped=0, seconds=0.0, failures=[], per_file={})
    reported, durations = set(), []
    if pathlib.Path(junit).is_file():
        for case in ElementTree.parse(junit).getroot().iter("testcase"):
            if not case.get("name"):  # a test interrupted at the time limit: not reported
                continue
            # classname: the module's dotted path, then the test's classes, if any.
            parts = case.get("classname", "").split(".")
            cut = next(
                (i + 1 for i, part in enumerate(parts) if part.startswith("test_")), len(parts)
            )
            file = "/".join(parts[:cut])
            test_id = "::".join([f"{file}.py", *parts[cut:], case.get("name", "")])
            reported.add(test_id)
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "errors"}.get(child.tag, "skipped")
                    if outcome != "skipped":
                        message = (child.get("message") or child.text or "").strip()
                        first = message.splitlines()[0][:500] if message else ""
                        summary["failures"].append({"test": test_id, "message": first})
                    break
            summary[outcome] += 1
            summary["seconds"] += float(case.get("time") or 0)
            durations.append((float(case.get("time") or 0), test_id))
            counts = summary["per_file"].setdefault(file, {})
            counts[outcome] = counts.get(outcome, 0) + 1
    summary["slowest"] = [
        {"test": test_id, "seconds": seconds}
        for seconds, test_id in sorted(durations, key=lambda d: -d[0])[:SLOWEST]
    ]
    summary["not_run"] = [test_id for test_id in collected if test_id not in reported]
    return summary


def rerun_targets(earlier, collected):
    """The ``collected`` test ids that the summary ``earlier`` (a ``layer_tests.json``) gives
    as failed or left unrun, in collection order."""
    wanted = {failure["test"] for failure in earlier["failures"]} | set(earlier["not_run"])
    return [test_id for test_id in collected if test_id in wanted]


def main(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--out", required=True, help="the folder the results go to")
    add("--seconds", type=positive(float), default=170.0, help="time limit (default: 170)")
    add("--workers", type=positive(int), default=8, help="pytest-xdist processes (default: 8)")
    add("--mode", choices=("full", "rehearsal"), default="full", help="rehearsal: a test a file")
    add("--rerun-from", help="an earlier run's layer_tests.json: run what failed or was unrun")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    junit, log = out / "layer_tests.xml", out / "layer_tests.log"
    files = selected_files()
    started = time.perf_counter()
    if args.rerun_from:
        earlier = json.loads(pathlib.Path(args.rerun_from).read_text(encoding="utf-8"))
        targets = rerun_targets(earlier, collect(files))
        if not targets:
            print(f"layer tests: nothing to rerun from {args.rerun_from}")
            return 0
    elif args.mode == "rehearsal":
        firsts = {}
        for test_id in collect(files):
            firsts.setdefault(test_id.split("::")[0], test_id)
        targets = list(firsts.values())
    else:
        targets = [f"tests/{f}" for f in files]
    with tempfile.TemporaryDirectory() as scratch:
        ids_file = pathlib.Path(scratch) / "collected.txt"
        status, interrupted = run(targets, args.workers, args.seconds, junit, log, ids_file)
        # What the run collected; where its time limit came before its collection ended,
        # collected again here (a rerun's or a rehearsal's tests are the targets).
        collected = collected_ids.read(ids_file)
    if collected is None:
        collected = collect(files) if args.mode == "full" and not args.rerun_from else targets
    summary = {
        "mode": args.mode,
        "files": files,
        "collected": len(collected),
        "precision": os.environ.get("JAX_DEFAULT_MATMUL_PRECISION", "default"),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "exit_status": status,
        "interrupted_at_time_limit": interrupted,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "rerun_from": args.rerun_from,
        **summarise(junit, collected),
    }
    (out / "layer_tests.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(
        f"layer tests: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['errors']} errors, {summary['skipped']} skipped, "
        f"{len(summary['not_run'])} not run, in {summary['wall_seconds']} s"
    )
    for failure in summary["failures"]:
        print(f"FAILED {failure['test']}: {failure['message']}")
    return 0 if status == 0 and not interrupted else 1


if __name__ == "__main__":
    sys.exit(main())
