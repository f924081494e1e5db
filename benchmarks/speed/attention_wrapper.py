"""Speed of attention over a memory inside the loop: the wrapped LSTM's training step against
the bare cell's (prints JSON; ``--update-docs`` fills docs/results.rst).

One training step (``train_on_batch``: forward, backward, SGD update; XLA unless
``--no-jit-compile``) of ``keras.layers.RNN(LSTMCell(100))`` over a hypothesis of T = 20
steps, batch 32, 100-d inputs, followed by ``Dense(3)``, against the same LSTM cell wrapped
to attend at every step over a memory of L vectors of width 100 (an encoder's outputs, given
to each call), run by `AttentionRNN`: `AttentionWrapper` with Luong et al.'s dot score after
the cell without input feeding (the cell's own step unchanged) and their general score with
input feeding (the cell's input joined with the previous attention vector), Bahdanau et al.'s
RNNsearch (the additive score before the cell, the context joined to its input), and
`WordByWordAttention` (Rocktäschel et al. 2016). Without input feeding nothing of the
attention reaches the next step, so `AttentionRNN` runs the cell's loop alone and attends
for all steps in batched products after it; the others attend inside the loop, step by
step. The variants are timed
interleaved in one process (`benchmarks.timing`): medians in milliseconds, and the ratio to
the bare cell as the median of the per-round ratios. A step costs time linear in L, so the
table gives several L; the goal is the wrapped LSTM within 1.5× the bare cell at L = 50.

Runs on whichever Keras backend is set (``KERAS_BACKEND``)::

    python -m benchmarks.speed.attention_wrapper --update-docs
"""

import argparse
import json
import os
import sys

import numpy as np

from benchmarks import timing
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.gpu import ArgumentParser, positive

BATCH, STEPS, UNITS, CLASSES = 32, 20, 100, 3
GOAL_LENGTH, GOAL_RATIO = 50, 1.5


def _wrapped(make_cell):
    """A variant reading the memory: `AttentionRNN` over ``make_cell(LSTMCell)``."""

    def make():
        import keras

        from tf_memlayers import AttentionRNN

        return AttentionRNN(make_cell(keras.layers.LSTMCell(UNITS))), True

    return make


def _bare():
    import keras

    return keras.layers.RNN(keras.layers.LSTMCell(UNITS)), False


def _attention_wrapper(**options):
    def make(cell):
        from tf_memlayers import AttentionWrapper

        return AttentionWrapper(cell, **options)

    return make


def _word_by_word(cell):
    from tf_memlayers import WordByWordAttention

    return WordByWordAttention(cell)


#: The variants: ``name -> () -> (the recurrent layer over the step's inputs, whether it reads
#: the memory)``; the first is the bare cell every ratio is taken against. (Keras is imported
#: when they are made, so that a bad option is refused before TensorFlow starts.)
VARIANTS = {
    "LSTMCell": _bare,
    "Luong dot, no input feeding": _wrapped(_attention_wrapper(score="dot", input_feeding=False)),
    "Luong general, input feeding": _wrapped(_attention_wrapper(score="general")),
    "RNNsearch (additive, before)": _wrapped(
        _attention_wrapper(score="additive", position="before")
    ),
    "WordByWordAttention": _wrapped(_word_by_word),
}


def training_step(variant, length, jit_compile, rng):
    """A compiled model of ``variant`` and a runner of one of its training steps on fixed
    data (the memory ``[BATCH, length, UNITS]``)."""
    import keras

    layer, reads_memory = VARIANTS[variant]()
    sequences = keras.Input((STEPS, UNITS))
    inputs, data = [sequences], [rng.normal(size=(BATCH, STEPS, UNITS)).astype("float32")]
    if reads_memory:
        memory = keras.Input((length, UNITS))
        inputs.append(memory)
        data.append(rng.normal(size=(BATCH, length, UNITS)).astype("float32"))
        features = layer(sequences, memory=memory)
    else:
        features = layer(sequences)
    model = keras.Model(inputs, keras.layers.Dense(CLASSES)(features))
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss="mse", jit_compile=jit_compile)
    targets = np.zeros((BATCH, CLASSES), "float32")
    model.train_on_batch(data, targets)  # trace and compile
    return lambda: model.train_on_batch(data, targets), model.count_params()


def measure(lengths, rounds, jit_compile):
    """One row per memory length and variant: median ms, × the bare cell, weights."""
    rng = np.random.default_rng(0)
    rows = []
    for length in lengths:
        runners, weights = {}, {}
        for variant in VARIANTS:
            runners[variant], weights[variant] = training_step(variant, length, jit_compile, rng)
        samples = timing.interleaved(runners, rounds)
        medians = timing.medians(samples)
        ratios = timing.median_ratio(samples, "LSTMCell")
        for variant in VARIANTS:
            rows.append(
                {
                    "memory_length": length,
                    "variant": variant,
                    "median_ms": medians[variant],
                    "ratio_to_cell": ratios[variant],
                    "weights": weights[variant],
                }
            )
        print(json.dumps(rows[-len(VARIANTS) :]), file=sys.stderr, flush=True)
    return rows


def parse_args(argv=None):
    parser = ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--rounds", type=positive(int), default=30, help="timed steps per variant and length"
    )
    parser.add_argument(
        "--lengths",
        type=positive(int),
        nargs="+",
        default=[10, GOAL_LENGTH, 200],
        help="memory lengths L",
    )
    parser.add_argument(
        "--no-jit-compile",
        dest="jit_compile",
        action="store_false",
        help="run the training steps without XLA",
    )
    add_update_docs_option(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import keras

    keras.utils.set_random_seed(0)
    rows = measure(args.lengths, args.rounds, args.jit_compile)
    results = {
        "settings": {
            "batch": BATCH,
            "steps": STEPS,
            "units": UNITS,
            "rounds": args.rounds,
            "jit_compile": args.jit_compile,
            "backend": keras.backend.backend(),
            "cpu_count": os.cpu_count(),
        },
        "rows": rows,
    }
    print(json.dumps(results))
    if args.update_docs:
        update_docs(
            "attention-wrapper-speed",
            rows,
            [
                ("memory_length", "L"),
                ("variant", "variant"),
                ("median_ms", "median step (ms)"),
                ("ratio_to_cell", "× bare cell"),
                ("weights", "weights"),
            ],
            f"One training step (``train_on_batch``, "
            f"{'XLA' if args.jit_compile else 'no XLA'}, Keras's "
            f"{keras.backend.backend()} backend, {os.cpu_count()} CPU cores) of an LSTM cell "
            f"({UNITS} units) over {STEPS} steps, batch {BATCH}, ``Dense({CLASSES})`` on its last "
            f"output: the bare cell in ``keras.layers.RNN`` against the cell wrapped to attend "
            f"at every step over a memory of L vectors of width {UNITS} "
            "(``benchmarks/speed/attention_wrapper.py``), medians of "
            f"{args.rounds} interleaved rounds (× bare cell: the median of the per-round "
            f"ratios). Goal: within {GOAL_RATIO}× the bare cell at L = {GOAL_LENGTH}. Where "
            "the attention feeds nothing back (Luong's score without input feeding), the "
            "cell's loop runs alone and the attention of all steps follows it in batched "
            "products. Where the context or the previous attention vector joins the cell's "
            "input (input feeding, RNNsearch), the attention runs inside the loop, step by "
            "step, and the cell's own input product is twice as wide as the bare cell's; the "
            "word-by-word attention adds three products of its own per step (the query, W^t "
            "and the output).",
        )


if __name__ == "__main__":
    main()
