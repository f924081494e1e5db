"""The language models of Daniluk et al. (2017) at an equal parameter budget, and a published
baseline, each trained by one run of the language-model example (examples/language_modeling).

The LSTM has ``--units`` units, every memory model the width whose parameter count is closest.
Each trains until its validation perplexity stops improving (``--patience``, at most
``--max-epochs``); ``--config PRESET``: the example's preset. A rerun skips the models in the
results file; a run directory continues its model. The results page names each table's command."""

import json
import pathlib

import keras
import numpy as np

from benchmarks import DATA, RESULTS, ROOT, results_file
from benchmarks.docs_tables import update_docs
from benchmarks.papers import paper_parser
from benchmarks.results_file import ResultsFile, read_or_exit
from examples.language_modeling import configs, input_pipeline, models, train
from examples.language_modeling import main as cli

# What decides the models a run trains (the results files' names, the options' after them).
SETTINGS = {"corpus": "corpus", "hidden": "units", "embedding_dim": "embedding_dim"}
SETTINGS.update({k: k for k in ("dropout", "learning_rate", "window", "ngram", "batch_size")})
SETTINGS.update(seq_len="sequence_length", seed="seed")
# Recorded, not compared: a higher cap continues a model where it stopped.
STOPPING_RULES = ("max_epochs", "patience")
DOCS_BLOCKS = {"ptb": "lm-equal-budget-ptb", "wikitext2": "lm-equal-budget-wikitext2"}
CORPUS_NAMES = {"ptb": "PTB", "wikitext2": "WikiText-2"}
COLUMNS = "model; hidden; parameters; epochs_trained: epochs; best_epoch: best epoch; stopped_by: "
COLUMNS += "stopped by; train_perplexity: train ppl (best epoch); valid_perplexity: valid ppl; "
COLUMNS += "test_perplexity: test ppl; test_below_lstm: test ppl below the LSTM's; "
COLUMNS += "attention_by_position: attention by position (oldest … newest)"
FIGURES = {"valid": "validation perplexity per epoch of each language model"}  # name: alt text
FIGURES["attention"] = "mean attention weight by window position of each attention model"
PRESET_COLUMNS = "config: preset; model; parameters; epochs; last_epoch_train_perplexity: train "
PRESET_COLUMNS += "ppl (last epoch); valid_perplexity: valid ppl; test_perplexity: test ppl"


