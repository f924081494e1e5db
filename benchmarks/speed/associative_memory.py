"""Speed of the associative-memory cells (prints JSON; ``--update-docs`` fills docs/results.rst).

1. Training cost per time step of an AM-GRU (n=100, C=8 and C=1; the cell form
   ``RNN(AssociativeGRUCell)``, the layer `AssociativeGRU`, which projects the inputs
   before the loop, and the same with ``fused_loop=True``: XLA-compiled loops with a
   hand-written backward, one per batch shard on CPU) against `keras.layers.GRU(100)` at batch 50,
   same input, same
   `tf.function` around each (no XLA unless ``--jit-compile``), variants interleaved in one
   process, medians (the ratio: median of the per-round ratios).
2. Hypothesis-side cost per step against premise length (10 … 2,000), the paper's claim of
   constant time and memory per step: the Dual AM-GRU reads a fixed-size premise memory, the
   LSTM with word-by-word attention (`WordByWordAttention`, Rocktäschel et al. 2016, the
   paper's comparator) attends over every premise output. Time per step (interleaved
   rounds), the number of floats each reads per step, and the peak resident memory of a
   training step, measured for each model and length in its own process
   (`benchmarks/peak_memory.py`); a figure of both against the length.
3. The SNLI model's training step (`tf_memlayers.models.snli`, batch 50, 100 units, 8
   copies, premise 25 / hypothesis 15 tokens) with layer 1 in the cell form and with
   ``fused_loop=True``, for the AM-GRU and the Dual AM-GRU.
"""

import argparse
import contextlib
import json
import os
import pathlib

import keras
import numpy as np
from keras import ops

from benchmarks import matmul_peak, peak_memory, timing  # noqa: E402
from benchmarks.docs_tables import add_update_docs_option, update_docs
from examples.snli.encoders import snli_model  # noqa: E402
from tf_memlayers.layers import (  # noqa: E402
    AssociativeGRU,
    AssociativeGRUCell,
    AttentionRNN,
    DualAssociativeGRUCell,
    WordByWordAttention,
)
from tf_memlayers.models.snli import compile_snli_model  # noqa: E402


@contextlib.contextmanager
def holographic_stand_ins():
    """While active, the holographic parts of the AM-GRU step
    (`tf_memlayers.ops.associative_gru_step`) are replaced by elementwise stand-ins that read
    the same inputs and give the same shapes: the key's bounded permuted copies (eqs. 4,
    9-10: the bound and the permutation product), the read (eq. 5) and the write (eq. 12).
    A step traced inside keeps the recurrent loop and the key, gate and candidate products
    with everything between them, and carries the memory as a state: the AM-GRU's floor
    without its associative memory. Restored on exit. The step is the Keras loop's (every
    AM-GRU on JAX; ``fused_loop=False`` on TensorFlow): the fused loop has its own."""
    from tf_memlayers.ops import associative_gru_step as step_module
    from tf_memlayers.ops import holographic

    def bounded_copies(key, matrix, num_copies):
        del matrix
        return tuple(
            ops.repeat(half[:, None, :], num_copies, axis=1) for half in holographic.complexify(key)
        )

    def read(copies, memory, conjugate=True):
        del conjugate
        return holographic.uncomplexify(
            *(ops.mean(key * part, axis=1) for key, part in zip(copies, memory))
        )

    def write_memory_parts(key_re, key_im, memory_re, memory_im, value_re, value_im):
        return (
            memory_re + key_re * value_re[:, None, :],
            memory_im + key_im * value_im[:, None, :],
        )

    saved = holographic.bounded_copies, holographic.write_memory_parts, step_module._read
    holographic.bounded_copies, holographic.write_memory_parts = bounded_copies, write_memory_parts
    step_module._read = read
    try:
        yield
    finally:
        holographic.bounded_copies, holographic.write_memory_parts, step_module._read = saved


