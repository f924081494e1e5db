"""The last-word example on its generated corpus: no cache and the three cache reads, 3 seeds.

Runs ``examples/fill_last_word_cache.py`` with its defaults (the generated episodes of facts
and questions, attention pooling, a heap cache of 1,000 states, the paper's optimizer) once
per read and seed: without a cache (``--cache-size 0``), and with the cache read
``--query none`` (the paper), ``additive`` (the reference code) and ``dot``. All four train the
same encoder on the same stream. Each evaluation episode writes its facts to the emptied cache
before its questions are asked, so a question's answer is stated only in a cached fact; the
table gives the accuracy on those questions, the accuracy of always answering the commonest
colour, and the read's mean weight on the fact about the asked house.

Results are saved after each run in ``--results`` and a rerun with the same settings skips the
runs already there (an interrupted run resumes from its run directory under
``runs/benchmarks/``). Prints the summary as JSON.

Example::

    python -m benchmarks.papers.fill_last_word_generated --update-docs
    python -m benchmarks.papers.fill_last_word_generated --from-results --update-docs
"""

import argparse
import json
import os
import pathlib
import sys

from benchmarks import results_file
from benchmarks.docs_tables import add_update_docs_option, update_docs
from benchmarks.papers.example_runs import mean_and_spread, run_example
from benchmarks.results_file import ResultsFile, add_results_options
from examples.harness import options

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fill_last_word_cache.py"
# Key (--variants, run directories): (name in the table, the example's options for it).
VARIANTS = {
    "no-cache": ("no cache", ["--cache-size", "0"]),
    "none": ("cache, query=none (the paper)", ["--query", "none"]),
    "additive": ("cache, query=additive (reference code)", ["--query", "additive"]),
    "dot": ("cache, query=dot", ["--query", "dot"]),
    # The dot read's gate starts at 1; the same start for the additive read.
    "additive-gate-ones": (
        "cache, query=additive, gate starting at 1",
        ["--query", "additive", "--cache-gate-init", "ones"],
    ),
}
DOCS_BLOCK = "fill-last-word-generated"


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--seeds",
        nargs="+",
        type=options.non_negative_int,
        default=[0, 1, 2],
        help="one run per read and seed",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="the rows to run",
    )
    parser.add_argument(
        "--epochs", type=options.positive_int, help="epochs per run (None: the example's default)"
    )
    parser.add_argument(
        "--runs-dir",
        type=pathlib.Path,
        default=ROOT / "runs" / "benchmarks" / "fill_last_word_generated",
        help="where the example keeps each run (checkpoints, TensorBoard logs)",
    )
    add_results_options(parser, ROOT / "benchmarks" / "results" / "fill_last_word_generated.json")
    add_update_docs_option(parser)
    return parser.parse_args(argv)


def example_arguments(args):
    """The example's options common to every run (the settings of the benchmark)."""
    return ["--epochs", str(args.epochs)] if args.epochs else []


def run(key, seed, args):
    """Runs the example once; returns its row."""
    name, variant = VARIANTS[key]
    metrics, settings = run_example(
        EXAMPLE,
        [*variant, *example_arguments(args), "--seed", str(seed)],
        args.runs_dir / f"{key}-seed{seed}",
        ROOT,
    )
    attention = metrics.get("eval_attention_on_fact")
    return {
        "variant": key,
        "model": name,
        "seed": seed,
        "query": metrics["query"] if metrics["cache_size"] else None,
        "eval_accuracy": round(metrics["eval_accuracy"], 4),
        "eval_majority_baseline": round(metrics["eval_majority_baseline"], 4),
        "eval_attention_on_fact": None if attention is None else round(attention, 4),
        "val_accuracy_by_epoch": [round(v, 4) for v in metrics["val_accuracy"]],
        "eval_questions": metrics["eval_sentences"],
        "train_sentences_per_epoch": metrics["train_sentences"],
        "epochs": len(metrics["epochs_run"]),
        "episodes_per_epoch": settings["episodes"],
        "houses_per_episode": settings["houses"],
        "pooling": metrics["pooling"],
        "cache_size": metrics["cache_size"],
        "seconds": metrics["seconds"],
    }


def summarise(runs):
    rows = []
    for key, (name, _) in VARIANTS.items():
        mine = [r for r in runs if r["variant"] == key]
        if not mine:
            continue
        attention = [r["eval_attention_on_fact"] for r in mine]
        rows.append(
            {
                "model": name,
                "seeds": len(mine),
                "accuracy": mean_and_spread([r["eval_accuracy"] for r in mine]),
                "accuracy_by_seed": ", ".join(f"{r['eval_accuracy']:.3f}" for r in mine),
                "attention_on_fact": "" if None in attention else mean_and_spread(attention),
                "majority_baseline": f"{mine[0]['eval_majority_baseline']:.3f}",
            }
        )
    return rows


def write_docs_table(report):
    runs = report["runs"]
    if not runs:
        sys.exit("No runs in the results file: nothing to write to docs/results.rst.")
    first = runs[0]
    epochs = sorted({r["epochs"] for r in runs})
    cache = max(r["cache_size"] for r in runs)
    update_docs(
        DOCS_BLOCK,
        report.get("summary") or summarise(runs),
        [
            ("model", "model"),
            ("seeds", "seeds"),
            ("accuracy", "held-out accuracy (mean ± std)"),
            ("accuracy_by_seed", "by seed"),
            ("attention_on_fact", "read weight on the asked house's fact"),
            ("majority_baseline", "commonest colour"),
        ],
        f"``examples/fill_last_word_cache.py`` on its generated corpus with its defaults "
        f"({'/'.join(map(str, epochs))} epochs of {first['episodes_per_epoch']} episodes of "
        f"{first['houses_per_episode']} houses, {first['train_sentences_per_epoch']} sentences "
        f"per epoch; {first['pooling']} pooling, a heap cache of {cache:,} states, the paper's "
        f"optimizer): accuracy on the {first['eval_questions']} questions of the evaluation "
        "episodes, each asked right after its episode's facts were written to the emptied "
        "cache. Every name appears in training with colours drawn afresh for each episode, "
        "so no weight can hold the answer; every colour is used equally often in each "
        "episode, so always answering the commonest colour scores 1/8. Written by "
        "``python -m benchmarks.papers.fill_last_word_generated --update-docs``; times are in the "
        "results file.",
    )


def main(argv=None):
    args = parse_args(argv)
    write_docs = write_docs_table if args.update_docs else None
    if args.from_results:
        report = results_file.render(args.results, write_docs)
        print(json.dumps(report.get("summary") or summarise(report["runs"]), indent=1))
        return report
    settings = {"example_arguments": example_arguments(args)}
    results = ResultsFile(args.results, settings, key=("variant", "seed"), summarise=summarise)
    report = results.resume()
    for key, seed in results.missing(report, [(k, s) for s in args.seeds for k in args.variants]):
        results.add(report, run(key, seed, args))
        print(json.dumps(report["runs"][-1]), flush=True)
    results.finish(report, write_docs)
    print(json.dumps(report["summary"], indent=1))
    return report


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
