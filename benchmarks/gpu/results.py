"""The GPU runs on the results page: reads ``benchmarks/results/gpu/run-*/`` and writes the
tables and the figure of the results page's "On a GPU" section.

Each run folder holds what ``benchmarks/gpu/run.sh`` wrote under ``$OUT`` on the GPU machine
(``device.json``, ``layer_tests.json``, ``speed.json``, ``speed_long.json`` where the run had
that step, ``run.log``), committed as it came back. The runs are read in their number's order:
the layer-test table has one row per run (a later run may rerun what an earlier one left failed
or unrun), and in the speed tables a row a later run measured replaces the same row of an
earlier run (same table, dtype and case). What no run measured stays in the tables with the
reason its run gave.

Usage::

    python -m benchmarks.gpu.results --update-docs
"""

import collections
import json
import pathlib
import re

from benchmarks import ArgumentParser
from benchmarks.docs_tables import RESULTS_PAGE, add_update_docs_option, update_docs
from benchmarks.speed.page import draw
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
# XLA's warning of a slow constant folding, and the time it reports once it is done.
_FOLDING_TOOK = re.compile(r"The operation took ([0-9hms.]+)\s*\nConstant folding")
_RUN_DONE = re.compile(r"\+(\d+)s\] done, status")


def run_number(folder):
    return int(folder.name.rsplit("-", 1)[1])


def load_runs(folder=RUNS):
    """The runs under ``folder`` in order: ``[{"name", "device", "layer_tests", "speed",
    "speeds", "log"}]``, a missing file read as None; ``speeds`` lists the run's speed files
    that exist (``speed.json``, then ``speed_long.json``), ``speed`` is the first."""
    runs = []
    for path in sorted(folder.glob("run-*"), key=run_number):
        run = {"name": path.name}
        for key, file in (
            ("device", "device.json"),
            ("layer_tests", "layer_tests.json"),
            ("speed", "speed.json"),
            ("speed_long", "speed_long.json"),
        ):
            file = path / file
            run[key] = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
        run["speeds"] = [speed for speed in (run["speed"], run.pop("speed_long")) if speed]
        log = path / "run.log"
        run["log"] = log.read_text(encoding="utf-8") if log.is_file() else ""
        runs.append(run)
    return runs


def gpu_name(run):
    devices = (run["device"] or {}).get("devices") or []
    return devices[0]["kind"] if devices else "?"


def _seconds(text):
    """XLA's duration (``1m58.938722243s``, ``8.2s``) in seconds."""
    minutes, _, seconds = text.rpartition("m")
    return 60 * float(minutes or 0) + float(seconds.rstrip("s"))


def longest_constant_folding(log):
    """The longest constant folding XLA reported in a run's log, in seconds, or None."""
    found = [_seconds(match) for match in _FOLDING_TOOK.findall(log)]
    return max(found) if found else None


def whole_run_seconds(log):
    """The seconds ``run.sh`` took from its start to its end, from its log, or None (a run
    that did not end)."""
    found = _RUN_DONE.findall(log)
    return int(found[-1]) if found else None


def failure_kinds(failures):
    """The failures' messages grouped by their first words: ``"13 × ValueError: ...; ..."``."""
    counts = collections.Counter(
        re.sub(r"\s+", " ", failure["message"])[:60].rstrip() for failure in failures
    )
    return "; ".join(f"{n} × {message}" for message, n in counts.most_common())


