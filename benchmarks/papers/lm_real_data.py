#!/usr/bin/env python
"""Language models on real data: LSTM vs the Daniluk et al. (2017) memory layers, on PTB.

Trains each model (LSTM, attention, key-value, key-value-predict, N-gram RNN) with the paper's
training settings (Adam 1e-3, batch 64, BPTT 20, clipping 5, forget bias 1, U(-0.1, 0.1)) at
an equal parameter budget, as the paper did: the LSTM baseline has ``--hidden`` units and
each memory model gets the LSTM width whose parameter count is closest to the baseline's
(`units_for_parameter_budget`). Every model trains for the same number of epochs (or
``--max-steps``), then validation and test perplexity are computed over the complete splits
(exp of the mean NLL over all target tokens, states carried through each split). For the
attention models the average attention weight per window position over validation text is
reported too (Daniluk et al. Fig. 3: does attention concentrate on the last few positions?).
Prints one JSON object; with ``--update-docs`` writes the results-page block ``lm-real-data``.

A few epochs on a 2-core CPU are far from the paper's converged models: the table ranks the
models at equal training, it does not reproduce the paper's figures.

Example::

    python -m benchmarks.papers.lm_real_data --epochs 1 --update-docs
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

from benchmarks import results_file
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.papers.lm_equal_budget import attention_by_position, model_arguments
from benchmarks.results_file import ResultsFile
from examples.harness import options
from examples.language_modeling import lm_batches, lm_corpora, token_streams
from examples.language_modeling.evaluation import evaluate_language_model
from examples.language_modeling.memories import (
    ATTENTION_KINDS,
    KINDS,
    language_model,
)
from examples.language_modeling.parameter_budget import (
    count_language_model_parameters,
    units_for_parameter_budget,
)
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback
from tf_memlayers.models.language_model import (
    DANILUK_DEFAULTS,
    compile_language_model,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]

COLUMNS = [
    ("model", "model"),
    ("hidden", "hidden"),
    ("parameters", "parameters"),
    ("train_steps", "steps"),
    ("epochs_trained", "epochs"),
    ("valid_perplexity", "valid ppl"),
    ("test_perplexity", "test ppl"),
    ("attention_by_position", "attention by position (oldest … newest)"),
]


def default_data_dir():
    shared = os.environ.get("TF_MEMLAYERS_DATA")
    return pathlib.Path(shared) / "ptb" if shared else ROOT.parent / "shared" / "data" / "ptb"


class StepBudget(keras.callbacks.Callback):
    """Counts training steps and stops after ``max_steps`` (if given)."""

    def __init__(self, max_steps=None):
        super().__init__()
        self.max_steps = max_steps
        self.steps = 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.max_steps is not None and self.steps >= self.max_steps:
            self.model.stop_training = True


def train_and_evaluate(kind, hidden, corpus, batches, args):
    keras.backend.clear_session()
    keras.utils.set_random_seed(args.seed)
    model = language_model(
        len(corpus.vocabulary),
        **model_arguments(kind, hidden, args),
        batch_size=args.batch_size,
        sequence_length=args.seq_len,
    )
    compile_language_model(model, jit_compile=not args.no_jit)
    budget = StepBudget(args.max_steps)
    started = time.time()
    model.fit(
        batches["train"].dataset(),
        epochs=args.epochs,
        callbacks=[StateResetCallback(batches["train"].resets), budget],
        verbose=args.verbose,
    )
    train_minutes = (time.time() - started) / 60
    results = {split: evaluate_language_model(model, batches[split]) for split in ("valid", "test")}
    row = {
        "model": kind,
        "hidden": hidden,
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "train_steps": budget.steps,
        "epochs_trained": round(budget.steps / batches["train"].num_batches, 2),
        "train_minutes": round(train_minutes, 2),
        "valid_perplexity": round(results["valid"]["perplexity"], 1),
        "test_perplexity": round(results["test"]["perplexity"], 1),
    }
    if kind in ATTENTION_KINDS:
        row["attention_by_position"] = [
            round(weight, 3)
            for weight in attention_by_position(
                model, kind, hidden, len(corpus.vocabulary), batches["valid"], args
            )
        ]
    return row


def widths(corpus, kinds, args):
    """Each kind's LSTM width: ``--hidden`` for the LSTM, equal parameters for the others."""
    if args.no_equal_parameters:
        return {kind: args.hidden for kind in kinds}
    vocab = len(corpus.vocabulary)
    common = dict(embedding_dim=args.embedding_dim, window=args.window, ngram=args.ngram)
    budget = count_language_model_parameters(vocab, kind="lstm", units=args.hidden, **common)
    return {
        kind: args.hidden
        if kind == "lstm"
        else units_for_parameter_budget(vocab, kind, budget, **common)[0]
        for kind in kinds
    }


