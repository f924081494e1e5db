"""The results page's blocks of the speed tables (`write`) and of the GPU runs (`write_gpu`),
their columns and captions from ``page.toml``, their rows and figures from the results files."""

import collections
import pathlib
import re
import tomllib

from benchmarks import RESULTS, ROOT, results_file
from benchmarks.docs_tables import RESULTS_PAGE, columns_of, update_docs
from benchmarks.speed.tables import FLOOR_LAYER, PALLAS_FLOOR, TABLES, equal_weight_key_dim

IMAGES = ROOT / "docs" / "images"
GPU_RUNS, GPU_FIGURE = RESULTS / "gpu", IMAGES / "gpu_window_attention.png"
BLOCKS = tomllib.loads(pathlib.Path(__file__).with_name("page.toml").read_text(encoding="utf-8"))
# The window-attention variants of the figure, in the order of their colours.
IMPLS = dict(ours="SlidingWindowAttention", floor="its matrix products alone")
IMPLS |= dict(mha="MultiHeadAttention, equal weights", mha_width="MultiHeadAttention, equal width")


def text(name, key="caption"):  # its line breaks spaces
    return " ".join(BLOCKS[name][key].split())


def write_block(name, rows, values, page=RESULTS_PAGE, every_column=False):
    """Writes block ``name``: ``rows`` under its columns that some row has (or ``every_column``,
    but ``backend``), its caption formatted with ``rows`` and ``values``."""
    block, columns = BLOCKS[name], columns_of(text(name, "columns"))
    shown = lambda key: every_column and key != "backend"  # noqa: E731  (JAX's rows have none)
    columns = [(k, h) for k, h in columns if shown(k) or any(k in row for row in rows)]
    caption = text(name).format(rows=rows, **values)
    return update_docs(name, rows, columns, caption, page, footer=block.get("footer", ""))


