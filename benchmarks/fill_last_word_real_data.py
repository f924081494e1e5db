"""Last-word accuracy on real sentences (PWKP, Gaffney's split): pooling and cache variants.

Trains on ``pwkp_gaffney/test.txt`` (the reference code's 20% split; its 75% training split is
not available) and evaluates on ``dev.txt`` (its 5% split), for: no attention (last LSTM state),
attention pooling, and attention pooling + a heap cache of 100 / 1,000 / 10,000 states (the
paper's Table 2 sizes). Paper settings otherwise: LSTM 128, attention 64, Adam with the paper's
learning rate and clip norm 5, L2 1e-5, batch 64, 40 steps, GloVe 50d where available. Prints
one JSON object; ``--update-readme`` writes the table into README.rst.

    python -m benchmarks.fill_last_word_real_data --update-readme
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

VARIANTS = (
    ("no attention", "last", None),
    ("attention pooling", "attention", None),
    ("attention + cache 100", "attention", 100),
    ("attention + cache 1,000", "attention", 1000),
    ("attention + cache 10,000", "attention", 10000),
)


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
    parser.add_argument("--update-readme", action="store_true",
                        help="write the results into README.rst")
    return parser.parse_args(argv)


def run_variant(label, pooling, cache_size, arrays, vocabulary, matrix, args):
    keras.backend.clear_session()
    keras.utils.set_random_seed(args.seed)
    (x_train, y_train), (x_eval, y_eval) = arrays
    model = build_fill_last_word_model(
        len(vocabulary), pooling=pooling, cache_size=cache_size, embedding_matrix=matrix
    )
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
        "dev_accuracy": round(100 * float(result["accuracy"]), 2),
        "dev_loss": round(float(result["loss"]), 3),
        "train_seconds": round(seconds, 1),
    }
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    args = parse_args(argv)
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
    chosen = [VARIANTS[i] for i in args.variants] if args.variants else VARIANTS
    rows = [run_variant(*variant, arrays, vocabulary, matrix, args) for variant in chosen]
    report = {
        "train_sentences": len(x_train),
        "dev_sentences": len(x_eval),
        "vocabulary": len(vocabulary),
        "glove_rows": found,
        "dev_labels_out_of_vocabulary": round(unknown_labels, 4),
        "epochs": args.epochs,
        "rows": rows,
    }
    print(json.dumps(report))
    if args.update_readme:
        from benchmarks.readme_tables import update_readme

        caption = (
            f"Last-word accuracy (%) on PWKP ``dev.txt`` ({len(x_eval):,} sentences) after "
            f"{args.epochs} epoch(s) on ``test.txt`` ({len(x_train):,} sentences, vocabulary "
            f"{len(vocabulary):,}, GloVe 50d for {found:,} words; "
            f"{100 * unknown_labels:.1f}% of dev answers are out of vocabulary). Paper settings; "
            "the paper's own split (75% train) is not available, so figures are not comparable "
            "to its Table 2."
        )
        columns = [("model", "model"), ("dev_accuracy", "dev accuracy (%)"),
                   ("dev_loss", "dev loss"), ("train_seconds", "train time (s)")]
        update_readme("fill-last-word-real-data", rows, columns, caption)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
