"""The last-word example on its generated corpus: no cache and the cache reads, 3 seeds.

``examples/fill_last_word/`` with its defaults, once per row and seed (docs/results.rst)."""

import pathlib

from benchmarks import ROOT, positive
from benchmarks.docs_tables import update_docs
from benchmarks.papers import mean_and_spread, paper_parser, per_model
from benchmarks.results_file import ResultsFile

NAME = "fill_last_word_generated"
VARIANTS = {  # key: (name in the table, the example's options)
    "no-cache": ("no cache", "--cache-size 0"),
    "none": ("cache, query=none (the paper)", "--query none"),
    "additive": ("cache, query=additive", "--query additive"),
    "dot": ("cache, query=dot", "--query dot"),
}
# The dot read's gate starts at 1; the same start for the additive read.
GATE = "--query additive --cache-gate-init ones"
VARIANTS["additive-gate-ones"] = ("cache, query=additive, gate starting at 1", GATE)


def parse_args(argv=None):
    parser = paper_parser(__doc__, NAME, [0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--epochs", type=positive(int), help="default: the example's")
    parser.add_argument("--runs-dir", type=pathlib.Path, default=ROOT / f"runs/benchmarks/{NAME}")
    args = parser.parse_args(argv)
    args.example_arguments = ["--epochs", str(args.epochs)] if args.epochs else []
    return args


def run(key, seed, args):
    """Trains the example once; returns the row."""
    import keras

    from examples.fill_last_word import main, train

    keras.backend.clear_session()
    name, options = VARIANTS[key]
    config = main.parse_args([*options.split(), *args.example_arguments, "--seed", str(seed)])
    config.verbose = 0
    m = train.train_and_evaluate(config, args.runs_dir / f"{key}-seed{seed}")
    row = dict(variant=key, model=name, seed=seed, query=m["query"] if m["cache_size"] else None)
    for field in ("eval_accuracy", "eval_majority_baseline", "eval_attention_on_fact"):
        row[field] = None if m[field] is None else round(m[field], 4)
    row.update(val_accuracy_by_epoch=[round(v, 4) for v in m["val_accuracy"]])
    row.update(eval_questions=m["eval_sentences"], train_sentences_per_epoch=m["train_sentences"])
    row.update(epochs=len(m["epochs_run"]), episodes_per_epoch=config.episodes)
    row.update(houses_per_episode=config.houses, pooling=m["pooling"])
    return dict(row, cache_size=m["cache_size"], seconds=m["seconds"])


def summarise(runs):
    rows = []
    for key, mine in per_model(runs, VARIANTS, "variant"):
        accuracy = [r["eval_accuracy"] for r in mine]
        attention = [r["eval_attention_on_fact"] for r in mine]
        row = dict(model=VARIANTS[key][0], seeds=len(mine), accuracy=mean_and_spread(accuracy))
        row["accuracy_by_seed"] = ", ".join(f"{a:.3f}" for a in accuracy)
        row["attention_on_fact"] = "" if None in attention else mean_and_spread(attention)
        rows.append(dict(row, majority_baseline=f"{mine[0]['eval_majority_baseline']:.3f}"))
    return rows


def write_docs_table(report):
    runs, first = report["runs"], report["runs"][0]
    update_docs(
        "fill-last-word-generated",
        report.get("summary") or summarise(runs),
        "model: model; seeds: seeds; accuracy: held-out accuracy (mean ± std); accuracy_by_seed: "
        "by seed; attention_on_fact: read weight on the asked house's fact; majority_baseline: "
        "commonest colour",
        f"``examples/fill_last_word_cache.py`` on its generated corpus with its defaults "
        f"({'/'.join(map(str, sorted({r['epochs'] for r in runs})))} epochs of "
        f"{first['episodes_per_epoch']} episodes of {first['houses_per_episode']} houses, "
        f"{first['train_sentences_per_epoch']} sentences per epoch; {first['pooling']} pooling, "
        f"a heap cache of {max(r['cache_size'] for r in runs):,} states, the paper's optimizer): "
        f"accuracy on the {first['eval_questions']} questions of the evaluation episodes, each "
        "asked right after its episode's facts were written to the emptied cache. Written by "
        f"``python -m benchmarks.papers.{NAME} --update-docs``; times are in the results file.",
    )


def main(argv=None):
    args = parse_args(argv)
    settings = {"example_arguments": args.example_arguments}
    results = ResultsFile(args.results, settings, key=("variant", "seed"), summarise=summarise)
    return results.run(args, args.variants, lambda _, *key: run(*key, args), write_docs_table)


if __name__ == "__main__":
    main()
