"""Language models trained to convergence at an equal parameter budget (Daniluk et al. 2017).

Trains the LSTM baseline and the four memory models (attention, key-value, key-value-predict,
N-gram RNN) on PTB (or WikiText-2) with one recipe for all:

* equal parameter budget, as in the paper: the LSTM has ``--hidden`` units and every memory
  model the LSTM width whose parameter count is closest (`units_for_parameter_budget`);
* Adam (``--learning-rate``), global-norm clipping 5, forget bias 1, U(-0.1, 0.1), batch 64,
  truncated BPTT 20 with states (and the memories) carried between segments and reset at
  document boundaries;
* the same dropout ``--dropout`` for every model (embeddings and before the softmax);
* after every epoch the complete validation split is scored; an epoch that does not improve
  the best validation perplexity halves the learning rate, ``--patience`` such epochs in a row
  stop the model (early stopping), and at most ``--max-epochs`` epochs are run. The weights of
  the best epoch are kept and scored on the complete validation and test splits.

For the attention models the mean attention weight per window position over validation text
is reported (Daniluk et al. Fig. 3b).

The results file holds one row per finished model and is written after each model; a rerun
with the same settings skips the models already there. Inside a run, each model's progress
(weights, optimizer slots, dropout seed states, history) is checkpointed after every epoch in
``--workdir``, so an interrupted model continues from its last finished epoch as if it had not
been stopped. ``--figures-dir`` receives two PNG figures drawn from the results:
validation perplexity per epoch of every model and the attention by window position.
`benchmarks.papers.lm_equal_budget_cost` estimates what a run costs before it is started.

Example::

    python -m benchmarks.papers.lm_equal_budget --update-docs
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

from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.results_file import ResultsFile, read_or_exit
from examples.harness import options  # noqa: E402
from examples.language_modeling import lm_batches, lm_corpora, token_streams  # noqa: E402
from examples.language_modeling.evaluation import evaluate_language_model  # noqa: E402
from examples.language_modeling.memories import (  # noqa: E402
    ATTENTION_KINDS,
    KINDS,
    language_model,
)
from examples.language_modeling.parameter_budget import (  # noqa: E402
    count_language_model_parameters,
    units_for_parameter_budget,
)
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback  # noqa: E402
from tf_memlayers.callbacks.window_attention_callback import average_attention_by_position  # noqa: E402
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights  # noqa: E402
from tf_memlayers.models.language_model import compile_language_model  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
# What decides the models a run trains: a checkpoint or a results row is reused only when all
# of these are the same.
SETTINGS = (
    "corpus",
    "hidden",
    "embedding_dim",
    "dropout",
    "learning_rate",
    "window",
    "ngram",
    "batch_size",
    "seq_len",
    "seed",
)
# When a model stops training. They are recorded but not compared: raising the cap continues
# a model from its last epoch instead of training it again from the start.
STOPPING_RULES = ("max_epochs", "patience")
# The results-page block each corpus's table goes to.
DOCS_BLOCKS = {"ptb": "lm-equal-budget-ptb", "wikitext2": "lm-equal-budget-wikitext2"}
CORPUS_NAMES = {"ptb": "PTB", "wikitext2": "WikiText-2"}
COLUMNS = [
    ("model", "model"),
    ("hidden", "hidden"),
    ("parameters", "parameters"),
    ("epochs_trained", "epochs"),
    ("best_epoch", "best epoch"),
    ("stopped_by", "stopped by"),
    ("train_perplexity", "train ppl (best epoch)"),
    ("valid_perplexity", "valid ppl"),
    ("test_perplexity", "test ppl"),
    ("test_below_lstm", "test ppl below the LSTM's"),
    ("attention_by_position", "attention by position (oldest … newest)"),
]


def add_model_options(parser):
    """The options that decide what is trained: corpus, models, budget and recipe."""
    shared = pathlib.Path(os.environ.get("TF_MEMLAYERS_DATA", ROOT.parent / "shared" / "data"))
    parser.add_argument(
        "--corpus", choices=tuple(DOCS_BLOCKS), default="ptb", help="which corpus under --data-root"
    )
    parser.add_argument(
        "--data-root", type=pathlib.Path, default=shared, help="folder holding ptb/ and wikitext2/"
    )
    parser.add_argument("--models", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--max-epochs", type=options.positive_int, default=40)
    parser.add_argument(
        "--patience",
        type=options.positive_int,
        default=2,
        help="epochs without a better validation perplexity before stopping",
    )
    parser.add_argument(
        "--hidden",
        type=options.positive_int,
        default=200,
        help="LSTM baseline width; the others get its parameter count",
    )
    parser.add_argument("--embedding-dim", type=options.positive_int, default=200)
    parser.add_argument(
        "--dropout",
        type=options.fraction,
        default=0.4,
        help="dropout on the embeddings and before the softmax, every model",
    )
    parser.add_argument("--learning-rate", type=options.positive_float, default=1e-3)
    parser.add_argument("--window", type=options.positive_int, default=5)
    parser.add_argument("--ngram", type=options.positive_int, default=4)
    parser.add_argument("--batch-size", type=options.positive_int, default=64)
    parser.add_argument("--seq-len", type=options.positive_int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--results",
        type=pathlib.Path,
        help="results file (default benchmarks/results/lm_equal_budget_<corpus>.json)",
    )
    return parser


def results_file(args):
    """``--results``, or the corpus's default results file."""
    return args.results or RESULTS / f"lm_equal_budget_{args.corpus}.json"


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_model_options(parser)
    parser.add_argument(
        "--probe-segments",
        type=options.positive_int,
        default=10,
        help="validation segments per row joined for the attention average",
    )
    parser.add_argument(
        "--workdir",
        type=pathlib.Path,
        default=ROOT / "runs" / "lm_equal_budget",
        help="per-epoch checkpoints of the model in training, in <workdir>/<corpus>/<model>",
    )
    parser.add_argument(
        "--figures-dir",
        type=pathlib.Path,
        default=ROOT / "docs" / "images",
        help="where the PNG figures are drawn",
    )
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), default=2)
    add_update_docs_option(parser)
    parser.add_argument(
        "--from-results",
        action="store_true",
        help="do not train: draw the figures and results table from --results",
    )
    args = parser.parse_args(argv)
    args.results = results_file(args)
    return args


