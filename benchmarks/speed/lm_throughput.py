"""Training throughput of each language-model kind against a bare LSTM LM; prints JSON.

Builds a model of every memory kind of `examples.language_modeling.memories` (lstm, attention,
key_value, key_value_predict,
ngram; parallel form, stateful, XLA) at one size (default: the paper's 300 units, batch 64,
20 steps, 10k-word softmax) in one process, times training steps with the kinds interleaved,
and reports for each kind its median step, tokens per second, its ratio to the bare LSTM and
the share of the machine's float32 matrix-multiply peak it reaches.

The peak (`benchmarks.matmul_peak.peak_gflops`) is measured in the same process, before and
after the models; the larger is used. FLOPs per token count the products with weight matrices
(`benchmarks.matmul_peak.weight_training_flops_per_token`), which is nearly all of each step's
arithmetic; the attention's window products (2 L (A + v) per token forward) are left out, so
the share is slightly understated for the attention kinds.

With ``--equal-parameters`` every memory kind gets the LSTM width at which it has as many
parameters as the bare LSTM at ``--hidden``, as in the equal-budget comparison of
`benchmarks.papers.lm_equal_budget` (its table is a block of its own on the results page).

Usage::

    python -m benchmarks.speed.lm_throughput                  # JSON on stdout
    python -m benchmarks.speed.lm_throughput --update-docs  # also rewrite the results table
    # the PTB comparison's models (4.3M weights):
    python -m benchmarks.speed.lm_throughput --hidden 200 --dropout 0.4 --equal-parameters
"""

import argparse
import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

from benchmarks import matmul_peak, timing
from benchmarks.docs_tables import add_update_docs_option, update_docs

ROOT = pathlib.Path(__file__).resolve().parents[2]

COLUMNS = [
    ("kind", "kind"),
    ("hidden", "hidden"),
    ("parameters", "parameters"),
    ("median_ms", "median step (ms)"),
    ("tokens_per_second", "tokens/s"),
    ("ratio_to_lstm", "step × bare LSTM"),
    ("gflop_per_step", "GFLOP/step"),
    ("share_of_peak", "share of matmul peak"),
]


def widths(kinds, args):
    """Each kind's LSTM width: ``--hidden``, or with ``--equal-parameters`` the width at which
    the kind has as many parameters as the LSTM at ``--hidden`` (the equal-budget comparison of
    `benchmarks.papers.lm_equal_budget`)."""
    from examples.language_modeling.parameter_budget import (
        count_language_model_parameters,
        units_for_parameter_budget,
    )

    if not args.equal_parameters:
        return dict.fromkeys(kinds, args.hidden)
    common = dict(embedding_dim=args.embedding_dim, window=args.window, ngram=args.ngram)
    budget = count_language_model_parameters(args.vocab, kind="lstm", units=args.hidden, **common)
    return {
        kind: args.hidden
        if kind == "lstm"
        else units_for_parameter_budget(args.vocab, kind, budget, **common)[0]
        for kind in kinds
    }


def build_models(kinds, args):
    """The compiled, stateful models of ``kinds`` (kind -> LSTM width)."""
    from examples.language_modeling.memories import language_model
    from tf_memlayers.models.language_model import compile_language_model

    models = {}
    for kind, hidden in kinds.items():
        model = language_model(
            args.vocab,
            kind=kind,
            units=hidden,
            embedding_dim=args.embedding_dim,
            window=args.window,
            ngram=args.ngram,
            dropout=args.dropout,
            batch_size=args.batch_size,
            sequence_length=args.seq_len,
            stateful=True,
        )
        models[kind] = compile_language_model(model, jit_compile=True)
    return models


def time_steps(models, args):
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.seq_len)
    x = rng.integers(0, args.vocab, shape).astype("int32")
    y = rng.integers(0, args.vocab, shape).astype("int32")
    for model in models.values():  # trace, compile and warm up
        for _ in range(3):
            model.train_on_batch(x, y)
    runners = {
        kind: (lambda model=model: model.train_on_batch(x, y)) for kind, model in models.items()
    }
    samples = timing.interleaved(runners, args.rounds)
    return {kind: ms / 1000 for kind, ms in timing.medians(samples).items()}  # seconds


