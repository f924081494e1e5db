"""Window attention against its own compute floor and against its peer at equal weights.

One SGD training step (forward, backward and the weight update; XLA) of each variant on
``[batch 8, T, width 300]`` inputs, each variant followed by ``Dense(300)`` and a mean-square
loss, for T = 20, 100, 400, 1000 and 2000, the variants interleaved in one process per T:

* ``ours``: `SlidingWindowAttention(window=10, attention_units=32)`;
* ``floor``: the same layer's matrix products alone, at the same shapes: eq. (2)'s two
  projections (W^Y and W^h, width × 32) and eq. (5)'s two width × width products (W^r, W^x).
  Nothing the layer does can cost less than these products;
* ``mha``: Keras's `MultiHeadAttention` (one head, ``sliding_window=window + 1``, causal mask:
  step t sees t - window .. t) with ``key_dim`` chosen so that its weights number as ours;
* ``ours`` with parts of the attention replaced by an elementwise stand-in that reads the same
  inputs and gives the same shape, at next to no cost: without eq. (4)'s weighted sum, without
  the scores (eqs (2)-(3): ``tanh``, ``w`` and the softmax), and without both. What a
  replacement saves, over the floor's time (the median over the rounds), is what that part
  costs above the floor; the two parts overlap (XLA fuses across them), so "both" need not
  be their sum. What is left above the floor without both is the rest: the windows of the
  keys and of the validity, the joins of the streams, and the stand-ins themselves.

Each row reports the median step times, the ratios ``ours / floor`` and ``ours / mha`` (the
median of the per-round ratios), the working memory of each variant's step (the temporary
buffers XLA assigns to it, `benchmarks.peak_memory.xla_training_buffers_mib`, computed in a
child process on Keras's JAX backend), the arithmetic of each variant's matrix products per step
and its share of the machine's float32 matrix-product peak (`benchmarks.matmul_peak`, measured
in the same process), so the distance to the physical limit shows beside the distance to
the peer. Prints JSON; ``--update-docs`` writes the table into docs/results.rst.

Usage::

    python -m benchmarks.speed.window_attention_floor
"""

import argparse
import contextlib
import json

import numpy as np

from benchmarks import matmul_peak, peak_memory, timing
from benchmarks.docs_tables import add_update_docs_option, update_docs

VARIANTS = ("ours", "floor", "mha")
#: The variants of ours with parts replaced by stand-ins: ``variant: (what its saving is
#: called in the results, the parts it replaces)``.
PARTS = {
    "ours_without_weighted_sum": ("weighted_sum", ("weighted_sum",)),
    "ours_without_scores": ("scores", ("scores",)),
    "ours_without_both": ("attention", ("weighted_sum", "scores")),
}


def ours_weights(width, attention_units):
    """The weights of `SlidingWindowAttention` in ``"attention"`` mode without biases."""
    return 2 * width * attention_units + attention_units + 2 * width * width


def equal_weight_key_dim(width, attention_units):
    """The ``key_dim`` of a one-head `MultiHeadAttention` (value_dim = key_dim, with biases)
    whose weights, ``3 (width k + k) + k width + width``, come closest to ours."""
    return round((ours_weights(width, attention_units) - width) / (4 * width + 3))


def variant_products(variant, rows, width, attention_units, key_dim, steps, window):
    """``(rows, inner, columns)`` of the matrix products of one forward pass of a variant,
    followed by the ``Dense(width)``; ``rows`` is batch × T."""
    dense = [(rows, width, width)]
    if variant in ("ours", "floor"):
        return dense + [(rows, width, attention_units)] * 2 + [(rows, width, width)] * 2
    batch = rows // steps
    # Q, K, V and the output projection; the T × T scores and their weighted sum.
    return (
        dense
        + [(rows, width, key_dim)] * 3
        + [(rows, key_dim, width)]
        + [(batch * steps, key_dim, steps), (batch * steps, steps, key_dim)]
    )