def _train_step(
    layer_fn, inputs, extra=None, jit_compile=False, run_once=True, layers=None, call_kwargs=None
):
    """A traced training step of ``layer_fn()`` (run once unless ``run_once=False``), called
    on ``inputs`` with ``initial_state=extra`` where given and ``call_kwargs``; the layer is
    appended to ``layers`` when given."""
    import tensorflow as tf  # the timed steps are TensorFlow's

    layer = layer_fn()
    if layers is not None:
        layers.append(layer)
    head = keras.layers.Dense(1)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            kwargs = dict(call_kwargs or {})
            if extra is not None:
                kwargs["initial_state"] = extra
            out = layer(inputs, **kwargs)
            loss = tf.reduce_mean(tf.square(head(out)))
        variables = layer.trainable_variables + head.trainable_variables
        grads = tape.gradient(loss, variables)
        return loss, grads

    if run_once:
        step()
    else:
        step.get_concrete_function()  # trace (and build the layer) without running
    return lambda: step()[0].numpy()


def speed_vs_gru(batch, steps, units, copies, rounds, jit_compile=False):
    import tensorflow as tf  # the timed steps are TensorFlow's

    x = tf.random.normal((batch, steps, units))
    variants = {"GRU": lambda: keras.layers.GRU(units)}
    for c in (copies, 1):
        variants[f"AM-GRU C={c} (cell)"] = lambda c=c: keras.layers.RNN(
            AssociativeGRUCell(units, num_copies=c)
        )
        variants[f"AM-GRU C={c} (AssociativeGRU)"] = lambda c=c: AssociativeGRU(units, num_copies=c)
        variants[f"AM-GRU C={c} (AssociativeGRU, fused_loop)"] = lambda c=c: AssociativeGRU(
            units, num_copies=c, fused_loop=True
        )
    runners, layers = {}, {}
    for name, fn in variants.items():
        built = []
        runners[name] = _train_step(fn, x, jit_compile=jit_compile, layers=built)
        layers[name] = built[0]
    samples = timing.interleaved(runners, rounds)
    peak = matmul_peak.peak_gflops()
    # The ratio is the median of per-round ratios: each round times every layer back to back,
    # so load that drifts on a shared machine cancels out of the pair.
    medians = timing.medians(samples)
    ratios = timing.median_ratio(samples, "GRU")
    rows = []
    for name in samples:
        # The products with the layer's weight matrices; the AM-GRU's permutation products
        # and its reads and writes are left out.
        flops = matmul_peak.weight_training_flops_per_token(layers[name]) * batch * steps
        rows.append(
            {
                "layer": name,
                "ms_per_time_step": medians[name] / steps,
                "ratio_to_gru": ratios[name],
                **matmul_peak.floor_columns(flops, medians[name], peak),
                "peak_gflops": round(peak, 1),
            }
        )
    return rows


def hypothesis_steps_for(
    batch, hypothesis_steps, units, copies, length, run_once=True, layers=None
):
    """``{"dual": step, "attention": step}``: training steps over the hypothesis, reading a
    premise memory (Dual AM-GRU) or ``length`` premise outputs (word-by-word attention). The
    two layers are appended to ``layers`` when given (dual first)."""
    import tensorflow as tf  # the timed steps are TensorFlow's

    x = tf.random.normal((batch, hypothesis_steps, units))
    memory = tf.random.normal((batch, units * copies)) * 0.1
    premise = tf.random.normal((batch, length, units))
    zeros_memory, last = tf.zeros_like(memory), tf.zeros((batch, units))
    dual = _train_step(
        lambda: keras.layers.RNN(DualAssociativeGRUCell(units, num_copies=copies)),
        x,
        [zeros_memory, last, memory],
        run_once=run_once,
        layers=layers,
    )
    attention = _train_step(
        lambda: AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(units))),
        x,
        run_once=run_once,
        layers=layers,
        call_kwargs={"memory": premise},
    )
    return {"dual": dual, "attention": attention}


def memory_child(spec):
    """Runs in a subprocess (``--child``): time and peak memory of one model's step."""
    import tensorflow as tf  # the timed steps are TensorFlow's

    keras.utils.set_random_seed(0)
    steps = hypothesis_steps_for(
        spec["batch"],
        spec["hypothesis_steps"],
        spec["units"],
        spec["copies"],
        spec["length"],
        run_once=False,
    )
    step = steps[spec["model"]]
    # Traced, never run: the peak includes the step's first run, which allocates its tensors.
    return peak_memory.measure_step(
        lambda: tf.constant(step()), spec["repeats"], include_first_run=True
    )


