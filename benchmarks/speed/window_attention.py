"""Speed and memory of the sliding-window attention and N-gram layers; prints JSON.

Two measurements, each a median over repeated steps with the variants interleaved in one
process (absolute times on shared machines drift; ratios measured together do not):

1. ``lm``: one training step of an LSTM language model (embedding -> LSTM -> memory layer ->
   softmax over the vocabulary; batch 64, 20 steps, hidden 300, vocabulary 10k, XLA on) for
   each variant of `LM_VARIANTS`, a memory kind of the language-model builder's table in one
   form: the bare `keras.layers.LSTM`, + `SlidingWindowAttention` (L = 5, 10, parallel and
   cell form) and + N-gram (N = 4, both forms). Reported as the ratio to the bare LSTM step.
2. ``peer``: `SlidingWindowAttention` against the window attention a user would pick instead,
   at the same attention width and reach (`peer_layer`): Keras's `MultiHeadAttention` with its
   built-in ``sliding_window`` and a causal mask, and `SeqSelfAttention` of the archived
   ``keras-self-attention`` package (skipped, with the reason recorded, when it is not
   installed). Both score a full T×T matrix. For every length, the working memory of one
   forward+backward step is the temporary buffers XLA plans for it, computed without running
   it on Keras's JAX backend in one subprocess per implementation
   (`benchmarks.peak_memory.xla_training_buffers_mib`: exact, and independent of the allocator
   and the load); an implementation whose buffers exceed the memory limit is not tried at
   longer lengths. Then the step time of the others, with and without XLA on TensorFlow,
   interleaved in one subprocess under the memory limit (a peer that does not run on JAX is
   timed beside ours in a subprocess of its own).

Usage::

    python -m benchmarks.speed.window_attention                 # both, JSON on stdout
    python -m benchmarks.speed.window_attention --update-docs # also rewrite docs/results.rst tables
"""

import argparse
import json
import os
import sys

import numpy as np

from benchmarks import matmul_peak, peak_memory, timing
from benchmarks.docs_tables import add_update_docs_option
from benchmarks.docs_tables import update_docs as write_block

# The repository root (this file is benchmarks/speed/window_attention.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _keras():
    import keras

    return keras


# The LM variants: name in the results -> (memory kind of
# `examples.language_modeling.memories`, form, size). The
# size is the window of an attention kind and N of the N-gram RNN; the memory layer's output
# is as wide as the LSTM. A new variant is one more entry.
LM_VARIANTS = {
    "lstm": ("lstm", "parallel", None),
    "window-parallel:5": ("attention", "parallel", 5),
    "window-parallel:10": ("attention", "parallel", 10),
    "window-cell:5": ("attention", "cell", 5),
    "window-cell:10": ("attention", "cell", 10),
    "ngram-parallel:4": ("ngram", "parallel", 4),
    "ngram-cell:4": ("ngram", "cell", 4),
}


