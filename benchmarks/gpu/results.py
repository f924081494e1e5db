"""The GPU runs on the results page: reads ``benchmarks/results/gpu/run-*/`` (what
``benchmarks/gpu/run.sh`` wrote, as it came back) and writes the tables and the figure of the
results page's "On a GPU" section (`benchmarks.speed.page`). The runs are read in their
number's order: the layer-test table has a row per run, and in the speed tables a row a later
run measured replaces the same row of an earlier run; what no run measured stays, with why.

Usage::

    python -m benchmarks.gpu.results --update-docs
"""

import collections
import json
import pathlib
import re

from benchmarks import ArgumentParser
from benchmarks.docs_tables import RESULTS_PAGE, add_update_docs_option
from benchmarks.speed.page import draw, text, write_block
from benchmarks.speed.tables import FLOOR_LAYER

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNS = ROOT / "benchmarks" / "results" / "gpu"
FIGURE = ROOT / "docs" / "images" / "gpu_window_attention.png"
# How a row of each speed table is told apart from the others.
ROW_KEYS = {
    "window_attention": ("dtype", "T"),
    "language_model": ("dtype", "variant"),
    "associative_memory": ("dtype", "layer"),
    "snli": ("dtype", "kind"),
    "heap_write": ("dtype", "cache_size"),
}


def load_runs(folder=RUNS):
    """The runs under ``folder`` in their number's order: ``{"name", "device",
    "layer_tests", "speed", "speeds", "log"}`` each, a missing file None; ``speeds``: the run's
    speed files (``speed.json``, then ``speed_long.json``), ``speed`` the first."""
    runs = []
    for path in sorted(folder.glob("run-*"), key=lambda path: int(path.name.split("-")[1])):
        run = {"name": path.name}
        for key in ("device", "layer_tests", "speed", "speed_long", "run"):
            file = path / (f"{key}.json" if key != "run" else "run.log")
            run[key] = file.read_text(encoding="utf-8") if file.is_file() else None
            run[key] = json.loads(run[key]) if run[key] and key != "run" else run[key]
        run["log"] = run.pop("run") or ""
        run["speeds"] = [speed for speed in (run["speed"], run.pop("speed_long")) if speed]
        runs.append(run)
    return runs


def gpu_name(run):
    devices = (run["device"] or {}).get("devices") or []
    return devices[0]["kind"] if devices else "?"


def layer_test_rows(runs):
    rows = []
    for run in runs:
        if (tests := run["layer_tests"]) is None:
            continue
        counts = collections.Counter(
            re.sub(r"\s+", " ", failure["message"])[:60].rstrip() for failure in tests["failures"]
        )
        done = re.findall(r"\+(\d+)s\] done, status", run["log"])
        rows.append(
            {
                "run": run["name"],
                "gpu": gpu_name(run),
                "versions": f"JAX {run['device']['jax']}, Keras {run['device']['keras']}",
                "precision": tests["precision"],
                "selection": "rerun of the failed and unrun tests of "
                + pathlib.Path(tests["rerun_from"]).parent.name
                if tests.get("rerun_from")
                else f"{len(tests['files'])} test modules",
                "passed": tests["passed"],
                "failed": tests["failed"] + tests["errors"],
                "skipped": tests["skipped"],
                "not_run": len(tests["not_run"]),
                "seconds": tests["wall_seconds"],
                "failures": "; ".join(f"{n} × {message}" for message, n in counts.most_common()),
                "xla_flags": tests.get("xla_flags", "not recorded") or "none",
                "run_seconds": int(done[-1]) if done else None,
            }
        )
    return rows


def merged_rows(runs, table):
    """The rows of ``table`` over every run, a later run's measured row replacing the same
    row of an earlier one; a table that failed in a run gives one row with its error, until
    a later run measures it."""
    rows = {}
    for run in runs:
        for speed in run["speeds"]:
            found = speed["tables"].get(table, [])
            if any("status" not in row for row in found):
                rows = {key: row for key, row in rows.items() if key[0] != "error"}
            for row in found:
                key = tuple(row.get(k) for k in ROW_KEYS[table])
                if "status" in row and key in rows and "status" not in rows[key]:
                    continue  # a measured row stays
                rows[key] = {**row, "run": run["name"]}
                if "error" in row and "status" not in row:
                    rows[key]["status"] = f"failed: {row['error']}"
            error = speed.get("errors", {}).get(table)
            if error and not found:
                failed = {"status": f"failed: {error}", "run": run["name"]}
                rows.setdefault(("error", run["name"]), failed)
    return list(rows.values())


def peaks_text(runs):
    """The matrix-product rates each run measured, as a sentence."""
    parts = []
    for run in runs:
        if (speed := run["speed"]) and (peaks := speed.get("peak_gflops")):
            highest = speed.get("peak_gflops_float32_highest")
            parts.append(
                f"{run['name']} on an {gpu_name(run)}: float32 {peaks['float32'] / 1000:.0f}, "
                f"bfloat16 {peaks['mixed_bfloat16'] / 1000:.0f}"
                + (f", float32 at 'highest' precision {highest / 1000:.0f}" if highest else "")
                + " TFLOP/s"
            )
    return "; ".join(parts)