def load_corpus(args):
    folder = {"ptb": "ptb", "wikitext2": "wikitext2"}[args.corpus]
    with options.reported_as("--data-root"):
        corpus = lm_corpora.load_corpus(args.data_root / folder)
    batches = {
        split: lm_batches.make_bptt_batches(corpus.split(split), args.batch_size, args.seq_len)
        for split in token_streams.SPLITS
    }
    return corpus, batches


def model_arguments(kind, hidden, args):
    return dict(
        kind=kind,
        units=hidden,
        embedding_dim=args.embedding_dim,
        window=args.window,
        ngram=args.ngram,
    )


def widths(vocabulary_size, kinds, args):
    """Each kind's LSTM width: ``--hidden`` for the LSTM, equal parameters for the others."""
    common = dict(embedding_dim=args.embedding_dim, window=args.window, ngram=args.ngram)
    budget = count_language_model_parameters(
        vocabulary_size, kind="lstm", units=args.hidden, **common
    )
    return {
        kind: args.hidden
        if kind == "lstm"
        else units_for_parameter_budget(vocabulary_size, kind, budget, **common)[0]
        for kind in kinds
    }


def attention_by_position(model, kind, hidden, vocabulary_size, valid, args):
    """Mean attention weight per window position over the first validation rows."""
    probe = language_model(
        vocabulary_size,
        **model_arguments(kind, hidden, args),
        stateful=False,
        sequence_length=None,
        return_attention_scores=True,
    )
    copy_trainable_weights(model, probe)
    rows = np.concatenate(list(valid.inputs[: args.probe_segments]), axis=1)
    _, scores = probe(rows, training=False)
    return [round(float(w), 4) for w in average_attention_by_position(scores, args.window)]


def random_states(model):
    """The model's random seed states (e.g. its dropout's), which weights files leave out."""
    weights = {id(w) for w in model.weights}
    return [v for v in model.variables if id(v) not in weights]