def lm_model(variant, vocab=10000, hidden=300, steps=20, batch=64):
    """The compiled language model of ``variant`` (a key of `LM_VARIANTS`): embedding, the
    LSTM with the variant's memory (on top of it, or wrapping its cell), softmax logits.

    Args:
        variant: String, a key of `LM_VARIANTS`.
        vocab: Integer, the vocabulary size.
        hidden: Integer, the LSTM width (and the memory layer's output width).
        steps: Integer, the sequence length.
        batch: Integer, the batch size.

    Returns:
        A `keras.Model` compiled with XLA.
    """
    keras = _keras()
    from examples.language_modeling.memories import make_memory
    from tf_memlayers.layers import ResettableRNN, lstm_use_cudnn

    if variant not in LM_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; the variants are {list(LM_VARIANTS)}")
    kind, form, size = LM_VARIANTS[variant]
    sized = {"ngram": size} if kind == "ngram" else {"window": size} if size else {}
    memory = make_memory(kind, hidden, form=form, memory_units=hidden, stateful=False, **sized)
    inputs = keras.Input((steps,), batch_size=batch, dtype="int32")
    h = keras.layers.Embedding(vocab, hidden)(inputs)
    if form == "cell" and memory is not None:
        # The loop the language-model builder runs a memory cell in.
        h = ResettableRNN(memory(keras.layers.LSTMCell(hidden)), return_sequences=True)(h)
    else:
        # cuDNN where it computes this dtype right, as the language-model builder decides.
        use_cudnn = lstm_use_cudnn()
        h = keras.layers.LSTM(hidden, return_sequences=True, use_cudnn=use_cudnn)(h)
        if memory is not None:
            h = memory(h)
    model = keras.Model(inputs, keras.layers.Dense(vocab)(h))
    model.compile(
        keras.optimizers.Adam(1e-3, global_clipnorm=5.0),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return model


def attention_part_step(window, hidden=300, steps=20, batch=64):
    """Eqs (2)-(4) of the parallel form without their weight products, as the language model
    of `lm_model` runs them: the ``tanh`` of the scores over ``[batch, steps, window,
    hidden]`` (the attention width is the key's), the score vector, the window softmax and
    the weighted sum of the values, forward and backward, on streams already projected; XLA.

    Returns:
        A callable that runs one step (warmed up).
    """
    import tensorflow as tf

    from tf_memlayers import SlidingWindowAttention

    layer = SlidingWindowAttention(window)
    layer.build((batch, steps, hidden))
    rng = np.random.default_rng(0)

    def tensor(*shape):
        return tf.constant(rng.normal(size=shape).astype("float32"))

    keys, query = tensor(batch, window + steps, hidden), tensor(batch, steps, hidden)
    carried, values = tensor(batch, window, hidden), tensor(batch, steps, hidden)
    projection = tensor(batch, steps, hidden)
    valid = tf.concat([tf.zeros((batch, window)), tf.ones((batch, steps))], axis=1)

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            tape.watch([keys, query, carried, values])
            context, _ = layer._attend_stream(keys, query, carried, values, valid)
            loss = tf.reduce_sum(context * projection)
        return tape.gradient(loss, [keys, query, carried, values, layer.score_vector])

    def run():
        return [gradient.numpy() for gradient in step()]

    for _ in range(2):
        run()
    return run


# The window of the row that times eqs (2)-(4) alone (`attention_part_step`), beside the LM
# variants: what the parallel form adds to its weight products.
ATTENTION_PART_WINDOW = 10


def bench_lm(rounds, variants, vocab=10000, hidden=300, steps=20, batch=64):
    """One row per variant: the median training step, its ratio to the bare LSTM's (the
    variants, ``"lstm"`` among them, timed interleaved; the shapes are `lm_model`'s), the
    arithmetic of its weight products and their share of the machine's matrix-product peak,
    measured in the same process (`benchmarks.matmul_peak`). A last row, timed with them,
    is eqs (2)-(4) alone at `ATTENTION_PART_WINDOW` (`attention_part_step`)."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, (batch, steps)).astype("int32")
    y = rng.integers(0, vocab, (batch, steps)).astype("int32")
    models = {v: lm_model(v, vocab, hidden, steps, batch) for v in variants}
    for model in models.values():  # compile and warm up
        for _ in range(2):
            model.train_on_batch(x, y)
    runners = {v: (lambda model=model: model.train_on_batch(x, y)) for v, model in models.items()}
    part = f"eqs (2)-(4) alone:{ATTENTION_PART_WINDOW}"
    runners[part] = attention_part_step(ATTENTION_PART_WINDOW, hidden, steps, batch)
    medians = timing.medians(timing.interleaved(runners, rounds))
    peak = matmul_peak.peak_gflops()
    rows = []
    for variant in [*variants, part]:
        flops = (
            0
            if variant == part
            else (matmul_peak.weight_training_flops_per_token(models[variant]) * batch * steps)
        )
        rows.append(
            {
                "variant": variant,
                "median_ms": medians[variant],
                # The ratio of the medians (not the median of per-round ratios).
                "ratio_to_lstm": medians[variant] / medians["lstm"],
                **matmul_peak.floor_columns(flops, medians[variant], peak),
                "peak_gflops": round(peak, 1),
            }
        )
    return rows


# The implementations of the peer comparison: ours and the layers a user would pick instead.
IMPLS = ("ours", "mha", "seq_self_attention", "output_only")
IMPL_NAMES = {
    "ours": "SlidingWindowAttention",
    "output_only": "eq. (5) matmuls alone",
    "mha": "MultiHeadAttention (sliding window)",
    "seq_self_attention": "SeqSelfAttention",
}


def peer_layer(impl, window, units):
    """``(forward, trainable weights after build)`` of one implementation, at attention width
    ``units``, each step attending to the previous ``window`` steps.

    - ``ours``: `SlidingWindowAttention(window, attention_units=units)` (additive, eqs 1-5).
    - ``mha``: Keras's `MultiHeadAttention(num_heads=1, key_dim=units)` with its built-in
      ``sliding_window=window + 1`` and ``use_causal_mask=True`` (step t sees t - window .. t);
      it scores a full T×T matrix and masks it.
    - ``seq_self_attention``: `SeqSelfAttention(units, attention_width=window + 1,
      history_only=True)` of the archived ``keras-self-attention`` package (additive like
      ours; it builds a [B, T, T, units] tensor).
    - ``output_only``: not a peer but our layer's floor: its output equation (5) alone,
      ``tanh(W^r h + W^x h)`` with two width × width kernels and no attention.
    """
    keras = _keras()
    if impl == "ours":
        from tf_memlayers import SlidingWindowAttention

        layer = SlidingWindowAttention(window, attention_units=units)
        return layer, layer
    if impl == "mha":
        layer = keras.layers.MultiHeadAttention(
            num_heads=1, key_dim=units, sliding_window=window + 1
        )
        return (lambda h: layer(h, h, use_causal_mask=True)), layer
    if impl == "seq_self_attention":
        from keras_self_attention import SeqSelfAttention

        layer = SeqSelfAttention(units, attention_width=window + 1, history_only=True)
        return layer, layer
    if impl == "output_only":

        class OutputOnly(keras.layers.Layer):
            def build(self, input_shape):
                width = (input_shape[-1], input_shape[-1])
                self.context_kernel = self.add_weight(shape=width, name="context_kernel")
                self.predict_kernel = self.add_weight(shape=width, name="predict_kernel")

            def call(self, h):
                ops = keras.ops
                return ops.tanh(
                    ops.matmul(h, self.context_kernel) + ops.matmul(h, self.predict_kernel)
                )

        layer = OutputOnly()
        return layer, layer
    raise ValueError(f"unknown implementation {impl!r}")


def _training_step(impl, spec, jit):
    """One compiled forward + backward of ``impl`` and its input."""
    import tensorflow as tf

    forward, layer = peer_layer(impl, spec["window"], spec["units"])
    x = np.random.default_rng(0).normal(size=(spec["batch"], spec["T"], spec["hidden"]))
    x = tf.constant(x.astype("float32"))
    forward(x)  # builds the weights

    @tf.function(jit_compile=jit)
    def step(h):
        with tf.GradientTape() as tape:
            tape.watch(h)
            loss = tf.reduce_sum(forward(h))
        return tape.gradient(loss, [h, *layer.trainable_weights])

    return lambda: step(x)


def peer_child(spec):
    """Runs in a subprocess. ``memory`` (on the JAX backend): the XLA buffers of one
    implementation's training step. ``time`` (TensorFlow): every implementation of
    ``spec["impls"]`` with and without XLA, interleaved."""
    if spec["part"] == "memory":
        forward, _ = peer_layer(spec["impl"], spec["window"], spec["units"])
        return {
            "xla_buffers_mib": peak_memory.xla_buffers_of_forward(
                forward, spec["batch"], spec["T"], spec["hidden"]
            )
        }
    runners = {}
    for impl in spec["impls"]:
        for jit, suffix in ((True, "xla"), (False, "no_xla")):
            step = _training_step(impl, spec, jit)
            timing.wait_for(step())  # trace and compile before timing
            runners[f"{impl}_{suffix}"] = step
    samples = timing.interleaved(runners, spec["repeats"])
    return {
        "medians_ms": timing.medians(samples),
        "ratios_to_ours_xla": timing.median_ratio(samples, "ours_xla"),
    }


def _peer_spec(args, T, **extra):
    return {
        "T": T,
        "batch": args.peer_batch,
        "hidden": args.peer_hidden,
        "window": args.window,
        "units": args.attention_units,
        "repeats": args.repeats,
        **extra,
    }


def available_impls():
    """The implementations that can run here, and why the others cannot."""
    impls, skipped = ["ours", "mha", "output_only"], {}
    try:
        import keras_self_attention  # noqa: F401
    except ImportError as error:
        skipped["seq_self_attention"] = f"not installed ({error}); pip install keras-self-attention"
    else:
        impls.append("seq_self_attention")
    return impls, skipped


def _record_times(row, times, impls, own=True):
    """Writes a timing child's medians and ratios for ``impls`` into ``row`` (``ours``'s own
    times too when ``own``)."""
    for name, ms in times["medians_ms"].items():
        if own or not name.startswith("ours_"):
            row[f"{name}_ms"] = ms
    ratios = times["ratios_to_ours_xla"]
    for impl in impls:
        if impl == "ours":
            continue
        row[f"ours_over_{impl}"] = 1 / ratios[f"{impl}_xla"]
        buffers = row.get(f"{impl}_xla_buffers_mib")
        if isinstance(buffers, (int, float)):
            row[f"{impl}_memory_over_ours"] = buffers / max(row["ours_xla_buffers_mib"], 1e-3)
    if own:
        row["ours_xla_over_no_xla"] = 1 / ratios["ours_no_xla"]


def bench_peer(args):
    """Per length: one process per implementation for its XLA buffers on JAX (an
    implementation that needs more than the memory limit at one length is not tried at longer
    ones), then one process timing those that fit, interleaved. An implementation whose
    buffers cannot be read on JAX (a peer written for TensorFlow only) is timed beside ours in
    a process of its own, and not tried at longer lengths once that fails."""
    impls, skipped = available_impls()
    failed = {}
    rows = []
    limit_mib = args.memory_limit_gib * 1024
    for T in args.lengths:
        row = {"T": T, "repeats": args.repeats}
        running, unmeasured = [], []
        for impl in impls:
            if impl in failed:
                row[f"{impl}_xla_buffers_mib"] = row[f"{impl}_xla_ms"] = (
                    f"failed at T={failed[impl]}"
                )
                continue
            result = peak_memory.run_child(
                # Compiled, never run: the address-space limit only has to admit JAX itself.
                __file__,
                _peer_spec(args, T, part="memory", impl=impl),
                16,
                env={"KERAS_BACKEND": "jax"},
            )
            buffers = result.get("xla_buffers_mib")
            if buffers is None:
                row[f"{impl}_xla_buffers_mib"] = "not measured: fails on JAX"
                unmeasured.append(impl)
            elif buffers > limit_mib:
                failed[impl] = T
                row[f"{impl}_xla_buffers_mib"] = buffers
                row[f"{impl}_xla_ms"] = f"not run: needs {buffers:.0f} MiB"
            else:
                row[f"{impl}_xla_buffers_mib"] = buffers
                running.append(impl)
        if running[:1] == ["ours"]:
            times = peak_memory.run_child(
                __file__, _peer_spec(args, T, part="time", impls=running), args.memory_limit_gib
            )
            if "error" in times:
                row["timing_error"] = times["error"]
            else:
                _record_times(row, times, running)
            for impl in unmeasured:
                times = peak_memory.run_child(
                    __file__,
                    _peer_spec(args, T, part="time", impls=["ours", impl]),
                    args.memory_limit_gib,
                )
                if "error" in times:
                    failed[impl] = T
                    row[f"{impl}_xla_ms"] = times["error"]
                else:
                    _record_times(row, times, ["ours", impl], own=False)
        print(json.dumps(row), file=sys.stderr, flush=True)  # progress; stdout stays JSON
        rows.append(row)
    return rows, skipped


def update_docs(results, args):
    """Rewrites the results-page blocks of whichever parts ``results`` holds."""

    if "lm" in results:
        write_lm_block(write_block, results["lm"], results.get("lm_rounds", args.rounds))
    if "peer" in results:
        write_peer_block(write_block, results, args)


def write_lm_block(write_block, lm, rounds):
    write_block(
        "window-attention-speed",
        lm,
        [
            ("variant", "variant"),
            ("median_ms", "median step (ms)"),
            ("ratio_to_lstm", "× bare LSTM"),
            ("gflop_per_step", "GFLOP/step"),
            ("share_of_peak", "share of matmul peak"),
        ],
        "One training step of an LSTM language model (batch 64, 20 steps, hidden 300, "
        f"10k-word softmax, XLA), median of {rounds} interleaved steps. Targets (L = 10): "
        "parallel ≤ 1.10×, cell form ≤ 1.25× the bare LSTM. GFLOP/step: the products with "
        "weight matrices (6 × their parameters outside the embedding, per token); share of "
        "peak: that over the step's time, against this machine's float32 matrix-product rate "
        + (
            f"measured in the same run ({lm[0]['peak_gflops']} GFLOP/s)."
            if lm and "peak_gflops" in lm[0]
            else "measured in the same run."
        )
        + " The row ``eqs (2)-(4) alone``, timed with the others, is what the parallel form "
        "adds besides weight products: the scores' tanh over [64, 20, L, 300] (the attention "
        "width is the key's), the window softmax and the weighted sum, forward and backward, "
        "on streams already projected. The parallel form's weight products alone are the "
        "GFLOP ratio above the LSTM's; this row is the rest.",
    )


# What the peer comparison measured with; saved with the results for --from-json.
PEER_SETTINGS = (
    "window",
    "attention_units",
    "peer_batch",
    "peer_hidden",
    "memory_limit_gib",
    "repeats",
)


# The figure of the peer comparison, shown under its table on the results page.
PEER_FIGURE = os.path.join(ROOT, "docs", "images", "window_attention_vs_peers.png")


def label_length_axes(time_axes, time_label, memory_axes):
    """The two panels of a figure against sequence length: both axes logarithmic, a grid,
    the time panel labelled ``time_label`` and the memory panel with XLA's buffers."""
    for axes, label in ((time_axes, time_label), (memory_axes, "XLA buffers of a step (MiB)")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("sequence length T")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)