def hypothesis_step_rows(batch, hypothesis_steps, length):
    """``weight -> rows it multiplies`` over the hypothesis: every matrix one state per step,
    except the word-by-word attention's :math:`W^y` (``memory_kernel``), which acts on each of
    the ``length`` premise outputs once per call (:math:`W^y Y` does not change with the
    step). Its :math:`w` is a vector, left out as the other non-matrix products are."""
    per_step = batch * hypothesis_steps
    return lambda weight: (
        batch * length if weight.path.split("/")[-1] == "memory_kernel" else per_step
    )


def dual_vs_attention(
    batch, hypothesis_steps, units, copies, lengths, rounds, peak, memory_limit_gib=12.0
):
    rows = []
    for length in lengths:
        layers = []
        steps = hypothesis_steps_for(batch, hypothesis_steps, units, copies, length, layers=layers)
        medians = timing.medians(timing.interleaved(steps, rounds))
        row = {
            "premise_length": length,
            "dual_ms_per_step": medians["dual"] / hypothesis_steps,
            "attention_ms_per_step": medians["attention"] / hypothesis_steps,
            "dual_floats_read": units * copies,
            "attention_floats_read": units * length,
        }
        for model, layer in zip(("dual", "attention"), layers):
            flops = matmul_peak.weight_training_flops(
                layer, hypothesis_step_rows(batch, hypothesis_steps, length)
            )
            floor = matmul_peak.floor_columns(flops, medians[model], peak)
            row[f"{model}_gflop_per_step"] = floor["gflop_per_step"]
            row[f"{model}_share_of_peak"] = floor["share_of_peak"]
        for model in ("dual", "attention"):
            spec = {
                "model": model,
                "batch": batch,
                "hypothesis_steps": hypothesis_steps,
                "units": units,
                "copies": copies,
                "length": length,
                "repeats": rounds,
            }
            result = peak_memory.run_child(__file__, spec, memory_limit_gib)
            row[f"{model}_peak_mib"] = result.get("peak_mib", result.get("error"))
        rows.append(row)
    return rows


def snli_step_rows(batch, premise_length, hypothesis_length):
    """``weight -> rows it multiplies`` in a training step of the SNLI model: the encoder's
    matrices every premise and hypothesis position (layer 1 reads both with the same weights,
    layer 2 runs over both), the Dual AM-GRU's own matrices the hypothesis positions, the
    classifier's one pair per example."""

    def rows(weight):
        if "/dual_associative_gru_cell/" in weight.path:
            return batch * hypothesis_length
        if weight.path.startswith("encoder/"):
            return batch * (premise_length + hypothesis_length)
        return batch

    return rows