def draw(path, x, lines, labels, titles, size=(10, 4), dpi=80, legend="small", below=False):
    """Two panels against ``x`` of ``lines``, ``(colour, label, time key, memory key, style,
    rows)`` each; ``labels``: the time's, the memory's and ``x``'s."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=dpi)
    panels = figure.subplots(2, 1) if below else figure.subplots(1, 2)
    for index, label, time_key, memory_key, style, rows in lines:
        for axes, key in zip(panels, (time_key, memory_key)):
            points = [(row[x], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
            if points:  # one colour per line in both panels
                axes.plot(*zip(*sorted(points)), style, marker="o", color=f"C{index}", label=label)
    for axes, label, title in zip(panels, labels, titles):
        axes.set(xscale="log", yscale="log", xlabel=labels[2], ylabel=label, title=title)
        axes.grid(True, which="both", alpha=0.3)
    for axes in panels[:1] if below else panels:
        axes.legend(fontsize=legend)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def window(report, rows, images):
    lines = [(i, IMPLS[m], f"{m}_ms", f"{m}_buffers_mib", "-", rows) for i, m in enumerate(IMPLS)]
    labels = ("ms per step, XLA", "XLA buffers of a step (MiB)", "sequence length T")
    titles = ("time per training step", "working memory of one step")
    draw(images / "window_attention.png", "T", lines, labels, titles)
    return rows, {}


def dual(report, rows, images):
    names = {"dual": "Dual AM-GRU (8 copies)", "attention": "LSTM, word-by-word attention"}
    lines = [
        (i, names[k], f"{k}_ms_per_step", f"{k}_buffers_mib", "-", rows)
        for i, k in enumerate(names)
    ]
    labels = ("ms per hypothesis step", "XLA buffers (MiB)", "premise length")
    titles = ("training time per hypothesis step", "working memory of a training step")
    draw(images / "dual_vs_word_by_word.png", "premise_length", lines, labels, titles)
    return rows, {}


BACKEND_SIDES = dict(tensorflow="TensorFlow", jax="JAX", torch="torch")
BACKEND_SIDES["torch_compile"] = "torch.compile"


def backends(report, rows, images):
    """The caption's goals, met or not per backend, and the cost of Keras's generic loop."""
    by_case = {row["case"]: row for row in rows}

    def listed(ratios, goal):  # each backend's ratio, and where it meets the goal
        met = ", ".join(n for s, n in BACKEND_SIDES.items() if 0 < (ratios[s] or 0) <= goal)
        shown = ", ".join(f"{n} {ratios[s]:.2f}" for s, n in BACKEND_SIDES.items() if ratios[s])
        return shown and f"{shown} (met on {met or 'none'})"

    gru = {s: by_case.get("am_gru", {}).get(f"{s}_over_baseline") for s in BACKEND_SIDES}
    parallel = [by_case[case] for case in ("lm_window_parallel", "lm_ngram_parallel")]
    worst = {s: max(row.get(f"{s}_over_baseline") or 0 for row in parallel) for s in BACKEND_SIDES}
    goals = f"AM-GRU / GRU: {listed(gru, 1.5) or 'not measured'}; parallel forms / LSTM, the "
    goals += f"worst: {listed(worst, 1.2) or 'none'}."
    torch = {c: by_case.get(c, {}).get("torch_ms") for c in ("am_gru", "gru_cell_rnn", "gru")}
    loop = torch["gru_cell_rnn"] and torch["gru"] and torch["gru_cell_rnn"] / torch["gru"]
    am = torch["am_gru"] and torch["gru_cell_rnn"] and torch["am_gru"] / torch["gru_cell_rnn"]
    am_missed, lm_missed = (gru["torch"] or 0) > 1.5, worst["torch"] > 1.2
    missed = "the AM-GRU's goal is" if am_missed else "the language models' goal is"
    missed = "both goals are" if am_missed and lm_missed else missed
    found = dict(missed=missed, gru_loop=f"{loop or 0:.2f}", am_over_loop=f"{am or 0:.2f}")
    why = (am_missed or lm_missed) and loop and am and text("backends-speed", "why_torch")
    return rows, dict(goals=goals, why=(why or "").format(**found))


#: Each table's block.
SPEED_BLOCKS = dict(language_model="window-attention-speed")
SPEED_BLOCKS |= dict(window_attention="window-attention-floor")
SPEED_BLOCKS |= dict(lm_equal_parameters="lm-throughput-equal-parameters", packing="lm-packing")
SPEED_BLOCKS |= dict(associative_memory="associative-memory-speed")
SPEED_BLOCKS |= dict(dual_vs_word_by_word="dual-vs-word-by-word", snli="snli-model-step")
SPEED_BLOCKS |= dict(heap_write="heap-cache-speed", heap_step="heap-cache-step")
SPEED_BLOCKS |= dict(attention_wrapper="attention-wrapper-speed")
SPEED_BLOCKS |= dict(backends="backends-speed")
#: How a block's rows and caption's values are made from the results where it needs more than
#: the settings: ``function(report, rows, images) -> (rows, values)``.
MAKERS = dict(window_attention=window, dual_vs_word_by_word=dual, backends=backends)


def read_rows(table, report=None):
    """``(report, rows, float32 peak)`` of ``table`` from ``report`` or its results file."""
    if report is None or table not in report.get("tables", {}):
        report = results_file.read_or_exit(RESULTS / TABLES[table].file)
    return report, report["tables"][table], report.get("peak_gflops", {}).get("float32")


def write(tables, report=None, page=RESULTS_PAGE, images=IMAGES):
    """Writes ``tables``' blocks in ``page``, figures in ``images``, from ``report`` or files."""
    for table in [table for table in tables if table in SPEED_BLOCKS]:
        name, make = SPEED_BLOCKS[table], MAKERS.get(table)
        report_of, rows, peak = read_rows(table, report)
        rows, values = make(report_of, rows, images) if make else (rows, {})
        s, cpus = report_of["settings"], report_of.get("device", {}).get("cpus")
        vocab_k = s.get("lm_vocab", 0) // 1000
        values.update(s=s, peak=peak, report=report_of, cpus=cpus, vocab_k=vocab_k)
        values.setdefault("key_dim", s.get("width") and equal_weight_key_dim(s["width"], 32))
        write_block(name, rows, values, page)


