"""The headline result of each paper's comparison, written into README.rst from the results
files of the benchmarks that ran it (never typed in): the PTB language models at an equal
parameter budget (Daniluk et al. 2017), the SNLI encoders on real sentence pairs (Weissenborn
2016) and the last-word task on real sentences (Gaffney).

    python -m benchmarks.headlines          # rewrite README.rst's block
    python -m benchmarks.headlines --check  # exit 1 if the block is not what the files say
"""

import argparse
import json
import pathlib
import sys

from benchmarks.docs_tables import with_block

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.rst"
BLOCK = "headlines"


def _load(name):
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def lm_headline(ptb_rows):
    """``(comparison, result)`` of the PTB language models: test perplexities, best first.
    When the models trained for different numbers of epochs (rows kept from a run with a
    lower epoch cap), each score names its model's epochs."""
    lm = sorted(ptb_rows, key=lambda row: row["test_perplexity"])
    epochs = sorted({row["epochs_trained"] for row in lm})
    # The budget is the LSTM's: every memory model takes the width closest to it.
    lstm = [row for row in lm if row["model"] == "lstm"]
    budget = f"the LSTM's {lstm[0]['parameters']:,}" if lstm else f"{lm[0]['parameters']:,}"
    comparison = (
        f"PTB word-level test perplexity, equal parameter budget ({budget} weights), "
        + (f"{epochs[0]} epochs" if len(epochs) == 1 else "each model's epochs in brackets")
    )
    result = ", ".join(
        f"{row['model']} {row['test_perplexity']:.1f}"
        + ("" if len(epochs) == 1 else f" ({row['epochs_trained']} epochs)")
        for row in lm
    )
    return comparison, result


def rows():
    """One row per paper: the comparison, its data and its models' scores."""
    lm_comparison, lm_result = lm_headline(_load("lm_equal_budget_ptb")["rows"])
    snli = _load("snli_real_data")
    last_word = _load("fill_last_word_real_data")
    from benchmarks.papers.fill_last_word_real_data import table_rows
    from benchmarks.papers.snli_real_data import PAPER_TABLE_1

    return [
        {
            "paper": "Daniluk et al. 2017",
            "comparison": lm_comparison,
            "result": lm_result,
        },
        {
            "paper": "Weissenborn 2016",
            "comparison": f"SNLI test accuracy on {snli['data']['train']:,} training pairs, "
                          f"{snli['summary'][0]['seeds']} seeds (the paper's on 550k pairs in "
                          "brackets)",
            "result": ", ".join(
                f"{row['model']} {row['test']} (paper {PAPER_TABLE_1[row['model']][-1]}%)"
                for row in snli["summary"]
            ),
        },
        {
            "paper": "Gaffney",
            "comparison": "last-word accuracy (%) on PWKP dev, best held-out epoch",
            "result": ", ".join(
                f"{row['model']} {row['dev_accuracy']} ({row['seeds']} seed"
                f"{'s' if row['seeds'] > 1 else ''})"
                for row in table_rows(last_word["runs"])
            ),
        },
    ]  # fmt: skip


COLUMNS = [("paper", "paper"), ("comparison", "comparison"), ("result", "result")]
CAPTION = (
    "Written by ``python -m benchmarks.headlines`` from the benchmarks' results files; the full "
    "tables, settings and figures are on the results page (``docs/results.rst``)."
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that README.rst's block is current")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new_text, block = with_block(text, BLOCK, rows(), COLUMNS, CAPTION, where=README.name)
    if args.check:
        if new_text != text:
            print("README.rst's headline block differs from the results files: run "
                  "python -m benchmarks.headlines", file=sys.stderr)
            return 1
    else:
        README.write_text(new_text, encoding="utf-8")
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
