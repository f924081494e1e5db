"""The speed tables' blocks of the results page (``docs/results.rst``) and their figures,
written from the tables' results files (`benchmarks.docs_tables`): ``python -m
benchmarks.speed --from-results`` rewrites them all from ``benchmarks/results/``."""

import functools
import pathlib
import types

from benchmarks import results_file
from benchmarks.docs_tables import RESULTS_PAGE, columns_of, update_docs
from benchmarks.speed.tables import equal_weight_key_dim

ROOT = pathlib.Path(__file__).resolve().parents[2]
IMAGES = ROOT / "docs" / "images"
# The window-attention implementations of the peer comparison, in the order of their colours.
IMPLS = {
    "ours": "SlidingWindowAttention",
    "mha_width": "MultiHeadAttention (sliding window)",
    "seq_self_attention": "SeqSelfAttention",
    "output_only": "eq. (5) matmuls alone",
}
PEAK = (
    "share of peak: that over the step's time, against this machine's float32 "
    "matrix-product rate measured in the same run"
)


def present(rows, columns):
    """``columns`` less those no row has."""
    return [(key, header) for key, header in columns_of(columns) if any(key in r for r in rows)]


def label_length_axes(time_axes, time_label, memory_axes, memory_label, x_label):
    """Two panels against a length: both axes logarithmic, a grid, their labels."""
    for axes, label in ((time_axes, time_label), (memory_axes, memory_label)):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel(x_label)
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)