def snli_model_steps(rounds, peak, batch=50, premise_length=25, hypothesis_length=15, units=100):
    """Median training-step time of the SNLI model, cell form vs fused loop, and the fused
    loop against the same model with a Keras GRU as layer 1 (interleaved)."""
    rng = np.random.default_rng(0)
    premise = rng.integers(2, 1000, (batch, premise_length)).astype("int32")
    hypothesis = rng.integers(2, 1000, (batch, hypothesis_length)).astype("int32")
    labels = rng.integers(0, 3, batch)
    runners, flops = {}, {}
    count = snli_step_rows(batch, premise_length, hypothesis_length)
    for kind in ("am_gru", "dual_am_gru"):
        for fused in (False, True):
            model = snli_model(1000, kind=kind, units=units, embedding_dim=100, fused_loop=fused)
            compile_snli_model(model)
            model.train_on_batch((premise, hypothesis), labels)  # trace and compile
            flops[kind] = matmul_peak.weight_training_flops(model, count)
            runners[(kind, fused)] = lambda model=model: model.train_on_batch(
                (premise, hypothesis), labels
            )
    gru = snli_model(1000, kind="gru", units=units, embedding_dim=100)
    compile_snli_model(gru)
    gru.train_on_batch((premise, hypothesis), labels)
    flops["gru"] = matmul_peak.weight_training_flops(gru, count)
    runners["gru"] = lambda: gru.train_on_batch((premise, hypothesis), labels)
    samples = timing.interleaved(runners, rounds)
    medians = timing.medians(samples)
    to_gru = timing.median_ratio(samples, "gru")
    rows = []
    for kind in ("am_gru", "dual_am_gru"):
        rows.append(
            {
                "kind": kind,
                "cell_form_ms": medians[(kind, False)],
                "fused_loop_ms": medians[(kind, True)],
                # median over rounds of (cell form / fused loop), timed in the same round
                "speedup": timing.median_ratio(samples, (kind, True))[(kind, False)],
                "gru_model_ms": medians["gru"],
                "fused_to_gru": to_gru[(kind, True)],
                "gflop_per_step": flops[kind] / 1e9,
                "fused_share_of_peak": matmul_peak.floor_columns(
                    flops[kind], medians[(kind, True)], peak
                )["share_of_peak"],
                "gru_gflop_per_step": flops["gru"] / 1e9,
                "gru_share_of_peak": matmul_peak.floor_columns(flops["gru"], medians["gru"], peak)[
                    "share_of_peak"
                ],
            }
        )
    return rows


DUAL_FIGURE = (
    pathlib.Path(__file__).resolve().parents[2] / "docs" / "images" / ("dual_vs_word_by_word.png")
)