# The GPU runs: what tells a row of each speed table apart from the others, beside its dtype.
ROW_KEYS = dict(window_attention="T", language_model="variant", associative_memory="layer")
ROW_KEYS.update(snli="kind", heap_write="cache_size")


def load_runs(folder=GPU_RUNS):
    """The runs under ``folder`` in their number's order (a missing file None), the rows of a
    run on another backend than JAX with its ``backend``."""
    runs = []
    for path in sorted(folder.glob("run-*"), key=lambda path: int(path.name.split("-")[1])):
        log = path / "run.log"
        run = {"name": path.name, "log": log.read_text(encoding="utf-8") if log.is_file() else ""}
        for key in ("device", "layer_tests", "speed", "speed_long"):
            run[key] = results_file.read(path / f"{key}.json")
        run["speeds"] = [speed for speed in (run["speed"], run.pop("speed_long")) if speed]
        for speed in run["speeds"]:  # a run on torch: its rows say so (JAX's: the default)
            for rows in speed["tables"].values() if "torch" in speed.get("device", {}) else ():
                for row in rows:
                    row["backend"] = "torch"
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
        messages = (re.sub(r"\s+", " ", f["message"])[:60].rstrip() for f in tests["failures"])
        counts = collections.Counter(messages)
        done = re.findall(r"\+(\d+)s\] done, status", run["log"])
        rerun = tests.get("rerun_from") and pathlib.Path(tests["rerun_from"]).parent.name
        row = dict(run=run["name"], gpu=gpu_name(run), precision=tests["precision"])
        backend = run["device"].get("backend", run["device"].get("keras_backend", "jax"))
        if backend == "torch" and "TF32" not in row["precision"]:  # before torch had a setting
            row["precision"] = "PyTorch's default: cuDNN's LSTM and GRU in TF32"
        version = run["device"].get(backend, run["device"].get("jax"))
        name = dict(jax="JAX").get(backend, backend)
        row["versions"] = f"{name} {version}, Keras {run['device']['keras']}"
        row["selection"] = f"rerun of the failed and unrun tests of {rerun}" if rerun else None
        row["selection"] = row["selection"] or f"{len(tests['files'])} test modules"
        row |= dict(passed=tests["passed"], failed=tests["failed"] + tests["errors"])
        row |= dict(skipped=tests["skipped"], not_run=len(tests["not_run"]))
        row |= dict(seconds=tests["wall_seconds"], run_seconds=int(done[-1]) if done else None)
        row["failures"] = "; ".join(f"{n} × {message}" for message, n in counts.most_common())
        rows.append(row | {"xla_flags": tests.get("xla_flags", "not recorded") or "none"})
    return rows


def merged_rows(runs, table):
    """The rows of ``table`` over the runs, a later run's measured row replacing an earlier's; a
    table that failed gives a row with its error until a later run measures it."""
    rows = {}
    for run in runs:
        for speed in run["speeds"]:
            found = speed["tables"].get(table, [])
            if any("status" not in row for row in found):
                rows = {key: row for key, row in rows.items() if key[0] != "error"}
            for row in found:
                key = (row.get("backend"), row.get("dtype"), row.get(ROW_KEYS[table]))
                if "status" in row and key in rows and "status" not in rows[key]:
                    continue  # a measured row stays
                rows[key] = {**row, "run": run["name"]}
                if "error" in row and "status" not in row:
                    rows[key]["status"] = f"failed: {row['error']}"
            error = speed.get("errors", {}).get(table)
            if error and not found:
                failed = {"status": f"failed: {error}", "run": run["name"]}
                failed |= {"backend": "torch"} if "torch" in speed.get("device", {}) else {}
                rows.setdefault(("error", run["name"]), failed)
    return list(rows.values())