def measure(args):
    from examples.language_modeling.memories import KINDS

    peak_before = matmul_peak.peak_gflops()
    hidden = widths(KINDS, args)
    models = build_models(hidden, args)
    medians = time_steps(models, args)
    peak = max(peak_before, matmul_peak.peak_gflops())
    tokens = args.batch_size * args.seq_len
    rows = []
    for kind, model in models.items():
        step = medians[kind]
        flops = matmul_peak.weight_training_flops_per_token(model) * tokens
        rows.append(
            {
                "kind": kind,
                "hidden": hidden[kind],
                "parameters": model.count_params(),
                "median_ms": 1000 * step,
                "tokens_per_second": round(tokens / step),
                "ratio_to_lstm": step / medians["lstm"],
                **matmul_peak.floor_columns(flops, 1000 * step, peak),
            }
        )
    settings = {k: getattr(args, k) for k in SETTINGS}
    return {"matmul_peak_gflops": peak, "settings": settings, "rows": rows}


SETTINGS = (
    "vocab",
    "hidden",
    "embedding_dim",
    "equal_parameters",
    "dropout",
    "window",
    "ngram",
    "batch_size",
    "seq_len",
    "rounds",
)


def write_docs(results):
    """Writes the table of ``results`` into docs/results.rst: the block ``lm-throughput``, or
    ``lm-throughput-equal-parameters`` for a run with ``--equal-parameters``."""
    s = results["settings"]
    equal = s.get("equal_parameters", False)
    shape = (
        f"the LSTM at {s['hidden']} and every kind at the width that gives it as many "
        "parameters (the PTB comparison's budget)"
        if equal
        else f"hidden {s['hidden']}"
    )
    update_docs(
        "lm-throughput-equal-parameters" if equal else "lm-throughput",
        results["rows"],
        COLUMNS,
        f"Training throughput of each language model (parallel form, stateful, XLA; {shape}; "
        f"embedding {s.get('embedding_dim', s['hidden'])}, dropout {s.get('dropout', 0.0)}, "
        f"batch {s['batch_size']}, {s['seq_len']} steps, {s['vocab']}-word softmax, window "
        f"{s['window']}, N = {s['ngram']}), median of {s['rounds']} interleaved steps in one "
        "process. Share of peak: weight-matrix FLOPs per step over the time, divided by this "
        "machine's float32 matmul peak measured in the same run "
        f"({results['matmul_peak_gflops']:.0f} GFLOP/s)."
        + (" Target: every kind within 1.2× the LSTM's step." if equal else ""),
        insert_after="lm-throughput" if equal else None,
    )


def parse_args(argv=None):
    from examples.harness import options

    parser = options.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--vocab", type=options.int_at_least(2), default=10000, help="vocabulary size"
    )
    parser.add_argument(
        "--hidden",
        type=options.positive_int,
        default=300,
        help="LSTM size (of the bare LSTM with --equal-parameters)",
    )
    parser.add_argument(
        "--embedding-dim", type=options.positive_int, help="embedding size (default: --hidden)"
    )
    parser.add_argument(
        "--equal-parameters",
        action="store_true",
        help="give each memory kind the LSTM width at which it has as many "
        "parameters as the bare LSTM (the equal-budget comparison)",
    )
    parser.add_argument(
        "--dropout",
        type=options.fraction,
        default=0.0,
        help="dropout of the models, as build_language_model takes it",
    )
    parser.add_argument("--window", type=options.positive_int, default=5, help="attention window")
    parser.add_argument("--ngram", type=options.positive_int, default=4, help="N of the N-gram RNN")
    parser.add_argument(
        "--batch-size", type=options.positive_int, default=64, help="rows per batch"
    )
    parser.add_argument(
        "--seq-len", type=options.positive_int, default=20, help="truncated-BPTT length"
    )
    parser.add_argument(
        "--rounds", type=options.positive_int, default=30, help="timed steps per kind"
    )
    parser.add_argument("--output", help="also save the JSON here")
    add_update_docs_option(parser)
    parser.add_argument("--from-json", help="render the results table from a saved run")
    args = parser.parse_args(argv)
    if args.embedding_dim is None:
        args.embedding_dim = args.hidden
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        results = json.loads(pathlib.Path(args.from_json).read_text(encoding="utf-8"))
    else:
        results = measure(args)
        print(json.dumps(results, indent=1))
        if args.output:
            pathlib.Path(args.output).write_text(json.dumps(results, indent=1) + "\n")
    if args.update_docs:
        write_docs(results)
    return results


if __name__ == "__main__":
    main()
