"""Predicts the last word of a sentence with an LSTM, attention pooling and a heap cache (Gaffney).

Data: ``--data-dir`` with one sentence per line (``train.txt`` and ``dev.txt``; when there is
no ``train.txt`` but a ``test.txt``, as in the PWKP split of the reference code, that file is
used for training), else an embedded generated corpus whose evaluation answers can only be
recovered from the cached states of earlier training sentences.

Examples::

    python examples/fill_last_word_cache.py                  # generated corpus, cache of 1000
    python examples/fill_last_word_cache.py --cache-size 0   # the same without a cache
    python examples/fill_last_word_cache.py --data-dir ../shared/data/pwkp_gaffney \\
        --embeddings glove-50d-5k.json --pooling attention --cache-size 1000 --epochs 5

The run directory (``--workdir``; by default ``runs/fill_last_word_cache/<pooling>-cache<size>-
<digest>``, one per set of options) keeps checkpoints (the same command resumes after an
interruption, cache included, and a different one in the same ``--workdir`` is refused),
TensorBoard logs (scalars; each epoch the cache-attention weight by heap index on a log axis, as
in the paper's Fig. 5, and the cache fill) and ``metrics.json``.
``tensorboard --logdir runs/fill_last_word_cache`` compares the runs.
"""

import argparse
import os
import sys
import time

import keras
import numpy as np

from tf_memlayers.callbacks.cache_attention import CacheAttentionCallback
from tf_memlayers.data import embeddings as word_vectors
from tf_memlayers.data import sentences as data
from tf_memlayers.layers.heap_cache_attention import POLICIES, QUERIES
from tf_memlayers.models.fill_last_word import (
    POOLINGS,
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.models.heap_cache_model import cache_fill_fractions
from tf_memlayers.training import (
    make_strategy,
    resumable_callbacks,
    run_settings,
    run_workdir,
    write_metrics,
)
from tf_memlayers.training.strategy import STRATEGIES


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    source = parser.add_argument_group("data")
    source.add_argument("--data-dir", help="directory of one-sentence-per-line files")
    source.add_argument("--train-file", help="training file name in --data-dir "
                        "(default: train.txt, else test.txt)")
    source.add_argument("--eval-file", default="dev.txt", help="evaluation file in --data-dir")
    source.add_argument("--max-train", type=int, help="use at most this many training sentences")
    source.add_argument("--max-vocabulary", type=int, help="cap the vocabulary (rest: <unk>)")
    source.add_argument("--max-length", type=int, default=40, help="context steps (the paper: 40)")
    source.add_argument("--embeddings", help="GloVe text file or JSON {word: vector} file")
    model = parser.add_argument_group("model")
    model.add_argument("--embedding-dim", type=int, default=100,
                       help="word vector size without --embeddings")
    model.add_argument("--hidden-units", type=int, default=128)
    model.add_argument("--attention-units", type=int, default=64)
    model.add_argument("--pooling", choices=POOLINGS, default="attention")
    model.add_argument("--cache-size", type=int, default=1000, help="0: no cache")
    model.add_argument("--policy", choices=POLICIES, default="heap")
    model.add_argument("--query", choices=QUERIES, default="additive",
                       help="cache read: none (the paper) or additive (depends on the example)")
    model.add_argument("--faithful-to-code", action="store_true",
                       help="reproduce the reference code (sum pooling, frozen batch norm, ...)")
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=30)
    train.add_argument("--batch-size", type=int, default=64)
    train.add_argument("--learning-rate", type=float,
                       help="default: 0.01 (paper) or 1e-3 (--faithful-to-code)")
    train.add_argument("--weight-decay", type=float, default=1e-5)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--strategy", choices=STRATEGIES, default="auto")
    train.add_argument("--jit", action="store_true", help="compile the train step with XLA")
    train.add_argument("--mixed-precision", action="store_true", help="mixed_float16 policy")
    train.add_argument("--workdir", help="run directory (default: runs/fill_last_word_cache/"
                       "<pooling>-cache<size>-<digest of the settings>, one per configuration)")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    return parser.parse_args(argv)