def peaks_text(runs):
    """The matrix-product rates each run measured, as a sentence."""
    parts = []
    for run in runs:
        if (speed := run["speed"]) and (peaks := speed.get("peak_gflops")):
            highest = speed.get("peak_gflops_float32_highest")
            highest = f", float32 at 'highest' precision {highest / 1000:.0f}" if highest else ""
            rates = f"float32 {peaks['float32'] / 1000:.0f}, "
            rates += f"bfloat16 {peaks['mixed_bfloat16'] / 1000:.0f}"
            parts.append(f"{run['name']} on an {gpu_name(run)}: {rates}{highest} TFLOP/s")
    return "; ".join(parts)


def window_notes(runs):
    """The caption's sentences on runs with XLA's constant folding off, or stalled in it."""
    folding_off, stalled = [], []
    for run in runs:
        for speed in run["speeds"]:
            if "constant_folding" in ((speed.get("device") or {}).get("xla_flags") or ""):
                lengths = (speed.get("settings") or {}).get("lengths")
                folding_off.append(f"{run['name']}, T = {', '.join(map(str, lengths))}")
        # XLA's warning of a slow constant folding gives the time it took once it is done.
        took = re.findall(r"The operation took ([0-9hms.]+)\s*\nConstant folding", run["log"])
        split = [t.rpartition("m") for t in took]
        seconds = [60 * float(m or 0) + float(s.rstrip("s")) for m, _, s in split]
        if seconds and max(seconds) >= 60:
            asked, name = (run["speed"] or {}).get("settings", {}).get("lengths"), run["name"]
            took = f"one constant folding took {max(seconds):.0f} s (``{name}/run.log``)"
            stalled.append(f"{name} (lengths {asked}): {took}")
    found = dict(folding_off=folding_off, stalled=stalled)
    note = lambda key: text("gpu-window-attention", key).format(runs="; ".join(found[key]))  # noqa: E731
    return {key: f" {note(key)}" if parts else "" for key, parts in found.items()}


def goal_rows(runs):
    """A row per goal of the GPU run and backend (JAX's, then the others' with their name): its
    limit, the worst measured value and where, whether it is met, and what was measured beside
    it (floors, shares of peak)."""
    tables = [merged_rows(runs, t) for t in list(ROW_KEYS)[:3]]
    found = {row.get("backend") for rows in tables for row in rows}
    rows = []
    for backend in [None, *sorted(found - {None})]:
        of = ([row for row in r if row.get("backend") == backend] for r in tables)
        rows += backend_goal_rows(*of, f" on {backend}" if backend else "")
    return rows


