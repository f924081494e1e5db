"""The headline result of each paper's comparison, written into README.rst and atop the results
page from the results files of the benchmarks that ran it.

    python -m benchmarks.headlines          # rewrite both blocks
    python -m benchmarks.headlines --check  # exit 1 if a block is not what the files say
"""

import argparse
import sys

from benchmarks import RESULTS, ROOT, results_file
from benchmarks.docs_tables import RESULTS_PAGE, with_block

PAGES = (ROOT / "README.rst", RESULTS_PAGE)


def _load(name):
    return results_file.read(RESULTS / f"{name}.json")


def lm_headline(ptb_rows):
    """``(comparison, result)`` of the PTB language models: test perplexities, best first, each
    naming its model's epochs where they differ (rows kept from a run with a lower epoch cap)."""
    lm = sorted(ptb_rows, key=lambda row: row["test_perplexity"])
    epochs = sorted({row["epochs_trained"] for row in lm})
    # The budget is the LSTM's: every memory model takes the width closest to it.
    lstm = [row for row in lm if row["model"] == "lstm"]
    budget = f"the LSTM's {lstm[0]['parameters']:,}" if lstm else f"{lm[0]['parameters']:,}"
    comparison = f"PTB word-level test perplexity, equal parameter budget ({budget} weights), "
    comparison += f"{epochs[0]} epochs" if len(epochs) == 1 else "each model's epochs in brackets"
    each = "" if len(epochs) == 1 else " ({epochs_trained} epochs)"
    return comparison, ", ".join(("{model} {test_perplexity:.1f}" + each).format(**r) for r in lm)


def seq2seq_headline(summaries):
    """``(comparison, result)`` of the auto-encoders by corpus name: decoded word accuracy (whole
    sentences in brackets), the AM-GRU encoder's key similarity (the paper's "same key")."""
    from benchmarks.papers.seq2seq_autoencoding import MODELS

    names = {description: model for model, description in MODELS.items()}
    comparison = "sentence auto-encoding (§5.3): test words decoded right, whole sentences in "
    comparison += "brackets, and the AM-GRU encoder's key similarity (1: one key)"
    parts = []
    for corpus, summary in summaries.items():
        seeds = summary[0]["seeds"]
        score = "{} {decoded_word_accuracy} ({decoded_exact_match})"
        scores = ", ".join(score.format(names.get(r["model"], r["model"]), **r) for r in summary)
        dual = [row for row in summary if names.get(row["model"]) == "dual_am_gru"]
        if dual and dual[0]["key_similarity"]:
            scores += f", key similarity {dual[0]['key_similarity']}"
        parts.append(f"{corpus} ({seeds} seed{'s' if seeds > 1 else ''}): {scores}")
    return comparison, "; ".join(parts)


def rows():
    """One row per comparison: the paper, its data and its models' scores."""
    from benchmarks.papers.fill_last_word_real_data import table_rows
    from benchmarks.papers.snli_real_data import PAPER_TABLE_1

    snli, last_word = _load("snli_real_data"), _load("fill_last_word_real_data")
    corpora = {"generated corpus": "", "Penn Treebank": "_ptb"}
    seq2seq = {name: _load(f"seq2seq_autoencoding{e}")["summary"] for name, e in corpora.items()}
    snli_comparison = (
        f"SNLI test accuracy on {snli['data']['train']:,} training pairs, "
        f"{snli['summary'][0]['seeds']} seeds (the paper's on 550k pairs in brackets)"
    )
    snli_result = ", ".join(
        f"{row['model']} {row['test']} (paper {PAPER_TABLE_1[row['model']][-1]}%)"
        for row in snli["summary"]
    )
    each, runs = "{model} {dev_accuracy} ({seeds} seed{s})", table_rows(last_word["runs"])
    last_word_result = ", ".join(each.format(**r, s="s" * (r["seeds"] > 1)) for r in runs)
    found = [
        ("Daniluk et al. 2017", *lm_headline(_load("lm_equal_budget_ptb")["rows"])),
        ("Weissenborn 2016", snli_comparison, snli_result),
        ("Weissenborn 2016", *seq2seq_headline(seq2seq)),
        ("Gaffney", "last-word accuracy (%) on PWKP dev, best held-out epoch", last_word_result),
    ]
    return [dict(zip(("paper", "comparison", "result"), row)) for row in found]


COLUMNS = "paper: paper; comparison: comparison; result: result"
CAPTION = "Written by ``python -m benchmarks.headlines`` from the benchmarks' results files; the "
CAPTION += "results page (``docs/results.rst``) has every row, its settings and the figures."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the blocks are current")
    args = parser.parse_args(argv)
    found = rows()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        new_text, block = with_block(text, "headlines", found, COLUMNS, CAPTION, where=page.name)
        if not args.check:
            page.write_text(new_text, encoding="utf-8")
        elif new_text != text:
            differs = f"{page.name}'s headline block differs from the results files"
            return print(f"{differs}: run python -m benchmarks.headlines", file=sys.stderr) or 1
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