def parse_args(argv=None):
    parser = paper_parser(__doc__, None, parser=cli.ArgumentParser)
    add = parser.add_argument
    add("--corpus", choices=tuple(DOCS_BLOCKS), default="ptb", help="a folder of --data-root")
    add("--data-root", type=pathlib.Path, default=DATA, help="the folder of ptb/, wikitext2/")
    add("--models", nargs="+", choices=models.KINDS, default=list(models.KINDS))
    add("--units", type=cli.positive_int, default=200, help="the LSTM's: the budget")
    add("--dropout", type=cli.fraction, default=0.4, help="every model's")
    add("--learning-rate", type=cli.positive, default=1e-3)
    add("--seed", type=cli.non_negative_int, default=0)
    sizes = dict(embedding_dim=200, window=5, ngram=4, batch_size=64, sequence_length=20)
    for name, default in (sizes | {"max_epochs": 40}).items():
        add(f"--{name.replace('_', '-')}", type=cli.positive_int, default=default)
    add("--patience", type=cli.positive_int, default=2, help="bad epochs before a model stops")
    add("--verbose", type=int, choices=(0, 1, 2), default=2)
    add("--config", choices=tuple(configs.PRESETS), help="run the example's preset instead")
    add("--workdir", type=pathlib.Path, default=ROOT / "runs", help="the models' runs under it")
    add("--figures-dir", type=pathlib.Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    name = f"lm_{args.config}" if args.config else f"lm_equal_budget_{args.corpus}"
    args.results = args.results or RESULTS / f"{name.replace('-', '_')}.json"
    return args


def results_of(args):  # a row per model, kept with the same settings
    settings = {name: getattr(args, option) for name, option in SETTINGS.items()}
    settings.update(max_epochs=args.max_epochs, patience=args.patience)
    compared = lambda s: {k: v for k, v in s.items() if k not in STOPPING_RULES}  # noqa: E731
    return ResultsFile(args.results, settings, rows="rows", key=("model",), compared=compared)


def example_options(args, kind, *extra):  # the example's options for ``kind`` but --units
    argv = ["--data-dir", str(args.data_root / args.corpus), "--verbose", str(args.verbose)]
    unread = {"window": kind not in models.ATTENTION_KINDS, "ngram": kind != "ngram"}
    for name in [n for n in list(SETTINGS.values())[2:] if not unread.get(n)]:
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return [*argv, "--model", kind, *extra]


def widths(args, kinds):  # the LSTM's --units, the others the budget's width
    size = len(input_pipeline.read_corpus(args.data_root / args.corpus).vocabulary)
    common = dict(embedding_dim=args.embedding_dim, window=args.window, ngram=args.ngram)
    lstm = models.language_model(size, "lstm", units=args.units, stateful=False, **common)
    budget = models.parameter_count(lstm)
    found = {kind: models.units_for_budget(size, kind, budget, **common)[0] for kind in kinds}
    return found | ({"lstm": args.units} if "lstm" in kinds else {})


def run_example(argv, workdir):
    keras.backend.clear_session()
    config = cli.parse_args([*argv, "--workdir", str(workdir)])
    return train.train_and_evaluate(config, config.workdir)


def row_of(m):
    """The results row of a model's run: its scores, and every epoch's."""
    h = m["history"]
    epochs = [dict(epoch=i + 1, learning_rate=rate) for i, rate in enumerate(h["learning_rate"])]
    for epoch, fit_ppl, val_ppl in zip(epochs, h["perplexity"], h["val_perplexity"]):
        epoch |= dict(train_perplexity=round(fit_ppl, 2), valid_perplexity=round(val_ppl, 2))
    row = {"model": m["model"], "hidden": m["units"], "parameters": m["parameters"]}
    row |= {"epochs_trained": m["epochs_run"], "best_epoch": m["best_epoch"]}
    row |= {"train_perplexity": epochs[m["best_epoch"] - 1]["train_perplexity"]}
    row |= {f"{s}_perplexity": round(m[f"{s}_perplexity"], 2) for s in ("valid", "test")}
    row |= {"attention_by_position": m.get("attention_by_position")}
    row["minutes"] = round(m["seconds"] / 60, 1)
    return row | {"history": epochs}


def stopped_by(row, patience):  # "cap": the epoch cap ended it
    return "patience" if row["epochs_trained"] - row["best_epoch"] >= patience else "cap"


def finished(row, args):  # the stopping rule or the epoch cap ended it
    return row["epochs_trained"] >= args.max_epochs or stopped_by(row, args.patience) == "patience"


def run(args):
    results = results_of(args)
    report = results.resume({"corpus": args.corpus, "settings": results.settings, "rows": []})
    # A row that a higher cap reopens stays published until its model finishes again.
    kinds = results.missing(report, args.models, finished=lambda row: finished(row, args))
    units = widths(args, kinds)
    rules = ["--epochs", str(args.max_epochs), "--patience", str(args.patience)]
    for kind in kinds:
        argv = example_options(args, kind, *rules, "--units", str(units[kind]))
        metrics = run_example(argv, args.workdir / "lm_equal_budget" / args.corpus / kind)
        results.add(report, row_of(metrics))
    return report


def in_model_order(rows):
    return sorted(rows, key=lambda row: models.KINDS.index(row["model"]))


def draw_figures(report, folder):
    """Validation perplexity per epoch, and attention by window position (Daniluk Fig. 3b)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    folder.mkdir(parents=True, exist_ok=True)
    corpus, rows = CORPUS_NAMES[report["corpus"]], in_model_order(report["rows"])
    valid, attention = Figure(figsize=(7, 4.5), dpi=100), Figure(figsize=(7, 4.5), dpi=100)
    axes = valid.subplots()
    for row in rows:
        epochs, values = zip(*[(e["epoch"], e["valid_perplexity"]) for e in row["history"]])
        axes.plot(epochs, values, marker="o", label=f"{row['model']} (H={row['hidden']})")
    title = f"{corpus}: validation perplexity, equal parameter budget"
    axes.set(xlabel="epoch", ylabel="validation perplexity", yscale="log", title=title)
    # Plain numbers at 1, 1.2, 1.5, ... x 10^k, so that perplexities between 100 and 200 read.
    axes.yaxis.set_major_locator(LogLocator(subs=(1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)))
    axes.yaxis.set_major_formatter(ScalarFormatter())
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.grid(True, which="both", alpha=0.3)
    rows = [row for row in rows if row.get("attention_by_position")]
    window, width = len(rows[0]["attention_by_position"]) if rows else 0, 0.8 / max(len(rows), 1)
    bars = attention.subplots()
    for i, row in enumerate(rows):
        positions = np.arange(window) + (i - (len(rows) - 1) / 2) * width
        bars.bar(positions, row["attention_by_position"], width, label=row["model"])
    bars.set_xticks(np.arange(window), [f"t-{window - i}" for i in range(window)])
    bars.set(xlabel="window position (oldest … newest)", ylabel="mean attention weight")
    bars.set_title(f"{corpus}: attention by window position (validation text)")
    for figure, name, legend in ((valid, "valid", True), (attention, "attention", rows)):
        if legend:
            figure.axes[0].legend()
        figure.tight_layout()
        figure.savefig(folder / f"lm_equal_budget_{report['corpus']}_{name}.png")


def with_gain_over_lstm(rows, settings):
    """The rows with how far each test perplexity is below the LSTM's; blank without an LSTM
    row, or where the row and the LSTM's ended by different epoch caps."""
    lstm = next((row for row in rows if row["model"] == "lstm"), None)

    def regime(row):  # the stopping rule and this run's cap alike, or another run's cap
        if stopped_by(row, settings["patience"]) == "patience":
            return "run"
        return "run" if row["epochs_trained"] >= settings["max_epochs"] else row["epochs_trained"]

    def gain(row):
        if lstm is None or row is lstm or regime(row) != regime(lstm):
            return None
        return round(lstm["test_perplexity"] - row["test_perplexity"], 1)

    return [row | {"test_below_lstm": gain(row)} for row in rows]


def notes(rows, gains):
    """The caption's sentences: the models an epoch cap stopped while still improving, and
    those without a gain over the LSTM (another cap ended it or the LSTM)."""
    capped = [r for r in rows if r["epochs_trained"] == r["best_epoch"]]
    capped = [f"{r['model']} ({r['epochs_trained']} epochs)" for r in capped]
    blank = [r["model"] for r in gains if r["model"] != "lstm" and r["test_below_lstm"] is None]
    text = " Stopped by an epoch cap with their last epoch the best, so still improving: "
    text = f"{text}{', '.join(capped)}." if capped else ""
    if blank and any(row["model"] == "lstm" for row in rows):
        text += " No gain over the LSTM is given where an epoch cap ended the model and the "
        text += f"LSTM after different numbers of epochs: {', '.join(blank)}."
    return text


def write_docs(report):
    if "config" in report:  # the metrics of a preset's run
        perplexities = ("last_epoch_train_perplexity", "valid_perplexity", "test_perplexity")
        row = report | {key: f"{report[key]:.2f}" for key in perplexities if report.get(key)}
        caption = (
            f"``examples/ptb_memory_lm.py --config {report['config']}`` on Penn Treebank "
            f"({report['train_tokens_per_epoch']:,} training targets per epoch), perplexity over "
            f"the complete validation and test splits, trained on a 2-core CPU (wall time of the "
            f"final invocation: {report['seconds'] / 60:.0f} minutes). Published: TensorFlow's "
            "PTB tutorial (small) 121.39 valid / 115.91 test; Zaremba et al. 120.7 / 114.5."
        )
        return update_docs("lm-reproduction", [row], PRESET_COLUMNS, caption)
    s, rows = report["settings"], in_model_order(report["rows"])
    gains = with_gain_over_lstm(rows, s)
    resets = " States and memories are reset at the start of every article, in training and "
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
        + (resets + "scoring." if report["corpus"] == "wikitext2" else "")
        + notes(rows, gains)
    )
    table = [row | {"stopped_by": stopped_by(row, s["patience"])} for row in gains]
    image = f".. image:: images/lm_equal_budget_{report['corpus']}_{{}}.png\n   :alt: {{}}"
    footer = "\n\n".join(image.format(*figure) for figure in FIGURES.items())
    block, after = DOCS_BLOCKS[report["corpus"]], DOCS_BLOCKS["ptb"]
    return update_docs(block, table, COLUMNS, caption, footer=footer, insert_after=after)


def main(argv=None):
    args = parse_args(argv)
    if args.from_results:
        report = read_or_exit(args.results)
    elif args.config:
        argv = ["--config", args.config, "--data-dir", str(args.data_root / args.corpus)]
        workdir = args.workdir / "lm_reproduction" / args.config
        report = run_example([*argv, "--verbose", str(args.verbose)], workdir)
    else:
        report = run(args)
    if args.config and not args.from_results:
        results_file.write(args.results, report)
    if "rows" in report:
        draw_figures(report, args.figures_dir)
    if args.update_docs:
        write_docs(report)
    rows = [{k: v for k, v in row.items() if k != "history"} for row in report.get("rows", [])]
    print(json.dumps(report | ({"rows": rows} if rows else {}), indent=1))
    return report


if __name__ == "__main__":
    main()
