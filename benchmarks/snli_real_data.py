"""GRU, AM-GRU and Dual AM-GRU on real SNLI pairs (prints JSON; ``--update-readme``).

Only the SNLI dev and test sets are available offline (../shared/data): the three models are
trained on dev (9,842 pairs; a held-out tenth drives the learning-rate halving) with the 50d
GloVe subset, and evaluated on test. This is a small-data regime (the paper trains on 550k
pairs), so the accuracies are far below the paper's and only compare the models with each
other.
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
sys.path.insert(0, str(ROOT))

from benchmarks.readme_tables import update_readme  # noqa: E402
from tf_memlayers.data import embeddings as word_vectors  # noqa: E402
from tf_memlayers.data import snli  # noqa: E402
from tf_memlayers.models.snli import (  # noqa: E402
    KINDS,
    build_snli_model,
    compile_snli_model,
    halve_learning_rate_callback,
)
from tf_memlayers.training import options  # noqa: E402

DATA = pathlib.Path(os.environ.get("TF_MEMLAYERS_DATA", ROOT.parent / "shared" / "data"))


def run(kind, splits, vocabulary, matrix, args):
    keras.utils.set_random_seed(args.seed)
    units = {"gru": args.units + 26, "am_gru": args.units + 8}.get(kind, args.units)  # paper's H
    units += units % 2
    model = build_snli_model(
        len(vocabulary), kind=kind, units=units, embeddings=matrix, num_copies=args.copies,
        seed=args.seed,
    )
    compile_snli_model(model, args.learning_rate)
    common = dict(batch_size=args.batch_size, max_length=args.max_length)
    train = snli.make_dataset(splits["train"], vocabulary, shuffle=True, seed=args.seed, **common)
    dev = snli.make_dataset(splits["dev"], vocabulary, **common)
    test = snli.make_dataset(splits["test"], vocabulary, **common)
    started = time.time()
    history = model.fit(
        train, validation_data=dev, epochs=args.epochs, verbose=args.verbose,
        callbacks=[halve_learning_rate_callback()],
    )
    result = model.evaluate(test, return_dict=True, verbose=0)
    return {
        "model": kind,
        "units": units,
        "parameters_without_embeddings": int(
            sum(np.prod(w.shape) for w in model.trainable_weights) - matrix.size
        ),
        "best_dev_accuracy": float(max(history.history["val_accuracy"])),
        "test_accuracy": float(result["accuracy"]),
        "epochs": args.epochs,
        "minutes": round((time.time() - started) / 60.0, 1),
    }


def parse_args(argv=None):
    parser = options.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS),
                        help="the models to train")
    parser.add_argument("--epochs", type=options.positive_int, default=10, help="epochs per model")
    parser.add_argument("--units", type=options.positive_int, default=100,
                        help="Dual AM-GRU size (paper: 100)")
    parser.add_argument("--copies", type=options.positive_int, default=8,
                        help="associative memory copies")
    parser.add_argument("--batch-size", type=options.positive_int, default=50,
                        help="pairs per batch")
    parser.add_argument("--learning-rate", type=options.positive_float, default=1e-3,
                        help="Adam's learning rate")
    parser.add_argument("--max-length", type=options.positive_int, default=40,
                        help="truncate sentences to this many tokens")
    parser.add_argument("--seed", type=options.non_negative_int, default=123, help="random seed")
    parser.add_argument("--verbose", type=int, choices=(0, 1, 2), default=2,
                        help="Keras progress output")
    parser.add_argument("--update-readme", action="store_true",
                        help="write the results into README.rst")
    parser.add_argument("--from-json", help="render the README table from the saved stdout of "
                        "an earlier run instead of training")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.from_json:
        render_saved_run(args.from_json)
        return

    directory = DATA / "snli" / "esnli_infersent_format"
    if not directory.is_dir():
        sys.exit(f"SNLI dev/test not found at {directory} (set TF_MEMLAYERS_DATA).")
    dev = snli.read_files(directory, "dev")
    held_out = len(dev) // 10
    splits = {"train": dev[held_out:], "dev": dev[:held_out], "test": snli.read_files(directory, "test")}
    vocabulary = snli.build_vocabulary(splits["train"])
    vectors = word_vectors.load_word_vectors(
        DATA / "glove_subset" / "glove-50d-5k.json", vocabulary=set(vocabulary)
    )
    matrix, found = word_vectors.embedding_matrix(vocabulary, vectors, seed=args.seed)
    print(json.dumps({"train": len(splits["train"]), "held_out_dev": held_out,
                      "test": len(splits["test"]), "vocabulary": len(vocabulary),
                      "glove_found": found}), flush=True)
    rows = []
    for kind in args.kinds:
        rows.append(run(kind, splits, vocabulary, matrix, args))
        print(json.dumps(rows[-1]), flush=True)
    labels = np.bincount([e.label for e in splits["test"]], minlength=3)
    majority = float(labels.max() / labels.sum())
    print(json.dumps({"snli_real_data": rows, "majority_baseline": majority}), flush=True)
    if args.update_readme:
        data = {"train": len(splits["train"]), "held_out_dev": held_out,
                "test": len(splits["test"]), "vocabulary": len(vocabulary), "glove_found": found}
        write_readme_table(rows, data, majority)


def write_readme_table(rows, data, majority):
    update_readme(
        "snli-real-data",
        rows,
        [("model", "model"), ("units", "H"), ("parameters_without_embeddings", "params (−E)"),
         ("best_dev_accuracy", "held-out dev acc."), ("test_accuracy", "SNLI test acc."),
         ("epochs", "epochs"), ("minutes", "minutes")],
        f"Trained on {data['train']} SNLI dev pairs ({data['held_out_dev']} held out for the "
        f"learning-rate schedule), 50d GloVe subset ({data['glove_found']} of "
        f"{data['vocabulary']} words found), evaluated on the {data['test']} SNLI test pairs "
        f"(majority class {majority:.3f}). Small-data regime: the paper trains on 550k pairs; "
        "these numbers compare the three models with each other, not with the paper's table.",
    )


def render_saved_run(path):
    """Writes the README table from the JSON lines an earlier run printed."""
    records = [json.loads(line) for line in open(path, encoding="utf-8") if line.startswith("{")]
    data = next(r for r in records if "glove_found" in r)
    summary = next(r for r in records if "snli_real_data" in r)
    write_readme_table(summary["snli_real_data"], data, summary["majority_baseline"])


if __name__ == "__main__":
    main()