def draw_peer_figure(results, path=PEER_FIGURE):
    """Time per training step (XLA) and the step's XLA buffers against sequence length, one
    line per implementation, both axes logarithmic."""
    from matplotlib.figure import Figure

    skipped = results.get("peer_skipped", {})
    figure = Figure(figsize=(10, 4), dpi=80)
    time_axes, memory_axes = figure.subplots(1, 2)
    for index, impl in enumerate(IMPLS):
        if impl in skipped:
            continue
        for axes, key in ((time_axes, f"{impl}_xla_ms"), (memory_axes, f"{impl}_xla_buffers_mib")):
            points = [
                (row["T"], row[key])
                for row in results["peer"]
                if isinstance(row.get(key), (int, float))
            ]
            if points:  # one colour per implementation in both panels
                axes.plot(*zip(*points), marker="o", color=f"C{index}", label=IMPL_NAMES[impl])
    label_length_axes(time_axes, "ms per step, XLA", memory_axes)
    time_axes.set_title("time per forward + backward step")
    memory_axes.set_title("working memory of one step")
    time_axes.legend(fontsize="small")
    memory_axes.legend(fontsize="small")
    figure.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    figure.savefig(path)
    return path


def write_peer_block(write_block, results, args):
    settings = results.get("peer_settings")
    if settings is None or "attention_units" not in settings:
        raise ValueError(
            "The saved results do not record the peer comparison's settings (window, attention "
            "width, batch, width, memory limit); measure again to write its table."
        )
    args = argparse.Namespace(**settings)
    columns = [
        ("T", "T"),
        ("repeats", "timed steps"),
        ("ours_xla_ms", "ours XLA (ms)"),
        ("ours_no_xla_ms", "ours no XLA (ms)"),
    ]
    for impl in IMPLS[1:]:
        if impl in results.get("peer_skipped", {}):
            continue
        columns += [
            (f"{impl}_xla_ms", f"{IMPL_NAMES[impl]} XLA (ms)"),
            (f"{impl}_no_xla_ms", "no XLA (ms)"),
            (f"ours_over_{impl}", "ours / it (XLA)"),
        ]
    columns.append(("ours_xla_buffers_mib", "ours XLA buffers (MiB)"))
    for impl in IMPLS[1:]:
        if impl not in results.get("peer_skipped", {}):
            columns.append((f"{impl}_xla_buffers_mib", f"{IMPL_NAMES[impl]} XLA buffers (MiB)"))
    skipped = "".join(
        f" {IMPL_NAMES[i]} skipped: {why}." for i, why in results.get("peer_skipped", {}).items()
    )
    write_block(
        "window-attention-vs-peers",
        results["peer"],
        columns,
        f"Window attention forward + backward, batch {args.peer_batch}, width "
        f"{args.peer_hidden}, every step attending to the previous {args.window} steps "
        f"(the peers also to itself), attention width {args.attention_units} everywhere: "
        f"`SlidingWindowAttention(window={args.window}, attention_units="
        f"{args.attention_units})`, Keras's `MultiHeadAttention(num_heads=1, key_dim="
        f"{args.attention_units}, sliding_window={args.window + 1})` with "
        "`use_causal_mask=True`, and `SeqSelfAttention(attention_width="
        f"{args.window + 1}, history_only=True)` of keras-self-attention. Times: median of "
        "the timed steps of each variant, the variants of one length interleaved in one "
        'process, with and without XLA (`jit_compile`); "ours / it" is the median per-step '
        "ratio, XLA against XLA. XLA buffers: the temporary buffers XLA plans for one "
        "training step (forward + backward), on Keras's JAX backend, computed without running "
        "it, each implementation and length in its own process (SeqSelfAttention does not run "
        "on JAX: its buffers are not measured, and it is timed beside ours in a process of its "
        f"own); an implementation that needed more than {args.memory_limit_gib} GiB, or failed, "
        f"is not timed, nor tried at longer lengths.{skipped} The figure shows the times and "
        "the buffers against T.",
        footer=".. image:: images/window_attention_vs_peers.png\n"
        "   :alt: time per step and XLA buffers of a step against sequence length",
    )
    draw_peer_figure(results)


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--rounds", type=options.positive_int, default=40, help="timed steps per LM variant"
    )
    parser.add_argument(
        "--repeats",
        type=options.positive_int,
        default=5,
        help="timed steps per variant and peer length",
    )
    parser.add_argument(
        "--lengths",
        type=options.positive_int,
        nargs="+",
        default=[20, 100, 400, 1000, 2000, 4000],
        help="sequence lengths of the peer comparison",
    )
    parser.add_argument(
        "--window",
        type=options.positive_int,
        default=10,
        help="attention window of the peer comparison",
    )
    parser.add_argument(
        "--attention-units",
        type=options.positive_int,
        default=32,
        help="attention width of every implementation in the peer comparison",
    )
    parser.add_argument(
        "--peer-batch",
        type=options.positive_int,
        default=8,
        help="batch size of the peer comparison",
    )
    parser.add_argument(
        "--peer-hidden", type=options.positive_int, default=300, help="width of the peer comparison"
    )
    parser.add_argument(
        "--memory-limit-gib",
        type=options.positive_float,
        default=12.0,
        help="address-space limit of each peak-memory child process",
    )
    parser.add_argument("--skip-lm", action="store_true", help="skip the LM variants")
    parser.add_argument("--skip-peer", action="store_true", help="skip the peer comparison")
    add_update_docs_option(parser)
    parser.add_argument(
        "--from-json",
        help="render the results tables from the saved JSON of an earlier run instead of measuring",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as saved:
            update_docs(json.load(saved), args)
        return
    if args.child:
        peak_memory.report(peer_child(json.loads(args.child)))
        return
    results = {}
    if not args.skip_lm:
        results["lm"] = bench_lm(args.rounds, list(LM_VARIANTS))
        results["lm_rounds"] = args.rounds
    if not args.skip_peer:
        results["peer"], results["peer_skipped"] = bench_peer(args)
        results["peer_settings"] = {name: getattr(args, name) for name in PEER_SETTINGS}
    print(json.dumps(results, indent=2))
    if args.update_docs:
        update_docs(results, args)


if __name__ == "__main__":
    main()
