"""Training-step time of the layers on Keras's TensorFlow (XLA) and JAX (jit) backends; prints JSON.

Keras fixes its backend when it is imported, so each backend runs in child processes
(``KERAS_BACKEND=tensorflow`` / ``jax``), alternately (tf, jax, tf, jax, ...) so that load that
changes over the run hits both alike. Each child times one training step (``train_on_batch``
of a model compiled with ``jit_compile=True``: XLA on TensorFlow, ``jax.jit`` on JAX) per case,
interleaved, and reports the medians; the parent reports, per case and backend, the median
over every child's steps and the ratio JAX / TensorFlow.

Cases:

* ``window``: `SlidingWindowAttention` (the parallel form, L = 10, key/value/predict split,
  attention width 32) over a ``[8, 400, 300]`` sequence;
* ``am_gru``: `AssociativeGRU` (C = 8 copies, 100 units) over ``[50, 30, 100]``, Keras's loop,
  which runs on both backends; on TensorFlow also ``fused_loop=True`` (TensorFlow only);
* ``gru``: `keras.layers.GRU(100)` over the AM-GRU's input, for scale.

Usage::

    python -m benchmarks.speed.backends                  # JSON on stdout
    python -m benchmarks.speed.backends --update-docs  # also the results table
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

from benchmarks import matmul_peak
from benchmarks.docs_tables import add_update_docs_option, update_docs

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "backends.json"
BACKENDS = ("tensorflow", "jax")
CASES = {
    "window": "SlidingWindowAttention(window=10, key_value_predict), [8, 400, 300]",
    "am_gru": "AssociativeGRU(100, copies=8), Keras's loop, [50, 30, 100]",
    "am_gru_fused": "AssociativeGRU(100, copies=8, fused_loop=True), [50, 30, 100]",
    "gru": "keras.layers.GRU(100), [50, 30, 100]",
}


def _model(case):
    import keras

    from tf_memlayers import AssociativeGRU, SlidingWindowAttention

    if case == "window":
        inputs = keras.Input((400, 300), batch_size=8)
        outputs = SlidingWindowAttention(window=10, mode="key_value_predict", attention_units=32)(
            inputs
        )
    else:
        inputs = keras.Input((30, 100), batch_size=50)
        if case == "gru":
            layer = keras.layers.GRU(100, return_sequences=True)
        else:
            layer = AssociativeGRU(
                100, num_copies=8, return_sequences=True, fused_loop=case == "am_gru_fused"
            )
        outputs = layer(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1)(outputs))
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    return model


def child(steps):
    """Times ``steps`` training steps per case on the current backend; prints JSON."""
    import keras
    import numpy as np

    from benchmarks import matmul_peak, timing

    backend = keras.backend.backend()
    cases = [c for c in CASES if backend == "tensorflow" or c != "am_gru_fused"]
    rng = np.random.default_rng(0)
    runners, flops = {}, {}
    for case in cases:
        model = _model(case)
        shape = (8, 400, 300) if case == "window" else (50, 30, 100)
        # Every weight matrix multiplies each of the step's batch x time vectors (the Dense(1)
        # head's is one more column).
        flops[case] = matmul_peak.weight_training_flops(
            model, lambda w, shape=shape: shape[0] * shape[1]
        )
        x = rng.normal(size=shape).astype("float32")
        y = rng.normal(size=shape[:2] + (1,)).astype("float32")
        for _ in range(2):  # compile and warm up
            model.train_on_batch(x, y)
        runners[case] = (lambda m, a, b: lambda: m.train_on_batch(a, b))(model, x, y)
    samples = timing.interleaved(runners, steps)
    report = {
        "backend": backend,
        "samples_ms": samples,
        "flops": flops,
        "peak_gflops": matmul_peak.peak_gflops(),
    }
    print(json.dumps(report))


def _run_child(backend, steps):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.backends", "--child", "--steps", str(steps)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the {backend} child failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(rounds, steps):
    """Children alternately per backend; ``{case: {backend: median ms}}`` and the ratios."""
    samples = {backend: {} for backend in BACKENDS}
    peaks, flops = [], {}
    for _ in range(rounds):
        for backend in BACKENDS:
            report = _run_child(backend, steps)
            for case, values in report["samples_ms"].items():
                samples[backend].setdefault(case, []).extend(values)
            peaks.append(report["peak_gflops"])
            flops.update(report["flops"])
    peak = statistics.median(peaks)
    rows = []
    for case, description in CASES.items():
        row = {"case": case, "description": description}
        for backend in BACKENDS:
            values = samples[backend].get(case)
            row[f"{backend}_ms"] = statistics.median(values) if values else None
        if row["tensorflow_ms"] and row["jax_ms"]:
            row["jax_over_tensorflow"] = row["jax_ms"] / row["tensorflow_ms"]
        else:
            row["jax_over_tensorflow"] = None
        row["gflop_per_step"] = flops[case] / 1e9
        for backend in BACKENDS:
            ms = row[f"{backend}_ms"]
            share = (
                matmul_peak.floor_columns(flops[case], ms, peak)["share_of_peak"] if ms else None
            )
            row[f"{backend}_share_of_peak"] = share
        row["peak_gflops"] = round(peak, 1)
        rows.append(row)
    return rows


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=options.positive_int,
        default=2,
        help="child processes per backend, run alternately (default: 2)",
    )
    parser.add_argument(
        "--steps",
        type=options.positive_int,
        default=15,
        help="timed training steps per case in each child (default: 15)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_update_docs_option(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        child(args.steps)
        return None
    rows = measure(args.rounds, args.steps)
    report = {"rounds": args.rounds, "steps": args.steps, "rows": rows}
    RESULTS.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report))
    if args.update_docs:
        caption = (
            "Median milliseconds per training step (``train_on_batch``, ``jit_compile=True``: "
            "XLA on TensorFlow, ``jax.jit`` on JAX), 2-core CPU, "
            f"{args.rounds} child processes per backend run alternately, {args.steps} steps "
            "per case in each. GFLOP/step: the products with the layers' weight matrices (6 × "
            "their parameters per vector of the batch × time steps; the attention's window "
            "products and the AM-GRU's permutations, reads and writes left out); share of "
            "peak: that over the step's time, against this machine's float32 matrix-product "
            f"rate measured in the children ({rows[0]['peak_gflops']} GFLOP/s, median). "
            "Written by ``python -m benchmarks.speed.backends --update-docs``."
        )
        columns = [
            ("description", "case"),
            ("tensorflow_ms", "TensorFlow (ms)"),
            ("jax_ms", "JAX (ms)"),
            ("jax_over_tensorflow", "JAX / TensorFlow"),
            ("gflop_per_step", "GFLOP/step"),
            ("tensorflow_share_of_peak", "TensorFlow share of matmul peak"),
            ("jax_share_of_peak", "JAX share of matmul peak"),
        ]
        update_docs("backends-speed", rows, columns, caption)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
