"""Trains GRU / AM-GRU / Dual AM-GRU sentence-pair classifiers (Weissenborn 2016) on SNLI.

Data: ``--data-dir`` with the official SNLI 1.0 files (``snli_1.0_*.jsonl``/``.txt`` or the
``snli_1.0.zip`` archive) or InferSent files (``s1.*``, ``s2.*``, ``labels.*``); else the
prepared tensorflow-datasets ``snli`` (never downloaded); else an embedded generated corpus
whose labels need the premise to be recalled (runs anywhere in a few minutes).

Examples::

    python examples/snli_dual_am_gru.py                      # embedded corpus, Dual AM-GRU
    python examples/snli_dual_am_gru.py --kind gru --epochs 3
    python examples/snli_dual_am_gru.py --data-dir ~/snli_1.0 --embeddings glove.840B.300d.txt \\
        --eval-every 1000 --epochs 30 --workdir runs/snli

The run directory (``--workdir``; by default ``runs/snli_dual_am_gru/<kind>-<digest>``, one
per set of options) keeps checkpoints (the same command resumes after an interruption, and a
different one in the same ``--workdir`` is refused), TensorBoard logs (scalars, the per-epoch
memory retrieval heatmap and its sentence pair) and ``metrics.json``.
``tensorboard --logdir runs/snli_dual_am_gru`` compares the runs.
"""

import argparse
import os
import sys
import time

import keras
import numpy as np

from tf_memlayers.callbacks.associative_memory import MemoryRetrievalHeatmap
from tf_memlayers.data import embeddings as word_vectors
from tf_memlayers.data import snli
from tf_memlayers.models.snli import (
    KINDS,
    build_snli_model,
    compile_snli_model,
    halve_learning_rate_callback,
)
from tf_memlayers.training import (
    make_strategy,
    resumable_callbacks,
    resumed_epoch,
    run_settings,
    run_workdir,
    write_metrics,
)
from tf_memlayers.training.strategy import STRATEGIES


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    data = parser.add_argument_group("data")
    data.add_argument("--source", choices=snli.SOURCES, default="auto",
                      help="auto: --data-dir if given, else prepared tfds snli, else generated")
    data.add_argument("--data-dir", help="SNLI 1.0 (jsonl/txt/zip) or InferSent-format directory")
    data.add_argument("--tfds-data-dir", help="tensorflow-datasets data_dir (never downloads)")
    data.add_argument("--train-size", choices=tuple(snli.GENERATED_SIZES), default="medium",
                      help="size of the generated corpus")
    data.add_argument("--max-train", type=int, help="use at most this many training pairs")
    data.add_argument("--max-length", type=int, default=64, help="truncate sentences to this")
    data.add_argument("--padding", choices=snli.PADDINGS, default="bucket")
    data.add_argument("--embeddings", help="GloVe text file or JSON {word: vector} file")
    data.add_argument("--freeze-embeddings", action="store_true")
    model = parser.add_argument_group("model")
    model.add_argument("--kind", choices=KINDS, default="dual_am_gru")
    model.add_argument("--units", type=int, default=100)
    model.add_argument("--top-units", type=int)
    model.add_argument("--embedding-dim", type=int, default=50,
                       help="word vector size without --embeddings (the paper: 300d GloVe)")
    model.add_argument("--copies", type=int, default=8)
    model.add_argument("--dual-key", choices=("paper", "released"), default="paper")
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--fused-loop", action="store_true",
                       help="run the (Dual) AM-GRU loops fused, with a hand-written backward: "
                       "faster steps, one XLA compile per batch shape (a few with --padding "
                       "bucket); --dual-key paper only")
    model.add_argument("--init-scale", type=float,
                       help="kernels start uniform in ±this; default 0.05 (the paper) on real "
                            "data, 0.2 on the generated corpus, whose short run needs a "
                            "better-conditioned start")
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=4, help="number of dev checks")
    train.add_argument("--eval-every", type=int,
                       help="batches between dev checks (an epoch of the schedule); default: "
                            "one pass over the training data (the paper: 1000)")
    train.add_argument("--batch-size", type=int, default=50)
    train.add_argument("--learning-rate", type=float,
                       help="default 1e-3 (the paper) on real data, 3e-3 on the generated corpus")
    train.add_argument("--clip-norm", type=float, default=5.0)
    train.add_argument("--seed", type=int, default=123)
    train.add_argument("--strategy", choices=STRATEGIES, default="auto")
    train.add_argument("--jit", action="store_true", help="compile the train step with XLA")
    train.add_argument("--mixed-precision", action="store_true", help="mixed_float16 policy")
    train.add_argument("--workdir", help="run directory (default: runs/snli_dual_am_gru/"
                       "<kind>-<digest of the settings>, one per configuration)")
    train.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2))
    return parser.parse_args(argv)


