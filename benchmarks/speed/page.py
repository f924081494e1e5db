"""The results page's blocks of the speed tables and of the GPU runs (``docs/results.rst``), by
one writer, `write_block`: each block's columns and caption are data (``page.toml``), its rows
and the caption's figures come from the results files. ``python -m benchmarks.speed
--from-results`` rewrites the speed tables' blocks (`write`), ``python -m benchmarks.gpu.results
--update-docs`` the GPU runs'."""

import pathlib
import tomllib

from benchmarks import results_file
from benchmarks.docs_tables import RESULTS_PAGE, columns_of, update_docs
from benchmarks.speed.tables import TABLES, equal_weight_key_dim

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
BLOCKS = tomllib.loads(pathlib.Path(__file__).with_name("page.toml").read_text(encoding="utf-8"))
# The window-attention implementations of the peer comparison, in the order of their colours.
IMPLS = {
    "ours": "SlidingWindowAttention",
    "mha_width": "MultiHeadAttention (sliding window)",
    "seq_self_attention": "SeqSelfAttention",
    "output_only": "eq. (5) matmuls alone",
}


def text(name, key="caption"):
    """The text ``key`` of block ``name``, its line breaks spaces."""
    return " ".join(BLOCKS[name][key].split())


def write_block(name, rows, values, page=RESULTS_PAGE, caption="caption", every_column=False):
    """Writes block ``name`` into ``page``: ``rows`` under the block's columns that some row
    has (``every_column``: all of them), its ``caption`` formatted with ``rows`` and
    ``values``."""
    block, columns = BLOCKS[name], columns_of(text(name, "columns"))
    columns = [(k, h) for k, h in columns if every_column or any(k in row for row in rows)]
    caption = text(name, caption).format(rows=rows, **values)
    footer, after = block.get("footer", ""), block.get("after")
    return update_docs(name, rows, columns, caption, page, footer=footer, insert_after=after)


def draw(path, x, lines, labels, titles, size=(10, 4), dpi=80, legend="small", below=False):
    """A figure of two panels against ``x``: for each ``(colour index, label, time key,
    memory key, style, rows)`` of ``lines``, the rows' numbers under the keys; ``labels``:
    the time's, the memory's and ``x``'s."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=dpi)
    panels = figure.subplots(2, 1) if below else figure.subplots(1, 2)
    for index, label, time_key, memory_key, style, rows in lines:
        for axes, key in zip(panels, (time_key, memory_key)):
            points = [(row[x], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
            if points:  # one colour per line in both panels
                axes.plot(*zip(*sorted(points)), style, marker="o", color=f"C{index}", label=label)
    for axes, label, title in zip(panels, labels, titles):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel(labels[2])
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)
        axes.set_title(title)
    for axes in panels[:1] if below else panels:
        axes.legend(fontsize=legend)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def peers(report, rows, images):
    impls = [impl for impl in IMPLS if any(f"{impl}_ms" in row for row in rows)]
    lines = [
        (i, IMPLS[impl], f"{impl}_ms", f"{impl}_buffers_mib", "-", rows)
        for i, impl in enumerate(IMPLS)
        if impl in impls
    ]
    labels = ("ms per step, XLA", "XLA buffers of a step (MiB)", "sequence length T")
    titles = ("time per forward + backward step", "working memory of one step")
    draw(images / "window_attention_vs_peers.png", "T", lines, labels, titles)
    fragments = ("with_seq_self_attention", "seq_self_attention_buffers")
    sa = "seq_self_attention" in impls
    return rows, {key: text("window-attention-vs-peers", key) if sa else "" for key in fragments}


def dual(report, rows, images):
    memory = "peak_mib" if "dual_peak_mib" in rows[0] else "buffers_mib"
    name = {"peak_mib": "peak", "buffers_mib": "XLA buffers"}[memory]
    lines = [
        (0, "Dual AM-GRU (8 copies)", "dual_ms_per_step", f"dual_{memory}", "-", rows),
        (
            1,
            "LSTM, word-by-word attention",
            "attention_ms_per_step",
            f"attention_{memory}",
            "-",
            rows,
        ),
    ]
    labels = ("ms per hypothesis step", f"{name} MiB", "premise length")
    titles = ("training time per hypothesis step", "peak memory of a training step")
    draw(images / "dual_vs_word_by_word.png", "premise_length", lines, labels, titles)
    return rows, {"memory": text("dual-vs-word-by-word", memory)}


def snli(report, rows, images):
    """A row per memory layer: its cell form and fused loop against the GRU model."""
    kinds, table = {row["kind"]: row for row in rows}, []
    gru = {f"gru_{key}": value for key, value in kinds.get("gru", {}).items()}
    fused_names = dict(fused_loop_ms="median_ms", speedup="speedup", fused_to_gru="ratio_to_gru")
    fused_names.update(gflop_per_step="gflop_per_step", fused_share_of_peak="share_of_peak")
    for kind in ("am_gru", "dual_am_gru"):
        cell, fused = kinds.get(kind, {}), kinds.get(f"{kind} fused_loop", {})
        row = {"kind": kind, "cell_form_ms": cell.get("median_ms"), **gru}
        row["gru_model_ms"] = gru.get("gru_median_ms")
        table.append(row | {key: fused.get(field) for key, field in fused_names.items()})
    return table, {}


def heap(report, rows, images):
    """A row per cache size and policy; the caption gives the training steps of
    ``heap_step``'s results file."""
    step_report, step_rows, step_peak = read_rows("heap_step", report)
    ms = {row["model"]: row for row in step_rows}
    table = [
        {
            "cache_size": row["cache_size"],
            "policy": policy,
            **{f"insert_{c}_ms": row.get(f"{policy}_{c}_ms") for c in ("worst", "random")},
            "read_ms": row.get(f"{policy}_read_ms"),
        }
        for row in rows
        for policy in ("heap", "topk")
    ]
    by_size = {row["cache_size"]: row for row in rows}
    worst = [by_size.get(k, {}).get("heap_worst_ms") for k in (100000, 1000)]
    at_1k = by_size.get(1000, {}).get("heap_over_topk_worst")
    read, write = ms["cache read"], ms["cache read + heap write"]
    return table, {
        "worst": f"{worst[0] / worst[1]:.2f}x" if all(worst) else "not measured",
        "at_1k": f"; at K=1k the exact heap write takes {at_1k:.2f}x the top-k write (worst case)."
        if at_1k
        else ".",
        "step_settings": step_report["settings"],
        "step_peak": step_peak,
        "base": ms["no cache"]["median_ms"],
        "read": read["median_ms"],
        "write": write["median_ms"],
        "read_overhead": 100 * (read["ratio_to_no_cache"] - 1),
        "write_overhead": 100 * (write["ratio_to_no_cache"] - 1),
        "steps": ", ".join(
            f"{name} {row['gflop_per_step']:.2f} GFLOP ({100 * row['share_of_peak']:.0f}%)"
            for name, row in ms.items()
        ),
    }


