"""What a run of `benchmarks.papers.lm_equal_budget` costs on this machine, measured before running
it.

The equal-budget run trains each model for up to ``--max-epochs`` epochs; on a large corpus that
can take far longer than one is willing to wait. This script answers "how long?" without
training: for each model (built with its equal-budget width, exactly as the run builds it) it
times ``model.fit`` on ``--steps`` consecutive training batches of the real corpus and
``model.evaluate`` on as many validation batches, ``--repeats`` times each after a warm-up
(tracing and XLA compilation), and takes the medians. One epoch of the run is one pass over the
training split plus one scoring of the complete validation split, so

    epoch minutes = (train batches x train step + valid batches x scoring step) / 60

and the run's upper bound is ``--max-epochs`` such epochs (early stopping can end it sooner).
When the corpus's results file (`benchmarks.papers.lm_equal_budget`, same settings) holds a finished
model, its measured minutes per epoch are shown beside the estimate.

The results go to ``benchmarks/results/lm_equal_budget_cost_<corpus>.json``; ``--update-docs``
writes one results table with the rows of every corpus measured so far.

Example::

    python -m benchmarks.papers.lm_equal_budget_cost --corpus wikitext2 --update-docs
"""

import argparse
import json
import os
import pathlib
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from benchmarks import results_file, timing  # noqa: E402
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.papers import lm_equal_budget as equal_budget  # noqa: E402
from examples.harness import options  # noqa: E402
from examples.language_modeling.evaluation import evaluate_language_model  # noqa: E402
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback  # noqa: E402

DOCS_BLOCK = "lm-equal-budget-cost"
COLUMNS = [
    ("corpus", "corpus"),
    ("model", "model"),
    ("hidden", "hidden"),
    ("parameters", "parameters"),
    ("train_step_seconds", "train step (s)"),
    ("train_step_range", "train step, fastest and slowest pass (s)"),
    ("scoring_step_seconds", "scoring step (s)"),
    ("epoch_minutes", "minutes per epoch"),
    ("max_epochs_hours", "hours for the epoch cap"),
    ("measured_epoch_minutes", "minutes per epoch, measured in the run"),
]


def cost_file(corpus):
    return equal_budget.RESULTS / f"lm_equal_budget_cost_{corpus}.json"


def first_batches(batches, count):
    """The first ``count`` batches of a split (all of them when it has fewer)."""
    return batches.take(count)


def seconds_per_batch(run, batches, repeats):
    """The seconds per batch of each of ``repeats`` timed calls ``run(batches)``, after one
    untimed call that traces and compiles."""
    run(batches)
    return [
        timing.elapsed_ms(lambda: run(batches)) / 1000 / batches.num_batches for _ in range(repeats)
    ]


def measured_epoch_minutes(args, settings):
    """``{model: minutes per epoch}`` of the models the corpus's run has finished."""
    report = equal_budget.read_report(equal_budget.results_file(args), settings)
    rows = report["rows"] if report else []
    return {row["model"]: row["minutes"] / row["epochs_trained"] for row in rows}


def model_cost(kind, hidden, vocabulary_size, batches, args):
    model = equal_budget.build_for_training(kind, hidden, vocabulary_size, args)
    train = first_batches(batches["train"], args.steps)
    resets = StateResetCallback(train.resets)

    def fit(part):
        model.fit(part.dataset(), epochs=1, callbacks=[resets], verbose=0, shuffle=False)

    train_steps = seconds_per_batch(fit, train, args.repeats)
    scoring_steps = seconds_per_batch(
        lambda part: evaluate_language_model(model, part),
        first_batches(batches["valid"], args.steps),
        args.repeats,
    )
    train_step, scoring_step = statistics.median(train_steps), statistics.median(scoring_steps)
    epoch_seconds = (
        batches["train"].num_batches * train_step + batches["valid"].num_batches * scoring_step
    )
    return {
        "corpus": args.corpus,
        "model": kind,
        "hidden": hidden,
        "parameters": equal_budget.parameter_count(model),
        "train_step_seconds": train_step,
        "scoring_step_seconds": scoring_step,
        "train_step_range": [min(train_steps), max(train_steps)],
        "epoch_minutes": epoch_seconds / 60,
        "max_epochs_hours": epoch_seconds * args.max_epochs / 3600,
    }


def measure(args):
    settings = {name: getattr(args, name) for name in equal_budget.SETTINGS}
    corpus, batches = equal_budget.load_corpus(args)
    vocabulary_size = len(corpus.vocabulary)
    hidden = equal_budget.widths(vocabulary_size, args.models, args)
    measured = measured_epoch_minutes(args, settings)
    rows = []
    for kind in args.models:
        row = model_cost(kind, hidden[kind], vocabulary_size, batches, args)
        row["measured_epoch_minutes"] = measured.get(kind)
        rows.append(row)
        print(f"{kind}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return {
        "corpus": args.corpus,
        "vocabulary": vocabulary_size,
        "train_batches": batches["train"].num_batches,
        "valid_batches": batches["valid"].num_batches,
        "settings": settings,
        "steps": args.steps,
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "rows": rows,
    }


def write_docs(reports):
    """One table with the rows of every corpus's cost report."""
    rows = [row for report in reports for row in report["rows"]]
    first = reports[0]
    corpora = ", ".join(
        f"{equal_budget.CORPUS_NAMES[r['corpus']]} ({r['train_batches']} training and "
        f"{r['valid_batches']} validation batches, vocabulary {r['vocabulary']:,})"
        for r in reports
    )
    caption = (
        f"What one epoch of the equal-budget run costs on a machine with {first['cpus']} CPU "
        f"cores and {first['gpus'] or 'no'} GPU, estimated by "
        "``benchmarks/papers/lm_equal_budget_cost.py`` from the median of "
        f"{first['repeats']} timed passes over {first['steps']} real batches per model and "
        f"split: {corpora}. The fastest and slowest training pass show how much identical "
        "passes vary on the machine. Minutes per epoch: one pass over the training split plus "
        "one scoring of the validation split. Hours for the epoch cap: that many epochs, the "
        "run's upper bound. The last column is the run's own wall clock per epoch where that "
        "model has finished (the run shared the machine with other work at times, so it can be "
        "longer)."
    )
    return update_docs(
        DOCS_BLOCK, rows, COLUMNS, caption, insert_after=equal_budget.DOCS_BLOCKS["ptb"]
    )


def saved_reports():
    """The cost reports on disk, PTB first."""
    reports = (results_file.read(cost_file(corpus)) for corpus in equal_budget.DOCS_BLOCKS)
    return [report for report in reports if report is not None]


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    equal_budget.add_model_options(parser)
    parser.add_argument(
        "--steps",
        type=options.positive_int,
        default=10,
        help="batches per timed pass, for training and for scoring",
    )
    parser.add_argument(
        "--repeats",
        type=options.positive_int,
        default=5,
        help="timed passes per model and split (their median is used)",
    )
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        help="where the JSON goes (default benchmarks/results/lm_equal_budget_cost_<corpus>.json)",
    )
    add_update_docs_option(parser)
    args = parser.parse_args(argv)
    args.output = args.output or cost_file(args.corpus)
    return args


def main(argv=None):
    args = parse_args(argv)
    report = measure(args)
    results_file.write(args.output, report)
    if args.update_docs:
        write_docs(saved_reports())
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