def _layer(variant, window, attention_units, key_dim):
    import keras

    from benchmarks.speed.window_attention import peer_layer

    ops = keras.ops
    if variant == "ours" or variant in PARTS:
        return peer_layer("ours", window, attention_units)
    if variant == "mha":
        return peer_layer("mha", window, key_dim)

    class Floor(keras.layers.Layer):
        """The four products of eqs (2) and (5); the projections reach the loss through a
        cheap product of their rows, so that XLA keeps them."""

        def build(self, input_shape):
            width = input_shape[-1]
            self.memory_kernel = self.add_weight(shape=(width, attention_units))
            self.query_kernel = self.add_weight(shape=(width, attention_units))
            self.context_kernel = self.add_weight(shape=(width, width))
            self.predict_kernel = self.add_weight(shape=(width, width))

        def call(self, h):
            scores = ops.sum(
                ops.matmul(h, self.memory_kernel) * ops.matmul(h, self.query_kernel),
                axis=-1,
                keepdims=True,
            )
            return ops.tanh(
                ops.matmul(h, self.context_kernel) + ops.matmul(h, self.predict_kernel) + scores
            )

    layer = Floor()
    return layer, layer


@contextlib.contextmanager
def stand_ins(parts):
    """While active, the named ``parts`` of `SlidingWindowAttention`'s sequence form are
    replaced by elementwise stand-ins that read the same inputs and give the same shapes:
    ``"weighted_sum"`` (eq. (4), `windows.window_weighted_sum`) and ``"scores"`` (eqs
    (2)-(3), `WindowAttentionMechanism._window_alpha`). A step traced inside keeps them."""
    from keras import ops

    from tf_memlayers.layers.window_attention import window_attention_mechanism
    from tf_memlayers.ops import windows

    def weighted_sum(weights, carried, steps):
        return steps * ops.sum(weights, axis=-1, keepdims=True) + ops.sum(
            carried, axis=1, keepdims=True
        )

    def window_alpha(layer, window_keys, query, window_valid):
        alpha = ops.sum(window_keys, axis=-1) + ops.sum(query, axis=-1, keepdims=True)
        alpha = alpha + ops.sum(layer.score_vector)
        if layer.use_bias:
            alpha = alpha + ops.sum(layer.memory_bias)
        if window_valid is not None:
            alpha = alpha * ops.cast(window_valid, alpha.dtype)
        return alpha

    saved = (
        windows.window_weighted_sum,
        window_attention_mechanism.WindowAttentionMechanism._window_alpha,
    )
    if "weighted_sum" in parts:
        windows.window_weighted_sum = weighted_sum
    if "scores" in parts:
        window_attention_mechanism.WindowAttentionMechanism._window_alpha = window_alpha
    try:
        yield
    finally:
        (
            windows.window_weighted_sum,
            window_attention_mechanism.WindowAttentionMechanism._window_alpha,
        ) = saved


def compiled_step(variant, steps, batch, width, window, attention_units, key_dim):
    """`training_step` of ``variant``, traced and compiled (with the stand-ins of a variant of
    `PARTS`); returns ``(run, weights)``."""
    with stand_ins(PARTS[variant][1] if variant in PARTS else ()):
        run, weights = training_step(variant, steps, batch, width, window, attention_units, key_dim)
        timing.wait_for(run())  # trace and compile before timing
    return run, weights


def training_step(variant, steps, batch, width, window, attention_units, key_dim):
    """One compiled SGD step of ``variant`` followed by ``Dense(width)``; returns a callable."""
    import keras
    import tensorflow as tf

    forward, layer = _layer(variant, window, attention_units, key_dim)
    dense = keras.layers.Dense(width)
    x = np.random.default_rng(0).normal(size=(batch, steps, width)).astype("float32")
    x = tf.constant(x)
    dense(forward(x))  # builds the weights
    variables = layer.trainable_weights + dense.trainable_weights

    @tf.function(jit_compile=True)
    def step(h):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(dense(forward(h))))
        for variable, gradient in zip(variables, tape.gradient(loss, variables)):
            variable.assign_sub(1e-3 * gradient)
        return loss

    return lambda: step(x), sum(int(np.prod(v.shape)) for v in layer.trainable_weights)


