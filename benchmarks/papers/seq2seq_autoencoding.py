"""Weissenborn (2016, §5.3), sentence auto-encoding: the Dual AM-GRU decoder, an attention decoder
and a plain GRU encoder-decoder, several seeds each, run by the example (``examples/seq2seq/``);
the results page's table and the paper's Figure 3. A rerun skips the rows in ``--results``.

    python -m benchmarks.papers.seq2seq_autoencoding --update-docs [--corpus ptb] [--from-results]
"""

import json
import pathlib

from benchmarks import DATA, RESULTS, ROOT, positive
from benchmarks.docs_tables import columns_of, update_docs
from benchmarks.papers import mean_and_spread, paper_parser, per_model
from benchmarks.results_file import ResultsFile
from examples.seq2seq.input_pipeline import GENERATED_LENGTHS

NAME = "seq2seq_autoencoding"
MODELS = dict(dual_am_gru="AM-GRU encoder, Dual AM-GRU decoder")
MODELS |= dict(attention="GRU encoder, GRU decoder with attention", gru="GRU encoder, GRU decoder")
# Per --corpus: the example's options, default epochs and seeds, block, data in the caption.
OPTIONS = {"generated": [], "ptb": ["--max-length", "15", "--max-train", "10000"]}
DEFAULTS = {"generated": (20, [0, 1, 2]), "ptb": (8, [0])}
BLOCKS = {"generated": "seq2seq-autoencoding", "ptb": "seq2seq-autoencoding-ptb"}
CORPORA = {
    "generated": "its generated corpus ({train_sentences} training sentences of {lengths} "
    "words, vocabulary {vocabulary})",
    "ptb": "Penn Treebank's sentences of at most 15 words ({train_sentences} from the "
    "training split, vocabulary {vocabulary} with ``<unk>``)",
}
COLUMNS = (
    "model; seeds; parameters; test_perplexity: test perplexity; test_word_accuracy: word "
    "accuracy; decoded_word_accuracy: decoded: word accuracy; decoded_exact_match: decoded: whole "
    "sentence; key_similarity_before: key similarity, untrained; key_similarity: key similarity, "
    "trained; read_aligned: reads its word most; read_last: reads the last word most"
)
# The scores given to three digits after the point (the others: two).
THREE_DIGITS = ("test_word_accuracy", "decoded_word_accuracy", "decoded_exact_match")
CAPTION = (
    "``examples/seq2seq_autoencoder.py`` on {data}, {epochs} epochs, {units} units, mean ± std "
    "over the seeds. Test perplexity and word accuracy: teacher-forced, over the "
    "{test_sentences} test sentences' words and end marks. Decoded: each test sentence decoded "
    "greedily from its encoding alone through the decoder's step model, word by word at its "
    "position, and whole sentences exactly right. Key similarity: the mean cosine similarity "
    "of the keys the AM-GRU encoder writes under at two steps of a sentence (1: one key for "
    "everything). The last two columns: the share of decoder steps whose read from the "
    "encoder's memory (the Dual AM-GRU's retrieval, the attention's weights) is largest at the "
    "word being predicted, and at the source's last word; over 100 test sentences. Written by "
    "``python -m benchmarks.papers.seq2seq_autoencoding --update-docs{option}``; times are in "
    "the results file."
)
# Figure 3's panels: the title and the lowest value of each model's heatmap.
PANELS = {"dual_am_gru": ("Dual AM-GRU: cosine(encoder write, decoder read)", -1.0)}
PANELS["attention"] = ("attention decoder: weights over the source", 0.0)
ALT = "Two heatmaps over one test sentence: left, the cosine similarity between what the AM-GRU "
ALT += "encoder wrote at each source word and what the Dual AM-GRU decoder read at each step; "
ALT += "right, the attention decoder's weights over the source words."


def parse_args(argv=None):
    parser = paper_parser(__doc__, None, help="default: 0 1 2 (generated), 0 (ptb)")
    add = parser.add_argument
    add("--corpus", choices=list(CORPORA), default="generated", help="ptb: from $DATA/ptb")
    add("--models", nargs="+", choices=list(MODELS), default=list(MODELS), help="rows to run")
    add("--epochs", type=positive(int), help="default: 20 (generated), 8 (ptb)")
    add("--runs-dir", type=pathlib.Path, default=ROOT / "runs" / "benchmarks" / NAME)
    args = parser.parse_args(argv)
    epochs, seeds = DEFAULTS[args.corpus]
    args.seeds, args.epochs = args.seeds or seeds, args.epochs or epochs
    suffix = "" if args.corpus == "generated" else f"_{args.corpus}"
    args.example_arguments = [*OPTIONS[args.corpus], "--epochs", str(args.epochs)]
    args.results = args.results or RESULTS / f"{NAME}{suffix}.json"
    return args