def load_sentences(args):
    """Returns (train sentences, evaluation sentences, source description)."""
    if not args.data_dir:
        train, evaluation = data.generated_last_word_corpus(seed=args.seed)
        return train, evaluation, "generated"
    train_file = args.train_file
    if train_file is None:
        has_train = os.path.exists(os.path.join(args.data_dir, "train.txt"))
        train_file = "train.txt" if has_train else "test.txt"
    train = data.read_sentences(os.path.join(args.data_dir, train_file))
    evaluation = data.read_sentences(os.path.join(args.data_dir, args.eval_file))
    return train, evaluation, f"{args.data_dir}:{train_file}/{args.eval_file}"


def initial_embeddings(args, vocabulary):
    if not args.embeddings:
        return None, 0
    vectors = word_vectors.load_word_vectors(args.embeddings, vocabulary=set(vocabulary))
    # Words without a vector keep the reference code's N(0, 0.9^2) initialisation.
    return word_vectors.embedding_matrix(vocabulary, vectors, scale=0.9, seed=args.seed)


def main(argv=None, extra_callbacks=()):
    """Runs the example; returns the final metrics dict."""
    args = parse_args(argv)
    label = f"{args.pooling}-cache{args.cache_size}"
    workdir = run_workdir(args, os.path.join("runs", "fill_last_word_cache"), label)
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    train, evaluation, source = load_sentences(args)
    if args.max_train:
        train = train[: args.max_train]
    vocabulary = data.build_vocabulary(train, args.max_vocabulary)
    x_train, y_train, _ = data.encode_last_word(train, vocabulary, args.max_length)
    x_eval, y_eval, _ = data.encode_last_word(evaluation, vocabulary, args.max_length)
    if not len(x_train) or not len(x_eval):
        raise ValueError(f"No usable sentences in {source} (2 to {args.max_length} tokens).")
    matrix, found = initial_embeddings(args, vocabulary)
    print(f"source={source} train={len(x_train)} eval={len(x_eval)} "
          f"vocabulary={len(vocabulary)} pretrained={found} workdir={workdir}", flush=True)

    strategy = make_strategy(args.strategy)
    batch_size = args.batch_size * strategy.num_replicas_in_sync
    train_data = data.last_word_dataset(x_train, y_train, batch_size, shuffle=True, seed=args.seed)
    eval_data = data.last_word_dataset(x_eval, y_eval, batch_size)
    with strategy.scope():
        model = build_fill_last_word_model(
            len(vocabulary),
            max_length=args.max_length,
            embedding_dim=args.embedding_dim,
            hidden_units=args.hidden_units,
            pooling=args.pooling,
            attention_units=args.attention_units,
            cache_size=args.cache_size or None,
            policy=args.policy,
            query=args.query,
            embedding_matrix=matrix,
            weight_decay=args.weight_decay,
            faithful_to_code=args.faithful_to_code,
        )
        compile_fill_last_word_model(
            model, args.faithful_to_code, args.learning_rate, jit_compile=args.jit
        )

    log_dir = os.path.join(workdir, "logs")
    callbacks = resumable_callbacks(
        workdir, monitor="val_accuracy", mode="max", settings=run_settings(args)
    )
    callbacks.append(keras.callbacks.TensorBoard(log_dir))
    if args.cache_size:
        callbacks.append(CacheAttentionCallback(log_dir, probe_inputs=x_eval[:batch_size]))
    callbacks += list(extra_callbacks)
    history = model.fit(
        train_data,
        epochs=args.epochs,
        validation_data=eval_data,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    final = model.evaluate(eval_data, return_dict=True, verbose=0)
    metrics = {
        "source": source,
        "workdir": workdir,
        "pooling": args.pooling,
        "cache_size": args.cache_size,
        "policy": args.policy,
        "query": args.query,
        "faithful_to_code": args.faithful_to_code,
        "train_sentences": len(x_train),
        "eval_sentences": len(x_eval),
        "vocabulary": len(vocabulary),
        "epochs_run": [int(e) for e in history.epoch],
        "val_accuracy": [float(a) for a in history.history.get("val_accuracy", [])],
        "eval_accuracy": float(final["accuracy"]),
        "eval_loss": float(final["loss"]),
        # The best constant answer: what the answers' frequencies alone can reach.
        "eval_majority_baseline": float(np.bincount(y_eval).max() / len(y_eval)),
        "cache_fill": cache_fill_fractions(model),
        "seconds": round(time.time() - started, 1),
    }
    write_metrics(metrics, os.path.join(workdir, "metrics.json"))
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