def window_notes(runs):
    """The runs whose rows were compiled with XLA's constant folding off, and those whose
    log shows XLA folding constants for a minute or more, as the caption's sentences."""
    folding_off, stalled = [], []
    for run in runs:
        for speed in run["speeds"]:
            if "constant_folding" in ((speed.get("device") or {}).get("xla_flags") or ""):
                lengths = (speed.get("settings") or {}).get("lengths")
                folding_off.append(f"{run['name']}, T = {', '.join(map(str, lengths))}")
        # XLA's warning of a slow constant folding gives the time it took once it is done.
        took = re.findall(r"The operation took ([0-9hms.]+)\s*\nConstant folding", run["log"])
        seconds = [
            60 * float(t.rpartition("m")[0] or 0) + float(t.rpartition("m")[2].rstrip("s"))
            for t in took
        ]
        if seconds and max(seconds) >= 60:
            asked = (run["speed"] or {}).get("settings", {}).get("lengths")
            stalled.append(
                f"{run['name']} (lengths {asked}): one constant folding took "
                f"{max(seconds):.0f} s (``{run['name']}/run.log``)"
            )
    return {
        key: " " + text("gpu-window-attention", key).format(runs="; ".join(parts)) if parts else ""
        for key, parts in (("folding_off", folding_off), ("stalled", stalled))
    }


def goal_rows(runs):
    """One row per goal of the GPU run: its limit, the worst measured value with where it
    was measured, whether it is met, and the measured reasons beside it (floors, shares of
    the matrix-product peak)."""
    window, lm = merged_rows(runs, "window_attention"), merged_rows(runs, "language_model")
    am, rows = merged_rows(runs, "associative_memory"), []

    def add(goal, limit, candidates, key, where, why=lambda row: ""):
        measured = [row for row in candidates if isinstance(row.get(key), (int, float))]
        if not measured:
            return rows.append({"goal": goal, "limit": f"≤ {limit}", "met": "not measured"})
        row = max(measured, key=lambda row: row[key])
        met = row[key] <= limit
        rows.append(
            dict(goal=goal, limit=f"≤ {limit}", worst=row[key], where=where(row))
            | dict(met="yes" if met else "no", why="" if met else why(row))
        )

    at = lambda row: f"T = {row['T']}, {row['dtype']}"  # noqa: E731
    floor = lambda row: (  # noqa: E731
        f"floor alone: {row['floor_ms'] / row['mha_ms']:.2f} × MHA; "
        f"{row['ours_share_of_peak']:.2%} of peak"
    )
    add("window attention / MHA, every T", 0.9, window, "ours_over_mha", at, floor)
    add("window attention / floor", 1.5, window, "ours_over_floor", at)
    long = [row for row in window if row.get("T") == 16000]
    add("window attention memory / MHA, T = 16000", 0.1, long, "ours_memory_over_mha", at)
    shares = lambda row: ", ".join(  # noqa: E731
        f"{other['share_of_peak']:.2%}"
        for other in lm
        if other.get("variant") == "lstm" and other.get("dtype") == row["dtype"]
    )
    for form in ("parallel", "cell"):
        add(
            f"LM step / bare LSTM, {form} form",
            1.2,
            [row for row in lm if f"-{form}:" in str(row.get("variant"))],
            "ratio_to_lstm",
            lambda row: f"{row['variant']}, {row['dtype']}",
            lambda row: (
                f"memory in the LSTM's loop; {row['share_of_peak']:.2%} of peak, bare "
                f"LSTM {shares(row)}"
            ),
        )
    floors = {row["dtype"]: row["ratio_to_gru"] for row in am if row.get("layer") == FLOOR_LAYER}
    add(
        "AM-GRU (C = 8) / GRU",
        1.5,
        [row for row in am if row.get("layer") == "AssociativeGRU C=8"],
        "ratio_to_gru",
        lambda row: row["dtype"],
        lambda row: (
            f"floor (memory by stand-ins): {floors[row['dtype']]:.2f} × GRU"
            if row["dtype"] in floors
            else ""
        ),
    )
    return rows


def update(runs, page=RESULTS_PAGE, figure=FIGURE):
    """Writes the GPU blocks of ``page`` (docs/results.rst) and ``figure`` from ``runs``."""
    window = merged_rows(runs, "window_attention")
    blocks = {
        "gpu-goals": goal_rows(runs),
        "gpu-layer-tests": layer_test_rows(runs),
        "gpu-window-attention": window,
        "gpu-window-attention-parts": [row for row in window if "attention_over_floor" in row],
        "gpu-language-model": merged_rows(runs, "language_model"),
        "gpu-associative-memory": merged_rows(runs, "associative_memory"),
        "gpu-snli": merged_rows(runs, "snli"),
        "gpu-heap-write": merged_rows(runs, "heap_write"),
    }
    values = {"peaks": peaks_text(runs), **window_notes(runs)}
    for name, rows in blocks.items():
        write_block(name, rows, values, page, every_column=True)
    names = {
        "ours": "SlidingWindowAttention",
        "floor": "its matrix products alone",
        "mha": "MultiHeadAttention (equal weights)",
    }
    lines = [
        (index, f"{name}, {dtype}", f"{variant}_ms", f"{variant}_buffers_mib", style, subset)
        for index, (variant, name) in enumerate(names.items())
        for dtype, style in (("float32", "-"), ("mixed_bfloat16", "--"))
        for subset in [[row for row in window if row.get("dtype") == dtype]]
    ]
    # One panel above the other, 8.1 inches at 90 dpi: 729 pixels wide, so that the results
    # page's content column shows it at its own size.
    labels = ("ms per training step", "XLA buffers of a step (MiB)", "sequence length T")
    titles = ("time per training step", "working memory of one step")
    return draw(figure, "T", lines, labels, titles, (8.1, 8.0), 90, "x-small", below=True)


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    add_update_docs_option(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    runs = load_runs()
    if args.update_docs:
        update(runs)
    else:
        tables = {table: merged_rows(runs, table) for table in ROW_KEYS}
        print(json.dumps({"layer_tests": layer_test_rows(runs), **tables}, indent=1))


if __name__ == "__main__":
    main()
