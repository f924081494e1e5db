"""Speed and memory of the sliding-window attention and N-gram layers; prints JSON.

Two measurements, each a median over repeated steps with the variants interleaved in one
process (absolute times on shared machines drift; ratios measured together do not):

1. ``lm``: one training step of an LSTM language model (embedding -> LSTM -> memory layer ->
   softmax over the vocabulary; batch 64, 20 steps, hidden 300, vocabulary 10k, XLA on) for
   the bare `keras.layers.LSTM`, + `SlidingWindowAttention` (L = 5, 10, parallel and cell
   form) and + N-gram (N = 4, both forms). Reported as the ratio to the bare LSTM step.
2. ``peer``: the same attention computed the Keras built-in way — Dense projections and
   `keras.layers.AdditiveAttention` scores over the full sequence with a banded causal mask
   (only the previous L steps) — against `SlidingWindowAttention`. First the outputs are
   shown equal, then forward+backward time and peak memory are measured at several lengths,
   each length in its own subprocess (peak resident memory above the pre-step level, from
   /proc; a run that exceeds the memory limit is reported as such).

Usage::

    python -m benchmarks.window_attention                 # both, JSON on stdout
    python -m benchmarks.window_attention --update-readme # also rewrite README.rst tables
"""

import argparse
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

from benchmarks import peak_memory, timing  # noqa: E402


def _keras():
    import keras

    return keras


def lm_model(variant, vocab=10000, hidden=300, steps=20, batch=64):
    keras = _keras()
    from tf_memlayers import (
        NGramConcat,
        NGramConcatCell,
        SlidingWindowAttention,
        SlidingWindowAttentionCell,
    )

    inputs = keras.Input((steps,), batch_size=batch, dtype="int32")
    h = keras.layers.Embedding(vocab, hidden)(inputs)
    kind, _, size = variant.partition(":")
    if kind == "lstm":
        h = keras.layers.LSTM(hidden, return_sequences=True)(h)
    elif kind == "window-parallel":
        h = keras.layers.LSTM(hidden, return_sequences=True)(h)
        h = SlidingWindowAttention(int(size))(h)
    elif kind == "window-cell":
        cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(hidden), int(size))
        h = keras.layers.RNN(cell, return_sequences=True)(h)
    elif kind == "ngram-parallel":
        h = keras.layers.LSTM(hidden, return_sequences=True)(h)
        h = NGramConcat(int(size), hidden)(h)
    elif kind == "ngram-cell":
        cell = NGramConcatCell(keras.layers.LSTMCell(hidden), int(size), hidden)
        h = keras.layers.RNN(cell, return_sequences=True)(h)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    model = keras.Model(inputs, keras.layers.Dense(vocab)(h))
    model.compile(
        keras.optimizers.Adam(1e-3, global_clipnorm=5.0),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return model


def bench_lm(rounds, variants):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10000, (64, 20)).astype("int32")
    y = rng.integers(0, 10000, (64, 20)).astype("int32")
    models = {v: lm_model(v) for v in variants}
    for model in models.values():  # compile and warm up
        for _ in range(2):
            model.train_on_batch(x, y)
    runners = {v: (lambda model=model: model.train_on_batch(x, y)) for v, model in models.items()}
    medians = timing.medians(timing.interleaved(runners, rounds))
    # The ratio of the medians (not the median of per-round ratios).
    return [
        {
            "variant": variant,
            "median_ms": medians[variant],
            "ratio_to_lstm": medians[variant] / medians["lstm"],
        }
        for variant in variants
    ]


