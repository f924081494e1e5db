"""The paper's sequence-to-sequence experiment (Weissenborn 2016, §5.3): auto-encoding with a Dual
AM-GRU decoder, an attention decoder and a plain GRU encoder-decoder, several seeds each.

Runs ``examples/seq2seq_autoencoder.py`` on its generated corpus once per model and seed and
tabulates what the example reports: the teacher-forced test perplexity and word accuracy, how
well the test sentences are decoded from their encodings alone (greedily), and what the
memories do (`examples.seq2seq.probes`): for the Dual AM-GRU, how alike the keys are that the
encoder writes under (the paper: "the encoder AM-GRU learned very quickly to write everything
with the same key") before and after training, and for it and the attention decoder, the share
of decoder steps that read most from the word they are about to predict (a memory addressed by
position) or from the last word (the paper's Figure 3). Draws the paper's Figure 3 from the
first seed's Dual AM-GRU run, beside the attention decoder's weights over the same sentence.

Results are saved after each run in ``--results`` and a rerun with the same settings skips the
runs already there (an interrupted run resumes from its run directory under
``runs/benchmarks/``). Prints the summary as JSON.

Example::

    python -m benchmarks.papers.seq2seq_autoencoding --update-docs
    python -m benchmarks.papers.seq2seq_autoencoding --from-results --update-docs
"""

import argparse
import json
import os
import pathlib
import sys

import numpy as np

from benchmarks import results_file
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.papers.example_runs import mean_and_spread, run_example
from benchmarks.results_file import ResultsFile, add_results_options
from examples.harness import options
from examples.seq2seq.sentences import GENERATED_LENGTHS

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "seq2seq_autoencoder.py"
MODELS = {
    "dual_am_gru": "AM-GRU encoder, Dual AM-GRU decoder",
    "attention": "GRU encoder, GRU decoder with attention",
    "gru": "GRU encoder, GRU decoder",
}
DATA = pathlib.Path(os.environ.get("TF_MEMLAYERS_DATA", ROOT.parent / "shared" / "data"))
# Key (--corpus): the example's options for the corpus (the folder of its files, if any, is
# added by `run`), the default epochs and seeds, and the results page's block and figure.
CORPORA = {
    "generated": {
        "folder": None,
        "arguments": [],
        "epochs": 20,
        "seeds": [0, 1, 2],
        "block": "seq2seq-autoencoding",
        "figure": "seq2seq_figure3.png",
    },
    "ptb": {
        "folder": "ptb",
        "arguments": ["--max-length", "15", "--max-train", "10000"],
        "epochs": 8,
        "seeds": [0],
        "block": "seq2seq-autoencoding-ptb",
        "figure": "seq2seq_figure3_ptb.png",
    },
}
IMAGES = ROOT / "docs" / "images"
RESULTS = ROOT / "benchmarks" / "results"


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--corpus",
        choices=list(CORPORA),
        default="generated",
        help="the example's generated corpus, or Penn Treebank's sentences of "
        f"at most 15 words from {DATA / 'ptb'} (TF_MEMLAYERS_DATA)",
    )
    parser.add_argument(
        "--models", nargs="+", choices=list(MODELS), default=list(MODELS), help="the rows to run"
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=options.non_negative_int,
        help="one run per model and seed (default: 0 1 2 on the generated "
        "corpus, 0 on Penn Treebank)",
    )
    parser.add_argument(
        "--epochs",
        type=options.positive_int,
        help="epochs per run (default: 20 on the generated corpus, 8 on Penn Treebank)",
    )
    parser.add_argument(
        "--runs-dir",
        type=pathlib.Path,
        default=ROOT / "runs" / "benchmarks" / "seq2seq_autoencoding",
        help="where the example keeps each run (checkpoints, TensorBoard logs)",
    )
    add_results_options(parser, None)
    add_update_docs_option(parser)
    args = parser.parse_args(argv)
    corpus = CORPORA[args.corpus]
    args.seeds = args.seeds or corpus["seeds"]
    args.epochs = args.epochs or corpus["epochs"]
    suffix = "" if args.corpus == "generated" else f"_{args.corpus}"
    args.results = args.results or RESULTS / f"seq2seq_autoencoding{suffix}.json"
    return args


def example_arguments(args):
    """The example's options common to every run (the settings of the benchmark), but for the
    corpus's folder."""
    return [*CORPORA[args.corpus]["arguments"], "--epochs", str(args.epochs)]