class ModelProgress:
    """One model's training state in ``workdir``: weights, optimizer slots, random seed states
    and history, so that a resumed model trains on as if it had not been stopped."""

    def __init__(self, workdir, settings, kind):
        self.folder = pathlib.Path(workdir) / kind
        self.state_file = self.folder / "state.json"
        self.settings = settings

    def load(self, model):
        """The saved history (and weights into ``model``), or a fresh one."""
        fresh = {
            "epochs": [],
            "best_valid": None,
            "best_epoch": None,
            "bad_epochs": 0,
            "learning_rate": self.settings["learning_rate"],
            "seconds": 0.0,
        }
        if not self.state_file.is_file():
            return fresh
        state = json.loads(self.state_file.read_text())
        if state.get("settings") != self.settings:
            return fresh
        optimizer = model.optimizer
        optimizer.build(model.trainable_variables)
        model.load_weights(self.folder / "last.weights.h5")
        slots = np.load(self.folder / "optimizer.npz")
        for i, variable in enumerate(optimizer.variables):
            variable.assign(slots[f"v{i}"])
        if (self.folder / "random.npz").is_file():
            seeds = np.load(self.folder / "random.npz")
            for i, variable in enumerate(random_states(model)):
                variable.assign(seeds[f"s{i}"])
        return state["history"]

    def save(self, model, history, is_best):
        self.folder.mkdir(parents=True, exist_ok=True)
        model.save_weights(self.folder / "last.weights.h5")
        if is_best:
            model.save_weights(self.folder / "best.weights.h5")
        slots = {f"v{i}": v.numpy() for i, v in enumerate(model.optimizer.variables)}
        np.savez(self.folder / "optimizer.npz", **slots)
        seeds = {f"s{i}": v.numpy() for i, v in enumerate(random_states(model))}
        np.savez(self.folder / "random.npz", **seeds)
        text = json.dumps({"settings": self.settings, "history": history}, indent=1)
        self.state_file.with_suffix(".tmp").write_text(text)
        self.state_file.with_suffix(".tmp").replace(self.state_file)


def build_for_training(kind, hidden, vocabulary_size, args):
    """A fresh, compiled, stateful model of ``kind`` as the run trains it."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(args.seed)
    model = language_model(
        vocabulary_size,
        **model_arguments(kind, hidden, args),
        dropout=args.dropout,
        batch_size=args.batch_size,
        sequence_length=args.seq_len,
    )
    return compile_language_model(model, learning_rate=args.learning_rate)


def parameter_count(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


def train_to_convergence(kind, hidden, corpus, batches, args, settings):
    vocabulary_size = len(corpus.vocabulary)
    model = build_for_training(kind, hidden, vocabulary_size, args)
    progress = ModelProgress(args.workdir / args.corpus, settings, kind)
    history = progress.load(model)
    resets = StateResetCallback(batches["train"].resets)
    while len(history["epochs"]) < args.max_epochs and history["bad_epochs"] < args.patience:
        epoch = len(history["epochs"])
        model.optimizer.learning_rate.assign(history["learning_rate"])
        started = time.time()
        logs = model.fit(
            batches["train"].dataset(),
            epochs=1,
            callbacks=[resets],
            verbose=args.verbose,
            shuffle=False,
        ).history
        valid = evaluate_language_model(model, batches["valid"])["perplexity"]
        history["seconds"] += time.time() - started
        improved = history["best_valid"] is None or valid < history["best_valid"]
        history["epochs"].append(
            {
                "epoch": epoch + 1,
                "learning_rate": history["learning_rate"],
                "train_perplexity": round(float(logs["perplexity"][-1]), 2),
                "valid_perplexity": round(valid, 2),
            }
        )
        if improved:
            history.update(best_valid=valid, best_epoch=epoch + 1, bad_epochs=0)
        else:
            history["bad_epochs"] += 1
            history["learning_rate"] /= 2
        progress.save(model, history, improved)
        print(
            f"{kind} epoch {epoch + 1}: {json.dumps(history['epochs'][-1])}",
            file=sys.stderr,
            flush=True,
        )
    model.load_weights(progress.folder / "best.weights.h5")
    scores = {split: evaluate_language_model(model, batches[split]) for split in ("valid", "test")}
    best = history["epochs"][history["best_epoch"] - 1]
    row = {
        "model": kind,
        "hidden": hidden,
        "parameters": parameter_count(model),
        "epochs_trained": len(history["epochs"]),
        "best_epoch": history["best_epoch"],
        "train_perplexity": best["train_perplexity"],
        "valid_perplexity": round(scores["valid"]["perplexity"], 2),
        "test_perplexity": round(scores["test"]["perplexity"], 2),
        "attention_by_position": None,
        "minutes": round(history["seconds"] / 60, 1),
        "history": history["epochs"],
    }
    if kind in ATTENTION_KINDS:
        row["attention_by_position"] = attention_by_position(
            model, kind, hidden, vocabulary_size, batches["valid"], args
        )
    return row


def draw_figures(report, folder):
    """Validation perplexity per epoch, and attention by window position (Daniluk Fig. 3b)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    folder.mkdir(parents=True, exist_ok=True)
    corpus, rows = report["corpus"], in_model_order(report["rows"])
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    for row in rows:
        epochs = [e["epoch"] for e in row["history"]]
        axes.plot(
            epochs,
            [e["valid_perplexity"] for e in row["history"]],
            marker="o",
            label=f"{row['model']} (H={row['hidden']})",
        )
    axes.set_xlabel("epoch")
    axes.set_ylabel("validation perplexity")
    axes.set_yscale("log")
    # Plain numbers at 1, 1.2, 1.5, ... x 10^k, so that perplexities between 100 and 200 read.
    axes.yaxis.set_major_locator(LogLocator(subs=(1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)))
    axes.yaxis.set_major_formatter(ScalarFormatter())
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.set_title(f"{CORPUS_NAMES[corpus]}: validation perplexity, equal parameter budget")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(folder / f"lm_equal_budget_{corpus}_valid.png")

    attention = [row for row in rows if row.get("attention_by_position")]
    figure = Figure(figsize=(7, 4.5), dpi=100)
    axes = figure.subplots()
    window = len(attention[0]["attention_by_position"]) if attention else 0
    width = 0.8 / max(len(attention), 1)
    for i, row in enumerate(attention):
        positions = np.arange(window) + (i - (len(attention) - 1) / 2) * width
        axes.bar(positions, row["attention_by_position"], width, label=row["model"])
    axes.set_xticks(np.arange(window), [f"t-{window - i}" for i in range(window)])
    axes.set_xlabel("window position (oldest … newest)")
    axes.set_ylabel("mean attention weight")
    axes.set_title(f"{CORPUS_NAMES[corpus]}: attention by window position (validation text)")
    if attention:
        axes.legend()
    figure.tight_layout()
    figure.savefig(folder / f"lm_equal_budget_{corpus}_attention.png")