def layer_test_rows(runs):
    rows = []
    for run in runs:
        tests = run["layer_tests"]
        if tests is None:
            continue
        selection = (
            "rerun of the failed and unrun tests of "
            + pathlib.Path(tests["rerun_from"]).parent.name
            if tests.get("rerun_from")
            else f"{len(tests['files'])} test modules"
        )
        rows.append(
            {
                "run": run["name"],
                "gpu": gpu_name(run),
                "versions": f"JAX {run['device']['jax']}, Keras {run['device']['keras']}",
                "precision": tests["precision"],
                "selection": selection,
                "passed": tests["passed"],
                "failed": tests["failed"] + tests["errors"],
                "skipped": tests["skipped"],
                "not_run": len(tests["not_run"]),
                "seconds": tests["wall_seconds"],
                "failures": failure_kinds(tests["failures"]),
                "xla_flags": tests.get("xla_flags", "not recorded") or "none",
                "run_seconds": whole_run_seconds(run["log"]),
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
            keys = ROW_KEYS[table]
            if any("status" not in row for row in speed["tables"].get(table, [])):
                rows = {key: row for key, row in rows.items() if key[0] != "error"}
            for row in speed["tables"].get(table, []):
                key = tuple(row.get(k) for k in keys)
                if "status" in row and key in rows and "status" not in rows[key]:
                    continue  # a measured row stays
                rows[key] = {**row, "run": run["name"]}
                if "error" in row and "status" not in row:
                    rows[key]["status"] = f"failed: {row['error']}"
            error = speed.get("errors", {}).get(table)
            if error and not speed["tables"].get(table):
                rows.setdefault(
                    ("error", run["name"]), {"status": f"failed: {error}", "run": run["name"]}
                )
    return list(rows.values())


def peaks_text(runs):
    """The matrix-product rates each run measured, as a sentence."""
    parts = []
    for run in runs:
        speed = run["speed"]
        if speed and speed.get("peak_gflops"):
            peaks = speed["peak_gflops"]
            parts.append(
                f"{run['name']} on an {gpu_name(run)}: float32 {peaks['float32'] / 1000:.0f}, "
                f"bfloat16 {peaks['mixed_bfloat16'] / 1000:.0f}"
                + (
                    f", float32 at 'highest' precision "
                    f"{speed['peak_gflops_float32_highest'] / 1000:.0f}"
                    if speed.get("peak_gflops_float32_highest")
                    else ""
                )
                + " TFLOP/s"
            )
    return "; ".join(parts)


def folding_off_text(runs):
    """A sentence naming the rows measured with XLA's constant folding off, or ''."""
    parts = []
    for run in runs:
        for speed in run["speeds"]:
            flags = (speed.get("device") or {}).get("xla_flags") or ""
            if "constant_folding" in flags:
                lengths = (speed.get("settings") or {}).get("lengths")
                parts.append(f"{run['name']}, T = {', '.join(map(str, lengths))}")
    if not parts:
        return ""
    return (
        " Rows compiled with XLA's constant folding off (``XLA_FLAGS="
        "--xla_disable_hlo_passes=constant_folding``, in a process of their own, so that "
        "MultiHeadAttention's causal mask is computed when the step runs instead of "
        "folded for minutes at compile time): " + "; ".join(parts) + "."
    )


def stalled_compiles(runs):
    """A sentence on the runs whose log shows XLA folding constants for minutes, or ''."""
    parts = []
    for run in runs:
        longest = longest_constant_folding(run["log"])
        if longest is not None and longest >= 60:
            asked = (run["speed"] or {}).get("settings", {}).get("lengths")
            parts.append(
                f"{run['name']} (lengths {asked}): one constant folding took "
                f"{longest:.0f} s (``{run['name']}/run.log``)"
            )
    if not parts:
        return ""
    return (
        " Rows missing a time at long T: a run that measured them ended while XLA was "
        "still folding constants in compiling their steps, an int32 reduce-window over a "
        "1 × T × T constant by its shape (the shape of MultiHeadAttention's causal mask, "
        "which Keras builds from cumulative sums): " + "; ".join(parts) + "."
    )


def _worst(rows, key):
    """The row of ``rows`` with the largest number under ``key``, or None."""
    measured = [row for row in rows if isinstance(row.get(key), (int, float))]
    return max(measured, key=lambda row: row[key]) if measured else None


def goal_rows(runs):
    """One row per goal of the GPU run: its limit, the worst measured value with where it
    was measured, whether it is met, and the measured reasons beside it (floors, shares of
    the matrix-product peak)."""
    window = merged_rows(runs, "window_attention")
    lm = merged_rows(runs, "language_model")
    am = merged_rows(runs, "associative_memory")
    goals = []

    def add(goal, limit, row, key, where, why=""):
        if row is None:
            goals.append({"goal": goal, "limit": f"≤ {limit}", "met": "not measured"})
            return
        goals.append(
            {
                "goal": goal,
                "limit": f"≤ {limit}",
                "worst": row[key],
                "where": where(row),
                "met": "yes" if row[key] <= limit else "no",
                "why": why(row) if why and row[key] > limit else "",
            }
        )

    at = lambda row: f"T = {row['T']}, {row['dtype']}"  # noqa: E731
    add(
        "window attention / MHA, every T",
        0.9,
        _worst(window, "ours_over_mha"),
        "ours_over_mha",
        at,
        lambda row: (
            f"floor alone: {row['floor_ms'] / row['mha_ms']:.2f} × MHA; "
            f"{row['ours_share_of_peak']:.2%} of peak"
        ),
    )
    add("window attention / floor", 1.5, _worst(window, "ours_over_floor"), "ours_over_floor", at)
    add(
        "window attention memory / MHA, T = 16000",
        0.1,
        _worst([row for row in window if row.get("T") == 16000], "ours_memory_over_mha"),
        "ours_memory_over_mha",
        at,
    )
    for form in ("parallel", "cell"):
        add(
            f"LM step / bare LSTM, {form} form",
            1.2,
            _worst([row for row in lm if f"-{form}:" in str(row.get("variant"))], "ratio_to_lstm"),
            "ratio_to_lstm",
            lambda row: f"{row['variant']}, {row['dtype']}",
            lambda row: (
                f"memory in the LSTM's loop; {row['share_of_peak']:.2%} of peak, bare "
                "LSTM "
                + ", ".join(
                    f"{other['share_of_peak']:.2%}"
                    for other in lm
                    if other.get("variant") == "lstm" and other.get("dtype") == row["dtype"]
                )
            ),
        )
    floors = {row["dtype"]: row for row in am if row.get("layer") == FLOOR_LAYER}
    add(
        "AM-GRU (C = 8) / GRU",
        1.5,
        _worst([row for row in am if row.get("layer") == "AssociativeGRU C=8"], "ratio_to_gru"),
        "ratio_to_gru",
        lambda row: row["dtype"],
        lambda row: (
            f"floor (memory by stand-ins): {floors[row['dtype']]['ratio_to_gru']:.2f} × GRU"
            if row["dtype"] in floors
            else ""
        ),
    )
    return goals


def draw_window_figure(rows, path=FIGURE):
    """Time per training step and XLA buffers against T, one line per variant and dtype."""
    names = {
        "ours": "SlidingWindowAttention",
        "floor": "its matrix products alone",
        "mha": "MultiHeadAttention (equal weights)",
    }
    lines = [
        (index, f"{name}, {dtype}", f"{variant}_ms", f"{variant}_buffers_mib", style, subset)
        for index, (variant, name) in enumerate(names.items())
        for dtype, style in (("float32", "-"), ("mixed_bfloat16", "--"))
        for subset in [[row for row in rows if row.get("dtype") == dtype]]
    ]
    # One panel above the other, 8.1 inches at 90 dpi: 729 pixels wide, so that the results
    # page's content column shows it at its own size.
    labels = ("ms per training step", "XLA buffers of a step (MiB)", "sequence length T")
    titles = ("time per training step", "working memory of one step")
    return draw(path, "T", lines, labels, titles, (8.1, 8.0), 90, "x-small", below=True)


def update(runs, page=RESULTS_PAGE, figure=FIGURE):
    """Writes the GPU blocks of ``page`` (docs/results.rst) and ``figure`` from ``runs``."""
    update_docs(
        "gpu-goals",
        goal_rows(runs),
        "goal: goal; limit: limit; worst: worst measured; where: where; met: met; "
        "why: measured beside it",
        "The GPU run's goals against the worst value the runs measured (the tables below), "
        "and, for a goal missed, what was measured beside it that says why: a floor is the "
        "same step with only its matrix products (window attention) or with the memory's "
        "reads and writes by elementwise stand-ins (AM-GRU); share of peak: the step's "
        "matrix-product arithmetic over its time, against the rate measured in the same run.",
        page=page,
    )
    update_docs(
        "gpu-layer-tests",
        layer_test_rows(runs),
        "run: run; gpu: GPU; versions: versions; precision: matmul precision; "
        "selection: tests; passed: passed; failed: failed; skipped: skipped; "
        "not_run: not run (time limit); seconds: tests (s); "
        "failures: failures, by message; xla_flags: the tests' XLA flags; "
        "run_seconds: whole run (s)",
        "The layers' tests on a GPU, Keras's JAX backend (``benchmarks/gpu/layer_tests.py``): "
        "each layer's test module (its Keras layer-protocol suites, NumPy-reference "
        "exactness tests and mechanism tests), with float32 matrix products "
        "at JAX's 'highest' precision (no TF32), under a time limit; skipped: the tests of "
        "TensorFlow-only parts. A rerun runs only what an earlier run left failed or unrun. "
        "The tests' XLA flags: those ``run.sh`` set for them (``--xla_gpu_autotune_level=0 "
        "--xla_gpu_enable_triton_gemm=false``: compiling without autotuning, the matrix "
        "products in cuBLAS). Whole run: ``run.sh`` from its start to its end, every step "
        "(``run.log``). "
        "Written by ``python -m benchmarks.gpu.results --update-docs``.",
        page=page,
    )
    window = merged_rows(runs, "window_attention")
    update_docs(
        "gpu-window-attention",
        window,
        "dtype: dtype; T: T; ours_ms: ours (ms); floor_ms: floor (ms); mha_ms: MHA (ms); "
        "ours_over_floor: ours / floor; ours_over_mha: ours / MHA; "
        "ours_buffers_mib: ours buffers (MiB); mha_buffers_mib: MHA buffers (MiB); "
        "ours_share_of_peak: ours share of peak; "
        "floor_share_of_peak: floor share of peak; status: not measured",
        "One SGD training step (``jax.jit``) of `SlidingWindowAttention(window=10, "
        "attention_units=32)` followed by `Dense(300)` on [8, T, 300], against its floor (its "
        "four matrix products alone) and Keras's `keras.layers.MultiHeadAttention` with "
        "`sliding_window` and a causal mask at equal weights (``python -m benchmarks.speed "
        "--device gpu``), medians of 20 "
        "interleaved steps; ratios are medians of per-step ratios. Buffers: the temporary "
        "memory XLA plans for the step. Share of peak: the step's matrix-product arithmetic "
        "over its time, against the matrix-product rate of the same dtype measured in the "
        f"same run ({peaks_text(runs)}). Goals: ours / MHA ≤ 0.9 at every T, ours / floor "
        "≤ 1.5, and at T = 16000 ours' buffers ≤ a tenth of MHA's."
        + folding_off_text(runs)
        + stalled_compiles(runs),
        footer=".. image:: images/gpu_window_attention.png\n"
        "   :alt: time per step and XLA buffers against sequence length, on a GPU",
        page=page,
    )
    draw_window_figure(window, figure)
    update_docs(
        "gpu-window-attention-parts",
        [row for row in window if "attention_over_floor" in row],
        "dtype: dtype; T: T; ours_over_floor: ours / floor; "
        "weighted_sum_over_floor: weighted sum; scores_over_floor: scores; "
        "attention_over_floor: both; rest_over_floor: rest",
        "Where ours spends its time above the floor on a GPU, in units of the floor's time, "
        "from the same runs: ours with parts of the attention replaced by elementwise "
        "stand-ins that read the same inputs (``PARTS`` of ``benchmarks/speed/tables.py``), "
        "timed interleaved with the rows above. A part's cost is the time its "
        "stand-in saves (the median over the rounds of (ours - ours without it) / floor); "
        "'both' replaces the weighted sum (eq. 4) and the scores (eqs. 2-3) together, and "
        "'rest' is what ours without both still costs above the floor. The parts overlap "
        "(XLA fuses across them), so they need not add up.",
        page=page,
        insert_after="gpu-window-attention",
    )
    update_docs(
        "gpu-language-model",
        merged_rows(runs, "language_model"),
        "dtype: dtype; variant: variant; cudnn: LSTM use_cudnn; "
        "median_ms: median step (ms); ratio_to_lstm: × bare LSTM; "
        "share_of_peak: share of peak; status: not measured",
        "One training step of the LSTM language model of the window-attention speed table "
        "(batch 64, 20 steps, hidden 300, 10k-word softmax), each memory variant against the "
        "bare LSTM, ``jax.jit``. Goal: at most 1.2× the bare LSTM.",
        page=page,
    )
    update_docs(
        "gpu-associative-memory",
        merged_rows(runs, "associative_memory"),
        "dtype: dtype; layer: layer; ms_per_time_step: ms / time step; "
        "ratio_to_gru: × GRU; gflop_per_step: GFLOP/step; share_of_peak: share of peak; "
        "status: not measured",
        "Training step per time step (batch 50, 100 units, T = 30, a `Dense(1)` head), "
        "`AssociativeGRU` (Keras's loop on JAX) and ``keras.layers.RNN(AssociativeGRUCell)`` "
        "with 8 copies against ``keras.layers.GRU(100)``, ``jax.jit``, medians of 20 "
        "interleaved steps. The floor row is `AssociativeGRU` with the holographic key "
        "copies, read and write replaced by elementwise stand-ins that read the same inputs "
        "(``holographic_stand_ins`` of ``benchmarks/speed/tables.py``): the loop, "
        "the key, gate and candidate products and everything between them, without the "
        "memory's permutations, reads and writes. GFLOP/step: the products with weight "
        "matrices (the memory's permutations, reads and writes left out). Goal: the AM-GRU "
        "at most 1.5× the GRU.",
        page=page,
    )
    update_docs(
        "gpu-snli",
        merged_rows(runs, "snli"),
        "dtype: dtype; kind: layer 1; median_ms: median step (ms); "
        "ratio_to_gru: × GRU model; gflop_per_step: GFLOP/step; "
        "share_of_peak: share of peak; status: not measured",
        "The SNLI model's training step (batch 50, 100 units, 8 copies, 100-d embeddings, "
        "premise 25 / hypothesis 15 tokens), layer 1 the AM-GRU or the Dual AM-GRU against "
        "the same model with a GRU, ``jax.jit``, medians of 20 interleaved steps.",
        page=page,
    )
    update_docs(
        "gpu-heap-write",
        merged_rows(runs, "heap_write"),
        "dtype: dtype; cache_size: K; heap_worst_ms: heap, all enter (ms); "
        "topk_worst_ms: top-k, all enter (ms); heap_random_ms: heap, random (ms); "
        "topk_random_ms: top-k, random (ms); status: not measured",
        "`HeapCacheAttention.insert` of 64 states into a full cache of K, the heap write "
        "against the top-k write: a batch that beats every cached state, and a random one.",
        page=page,
    )


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
        print(
            json.dumps(
                {
                    "layer_tests": layer_test_rows(runs),
                    **{table: merged_rows(runs, table) for table in ROW_KEYS},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