def run(model, seed, args):
    """Runs the example once; returns its row."""
    folder = CORPORA[args.corpus]["folder"]
    data = []
    if folder:
        if not (DATA / folder).is_dir():
            sys.exit(f"{DATA / folder} not found (set TF_MEMLAYERS_DATA).")
        data = ["--data-dir", str(DATA / folder)]
    metrics, settings = run_example(
        EXAMPLE,
        ["--model", model, *data, *example_arguments(args), "--seed", str(seed)],
        args.runs_dir / f"{args.corpus}-{model}-seed{seed}",
        ROOT,
    )
    return {
        "model": model,
        "seed": seed,
        "units": settings["units"],
        "parameters": metrics["parameters"],
        "epochs": len(metrics["epochs_run"]),
        "train_sentences": metrics["train_sentences"],
        "test_sentences": metrics["test_sentences"],
        "vocabulary": metrics["vocabulary"],
        "test_perplexity": metrics["test_perplexity"],
        "test_word_accuracy": metrics["test_word_accuracy"],
        "decoded_exact_match": metrics["decoded_exact_match"],
        "decoded_word_accuracy": metrics["decoded_word_accuracy"],
        "memory_before_training": metrics["memory_before_training"],
        "memory": metrics["memory"],
        "probe_heatmap": metrics["probe_heatmap"],
        "val_loss_by_epoch": [round(v, 4) for v in metrics["history"]["val_loss"]],
        "seconds": metrics["seconds"],
    }


def summarise(runs):
    rows = []
    for model, name in MODELS.items():
        mine = [r for r in runs if r["model"] == model]
        if not mine:
            continue

        def memory(key, when="memory", mine=mine):
            return mean_and_spread([r[when].get(key) for r in mine], 2)

        rows.append(
            {
                "model": name,
                "seeds": len(mine),
                "parameters": mine[0]["parameters"],
                "test_perplexity": mean_and_spread([r["test_perplexity"] for r in mine], 2),
                "test_word_accuracy": mean_and_spread([r["test_word_accuracy"] for r in mine]),
                "decoded_word_accuracy": mean_and_spread(
                    [r["decoded_word_accuracy"] for r in mine]
                ),
                "decoded_exact_match": mean_and_spread([r["decoded_exact_match"] for r in mine]),
                "key_similarity_before": memory("key_similarity", "memory_before_training"),
                "key_similarity": memory("key_similarity"),
                "read_aligned": memory("read_aligned"),
                "read_last": memory("read_last"),
            }
        )
    return rows