def buffers_child(spec):
    """Runs in a child process on the JAX backend (``--child``): XLA's working memory of one
    training step of ``spec["variant"]`` followed by ``Dense(width)``."""
    import keras

    forward, _ = _layer(spec["variant"], spec["window"], spec["attention_units"], spec["key_dim"])
    dense = keras.layers.Dense(spec["width"])
    return {
        "xla_buffers_mib": peak_memory.xla_buffers_of_forward(
            lambda h: dense(forward(h)), spec["batch"], spec["steps"], spec["width"]
        )
    }


def xla_buffers(variant, steps, args, key_dim):
    """`buffers_child` of one variant and length, in its own process; None if it failed."""
    spec = {
        "variant": variant,
        "steps": steps,
        "batch": args.batch,
        "width": args.width,
        "window": args.window,
        "attention_units": args.attention_units,
        "key_dim": key_dim,
    }
    result = peak_memory.run_child(
        __file__, spec, memory_limit_gib=16, env={"KERAS_BACKEND": "jax"}
    )
    return result.get("xla_buffers_mib")


def bench(args):
    """One row per length: medians, ratios, weights, arithmetic and share of the peak."""
    key_dim = equal_weight_key_dim(args.width, args.attention_units)
    peak = matmul_peak.peak_gflops()
    rows = []
    for steps in args.lengths:
        runners, weights = {}, {}
        for variant in (*VARIANTS, *PARTS):
            runners[variant], weights[variant] = compiled_step(
                variant, steps, args.batch, args.width, args.window, args.attention_units, key_dim
            )
        samples = timing.interleaved(runners, args.rounds)
        medians, ratios = timing.medians(samples), timing.median_ratio(samples, "ours")
        row = {"T": steps, "rounds": args.rounds, "peak_gflops": round(peak, 1)}
        for variant in VARIANTS:
            flops = matmul_peak.training_flops(
                variant_products(
                    variant,
                    args.batch * steps,
                    args.width,
                    args.attention_units,
                    key_dim,
                    steps,
                    args.window,
                )
            )
            row[f"{variant}_ms"] = round(medians[variant], 3)
            row[f"{variant}_weights"] = weights[variant]
            row[f"{variant}_gflop"] = round(flops / 1e9, 4)
            row[f"{variant}_peak_share"] = flops / (medians[variant] * 1e6) / peak
        row["ours_over_floor"] = round(1 / ratios["floor"], 3)
        row["ours_over_mha"] = round(1 / ratios["mha"], 3)
        # What each part costs above the floor, in units of the floor's time: the time its
        # stand-in saves; the rest is what remains above the floor without both parts. Each
        # is the median over the rounds of the same round's times, like the ratios.
        for variant, (name, _) in PARTS.items():
            row[f"{variant}_ms"] = round(medians[variant], 3)
            row[f"{name}_over_floor"] = round(_median_over_rounds(samples, "ours", variant), 3)
        row["rest_over_floor"] = round(
            _median_over_rounds(samples, "ours_without_both", "floor"), 3
        )
        if not args.skip_memory:
            for variant in VARIANTS:
                row[f"{variant}_xla_buffers_mib"] = xla_buffers(variant, steps, args, key_dim)
            if row["ours_xla_buffers_mib"] and row["mha_xla_buffers_mib"]:
                row["ours_over_mha_buffers"] = round(
                    row["ours_xla_buffers_mib"] / row["mha_xla_buffers_mib"], 3
                )
        rows.append(row)
    return {
        "settings": {name: getattr(args, name) for name in SETTINGS},
        "mha_key_dim": key_dim,
        "rows": rows,
    }


def _median_over_rounds(samples, minuend, subtrahend):
    """The median over the rounds of ``(minuend - subtrahend) / floor``, each round's times."""
    return float(
        np.median(
            [
                (big - small) / floor
                for big, small, floor in zip(
                    samples[minuend], samples[subtrahend], samples["floor"]
                )
            ]
        )
    )


