#!/usr/bin/env python
"""Language models on real data: LSTM vs the Daniluk et al. (2017) memory layers, on PTB.

Trains each model (LSTM, attention, key-value, key-value-predict, N-gram RNN) with the paper's
training settings (Adam 1e-3, batch 64, BPTT 20, clipping 5, forget bias 1, U(-0.1, 0.1))
for a fixed wall-clock budget per model, then evaluates validation and test perplexity over
the complete splits (exp of the mean NLL over all target tokens). Prints one JSON object;
with ``--update-readme`` writes the README block ``lm-real-data``.

A budget of minutes is far from convergence (the paper trains for many epochs): the table
ranks the models early in training on this machine, it does not reproduce the paper's figures.

Example::

    python benchmarks/lm_real_data.py --max-minutes 2.5 --update-readme
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.readme_tables import update_readme  # noqa: E402
from tf_memlayers.data import lm_corpora  # noqa: E402
from tf_memlayers.models.language_model import (  # noqa: E402
    DANILUK_DEFAULTS,
    KINDS,
    StateResetCallback,
    build_language_model,
    compile_language_model,
    evaluate_language_model,
)

COLUMNS = [
    ("model", "model"),
    ("parameters", "parameters"),
    ("train_steps", "steps"),
    ("epochs_trained", "epochs"),
    ("train_minutes", "train min"),
    ("valid_perplexity", "valid ppl"),
    ("test_perplexity", "test ppl"),
]


def default_data_dir():
    shared = os.environ.get("TF_MEMLAYERS_DATA")
    return pathlib.Path(shared) / "ptb" if shared else ROOT.parent / "shared" / "data" / "ptb"


class TimeBudget(keras.callbacks.Callback):
    """Stops training after ``seconds`` of wall time, counted from the end of the first step
    (which includes tracing and XLA compilation), or after ``max_steps`` steps."""

    def __init__(self, seconds, max_steps=None):
        super().__init__()
        self.seconds = seconds
        self.max_steps = max_steps
        self.steps = 0
        self.started = None

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.started is None:
            self.started = time.time()
        out_of_time = time.time() - self.started >= self.seconds
        if out_of_time or (self.max_steps is not None and self.steps >= self.max_steps):
            self.model.stop_training = True


def train_and_evaluate(kind, corpus, batches, args):
    keras.backend.clear_session()
    keras.utils.set_random_seed(args.seed)
    model = build_language_model(
        len(corpus.vocabulary),
        kind=kind,
        hidden=args.hidden,
        embedding_dim=args.embedding_dim,
        window=args.window,
        ngram=args.ngram,
        batch_size=args.batch_size,
        seq_len=args.seq_len,
    )
    compile_language_model(model, jit_compile=not args.no_jit)
    budget = TimeBudget(args.max_minutes * 60, args.max_steps)
    started = time.time()
    model.fit(
        batches["train"].dataset(),
        epochs=10_000,
        callbacks=[StateResetCallback(batches["train"].resets), budget],
        verbose=args.verbose,
    )
    train_minutes = (time.time() - started) / 60
    results = {split: evaluate_language_model(model, batches[split]) for split in ("valid", "test")}
    return {
        "model": kind,
        "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "train_steps": budget.steps,
        "epochs_trained": round(budget.steps / batches["train"].num_batches, 2),
        "train_minutes": round(train_minutes, 2),
        "valid_perplexity": round(results["valid"]["perplexity"], 1),
        "test_perplexity": round(results["test"]["perplexity"], 1),
    }


def parse_args(argv=None):
    d = DANILUK_DEFAULTS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(default_data_dir()),
                        help="folder with ptb.{train,valid,test}.txt (or another corpus)")
    parser.add_argument("--models", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--max-minutes", type=float, default=2.5,
                        help="training wall time per model")
    parser.add_argument("--max-steps", type=int,
                        help="also stop after this many steps (equal steps for every model)")
    parser.add_argument("--hidden", type=int, default=d["hidden"])
    parser.add_argument("--embedding-dim", type=int, default=d["embedding_dim"])
    parser.add_argument("--window", type=int, default=d["window"])
    parser.add_argument("--ngram", type=int, default=d["ngram"])
    parser.add_argument("--batch-size", type=int, default=d["batch_size"])
    parser.add_argument("--seq-len", type=int, default=d["seq_len"])
    parser.add_argument("--no-jit", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=0)
    parser.add_argument("--json-out", help="also write the JSON here")
    parser.add_argument("--update-readme", action="store_true")
    parser.add_argument("--from-json",
                        help="do not train: take the report written by an earlier --json-out")
    return parser.parse_args(argv)


def write_readme(report):
    """Writes the README block ``lm-real-data`` from a report."""
    rows, settings = report["rows"], report["settings"]
    steps = [r["train_steps"] for r in rows]
    caption = (
        f"{report['corpus'].upper()} word-level perplexity (complete validation / test splits) "
        f"after a budget of {settings['max_minutes']:g} minutes"
        + (f" or {settings['max_steps']} steps" if settings.get("max_steps") else "")
        + " of training per model on "
        f"a shared 2-core CPU ({min(steps)}-{max(steps)} steps of {settings['batch_size']}x"
        f"{settings['seq_len']} tokens; one epoch is {report['batches_per_epoch']} steps; with a "
        "time budget the step count of each model depends on the machine's load, so compare "
        "rows together with their steps). Far "
        "from converged: this ranks the models early in training, it does not reproduce the "
        f"paper. Hidden {settings['hidden']}, embedding {settings['embedding_dim']}, window "
        f"{settings['window']}, N = {settings['ngram']}, Adam 1e-3, clip 5, forget bias 1, "
        "U(-0.1, 0.1)."
    )
    return update_readme("lm-real-data", rows, COLUMNS, caption)


def run(args):
    corpus = lm_corpora.load_corpus(args.data_dir)
    batches = {
        split: lm_corpora.make_bptt_batches(corpus.split(split), args.batch_size, args.seq_len)
        for split in lm_corpora.SPLITS
    }
    rows = []
    for kind in args.models:
        rows.append(train_and_evaluate(kind, corpus, batches, args))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {
        "corpus": corpus.name,
        "train_tokens": corpus.train.num_tokens,
        "batches_per_epoch": batches["train"].num_batches,
        "settings": {k: getattr(args, k) for k in (
            "max_minutes", "max_steps", "hidden", "embedding_dim", "window", "ngram", "batch_size", "seq_len"
        )},
        "rows": rows,
    }  # fmt: skip


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        report = json.loads(pathlib.Path(args.from_json).read_text())
    else:
        report = run(args)
    text = json.dumps(report, indent=1)
    print(text)
    if args.json_out:
        pathlib.Path(args.json_out).write_text(text + "\n")
    if args.update_readme:
        write_readme(report)
    return report


if __name__ == "__main__":
    main()