def draw_figure(runs, path):
    """The first seed's Dual AM-GRU heatmap (Figure 3) beside the attention decoder's weights
    on the same sentence; returns the path, or `None` without both runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = {}
    for model in ("dual_am_gru", "attention"):
        mine = sorted((r for r in runs if r["model"] == model), key=lambda r: r["seed"])
        if mine and mine[0]["probe_heatmap"]:
            found[model] = mine[0]
    if len(found) < 2:
        return None
    # One panel above the other, 6.6 inches at 110 dpi: 726 pixels wide, so that the results
    # page's content column shows it at its own size.
    figure, axes = plt.subplots(2, 1, figsize=(6.6, 9.0))
    panels = [
        ("dual_am_gru", "Dual AM-GRU: cosine(encoder write, decoder read)", -1.0, 1.0),
        ("attention", "attention decoder: weights over the source", 0.0, 1.0),
    ]
    for axis, (model, title, low, high) in zip(axes, panels):
        heatmap = found[model]["probe_heatmap"]
        image = axis.imshow(
            np.array(heatmap["matrix"]), cmap="viridis", vmin=low, vmax=high, aspect="auto"
        )
        axis.set_xticks(
            range(len(heatmap["source"])), heatmap["source"], rotation=60, ha="right", fontsize=9
        )
        axis.set_yticks(range(len(heatmap["decoder_input"])), heatmap["decoder_input"], fontsize=9)
        axis.set_xlabel("source word (written by the encoder)")
        axis.set_ylabel("decoder input")
        axis.set_title(f"{title}\n(seed {found[model]['seed']})", fontsize=10)
        figure.colorbar(image, ax=axis, fraction=0.046)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def findings(summary):
    """The paper's two claims against the runs, as a sentence of the summary's values (empty
    without the Dual AM-GRU's row)."""
    rows = {row["model"]: row for row in summary}
    dual = rows.get(MODELS["dual_am_gru"])
    if not dual or not dual["key_similarity"]:
        return ""
    text = (
        "The paper's finding against these runs: the AM-GRU encoder's keys have a mean "
        f"cosine similarity of {dual['key_similarity_before']} untrained and "
        f"{dual['key_similarity']} trained (1: one key for everything, as the paper found); "
        f"the Dual AM-GRU decoder's read is largest at the source's last word in "
        f"{dual['read_last']} of its steps and at the word it predicts in {dual['read_aligned']}"
    )
    attention = rows.get(MODELS["attention"])
    if attention and attention["read_aligned"]:
        text += f" (the attention decoder's weights: {attention['read_aligned']} at that word)"
    return text + "."


def write_docs_table(report):
    runs = report["runs"]
    if not runs:
        sys.exit("No runs in the results file: nothing to write to docs/results.rst.")
    corpus = report["settings"].get("corpus", "generated")
    first = runs[0]
    epochs = sorted({r["epochs"] for r in runs})
    if corpus == "generated":
        shortest, longest = GENERATED_LENGTHS
        sentences = (
            f"its generated corpus ({first['train_sentences']} training sentences of "
            f"{shortest}-{longest} words, vocabulary {first['vocabulary']})"
        )
    else:
        sentences = (
            f"Penn Treebank's sentences of at most 15 words ({first['train_sentences']} "
            f"from the training split, vocabulary {first['vocabulary']} with "
            "``<unk>``)"
        )
    figure = CORPORA[corpus]["figure"]
    drawn = draw_figure(runs, IMAGES / figure)
    summary = report.get("summary") or summarise(runs)
    footer = findings(summary)
    if drawn:
        footer += (
            f"\n\n.. image:: images/{figure}\n   :alt: Two heatmaps over one test "
            "sentence: left, the cosine similarity between what the AM-GRU encoder "
            "wrote at each source word and what the Dual AM-GRU decoder read at each "
            "step; right, the attention decoder's weights over the source words."
        )
    update_docs(
        CORPORA[corpus]["block"],
        summary,
        [
            ("model", "model"),
            ("seeds", "seeds"),
            ("parameters", "parameters"),
            ("test_perplexity", "test perplexity"),
            ("test_word_accuracy", "word accuracy"),
            ("decoded_word_accuracy", "decoded: word accuracy"),
            ("decoded_exact_match", "decoded: whole sentence"),
            ("key_similarity_before", "key similarity, untrained"),
            ("key_similarity", "key similarity, trained"),
            ("read_aligned", "reads its word most"),
            ("read_last", "reads the last word most"),
        ],
        f"``examples/seq2seq_autoencoder.py`` on {sentences}, "
        f"{'/'.join(map(str, epochs))} epochs, {first['units']} units, "
        "mean ± std over the seeds. Test perplexity and word accuracy: teacher-forced, over "
        f"the {first['test_sentences']} test sentences' words and end marks. Decoded: each test "
        "sentence decoded greedily from its encoding alone through the decoder's step model, "
        "word by word at its position, and whole sentences exactly right. Key similarity: "
        "the mean cosine similarity of the keys the AM-GRU encoder writes under at two "
        "steps of a sentence (1: one key for everything). The last two columns: the share of "
        "decoder steps whose read from the encoder's memory (the Dual AM-GRU's retrieval, the "
        "attention's weights) is largest at the word being predicted, and at the source's last "
        "word; over 100 test sentences. Written by ``python -m "
        "benchmarks.papers.seq2seq_autoencoding --update-docs"
        + ("" if corpus == "generated" else f" --corpus {corpus}")
        + "``; times are in the results file.",
        footer=footer,
        insert_after=None if corpus == "generated" else CORPORA["generated"]["block"],
    )


def main(argv=None):
    args = parse_args(argv)
    write_docs = write_docs_table if args.update_docs else None
    if args.from_results:
        report = results_file.render(args.results, write_docs)
        print(json.dumps(report.get("summary") or summarise(report["runs"]), indent=1))
        return report
    settings = {"corpus": args.corpus, "example_arguments": example_arguments(args)}
    results = ResultsFile(args.results, settings, key=("model", "seed"), summarise=summarise)
    report = results.resume()
    for model, seed in results.missing(report, [(m, s) for s in args.seeds for m in args.models]):
        results.add(report, run(model, seed, args))
        print(
            json.dumps({k: v for k, v in report["runs"][-1].items() if k != "probe_heatmap"}),
            flush=True,
        )
    results.finish(report, write_docs)
    print(json.dumps(report["summary"], indent=1))
    return report


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