def parse_args(argv=None):
    d = DANILUK_DEFAULTS
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        default=str(default_data_dir()),
        help="folder with ptb.{train,valid,test}.txt (or another corpus)",
    )
    parser.add_argument(
        "--models", nargs="+", choices=KINDS, default=list(KINDS), help="the models to train"
    )
    parser.add_argument(
        "--epochs", type=options.positive_int, default=1, help="training epochs per model"
    )
    parser.add_argument(
        "--max-steps",
        type=options.positive_int,
        help="stop each model after this many steps instead",
    )
    parser.add_argument(
        "--hidden",
        type=options.positive_int,
        default=200,
        help="LSTM baseline width; the others get its parameter count",
    )
    parser.add_argument(
        "--no-equal-parameters",
        action="store_true",
        help="give every model the width --hidden instead",
    )
    parser.add_argument(
        "--probe-segments",
        type=options.positive_int,
        default=10,
        help="validation segments per row joined for the attention average",
    )
    parser.add_argument(
        "--embedding-dim", type=options.positive_int, default=200, help="word vector size"
    )
    parser.add_argument(
        "--window", type=options.positive_int, default=d["window"], help="attention window"
    )
    parser.add_argument(
        "--ngram", type=options.positive_int, default=d["ngram"], help="N of the N-gram RNN"
    )
    parser.add_argument(
        "--batch-size", type=options.positive_int, default=d["batch_size"], help="rows per batch"
    )
    parser.add_argument(
        "--seq-len",
        type=options.positive_int,
        default=d["sequence_length"],
        help="truncated-BPTT length",
    )
    parser.add_argument("--no-jit", action="store_true", help="do not compile with XLA")
    parser.add_argument("--seed", type=options.non_negative_int, default=0, help="random seed")
    parser.add_argument(
        "--verbose", type=int, choices=(0, 1, 2), default=0, help="Keras progress output"
    )
    parser.add_argument(
        "--json-out",
        help="also write the JSON here (after each model; a "
        "rerun with the same settings skips the models already there)",
    )
    add_update_docs_option(parser)
    parser.add_argument(
        "--from-json", help="do not train: take the report written by an earlier --json-out"
    )
    return parser.parse_args(argv)


def write_docs(report):
    """Writes the results-page block ``lm-real-data`` from a report."""
    rows, settings = report["rows"], report["settings"]
    budget = (
        f"{settings['max_steps']} steps"
        if settings.get("max_steps")
        else f"{settings['epochs']} epoch(s) ({report['batches_per_epoch']} steps each)"
    )
    if settings.get("no_equal_parameters"):
        widths = f"Every model has {settings['hidden']} LSTM units"
    else:
        widths = (
            f"Equal parameter budget: the LSTM has {settings['hidden']} units and every memory "
            "model the width whose parameter count is closest"
        )
    caption = (
        f"{report['corpus'].upper()} word-level perplexity (complete validation / test splits) "
        f"after {budget} of {settings['batch_size']}x{settings['seq_len']} tokens per model "
        f"on a 2-core CPU. {widths}. Embedding {settings['embedding_dim']}, window "
        f"{settings['window']}, "
        f"N = {settings['ngram']}, Adam 1e-3, clip 5, forget bias 1, U(-0.1, 0.1). Far from "
        "converged: this ranks the models at equal training, it does not reproduce the "
        "paper. Attention by position: mean weight per window slot over validation text. "
        "(Wall times are in the saved JSON; on a shared machine they are not comparable.)"
    )
    return update_docs("lm-real-data", rows, COLUMNS, caption)


def saved_rows(path, settings):
    """Rows of an earlier, interrupted run with the same settings (saved after each model)."""
    return ResultsFile(path, settings, rows="rows", key=("model",)).kept_rows() if path else []


def run(args):
    corpus = lm_corpora.load_corpus(args.data_dir)
    batches = {
        split: lm_batches.make_bptt_batches(corpus.split(split), args.batch_size, args.seq_len)
        for split in token_streams.SPLITS
    }
    settings = {
        k: getattr(args, k)
        for k in (
            "epochs",
            "max_steps",
            "hidden",
            "embedding_dim",
            "window",
            "ngram",
            "batch_size",
            "seq_len",
            "seed",
            "no_equal_parameters",
        )
    }
    report = {
        "corpus": corpus.name,
        "train_tokens": corpus.train.num_tokens,
        "batches_per_epoch": batches["train"].num_batches,
        "settings": settings,
        "rows": saved_rows(args.json_out, settings),
    }
    done = {row["model"] for row in report["rows"]}
    kinds = [kind for kind in args.models if kind not in done]
    hidden = widths(corpus, kinds, args)
    for kind in kinds:
        report["rows"].append(train_and_evaluate(kind, hidden[kind], corpus, batches, args))
        print(json.dumps(report["rows"][-1]), file=sys.stderr, flush=True)
        if args.json_out:  # an interrupted run continues with the next model
            results_file.write(args.json_out, report)
    order = {kind: i for i, kind in enumerate(args.models)}
    report["rows"].sort(key=lambda row: order.get(row["model"], len(order)))
    return report


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        report = results_file.read_or_exit(args.from_json)
    else:
        report = run(args)
    print(json.dumps(report, indent=1))
    if args.json_out:
        results_file.write(args.json_out, report)
    if args.update_docs:
        write_docs(report)
    return report


if __name__ == "__main__":
    main()