def draw_dual_figure(rows, path=DUAL_FIGURE):
    """Time and peak memory of a hypothesis step against premise length, both models, both
    axes logarithmic."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), dpi=80)
    time_axes, memory_axes = figure.subplots(1, 2)
    for index, (model, name) in enumerate(
        (("dual", "Dual AM-GRU (8 copies)"), ("attention", "LSTM, word-by-word attention"))
    ):
        for axes, key in ((time_axes, f"{model}_ms_per_step"), (memory_axes, f"{model}_peak_mib")):
            points = [
                (row["premise_length"], row[key])
                for row in rows
                if isinstance(row.get(key), (int, float))
            ]
            if points:
                axes.plot(*zip(*points), marker="o", color=f"C{index}", label=name)
    for axes, label in ((time_axes, "ms per hypothesis step"), (memory_axes, "peak MiB")):
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("premise length")
        axes.set_ylabel(label)
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize="small")
    time_axes.set_title("training time per hypothesis step")
    memory_axes.set_title("peak memory of a training step")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--rounds", type=options.positive_int, default=15, help="timed steps per variant"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds and lengths")
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile each training step (GRU and AM-GRU alike) with XLA",
    )
    parser.add_argument(
        "--memory-limit-gib",
        type=options.positive_float,
        default=12.0,
        help="address-space limit of each peak-memory child process",
    )
    add_update_docs_option(parser)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        peak_memory.report(memory_child(json.loads(args.child)))
        return
    rounds = 3 if args.quick else args.rounds
    lengths = (25, 100) if args.quick else (10, 25, 50, 100, 200, 500, 1000, 2000)
    keras.utils.set_random_seed(0)
    speed = speed_vs_gru(
        batch=50, steps=30, units=100, copies=8, rounds=rounds, jit_compile=args.jit_compile
    )
    print(json.dumps({"associative_memory_speed": speed}), flush=True)
    peak = speed[0]["peak_gflops"]
    scaling = dual_vs_attention(
        batch=50,
        hypothesis_steps=10,
        units=100,
        copies=8,
        lengths=lengths,
        rounds=rounds,
        peak=peak,
        memory_limit_gib=args.memory_limit_gib,
    )
    print(json.dumps({"dual_vs_word_by_word": scaling}), flush=True)
    snli_steps = snli_model_steps(rounds, peak)
    print(json.dumps({"snli_model_step": snli_steps}), flush=True)
    if args.update_docs:
        update_docs(
            "associative-memory-speed",
            speed,
            [
                ("layer", "layer"),
                ("ms_per_time_step", "ms / time step"),
                ("ratio_to_gru", "× keras GRU"),
                ("gflop_per_step", "GFLOP/step"),
                ("share_of_peak", "share of matmul peak"),
            ],
            f"Training step (forward + backward) per time step, batch 50, 100 units, T=30, "
            f"median of {rounds} interleaved rounds (the ratio: median of the per-round "
            f"ratios), {'XLA' if args.jit_compile else 'no model-level XLA'} on either side "
            f"(``fused_loop`` compiles its own loops), {os.cpu_count()} CPU cores. GFLOP/step: "
            "the products with the layer's weight matrices (6 × their parameters per token; "
            "the AM-GRU's permutation products, reads and writes left out); share of peak: that "
            "over the step's time, against this machine's float32 matrix-product rate measured "
            f"in the same run ({speed[0]['peak_gflops']} GFLOP/s). Target: fused, 8 copies "
            "≤ 1.5× the GRU.",
        )
        update_docs(
            "dual-vs-word-by-word",
            scaling,
            [
                ("premise_length", "premise length"),
                ("dual_ms_per_step", "Dual ms/step"),
                ("attention_ms_per_step", "attention ms/step"),
                ("dual_peak_mib", "Dual peak (MiB)"),
                ("attention_peak_mib", "attention peak (MiB)"),
                ("dual_share_of_peak", "Dual share of peak"),
                ("attention_share_of_peak", "attention share of peak"),
            ],
            f"Hypothesis-side training cost per step against premise length (batch 50, 100 "
            f"units, 10 hypothesis steps, median of {rounds} interleaved rounds, "
            f"{os.cpu_count()} CPU cores): the Dual AM-GRU (8 copies) reads a fixed-size "
            f"memory of the premise ({100 * 8} floats a row), the LSTM with "
            "`WordByWordAttention` (Rocktäschel et al. 2016) every premise output (100 floats "
            "each). Peak = resident memory during the training steps (the first run included) "
            "above the level after tracing, each model and length in its own process. Share of "
            "peak: the products with the layer's weight matrices over the 10 hypothesis steps "
            "(6 × their parameters per row; the attention's W^y once per premise output, its "
            "other matrices and the Dual AM-GRU's once per step) over the step's time, against "
            f"the matrix-product rate measured in the same run ({peak} GFLOP/s).",
            footer=f".. image:: images/{DUAL_FIGURE.name}\n"
            "   :alt: time and peak memory of a hypothesis step against premise length, the "
            "Dual AM-GRU and word-by-word attention",
        )
        draw_dual_figure(scaling)
        update_docs(
            "snli-model-step",
            snli_steps,
            [
                ("kind", "layer 1"),
                ("cell_form_ms", "cell form (ms)"),
                ("fused_loop_ms", "fused_loop=True (ms)"),
                ("speedup", "speed-up"),
                ("gru_model_ms", "GRU model (ms)"),
                ("fused_to_gru", "fused × GRU model"),
                ("gflop_per_step", "GFLOP/step"),
                ("fused_share_of_peak", "fused share of peak"),
                ("gru_gflop_per_step", "GRU model GFLOP/step"),
                ("gru_share_of_peak", "GRU model share of peak"),
            ],
            f"SNLI model training step (``train_on_batch``, batch 50, 100 units, 8 copies, "
            f"100-d embeddings, premise 25 / hypothesis 15 tokens), median of {rounds} "
            f"interleaved rounds (speed-up and × GRU: medians of per-round ratios); the GRU "
            f"model is the same model with ``keras.layers.GRU`` as layer 1, {os.cpu_count()} "
            "CPU cores. GFLOP/step: the products with the weight matrices (6 × their "
            "parameters per row: the encoder's every premise and hypothesis position, the "
            "Dual AM-GRU's own every hypothesis position, the classifier's one per pair; the "
            "holographic memory's permutations, reads and writes left out); share of peak: "
            "that over the step's time, against the matrix-product rate measured in the same "
            f"run ({peak} GFLOP/s).",
        )


if __name__ == "__main__":
    main()
