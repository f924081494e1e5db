"""Last-word accuracy on real sentences (PWKP, Gaffney's split): pooling and cache variants.

Trains on ``pwkp_gaffney/test.txt`` (the reference code's 20% split; its 75% training split is
not available) and evaluates on ``dev.txt`` (its 5% split), for: no attention (last LSTM state),
attention pooling, attention pooling + a heap cache of 100 / 1,000 / 10,000 states (the
paper's Table 2 sizes) read as in the paper (``query="none"``), and attention pooling + a cache
of 1,000 states read with ``query="dot"``. Paper settings otherwise: LSTM 128, attention 64,
Adam with the paper's learning rate and clip norm 5, L2 1e-5, batch 64, 40 steps, GloVe 50d
where available. Results are saved after each row in ``--results``, and a rerun with the same
settings skips the rows already there. Prints one JSON object; ``--update-readme`` writes the
table into README.rst.

    python -m benchmarks.fill_last_word_real_data --update-readme
    python -m benchmarks.fill_last_word_real_data --from-results --update-readme
"""

import argparse
import json
import os
import pathlib
import sys
import time

import keras
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]

from tf_memlayers.data import embeddings as word_vectors  # noqa: E402
from tf_memlayers.data import sentences as data  # noqa: E402
from tf_memlayers.models.fill_last_word import (  # noqa: E402
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.training import options  # noqa: E402

# (row, pooling, cache size, cache read)
VARIANTS = (
    ("no attention", "last", None, None),
    ("attention pooling", "attention", None, None),
    ("attention + cache 100", "attention", 100, "none"),
    ("attention + cache 1,000", "attention", 1000, "none"),
    ("attention + cache 10,000", "attention", 10000, "none"),
    ("attention + cache 1,000, dot read", "attention", 1000, "dot"),
)
SETTINGS = ("epochs", "batch_size", "max_train", "seed")


def default_data_dir():
    env = os.environ.get("TF_MEMLAYERS_DATA")
    return pathlib.Path(env) if env else ROOT.parent / "shared" / "data"


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", type=pathlib.Path, default=default_data_dir(),
                        help="the shared corpora folder (pwkp_gaffney/, glove_subset/)")
    parser.add_argument("--epochs", type=options.positive_int, default=1,
                        help="the reference code ran 1 epoch")
    parser.add_argument("--batch-size", type=options.positive_int, default=64,
                        help="sentences per batch")
    parser.add_argument("--max-train", type=options.positive_int,
                        help="limit the training sentences")
    parser.add_argument("--variants", nargs="*", type=options.non_negative_int,
                        help="indices into the variant list (default: all)")
    parser.add_argument("--seed", type=options.non_negative_int, default=0, help="random seed")
    parser.add_argument("--results", type=pathlib.Path,
                        default=ROOT / "benchmarks" / "results" / "fill_last_word_real_data.json",
                        help="results file, written after each row and resumed")
    parser.add_argument("--update-readme", action="store_true",
                        help="write the results into README.rst")
    parser.add_argument("--from-results", action="store_true",
                        help="do not train: render the README table from --results")
    return parser.parse_args(argv)


def run_variant(label, pooling, cache_size, query, arrays, vocabulary, matrix, args):
    keras.backend.clear_session()
    keras.utils.set_random_seed(args.seed)
    (x_train, y_train), (x_eval, y_eval) = arrays
    model = build_fill_last_word_model(
        len(vocabulary), pooling=pooling, cache_size=cache_size, query=query or "none",
        embedding_matrix=matrix,
    )  # fmt: skip
    compile_fill_last_word_model(model)
    train = data.last_word_dataset(x_train, y_train, args.batch_size, shuffle=True, seed=args.seed)
    evaluation = data.last_word_dataset(x_eval, y_eval, args.batch_size)
    started = time.time()
    model.fit(train, epochs=args.epochs, verbose=2)
    seconds = time.time() - started
    result = model.evaluate(evaluation, return_dict=True, verbose=0)
    row = {
        "model": label,
        "cache_size": cache_size or 0,
        "query": query or "",
        "dev_accuracy": round(100 * float(result["accuracy"]), 2),
        "dev_loss": round(float(result["loss"]), 3),
        "train_seconds": round(seconds, 1),
    }
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    args = parse_args(argv)
    settings = {name: getattr(args, name) for name in SETTINGS}
    report = json.loads(args.results.read_text()) if args.results.is_file() else {}
    if args.from_results:
        if not report:
            sys.exit(f"No results file at {args.results}.")
        if args.update_readme:
            write_readme_table(report)
        print(json.dumps(report))
        return report
    if report.get("settings") != settings:
        report = {"settings": settings, "rows": []}
    folder = args.data_dir / "pwkp_gaffney"
    train = data.read_sentences(folder / "test.txt")
    evaluation = data.read_sentences(folder / "dev.txt")
    if args.max_train:
        train = train[: args.max_train]
    vocabulary = data.build_vocabulary(train)
    x_train, y_train, _ = data.encode_last_word(train, vocabulary)
    x_eval, y_eval, _ = data.encode_last_word(evaluation, vocabulary)
    glove = args.data_dir / "glove_subset" / "glove-50d-5k.json"
    vectors = word_vectors.load_word_vectors(glove, vocabulary=set(vocabulary))
    matrix, found = word_vectors.embedding_matrix(vocabulary, vectors, scale=0.9, seed=args.seed)
    unknown_labels = float(np.mean(y_eval == vocabulary.index(data.UNK)))
    arrays = ((x_train, y_train), (x_eval, y_eval))
    report["data"] = {
        "train_sentences": len(x_train),
        "dev_sentences": len(x_eval),
        "vocabulary": len(vocabulary),
        "glove_rows": found,
        "dev_labels_out_of_vocabulary": round(unknown_labels, 6),
    }
    chosen = [VARIANTS[i] for i in args.variants] if args.variants else VARIANTS
    for variant in chosen:
        if any(row["model"] == variant[0] for row in report["rows"]):
            continue
        report["rows"].append(run_variant(*variant, arrays, vocabulary, matrix, args))
        order = [v[0] for v in VARIANTS]
        report["rows"].sort(key=lambda row: order.index(row["model"]))
        write_results(report, args.results)
    write_results(report, args.results)
    print(json.dumps(report))
    if args.update_readme:
        write_readme_table(report)
    return report


def write_results(report, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


def write_readme_table(report):
    from benchmarks.readme_tables import update_readme

    corpus, epochs = report["data"], report["settings"]["epochs"]
    caption = (
        f"Last-word accuracy (%) on PWKP ``dev.txt`` ({corpus['dev_sentences']:,} sentences) "
        f"after {epochs} epoch(s) on ``test.txt`` ({corpus['train_sentences']:,} sentences, "
        f"vocabulary {corpus['vocabulary']:,}, GloVe 50d for {corpus['glove_rows']:,} words; "
        f"{100 * corpus['dev_labels_out_of_vocabulary']:.1f}% of dev answers are out of "
        "vocabulary). Paper settings; the cache rows read with ``query=\"none\"`` (the paper) "
        "unless the row says ``dot read`` (``query=\"dot\"``, its gate starting at 1). The "
        "paper's own split (75% train) is not available, so figures are not comparable to its "
        "Table 2."
    )
    columns = [("model", "model"), ("dev_accuracy", "dev accuracy (%)"),
               ("dev_loss", "dev loss"), ("train_seconds", "train time (s)")]
    update_readme("fill-last-word-real-data", report["rows"], columns, caption)


if __name__ == "__main__":
    main(sys.argv[1:])