def backend_goal_rows(window, lm, am, on):
    """`goal_rows` of one backend's rows; ``on`` ends each goal's name."""
    rows, layer = [], lambda name: [row for row in am if row.get("layer") == name]  # noqa: E731

    def add(goal, limit, candidates, key, where, why=lambda row: ""):
        measured = [row for row in candidates if isinstance(row.get(key), (int, float))]
        rows.append({"goal": goal + on, "limit": f"≤ {limit}", "met": "not measured"})
        stopped = [f"{row['run']}: {row['status']}" for row in candidates if "status" in row]
        rows[-1]["why"] = "; ".join(stopped)  # rows not measured, and why
        if measured:
            row = max(measured, key=lambda row: row[key])
            rows[-1] |= dict(worst=row[key], where=where(row), met="yes", why="")
            if row[key] > limit:
                rows[-1] |= dict(met="no", why=why(row))

    def lm_why(row):
        lstm = [o for o in lm if o.get("variant") == "lstm" and o.get("dtype") == row["dtype"]]
        shares = ", ".join(f"{other['share_of_peak']:.2%}" for other in lstm)
        return f"memory in the LSTM's loop; {row['share_of_peak']:.2%} of peak, bare LSTM {shares}"

    def floor_of(name, text):  # a row's words on the floor ``name`` of its dtype
        found = {row["dtype"]: row["ratio_to_gru"] for row in layer(name)}
        return lambda row: "" if (ratio := found.get(row["dtype"])) is None else text.format(ratio)

    at = lambda row: f"T = {row['T']}, {row['dtype']}"  # noqa: E731
    mha = lambda row: f"floor alone: {row['floor_ms'] / row['mha_ms']:.2f} × MHA; "  # noqa: E731
    floor = lambda row: f"{mha(row)}{row['ours_share_of_peak']:.2%} of peak"  # noqa: E731
    add("window attention / MHA, every T", 0.9, window, "ours_over_mha", at, floor)
    add("window attention / floor", 1.5, window, "ours_over_floor", at)
    long = [row for row in window if row.get("T") == 16000]
    add("window attention memory / MHA, T = 16000", 0.1, long, "ours_memory_over_mha", at)
    variant = lambda row: f"{row['variant']}, {row['dtype']}"  # noqa: E731
    for form in ("parallel", "cell"):
        forms = [row for row in lm if f"-{form}:" in str(row.get("variant"))]
        add(f"LM step / bare LSTM, {form} form", 1.2, forms, "ratio_to_lstm", variant, lm_why)
    dtype, c8 = lambda row: row["dtype"], layer("AssociativeGRU C=8")  # noqa: E731
    c8_fused = "AssociativeGRU C=8 fused_loop"
    floor = floor_of(FLOOR_LAYER, "floor (memory by stand-ins): {:.2f} × GRU")
    add("AM-GRU (C = 8) / GRU", 1.5, c8, "ratio_to_gru", dtype, floor)
    if on:  # the Pallas kernels are JAX's
        return rows
    floor, kernels = floor_of(PALLAS_FLOOR, "Pallas loop floor: {:.2f} × GRU"), layer(c8_fused)
    kernels += [row for row in am if c8_fused in row.get("status", "") and "layer" not in row]
    add("AM-GRU Pallas kernels (C = 8) / GRU", 1.0, kernels, "ratio_to_gru", dtype, floor)
    return rows


def write_gpu(runs, page=RESULTS_PAGE, figure=GPU_FIGURE):
    """Writes the GPU blocks of ``page`` and their ``figure`` from ``runs`` (`load_runs`)."""
    # A block per table of `ROW_KEYS`, in its order.
    names = ("gpu-window-attention", "gpu-language-model", "gpu-associative-memory", "gpu-snli")
    blocks = {name: merged_rows(runs, t) for name, t in zip((*names, "gpu-heap-write"), ROW_KEYS)}
    window = blocks["gpu-window-attention"]
    blocks |= {"gpu-goals": goal_rows(runs), "gpu-layer-tests": layer_test_rows(runs)}
    blocks["gpu-window-attention-parts"] = [row for row in window if "attention_over_floor" in row]
    for name, rows in blocks.items():  # JAX's rows named beside another backend's
        if name != "gpu-goals" and any("backend" in row for row in rows):
            blocks[name] = [{"backend": "jax", **row} for row in rows]
    values = {"peaks": peaks_text(runs), **window_notes(runs)}
    for name, rows in blocks.items():
        write_block(name, rows, values, page, every_column=True)
    lines = [
        (index, f"{name}, {dtype}", f"{variant}_ms", f"{variant}_buffers_mib", style, subset)
        for index, (variant, name) in enumerate(list(IMPLS.items())[:3])
        for dtype, style in (("float32", "-"), ("mixed_bfloat16", "--"))
        for subset in [[row for row in window if row.get("dtype") == dtype]]
    ]
    # One panel above the other, 8.1 inches at 90 dpi: 729 pixels wide, so that the results
    # page's content column shows it at its own size.
    labels = ("ms per training step", "XLA buffers of a step (MiB)", "sequence length T")
    titles = ("time per training step", "working memory of one step")
    return draw(figure, "T", lines, labels, titles, (8.1, 8.0), 90, "x-small", below=True)