def _peer_layers(T, batch, hidden, window, seed=0):
    """The built-in peer and our layer with identical weights, and an input batch."""
    keras = _keras()
    from tf_memlayers import SlidingWindowAttention

    rng = np.random.default_rng(seed)
    ours = SlidingWindowAttention(window)
    ours.build((batch, T, hidden))
    for variable in ours.weights:
        variable.assign(rng.normal(0.0, 0.05, variable.shape).astype("float32"))
    query = keras.layers.Dense(hidden, use_bias=False)
    key = keras.layers.Dense(hidden, use_bias=False)
    context = keras.layers.Dense(hidden, use_bias=False)
    predict = keras.layers.Dense(hidden, use_bias=False)
    additive = keras.layers.AdditiveAttention(use_scale=True)
    for layer, kernel in [
        (query, ours.query_kernel),
        (key, ours.memory_kernel),
        (context, ours.context_kernel),
        (predict, ours.predict_kernel),
    ]:
        layer.build((batch, T, hidden))
        layer.kernel.assign(kernel)
    additive.build([(batch, T, hidden), (batch, T, hidden)])
    additive.scale.assign(ours.score_vector)
    x = rng.normal(size=(batch, T, hidden)).astype("float32")
    return ours, (query, key, context, predict, additive), x


def _peer_forward(layers, h, window):
    """Dense projections + AdditiveAttention scores, band of the previous ``window`` steps."""
    from keras import ops

    query, key, context, predict, additive = layers
    T = ops.shape(h)[1]
    rows = ops.arange(T)[:, None]
    cols = ops.arange(T)[None, :]
    band = ops.logical_and(cols < rows, cols >= rows - window)[None]
    scores = additive._calculate_scores(query(h), key(h))
    attended, _ = additive._apply_scores(scores, h, scores_mask=band)
    return ops.tanh(context(attended) + predict(h))


def prove_peer_equal(T=30, batch=4, hidden=64, window=5):
    ours, peer, x = _peer_layers(T, batch, hidden, window)
    got = ours(x).numpy()
    expected = _peer_forward(peer, x, window).numpy()
    # Step 0 has nothing to attend: ours uses r_0 = 0; the peer's all-masked row is uniform.
    return float(np.max(np.abs(got[:, 1:] - expected[:, 1:])))


def peer_child(impl, T, batch, hidden, window, repeats):
    """Runs in a subprocess: time and peak memory of forward+backward of one implementation."""
    import tensorflow as tf

    ours, peer, x = _peer_layers(T, batch, hidden, window)
    x = tf.constant(x)
    if impl == "ours":
        variables = ours.trainable_weights
        forward = ours
    else:
        variables = [v for layer in peer for v in layer.trainable_weights]
        forward = lambda h: _peer_forward(peer, h, window)  # noqa: E731

    @tf.function(jit_compile=True)
    def step(h):
        with tf.GradientTape() as tape:
            tape.watch(h)
            loss = tf.reduce_sum(forward(h))
        return tape.gradient(loss, [h, *variables])

    return peak_memory.measure_step(lambda: step(x), repeats)


def run_peer_child(impl, T, args):
    spec = {"impl": impl, "T": T, "batch": args.peer_batch, "hidden": args.peer_hidden,
            "window": args.window, "repeats": args.repeats}
    return peak_memory.run_child(__file__, spec, args.memory_limit_gib)


def bench_peer(args):
    rows = []
    for T in args.lengths:
        ours = run_peer_child("ours", T, args)
        peer = run_peer_child("keras", T, args)
        row = {"T": T}
        for name, res in (("ours", ours), ("keras", peer)):
            if "error" in res:
                row[f"{name}_ms"] = row[f"{name}_peak_mib"] = res["error"]
            else:
                row[f"{name}_ms"] = res["median_ms"]
                row[f"{name}_peak_mib"] = res["peak_mib"]
        if "error" not in ours and "error" not in peer:
            row["speedup"] = peer["median_ms"] / ours["median_ms"]
            row["memory_ratio"] = peer["peak_mib"] / max(ours["peak_mib"], 1e-3)
        rows.append(row)
    return rows


def update_readme(results, args):
    """Rewrites the README blocks of whichever parts ``results`` holds."""
    from benchmarks.readme_tables import update_readme as write_block

    if "lm" in results:
        write_lm_block(write_block, results["lm"], results.get("lm_rounds", args.rounds))
    if "peer" in results:
        write_peer_block(write_block, results, args)