def load_data(args):
    splits, source = snli.load_nli_splits(
        args.source, args.data_dir, args.tfds_data_dir, args.train_size, seed=args.seed
    )
    if args.max_train:
        splits["train"] = splits["train"][: args.max_train]
    for name, examples in splits.items():
        if not examples:
            raise ValueError(f"The {name} split of source {source!r} is empty.")
    return splits, source


def initial_embeddings(args, vocabulary):
    if not args.embeddings:
        return None, 0
    vectors = word_vectors.load_word_vectors(args.embeddings, vocabulary=set(vocabulary))
    return word_vectors.embedding_matrix(vocabulary, vectors, seed=args.seed)


def main(argv=None, extra_callbacks=()):
    """Runs the example; returns the final metrics dict."""
    args = parse_args(argv)
    workdir = run_workdir(args, os.path.join("runs", "snli_dual_am_gru"), args.kind)
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    splits, source = load_data(args)
    vocabulary = snli.build_vocabulary(splits["train"])
    matrix, found = initial_embeddings(args, vocabulary)
    print(f"source={source} train={len(splits['train'])} dev={len(splits['dev'])} "
          f"test={len(splits['test'])} vocabulary={len(vocabulary)} pretrained={found} "
          f"workdir={workdir}",
          flush=True)

    strategy = make_strategy(args.strategy)
    batch_size = args.batch_size * strategy.num_replicas_in_sync
    common = dict(padding=args.padding, max_length=args.max_length, batch_size=batch_size)
    train_data = snli.make_dataset(
        splits["train"], vocabulary, shuffle=True, repeat=True, seed=args.seed, **common
    )
    dev_data = snli.make_dataset(splits["dev"], vocabulary, **common)
    test_data = snli.make_dataset(splits["test"], vocabulary, **common)
    steps = args.eval_every or max(1, -(-len(splits["train"]) // batch_size))

    with strategy.scope():
        model = build_snli_model(
            len(vocabulary),
            kind=args.kind,
            units=args.units,
            top_units=args.top_units,
            embedding_dim=args.embedding_dim,
            embeddings=matrix,
            train_embeddings=not args.freeze_embeddings,
            num_copies=args.copies,
            dual_key=args.dual_key,
            dropout=args.dropout,
            seed=args.seed,
            init_scale=args.init_scale or (0.2 if source == "generated" else 0.05),
            fused_loop=args.fused_loop,
        )
        learning_rate = args.learning_rate or (3e-3 if source == "generated" else 1e-3)
        compile_snli_model(model, learning_rate, args.clip_norm, jit_compile=args.jit)

    log_dir = os.path.join(workdir, "logs")
    probe = next((e for e in splits["dev"] if e.label == 0), splits["dev"][0])
    callbacks = resumable_callbacks(
        workdir, monitor="val_accuracy", mode="max", settings=run_settings(args)
    )
    # The training stream is endless: a resumed run skips what the completed epochs used.
    train_data = train_data.skip(resumed_epoch(workdir) * steps)
    callbacks += [
        halve_learning_rate_callback(state_path=os.path.join(workdir, "learning_rate.json")),
        keras.callbacks.TensorBoard(log_dir),
        MemoryRetrievalHeatmap(log_dir, probe.premise, probe.hypothesis, vocabulary),
        *extra_callbacks,
    ]
    history = model.fit(
        train_data,
        epochs=args.epochs,
        steps_per_epoch=steps,
        validation_data=dev_data,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    test = model.evaluate(test_data, return_dict=True, verbose=args.verbose)
    labels = np.array([e.label for e in splits["test"]])
    metrics = {
        "kind": args.kind,
        "source": source,
        "workdir": workdir,
        "train_pairs": len(splits["train"]),
        "test_pairs": len(splits["test"]),
        "epochs_run": [int(e) for e in history.epoch],
        "dev_accuracy": [float(a) for a in history.history.get("val_accuracy", [])],
        "test_accuracy": float(test["accuracy"]),
        "test_loss": float(test["loss"]),
        "majority_baseline": float(np.bincount(labels, minlength=3).max() / len(labels)),
        "seconds": round(time.time() - started, 1),
    }
    write_metrics(metrics, os.path.join(workdir, "metrics.json"))
    return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