#: Each table's block, and how its rows and its caption's values are made from the results
#: where it needs more than the settings: ``function(report, rows, images) -> (rows, values)``.
SPEED_BLOCKS = {
    "language_model": (
        "window-attention-speed",
        lambda report, rows, _: (rows, {"vocab_k": report["settings"]["lm_vocab"] // 1000}),
    ),
    "window_peers": ("window-attention-vs-peers", peers),
    "window_attention": (
        "window-attention-floor",
        lambda report, rows, _: (
            rows,
            {"key_dim": equal_weight_key_dim(report["settings"]["width"], 32)},
        ),
    ),
    "lm_kinds": ("lm-throughput", None),
    "lm_equal_parameters": ("lm-throughput-equal-parameters", None),
    "packing": ("lm-packing", None),
    "associative_memory": ("associative-memory-speed", None),
    "dual_vs_word_by_word": ("dual-vs-word-by-word", dual),
    "snli": ("snli-model-step", snli),
    "heap_write": ("heap-cache-speed", heap),
    "attention_wrapper": ("attention-wrapper-speed", None),
    "backends": ("backends-speed", None),
}


def read_rows(table, report=None):
    """``(report, rows, float32 peak)`` of ``table`` from ``report`` or its results file."""
    if report is None or table not in report.get("tables", {}):
        report = results_file.read_or_exit(ROOT / "benchmarks" / "results" / TABLES[table].file)
    return report, report["tables"][table], report.get("peak_gflops", {}).get("float32")


def write(tables, report=None, page=RESULTS_PAGE, images=IMAGES):
    """Writes the blocks of ``tables`` into ``page`` (their figures into ``images``) from
    ``report`` (a run's results) or their results files."""
    for table in [table for table in tables if table in SPEED_BLOCKS]:
        name, make = SPEED_BLOCKS[table]
        report_of, rows, peak = read_rows(table, report)
        rows, values = make(report_of, rows, images) if make else (rows, {})
        cpus = report_of.get("device", {}).get("cpus")
        values.update(s=report_of["settings"], peak=peak, report=report_of, cpus=cpus)
        corpus = report_of.get("corpus") and "caption_corpus" in BLOCKS[name]
        write_block(name, rows, values, page, "caption_corpus" if corpus else "caption")