def in_model_order(rows):
    """``rows`` in the order of the builder's kinds (the LSTM first), however they finished."""
    return sorted(rows, key=lambda row: KINDS.index(row["model"]))


def capped_note(rows):
    """A sentence naming the models an epoch cap stopped while still improving (their last
    epoch their best), each with its number of epochs: rows kept from a run with a lower cap
    say so."""
    capped = [
        f"{row['model']} ({row['epochs_trained']} epochs)"
        for row in rows
        if row["epochs_trained"] == row["best_epoch"]
    ]
    if not capped:
        return ""
    return (
        " Stopped by an epoch cap with their last epoch the best, so still improving: "
        f"{', '.join(capped)}."
    )


# WikiText-2 keeps its articles apart: the recurrent state and the memories start afresh at each.
DOCUMENT_RESETS = {
    "wikitext2": " States and memories are reset at the start of every article, in training "
    "and scoring.",
}


def training_regime(row, settings):
    """What ended ``row``'s training, as far as it matters for comparing rows: the stopping
    rule or the run's epoch cap (``"run"``, the same for every row of this run), else the
    lower epoch cap of an earlier run that stopped it (``"cap <epochs>"``)."""
    stopping_rule = stopped_by(row, settings["patience"]) == "patience"
    if stopping_rule or row["epochs_trained"] >= settings["max_epochs"]:
        return "run"
    return f"cap {row['epochs_trained']}"


def with_gain_over_lstm(rows, settings):
    """The rows, each with how far its test perplexity is below the LSTM's (the papers' way of
    comparing; negative when worse). Blank where there is nothing to compare with fairly: no
    LSTM row, or the row and the LSTM's ended by different epoch caps (`training_regime`)."""
    lstm = next((row for row in rows if row["model"] == "lstm"), None)

    def gain(row):
        if lstm is None or row is lstm:
            return None
        if training_regime(row, settings) != training_regime(lstm, settings):
            return None
        return round(lstm["test_perplexity"] - row["test_perplexity"], 1)

    return [row | {"test_below_lstm": gain(row)} for row in rows]


def different_caps_note(rows, settings):
    """A sentence naming the models whose gain over the LSTM is blank because another epoch
    cap ended the one or the other."""
    gains = with_gain_over_lstm(rows, settings)
    blank = [
        row["model"] for row in gains if row["model"] != "lstm" and row["test_below_lstm"] is None
    ]
    if not blank or not any(row["model"] == "lstm" for row in rows):
        return ""
    return (
        " No gain over the LSTM is given where an epoch cap ended the model and the LSTM "
        f"after different numbers of epochs: {', '.join(blank)}."
    )