def run(model, seed, args):
    """Trains and evaluates one model with the example; returns its row."""
    import keras

    from examples.seq2seq import main as example

    data = [] if args.corpus == "generated" else ["--data-dir", str(DATA / args.corpus)]
    workdir = args.runs_dir / f"{args.corpus}-{model}-seed{seed}"
    argv = ["--model", model, *data, *args.example_arguments, "--seed", str(seed)]
    keras.backend.clear_session()
    metrics = example.main([*argv, "--workdir", str(workdir), "--verbose", "0"])
    row = {k: v for k, v in metrics.items() if k not in ("source", "workdir", "history")}
    row.update(seed=seed, units=example.parse_args(argv).units, epochs=len(row.pop("epochs_run")))
    return dict(row, val_loss_by_epoch=[round(v, 4) for v in metrics["history"]["val_loss"]])


def summarise(runs):
    """One row per model: the ``mean ± std`` of its runs' scores."""
    rows = []
    for model, mine in per_model(runs, MODELS):
        before = (r["memory_before_training"].get("key_similarity") for r in mine)
        mine = [r | r["memory"] | {"key_similarity_before": b} for r, b in zip(mine, before)]
        row = {"model": MODELS[model], "seeds": len(mine), "parameters": mine[0]["parameters"]}
        for key, _ in columns_of(COLUMNS)[3:]:
            digits = 3 if key in THREE_DIGITS else 2
            row[key] = mean_and_spread([r.get(key) for r in mine], digits)
        rows.append(row)
    return rows


def draw_figure(runs, path):
    """The first seed's Dual AM-GRU heatmap (Figure 3) above the attention decoder's weights
    on the same sentence; returns the path, or `None` without both runs."""
    from matplotlib.figure import Figure

    first = {r["model"]: r for r in sorted(runs, key=lambda r: -r["seed"]) if r["probe_heatmap"]}
    if not set(PANELS) <= set(first):
        return None
    figure = Figure(figsize=(6.6, 9.0))  # 726 pixels at 110 dpi: the page's content column
    for axis, (model, (title, low)) in zip(figure.subplots(2, 1), PANELS.items()):
        heatmap = first[model]["probe_heatmap"]
        image = axis.imshow(heatmap["matrix"], vmin=low, vmax=1.0, aspect="auto")
        source, inputs = heatmap["source"], heatmap["decoder_input"]
        axis.set_xticks(range(len(source)), source, rotation=60, ha="right", fontsize=9)
        axis.set_yticks(range(len(inputs)), inputs, fontsize=9)
        axis.set(xlabel="source word (written by the encoder)", ylabel="decoder input")
        axis.set_title(f"{title}\n(seed {first[model]['seed']})", fontsize=10)
        figure.colorbar(image, ax=axis, fraction=0.046)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def findings(summary):
    """The paper's two claims in the summary's values ("" without the Dual AM-GRU's)."""
    dual, attention = ({r["model"]: r for r in summary}.get(MODELS[m], {}) for m in PANELS)
    if not dual.get("key_similarity"):
        return ""
    text = (
        "The paper's finding against these runs: the AM-GRU encoder's keys have a mean cosine "
        f"similarity of {dual['key_similarity_before']} untrained and {dual['key_similarity']} "
        "trained (1: one key for everything, as the paper found); the Dual AM-GRU decoder's "
        f"read is largest at the source's last word in {dual['read_last']} of its steps and at "
        f"the word it predicts in {dual['read_aligned']}"
    )
    if attention.get("read_aligned"):
        text += f" (the attention decoder's weights: {attention['read_aligned']} at that word)"
    return text + "."


def write_docs_table(report):
    runs, corpus = report["runs"], report["settings"]["corpus"]
    summary, first = report.get("summary") or summarise(runs), runs[0]
    figure = f"seq2seq_figure3{'' if corpus == 'generated' else '_' + corpus}.png"
    footer = findings(summary)
    if draw_figure(runs, ROOT / "docs" / "images" / figure):
        footer += f"\n\n.. image:: images/{figure}\n   :alt: {ALT}"
    data = CORPORA[corpus].format(lengths="-".join(map(str, GENERATED_LENGTHS)), **first)
    epochs = "/".join(map(str, sorted({r["epochs"] for r in runs})))
    option = "" if corpus == "generated" else f" --corpus {corpus}"
    caption = CAPTION.format_map(dict(first, data=data, epochs=epochs, option=option))
    update_docs(BLOCKS[corpus], summary, COLUMNS, caption, footer=footer)


def main(argv=None):
    args = parse_args(argv)
    settings = {"corpus": args.corpus, "example_arguments": args.example_arguments}
    results = ResultsFile(args.results, settings, summarise=summarise)
    report = results.run(args, args.models, lambda _, *key: run(*key, args), write_docs_table)
    print(json.dumps(report.get("summary") or summarise(report["runs"]), indent=1))
    return report


if __name__ == "__main__":
    main()