def write_lm_block(write_block, lm, rounds):
    write_block(
        "window-attention-speed",
        lm,
        [("variant", "variant"), ("median_ms", "median step (ms)"), ("ratio_to_lstm", "× bare LSTM")],
        "One training step of an LSTM language model (batch 64, 20 steps, hidden 300, "
        f"10k-word softmax, XLA), median of {rounds} interleaved steps. Targets: "
        "parallel ≤ 1.15×, cell form ≤ 1.6× the bare LSTM.",
    )


# What the peer comparison measured with; saved with the results for --from-json.
PEER_SETTINGS = ("window", "peer_batch", "peer_hidden", "memory_limit_gib")


def write_peer_block(write_block, results, args):
    settings = results.get("peer_settings")
    if settings is None:
        raise ValueError(
            "The saved results do not record the peer comparison's settings (window, batch, "
            "width, memory limit); measure again to write its table."
        )
    args = argparse.Namespace(**settings)
    write_block(
        "window-attention-vs-keras",
        results["peer"],
        [
            ("T", "T"),
            ("ours_ms", "ours (ms)"),
            ("keras_ms", "Keras AdditiveAttention (ms)"),
            ("speedup", "speed-up"),
            ("ours_peak_mib", "ours peak (MiB)"),
            ("keras_peak_mib", "Keras peak (MiB)"),
            ("memory_ratio", "memory ratio"),
        ],
        "Window attention (L = "
        f"{args.window}) forward + backward, batch {args.peer_batch}, width {args.peer_hidden}, "
        "XLA, against Dense projections + `AdditiveAttention` with a banded causal mask "
        "(outputs equal to "
        f"{results['peer_max_abs_difference']:.1e}). Peak = resident memory above the "
        f"pre-step level; each length in its own process, limited to {args.memory_limit_gib} GiB.",
    )


def parse_args(argv=None):
    from tf_memlayers.training import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--rounds", type=options.positive_int, default=40,
                        help="timed steps per LM variant")
    parser.add_argument("--repeats", type=options.positive_int, default=5,
                        help="timed steps per peer length")
    parser.add_argument("--lengths", type=options.positive_int, nargs="+",
                        default=[20, 100, 400, 1000], help="sequence lengths of the peer "
                        "comparison")
    parser.add_argument("--window", type=options.positive_int, default=10,
                        help="attention window of the peer comparison")
    parser.add_argument("--peer-batch", type=options.positive_int, default=8,
                        help="batch size of the peer comparison")
    parser.add_argument("--peer-hidden", type=options.positive_int, default=300,
                        help="width of the peer comparison")
    parser.add_argument("--memory-limit-gib", type=options.positive_float, default=12.0,
                        help="address-space limit of each peak-memory child process")
    parser.add_argument("--skip-lm", action="store_true", help="skip the LM variants")
    parser.add_argument("--skip-peer", action="store_true", help="skip the peer comparison")
    parser.add_argument("--update-readme", action="store_true",
                        help="write the results into README.rst")
    parser.add_argument("--from-json", help="render the README tables from the saved JSON of "
                        "an earlier run instead of measuring")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as saved:
            update_readme(json.load(saved), args)
        return
    if args.child:
        spec = json.loads(args.child)
        result = peer_child(
            spec["impl"], spec["T"], spec["batch"], spec["hidden"], spec["window"], spec["repeats"]
        )
        peak_memory.report(result)
        return
    results = {}
    if not args.skip_lm:
        variants = [
            "lstm",
            "window-parallel:5",
            "window-parallel:10",
            "window-cell:5",
            "window-cell:10",
            "ngram-parallel:4",
            "ngram-cell:4",
        ]
        results["lm"] = bench_lm(args.rounds, variants)
        results["lm_rounds"] = args.rounds
    if not args.skip_peer:
        results["peer_max_abs_difference"] = prove_peer_equal(window=args.window)
        results["peer"] = bench_peer(args)
        results["peer_settings"] = {name: getattr(args, name) for name in PEER_SETTINGS}
    print(json.dumps(results, indent=2))
    if args.update_readme:
        update_readme(results, args)


if __name__ == "__main__":
    main()