def draw(path, x, lines, labels, titles, size=(10, 4), dpi=80, legend="small", below=False):
    """A figure of two panels against ``x``: for each ``(colour index, label, time key,
    memory key, style, rows)`` of ``lines``, the rows' numbers under the keys; ``labels``:
    the time's, the memory's and ``x``'s."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=dpi)
    time_axes, memory_axes = figure.subplots(2, 1) if below else figure.subplots(1, 2)
    for index, label, time_key, memory_key, style, rows in lines:
        for axes, key in ((time_axes, time_key), (memory_axes, memory_key)):
            points = [(row[x], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
            if points:  # one colour per line in both panels
                axes.plot(*zip(*sorted(points)), style, marker="o", color=f"C{index}", label=label)
    label_length_axes(time_axes, labels[0], memory_axes, labels[1], labels[2])
    time_axes.set_title(titles[0])
    memory_axes.set_title(titles[1])
    time_axes.legend(fontsize=legend)
    if not below:
        memory_axes.legend(fontsize=legend)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def lm_block(out, report, rows, s, peak):
    out.update(
        "window-attention-speed",
        rows,
        "variant: variant; median_ms: median step (ms); ratio_to_lstm: × bare LSTM; "
        "gflop_per_step: GFLOP/step; share_of_peak: share of matmul peak",
        f"One training step of an LSTM language model (batch {s['lm_batch']}, "
        f"{s['lm_steps']} steps, hidden {s['lm_hidden']}, {s['lm_vocab'] // 1000}k-word "
        f"softmax, {s['step']}), median of {s['rounds']} interleaved steps. Targets (L = 10): "
        "parallel ≤ 1.10×, cell form ≤ 1.25× the bare LSTM. GFLOP/step: the products with "
        f"weight matrices (6 × their parameters outside the embedding, per token); {PEAK} "
        f"({peak:.1f} GFLOP/s). The row ``eqs (2)-(4) alone``, timed with the others, is what "
        "the parallel form adds besides weight products: the scores' tanh over [64, 20, L, "
        "300] (the attention width is the key's), the window softmax and the weighted sum, "
        "forward and backward, on streams already projected. The parallel form's weight "
        "products alone are the GFLOP ratio above the LSTM's; this row is the rest.",
    )


def peers_block(out, report, rows, s, peak):
    columns = [
        ("T", "T"),
        ("rounds", "timed steps"),
        ("ours_ms", "ours XLA (ms)"),
        ("ours_no_xla_ms", "ours no XLA (ms)"),
    ]
    impls = [impl for impl in list(IMPLS)[1:] if any(f"{impl}_ms" in row for row in rows)]
    for impl in impls:
        columns += [
            (f"{impl}_ms", f"{IMPLS[impl]} XLA (ms)"),
            (f"{impl}_no_xla_ms", "no XLA (ms)"),
            (f"ours_over_{impl}", "ours / it (XLA)"),
        ]
    columns.append(("ours_buffers_mib", "ours XLA buffers (MiB)"))
    columns += [(f"{impl}_buffers_mib", f"{IMPLS[impl]} XLA buffers (MiB)") for impl in impls]
    limit = s["memory_limit_gib"]
    out.update(
        "window-attention-vs-peers",
        rows,
        columns,
        f"Window attention, {s['step']}, batch {s['batch']}, width {s['width']}, every step "
        "attending to the previous 10 steps (the peers also to itself), attention width 32 "
        "everywhere: `SlidingWindowAttention(window=10, attention_units=32)`, Keras's "
        "`MultiHeadAttention(num_heads=1, key_dim=32, sliding_window=11)` with "
        "`use_causal_mask=True`"
        + (
            ", and `SeqSelfAttention(attention_width=11, history_only=True)` of "
            "keras-self-attention"
            if "seq_self_attention" in impls
            else ""
        )
        + ". Times: median of the timed steps of each variant, the variants of one length "
        'interleaved in one process, with and without XLA (`jit_compile`); "ours / it" is the '
        "median per-step ratio, XLA against XLA. XLA buffers: the temporary buffers XLA plans "
        "for the step, on Keras's JAX backend, computed without running it"
        + (
            ", each implementation and length in its own process (SeqSelfAttention does not "
            "run on JAX: its buffers are not measured, and it is timed beside ours in a "
            "process of its own)"
            if "seq_self_attention" in impls
            else ""
        )
        + f"; an implementation that needed more than {limit} GiB, or failed, is not timed, "
        "nor tried at longer lengths. The figure shows the times and the buffers against T.",
        footer=".. image:: images/window_attention_vs_peers.png\n"
        "   :alt: time per step and XLA buffers of a step against sequence length",
    )
    lines = [
        (i, IMPLS[impl], f"{impl}_ms", f"{impl}_buffers_mib", "-", rows)
        for i, impl in enumerate(IMPLS)
        if impl == "ours" or impl in impls
    ]
    draw(
        out.images / "window_attention_vs_peers.png",
        "T",
        lines,
        ("ms per step, XLA", "XLA buffers of a step (MiB)", "sequence length T"),
        ("time per forward + backward step", "working memory of one step"),
    )


def floor_block(out, report, rows, s, peak):
    out.update(
        "window-attention-floor",
        rows,
        "T: T; ours_ms: ours (ms); floor_ms: floor (ms); "
        "mha_ms: MHA, equal weights (ms); ours_over_floor: ours / floor; "
        "ours_over_mha: ours / MHA; weighted_sum_over_floor: eq. (4) sum / floor; "
        "scores_over_floor: scores / floor; attention_over_floor: both / floor; "
        "rest_over_floor: rest / floor; ours_buffers_mib: ours: XLA buffers (MiB); "
        "mha_buffers_mib: MHA: XLA buffers (MiB); "
        "ours_memory_over_mha: buffers: ours / MHA; "
        "ours_share_of_peak: ours: share of peak; "
        "floor_share_of_peak: floor: share of peak",
        f"One SGD training step ({s['step']}) of `SlidingWindowAttention(window=10, "
        f"attention_units=32)` on width {s['width']}, batch {s['batch']}, followed by "
        f"`Dense({s['width']})`; the floor is its own matrix products (eq. (2)'s two "
        "projections, eq. (5)'s two width × width products) alone; the peer is "
        "`MultiHeadAttention(num_heads=1, sliding_window=11)` with key_dim "
        f"{equal_weight_key_dim(s['width'], 32)}, so that its weights number as ours. Medians "
        f"of {s['rounds']} "
        "interleaved rounds; a share of peak is the step's matrix-product arithmetic over its "
        "time, against this machine's float32 product rate measured in the same process "
        f"({peak:.1f} GFLOP/s). XLA buffers: the temporary buffers XLA assigns to the compiled "
        "step (Keras on JAX, in a child process), its working memory beyond weights and "
        "inputs. The parts: what the step saves when eq. (4)'s weighted sum, the scores "
        "(eqs (2)-(3)) or both are replaced by an elementwise stand-in of the same shapes, "
        "over the floor's time (medians over the rounds; the parts overlap, so both need not "
        "be their sum); the rest is what remains above the floor without both (the windows of "
        "the keys and of the validity, the joins of the streams, the stand-ins themselves). "
        "Targets: ours / floor ≤ 1.25 and ours / MHA ≤ 0.9 at every T; buffers at T = 2000 "
        "≤ ¼ of MHA's.",
        insert_after="window-attention-vs-peers",
    )


def throughput_block(name, equal):
    def block(out, report, rows, s, peak):
        shape = f"hidden {s['lm_hidden']}"
        if equal:
            shape = (
                f"the LSTM at {s['lm_equal_hidden']} and every kind at the width that gives it "
                "as many parameters (the PTB comparison's budget); embedding "
                f"{s['lm_equal_hidden']}, dropout 0.4"
            )
        out.update(
            name,
            rows,
            present(
                rows,
                "kind: kind; hidden: hidden; parameters: parameters; "
                "median_ms: median step (ms); tokens_per_second: tokens/s; "
                "ratio_to_lstm: step × bare LSTM; gflop_per_step: GFLOP/step; "
                "share_of_peak: share of matmul peak",
            ),
            f"Training throughput of each language model ({s['step']}; {shape}, batch "
            f"{s['lm_batch']}, {s['lm_steps']} steps, {s['lm_vocab']}-word softmax, window 5, "
            f"N = 4), median of {s['rounds']} interleaved steps in one process. Share of peak: "
            "weight-matrix FLOPs per step over the time, divided by this machine's float32 "
            f"matmul peak measured in the same run ({peak:.0f} GFLOP/s)."
            + (" Target: every kind within 1.2× the LSTM's step." if equal else ""),
            insert_after="lm-throughput" if equal else None,
        )

    return block


def packing_block(out, report, rows, s, peak):
    corpus = report.get("corpus")
    out.update(
        "lm-packing",
        rows,
        present(
            rows,
            "layout: layout; train_padding: padding, train; valid_padding: padding, valid; "
            "train_batches: train batches; step_ms: median step (ms); "
            "step_ratio: step × padded; tokens_per_second: target tokens/s (timed batches); "
            "epoch_minutes: minutes per epoch; "
            "epoch_tokens_per_second: target tokens/s (epoch); gflop_per_step: GFLOP/step; "
            "share_of_peak: share of matmul peak",
        ),
        "Documents padded to segment starts (host-side state resets) and packed back to back "
        "(in-graph resets, ``pack=True``)"
        + (
            f" on {corpus} ({report['documents']['train']} training articles): the share of "
            "padding positions, and training speed"
            if corpus
            else ": training speed"
        )
        + f" of the plain LSTM language model (hidden {s['packing_hidden']}, batch "
        f"{s['packing_batch']}, 20 steps, {s['packing_vocab']}-word softmax, {s['step']}): "
        + (
            f"``model.fit`` on the first {s['steps']} training batches, median of "
            f"{s['rounds']} interleaved passes after a compiling pass"
            if corpus
            else f"median of {s['rounds']} interleaved steps"
        )
        + f", on {report['device']['cpus']} CPU cores"
        + (
            f" (load average {report['load_average'][0]:g} before the timed passes, "
            f"{report['load_average'][1]:g} after: a shared machine); an epoch is the split's "
            "batches at that median step"
            if corpus
            else ""
        )
        + ". GFLOP/step: the products with the weight matrices (6 × their parameters per "
        "position of the batch, the embedding left out); share of peak: that over the median "
        "step, against this machine's float32 matrix-product rate measured in the same run "
        f"({peak:.1f} GFLOP/s).",
        insert_after="lm-throughput",
    )


def associative_block(out, report, rows, s, peak):
    out.update(
        "associative-memory-speed",
        rows,
        "layer: layer; ms_per_time_step: ms / time step; ratio_to_gru: × keras GRU; "
        "gflop_per_step: GFLOP/step; share_of_peak: share of matmul peak",
        f"Training step ({s['step']}) per time step, batch {s['am_batch']}, {s['am_units']} "
        f"units, T={s['am_steps']}, median of {s['rounds']} interleaved rounds (the ratio: "
        "median of the per-round ratios), ``fused_loop`` compiling its own loops, "
        f"{report['device']['cpus']} CPU cores. GFLOP/step: the products with the layer's "
        "weight matrices (6 × their parameters per token; the AM-GRU's permutation products, "
        f"reads and writes left out); {PEAK} ({peak:.1f} GFLOP/s). Target: fused, 8 copies "
        "≤ 1.5× the GRU.",
    )


def dual_block(out, report, rows, s, peak):
    memory = "peak_mib" if "dual_peak_mib" in rows[0] else "buffers_mib"
    name = {"peak_mib": "peak", "buffers_mib": "XLA buffers"}[memory]
    out.update(
        "dual-vs-word-by-word",
        rows,
        [
            ("premise_length", "premise length"),
            ("dual_ms_per_step", "Dual ms/step"),
            ("attention_ms_per_step", "attention ms/step"),
            (f"dual_{memory}", f"Dual {name} (MiB)"),
            (f"attention_{memory}", f"attention {name} (MiB)"),
            ("dual_share_of_peak", "Dual share of peak"),
            ("attention_share_of_peak", "attention share of peak"),
        ],
        f"Hypothesis-side training cost per step against premise length ({s['step']}, batch "
        f"{s['am_batch']}, {s['am_units']} units, 10 hypothesis steps, median of "
        f"{s['rounds']} interleaved rounds, {report['device']['cpus']} CPU cores): the Dual "
        f"AM-GRU (8 copies) reads a fixed-size memory of the premise ({rows[0]['dual_floats_read']}"
        " floats a row), the LSTM with `WordByWordAttention` (Rocktäschel et al. 2016) every "
        f"premise output ({s['am_units']} floats each). "
        + (
            "Peak = resident memory during the training steps (the first run included) above "
            "the level after tracing, each model and length in its own process."
            if memory == "peak_mib"
            else "XLA buffers: the temporary buffers XLA plans for the step (on JAX)."
        )
        + " Share of peak: the products with the layer's weight matrices over the 10 "
        "hypothesis steps (6 × their parameters per row; the attention's W^y once per premise "
        "output, its other matrices and the Dual AM-GRU's once per step) over the step's time, "
        f"against the matrix-product rate measured in the same run ({peak:.1f} GFLOP/s).",
        footer=".. image:: images/dual_vs_word_by_word.png\n   :alt: time and peak memory of a "
        "hypothesis step against premise length, the Dual AM-GRU and word-by-word attention",
    )
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
    draw(
        out.images / "dual_vs_word_by_word.png",
        "premise_length",
        lines,
        ("ms per hypothesis step", f"{name} MiB", "premise length"),
        ("training time per hypothesis step", "peak memory of a training step"),
    )


def snli_block(out, report, rows, s, peak):
    by_kind = {row["kind"]: row for row in rows}
    gru = by_kind.get("gru", {})
    table = []
    for kind in ("am_gru", "dual_am_gru"):
        cell, fused = by_kind.get(kind, {}), by_kind.get(f"{kind} fused_loop", {})
        table.append(
            {
                "kind": kind,
                "cell_form_ms": cell.get("median_ms"),
                "fused_loop_ms": fused.get("median_ms"),
                "speedup": fused.get("speedup"),
                "gru_model_ms": gru.get("median_ms"),
                "fused_to_gru": fused.get("ratio_to_gru"),
                "gflop_per_step": fused.get("gflop_per_step"),
                "fused_share_of_peak": fused.get("share_of_peak"),
                "gru_gflop_per_step": gru.get("gflop_per_step"),
                "gru_share_of_peak": gru.get("share_of_peak"),
            }
        )
    out.update(
        "snli-model-step",
        table,
        "kind: layer 1; cell_form_ms: cell form (ms); "
        "fused_loop_ms: fused_loop=True (ms); speedup: speed-up; "
        "gru_model_ms: GRU model (ms); fused_to_gru: fused × GRU model; "
        "gflop_per_step: GFLOP/step; fused_share_of_peak: fused share of peak; "
        "gru_gflop_per_step: GRU model GFLOP/step; "
        "gru_share_of_peak: GRU model share of peak",
        f"SNLI model training step ({s['step']}, batch {s['snli_batch']}, {s['snli_units']} "
        f"units, 8 copies, {s['snli_units']}-d embeddings, premise 25 / hypothesis 15 tokens), "
        f"median of {s['rounds']} interleaved rounds (speed-up and × GRU: medians of per-round "
        "ratios); the GRU model is the same model with ``keras.layers.GRU`` as layer 1, "
        f"{report['device']['cpus']} CPU cores. GFLOP/step: the products with the weight "
        "matrices (6 × their parameters per row: the encoder's every premise and hypothesis "
        "position, the Dual AM-GRU's own every hypothesis position, the classifier's one per "
        "pair; the holographic memory's permutations, reads and writes left out); share of "
        "peak: that over the step's time, against the matrix-product rate measured in the same "
        f"run ({peak:.1f} GFLOP/s).",
    )


def heap_block(out, report, rows, s, peak):
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
    heap = {row["cache_size"]: row for row in rows}

    def ratio(a, b):
        return a / b if a and b else None

    worst = ratio(
        heap.get(100000, {}).get("heap_worst_ms"), heap.get(1000, {}).get("heap_worst_ms")
    )
    at_1k = heap.get(1000, {}).get("heap_over_topk_worst")
    base = ms["no cache"]["median_ms"]
    overhead = {name: row["ratio_to_no_cache"] - 1 for name, row in ms.items()}
    out.update(
        "heap-cache-speed",
        table,
        "cache_size: K; policy: policy; insert_worst_ms: insert worst (ms); "
        "insert_random_ms: insert random (ms); read_ms: read (ms)",
        f"Median milliseconds per batch of {s['heap_batch']} states of width 128 (attention "
        f"width 64), {report['device']['cpus']}-core CPU. ``insert worst``: every candidate "
        "beats the whole cache (heap: full-depth sift); ``insert random``: candidates like the "
        "cached vectors. Heap insert, worst case, K=100k vs 1k: "
        + (f"{worst:.2f}x" if worst else "not measured")
        + f". Training step of the paper's model ({step_report['settings']['step']}, vocabulary "
        f"10k, B={s['heap_batch']}): {base:.0f} ms without a cache, "
        f"{ms['cache read']['median_ms']:.0f} ms with a K=10k read "
        f"({100 * overhead['cache read']:+.0f}%), "
        f"{ms['cache read + heap write']['median_ms']:.0f} ms with read and heap write "
        f"({100 * overhead['cache read + heap write']:+.0f}%). Each write scores the cache and "
        "the candidates once and replays the heap procedure on the scores, compiled with XLA"
        + (
            f"; at K=1k the exact heap write takes {at_1k:.2f}x the top-k write (worst case)."
            if at_1k
            else "."
        )
        + " The steps' products with the weight matrices (6 × their parameters per row they "
        "multiply: the LSTM's and the pooling's every position, the cache's every cached "
        "state, the softmax layer's one per example) and their share of this machine's float32 "
        f"matrix-product peak measured in the same run ({step_peak:.1f} GFLOP/s): "
        + ", ".join(
            f"{name} {row['gflop_per_step']:.2f} GFLOP ({100 * row['share_of_peak']:.0f}%)"
            for name, row in ms.items()
        )
        + ". The inserts have no matrix product of their size: their floor is the reads and "
        "writes of the cache.",
    )


def wrapper_block(out, report, rows, s, peak):
    out.update(
        "attention-wrapper-speed",
        rows,
        "memory_length: L; variant: variant; median_ms: median step (ms); "
        "ratio_to_cell: × bare cell; weights: weights",
        f"One training step ({s['step']}, Keras's {report['device']['backend']} backend, "
        f"{report['device']['cpus']} CPU cores) of an LSTM cell (100 units) over 20 steps, "
        "batch 32, ``Dense(3)`` on its last output: the bare cell in ``keras.layers.RNN`` "
        "against the cell wrapped to attend at every step over a memory of L vectors of width "
        "100 (``python -m benchmarks.speed --tables attention_wrapper``), medians of "
        f"{s['rounds']} interleaved rounds (× bare cell: the median of the per-round ratios). "
        "Goal: within 1.5× the bare cell at L = 50. Where the attention feeds nothing back "
        "(Luong's score without input feeding), the cell's loop runs alone and the attention "
        "of all steps follows it in batched products. Where the context or the previous "
        "attention vector joins the cell's input (input feeding, RNNsearch), the attention "
        "runs inside the loop, step by step, and the cell's own input product is twice as "
        "wide as the bare cell's; the word-by-word attention adds three products of its own "
        "per step (the query, W^t and the output).",
    )


def backends_block(out, report, rows, s, peak):
    out.update(
        "backends-speed",
        rows,
        "description: case; tensorflow_ms: TensorFlow (ms); jax_ms: JAX (ms); "
        "jax_over_tensorflow: JAX / TensorFlow; gflop_per_step: GFLOP/step; "
        "tensorflow_share_of_peak: TensorFlow share of matmul peak; "
        "jax_share_of_peak: JAX share of matmul peak",
        f"Median milliseconds per training step ({s['step']}: XLA on TensorFlow, ``jax.jit`` "
        f"on JAX), {report['device']['cpus']}-core CPU, {s['backend_rounds']} child processes "
        f"per backend run alternately, {s['rounds']} steps per case in each. GFLOP/step: the "
        "products with the layers' weight matrices (6 × their parameters per vector of the "
        "batch × time steps; the attention's window products and the AM-GRU's permutations, "
        "reads and writes left out); share of peak: that over the step's time, against this "
        "machine's float32 matrix-product rate measured in the children "
        f"({rows[0]['peak_gflops']} GFLOP/s, median). Written by ``python -m benchmarks.speed "
        "--tables backends --update-docs``.",
    )


#: Each table's results-page block: ``table -> write(report, rows, settings, peak)``.
BLOCKS = {
    "language_model": lm_block,
    "window_peers": peers_block,
    "window_attention": floor_block,
    "lm_kinds": throughput_block("lm-throughput", False),
    "lm_equal_parameters": throughput_block("lm-throughput-equal-parameters", True),
    "packing": packing_block,
    "associative_memory": associative_block,
    "dual_vs_word_by_word": dual_block,
    "snli": snli_block,
    "heap_write": heap_block,
    "attention_wrapper": wrapper_block,
    "backends": backends_block,
}


def read_rows(table, report=None):
    """``(report, rows, float32 peak)`` of ``table`` from ``report`` or its results file."""
    from benchmarks.speed.tables import TABLES

    if report is None or table not in report.get("tables", {}):
        report = results_file.read_or_exit(ROOT / "benchmarks" / "results" / TABLES[table].file)
    return report, report["tables"][table], report.get("peak_gflops", {}).get("float32")


def write(tables, report=None, page=RESULTS_PAGE, images=IMAGES):
    """Writes the blocks of ``tables`` into ``page`` (their figures into ``images``) from
    ``report`` (a run's results) or their results files."""
    out = types.SimpleNamespace(update=functools.partial(update_docs, page=page), images=images)
    for table in tables:
        if table in BLOCKS:
            report_of, rows, peak = read_rows(table, report)
            BLOCKS[table](out, report_of, rows, report_of["settings"], peak)