def write_docs(report):
    s = report["settings"]
    rows = in_model_order(report["rows"])
    caption = (
        f"{CORPUS_NAMES[report['corpus']]} word-level perplexity over the complete validation and "
        f"test splits, each model trained until its validation perplexity stopped improving "
        f"(patience {s['patience']}, learning rate halved after every epoch without "
        f"improvement, at most {s['max_epochs']} epochs; scored with the best epoch's weights). "
        f"Equal parameter budget: the LSTM has {s['hidden']} units and every memory model the "
        f"width whose parameter count is closest. Embedding {s['embedding_dim']}, dropout "
        f"{s['dropout']} on the embeddings and before the softmax for every model, window "
        f"{s['window']}, N = {s['ngram']}, Adam {s['learning_rate']:g}, clip 5, batch "
        f"{s['batch_size']}, BPTT {s['seq_len']}, forget bias 1, U(-0.1, 0.1). Attention by "
        "position: mean weight per window slot over validation text. The figures under the "
        "table show the validation perplexity per epoch and the attention by position."
        + DOCUMENT_RESETS.get(report["corpus"], "")
        + capped_note(rows)
        + different_caps_note(rows, s)
    )
    return update_docs(
        DOCS_BLOCKS[report["corpus"]],
        [
            row | {"stopped_by": stopped_by(row, s["patience"])}
            for row in with_gain_over_lstm(rows, s)
        ],
        COLUMNS,
        caption,
        footer=figure_directives(report["corpus"]),
        insert_after=DOCS_BLOCKS["ptb"],
    )


def figure_directives(corpus):
    """The RST showing the two figures of ``corpus`` under its table."""
    return "\n\n".join(
        f".. image:: images/lm_equal_budget_{corpus}_{name}.png\n   :alt: {alt}"
        for name, alt in (
            ("valid", "validation perplexity per epoch of each language model"),
            ("attention", "mean attention weight by window position of each attention model"),
        )
    )


def model_settings(settings):
    """``settings`` without the stopping rules."""
    return {name: value for name, value in settings.items() if name not in STOPPING_RULES}


def results_of(path, settings):
    """The `ResultsFile` at ``path`` of a run with ``settings``: one row per model, kept while
    the models are trained with the same settings (stopping rules aside)."""
    return ResultsFile(path, settings, rows="rows", key=("model",), compared=model_settings)


def read_report(path, settings):
    """The results file at ``path`` if its models were trained with ``settings`` (stopping
    rules aside), else None."""
    return results_of(path, settings).stored()


def stopped_by(row, patience):
    """``"patience"`` if the row's last ``patience`` epochs did not improve on its best, else
    ``"cap"``: the epoch cap ended it."""
    return "patience" if row["epochs_trained"] - row["best_epoch"] >= patience else "cap"


def is_finished(row, args):
    """Whether ``row`` needs no more training under this run's stopping rules."""
    return stopped_by(row, args.patience) == "patience" or row["epochs_trained"] >= args.max_epochs


def run(args):
    settings = {name: getattr(args, name) for name in SETTINGS + STOPPING_RULES}
    corpus, batches = load_corpus(args)
    results = results_of(args.results, settings)
    report = results.resume(
        fresh={
            "corpus": args.corpus,
            "train_tokens": corpus.train.num_tokens,
            "batches_per_epoch": batches["train"].num_batches,
            "settings": settings,
            "rows": [],
        }
    )
    # A row that the stopping rules reopen stays published until its model finishes again.
    kinds = results.missing(report, args.models, finished=lambda row: is_finished(row, args))
    hidden = widths(len(corpus.vocabulary), kinds, args)
    for kind in kinds:
        row = train_to_convergence(
            kind, hidden[kind], corpus, batches, args, model_settings(settings)
        )
        results.add(report, row)
        draw_figures(report, args.figures_dir)
        print(f"saved {kind} to {args.results}", file=sys.stderr, flush=True)
    return report


def main(argv=None):
    args = parse_args(argv)
    if args.from_results:
        report = read_or_exit(args.results)
        draw_figures(report, args.figures_dir)
    else:
        report = run(args)
    if args.update_docs:
        write_docs(report)
    print(
        json.dumps(
            {k: v for k, v in report.items() if k != "rows"}
            | {
                "rows": [{k: v for k, v in row.items() if k != "history"} for row in report["rows"]]
            },
            indent=1,
        )
    )
    return report


if __name__ == "__main__":
    main()