SETTINGS = ("batch", "width", "window", "attention_units", "lengths", "rounds", "skip_memory")


def write_docs(results):
    settings = results["settings"]
    columns = [
        ("T", "T"),
        ("ours_ms", "ours (ms)"),
        ("floor_ms", "floor (ms)"),
        ("mha_ms", "MHA, equal weights (ms)"),
        ("ours_over_floor", "ours / floor"),
        ("ours_over_mha", "ours / MHA"),
        ("weighted_sum_over_floor", "eq. (4) sum / floor"),
        ("scores_over_floor", "scores / floor"),
        ("attention_over_floor", "both / floor"),
        ("rest_over_floor", "rest / floor"),
        ("ours_xla_buffers_mib", "ours: XLA buffers (MiB)"),
        ("mha_xla_buffers_mib", "MHA: XLA buffers (MiB)"),
        ("ours_over_mha_buffers", "buffers: ours / MHA"),
        ("ours_peak_share", "ours: share of peak"),
        ("floor_peak_share", "floor: share of peak"),
    ]
    peak = results["rows"][0]["peak_gflops"] if results["rows"] else None
    update_docs(
        "window-attention-floor",
        results["rows"],
        columns,
        f"One SGD training step (XLA) of `SlidingWindowAttention(window={settings['window']}, "
        f"attention_units={settings['attention_units']})` on width {settings['width']}, batch "
        f"{settings['batch']}, followed by `Dense({settings['width']})`; the floor is its own "
        "matrix products (eq. (2)'s two projections, eq. (5)'s two width × width products) "
        "alone; the peer is `MultiHeadAttention(num_heads=1, sliding_window="
        f"{settings['window'] + 1})` with key_dim {results['mha_key_dim']}, so that its weights "
        f"number as ours. Medians of {settings['rounds']} interleaved rounds; a share of peak "
        "is the step's matrix-product arithmetic over its time, against this machine's float32 "
        f"product rate measured in the same process ({peak} GFLOP/s). XLA buffers: the "
        "temporary buffers XLA assigns to the compiled step (Keras on JAX, in a child process), "
        "its working memory beyond weights and inputs. The parts: what the step saves when "
        "eq. (4)'s weighted sum, the scores (eqs (2)-(3)) or both are replaced by an "
        "elementwise stand-in of the same shapes, over the floor's time (medians over the "
        "rounds; the parts overlap, so both need not be their sum); the rest is what remains "
        "above the floor without both (the windows of the keys and of the validity, the joins "
        "of the streams, the stand-ins themselves). Targets: ours / floor ≤ 1.25 and ours / "
        "MHA ≤ 0.9 at every T; buffers at T = 2000 ≤ ¼ of MHA's.",
        insert_after="window-attention-vs-peers",
    )


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--lengths",
        type=options.positive_int,
        nargs="+",
        default=[20, 100, 400, 1000, 2000],
        help="sequence lengths T",
    )
    parser.add_argument(
        "--rounds",
        type=options.positive_int,
        default=15,
        help="interleaved timed steps per variant and length",
    )
    parser.add_argument("--batch", type=options.positive_int, default=8, help="batch size")
    parser.add_argument("--width", type=options.positive_int, default=300, help="input width")
    parser.add_argument(
        "--window", type=options.positive_int, default=10, help="attention window L"
    )
    parser.add_argument(
        "--attention-units",
        type=options.positive_int,
        default=32,
        help="attention width of our layer",
    )
    parser.add_argument(
        "--skip-memory",
        action="store_true",
        help="leave out the XLA buffer sizes (a JAX child process per cell)",
    )
    parser.add_argument("--output", help="also write the JSON results to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    add_update_docs_option(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        peak_memory.report(buffers_child(json.loads(args.child)))
        return
    results = bench(args)
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text + "\n")
    if args.update_docs:
        write_docs(results)


if __name__ == "__main__":
    main()
