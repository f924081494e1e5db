"""Trains GRU / AM-GRU / Dual AM-GRU sentence-pair classifiers (Weissenborn 2016) on SNLI, and the
paper's comparator, an LSTM with word-by-word attention (Rocktäschel et al. 2016).

Data: ``--data-dir`` with the official SNLI 1.0 files (``snli_1.0_*.jsonl``/``.txt`` or the
``snli_1.0.zip`` archive) or InferSent files (``s1.*``, ``s2.*``, ``labels.*``); else the
prepared tensorflow-datasets ``snli`` (downloaded and prepared first with ``--download``);
else an embedded generated corpus whose labels need the premise to be recalled (runs anywhere
in a few minutes).

Examples::

    python examples/snli_dual_am_gru.py                      # embedded corpus, Dual AM-GRU
    python examples/snli_dual_am_gru.py --model gru --epochs 3
    python examples/snli_dual_am_gru.py --model word_by_word
    python examples/snli_dual_am_gru.py --data-dir ~/snli_1.0 --embeddings glove.840B.300d.txt \\
        --eval-every 1000 --epochs 30 --workdir runs/snli

The run directory (``--workdir``; by default ``runs/snli_dual_am_gru/<model>-<options changed
from their defaults>-<digest of the resolved settings>``, e.g.
``gru-kind=gru_units=50-<digest>`` for ``--model gru --units 50``, one per set of settings)
keeps checkpoints (the same command resumes after an interruption at any point and ends as an
uninterrupted run would; a different one in the same ``--workdir`` is refused), TensorBoard
logs (scalars, the per-epoch memory retrieval heatmap, or the word-by-word
attention's weights, and its sentence pair) and ``metrics.json`` (the whole run).
``tensorboard --logdir runs/snli_dual_am_gru`` compares the runs.
"""

import argparse
import contextlib
import operator
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: the harness is in the repository's examples/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from examples.harness.startup import keras  # noqa: E402  (first: a quiet TensorFlow start)

# isort: split
import numpy as np  # noqa: E402

from examples.harness import options  # noqa: E402
from examples.harness.data import embeddings as word_vectors  # noqa: E402
from examples.harness.run_directory import (  # noqa: E402
    recorded_names,
    recorded_spellings,
    resolved_settings,
    run_workdir,
)
from examples.harness.training import (  # noqa: E402
    evaluate,
    make_strategy,
    resumable_callbacks,
    resumed_epoch,
    run_history,
    train,
    worker_directory,
    write_metrics,
)
from examples.harness.training.hparams import log_hparams  # noqa: E402
from examples.harness.training.learning_rate import halve_learning_rate_callback  # noqa: E402
from examples.snli import generated_nli, nli_batches, snli  # noqa: E402
from examples.snli.encoders import KINDS, snli_model  # noqa: E402
from tf_memlayers.callbacks import MemoryRetrievalHeatmap, PairAttentionHeatmap  # noqa: E402
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES  # noqa: E402
from tf_memlayers.layers.associative_memory.dual_associative_gru import DUAL_KEYS  # noqa: E402
from tf_memlayers.models.snli import PAPER_UNITS, compile_snli_model  # noqa: E402


def _snli_files(path):
    """Checks that ``path`` holds SNLI files for every split (`snli.check_files`)."""
    snli.check_files(path)


def parse_args(argv=None):
    parser = options.ArgumentParser(description=__doc__.split("\n\n")[0])
    data = parser.add_argument_group("data")
    options.add_argument(
        data,
        "--source",
        choices=snli.SOURCES,
        default="auto",
        help="auto: --data-dir if given, else the prepared tensorflow-datasets "
        "snli, else the generated corpus; files: --data-dir only; tfds: "
        "tensorflow-datasets only; generated: the generated corpus",
    )
    options.add_option(
        data,
        "data_dir",
        metavar="PATH",
        type=options.checked_path(_snli_files, options.existing_path),
        help="official SNLI 1.0 files (snli_1.0_<split>.jsonl or .txt, in a "
        "folder or the snli_1.0.zip archive) or InferSent files (s1.<split>, "
        "s2.<split>, labels.<split>) (default: none, see --source)",
    )
    options.add_argument(
        data,
        "--tfds-data-dir",
        metavar="DIR",
        help="tensorflow-datasets data_dir (default: tensorflow-datasets' "
        "own, ~/tensorflow_datasets)",
    )
    options.add_argument(
        data,
        "--download",
        action="store_true",
        help="let tensorflow-datasets download and prepare SNLI (needs "
        "internet and the datasets extra; --source auto or tfds, without "
        "--data-dir). Without it nothing is downloaded",
    )
    options.add_argument(
        data,
        "--train-size",
        choices=tuple(generated_nli.GENERATED_SIZES),
        default="medium",
        help="size of the generated corpus",
    )
    options.add_option(
        data, "max_train", help="use at most this many training pairs (default: all)"
    )
    options.add_option(
        data, "max_length", default=64, help="truncate sentences to this many tokens"
    )
    options.add_argument(
        data,
        "--padding",
        choices=nli_batches.PADDINGS,
        default="bucket",
        help="bucket: pad each batch to a multiple of 8 steps; fixed: pad "
        "every batch to the longest sentence",
    )
    options.add_option(
        data,
        "embeddings",
        help="pretrained word vectors: a GloVe text file "
        "(optionally .gz) or a JSON {word: vector} file (default: none, "
        "vectors drawn from N(0, 1))",
    )
    options.add_argument(
        data,
        "--train-embeddings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tune the word vectors (--no-train-embeddings: keep them fixed)",
    )
    data.add_argument(
        "--freeze-embeddings",
        action=options.DeprecatedAlias,
        nargs=0,
        replacement="--no-train-embeddings",
        dest="train_embeddings",
        const=False,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )
    model = parser.add_argument_group("model")
    options.add_option(
        model,
        "model",
        default="dual_am_gru",
        choices=KINDS,
        help="layer 1: gru, am_gru (associative memory GRU) or dual_am_gru "
        "(AM-GRU over the premise, Dual AM-GRU over the hypothesis); or "
        "word_by_word: an LSTM over the premise and an LSTM with word-by-word "
        "attention over the hypothesis, without layer 2",
    )
    options.add_option(
        model,
        "units",
        default=PAPER_UNITS,
        help="size of layer 1 (the paper: 100 "
        "for the Dual AM-GRU, 108 AM-GRU, 126 GRU, 100 word_by_word)",
    )
    options.add_argument(
        model,
        "--top-units",
        type=options.positive_int,
        metavar="N",
        help="size of layer 2 and of the classifier (default: --units)",
    )
    options.add_option(
        model,
        "embedding_dim",
        default=50,
        help="word vector size without --embeddings (the paper: 300d GloVe)",
    )
    options.add_option(model, "num_copies", default=NUM_COPIES)
    options.add_argument(
        model,
        "--dual-key",
        choices=DUAL_KEYS,
        default="paper",
        help="the Dual AM-GRU's read key: as in the paper or as in the released code",
    )
    options.add_option(model, "dropout", default=0.1, help="dropout rate on the word vectors")
    options.add_argument(
        model,
        "--fused-loop",
        action=argparse.BooleanOptionalAction,
        help="run the (Dual) AM-GRU loops fused, with a hand-written "
        "backward: faster steps, the same results as Keras's loop up to "
        "float rounding (default: each layer runs it where it supports the "
        "layer's options, e.g. not with --dual-key released; --no-fused-loop: "
        "Keras's loop)",
    )
    options.add_option(
        model,
        "init_scale",
        help="kernels start uniform in ±this (default: 0.05, the paper, on "
        "real data; 0.2 on the generated corpus, whose short run needs a "
        "better-conditioned start)",
    )
    train = parser.add_argument_group("training")
    options.add_option(
        train, "epochs", default=4, help="number of dev checks (epochs of --eval-every batches)"
    )
    options.add_argument(
        train,
        "--eval-every",
        type=options.positive_int,
        metavar="N",
        help="batches between dev checks, an epoch of the schedule (default: "
        "one pass over the training data; the paper: 1000)",
    )
    options.add_option(train, "batch_size", default=50)
    options.add_option(
        train,
        "learning_rate",
        help="Adam's learning rate (default: 1e-3, the paper, on real data; "
        "3e-3 on the generated corpus)",
    )
    options.add_option(train, "clip_norm", default=5.0)
    options.add_run_options(
        train, seed=123, default_workdir="runs/snli_dual_am_gru/<model>-<changed options>-<digest>"
    )
    args = parser.parse_args(argv)
    if args.source == "files" and not args.data_dir:
        parser.error("argument --source: 'files' needs --data-dir")
    if args.data_dir and args.source in ("tfds", "generated"):
        parser.error(
            f"argument --data-dir: is read with --source auto or files, not with "
            f"--source {args.source}"
        )
    if args.tfds_data_dir is not None:
        if args.data_dir or args.source in ("files", "generated"):
            parser.error(
                "argument --tfds-data-dir: is read with --source auto or tfds, without --data-dir"
            )
        if not args.download and not os.path.isdir(args.tfds_data_dir):
            parser.error(
                f"argument --tfds-data-dir: no folder {args.tfds_data_dir!r} (with "
                "--download, tensorflow-datasets prepares SNLI there)"
            )
    if args.download and (args.source in ("files", "generated") or args.data_dir):
        parser.error(
            "argument --download: fetches SNLI through tensorflow-datasets; use "
            "--source auto or tfds without --data-dir"
        )
    return args


def build_model(args, vocabulary_size, matrix, init_scale):
    """The classifier of the command line ``args`` (`build_snli_model` with the encoder
    ``--model`` names, `examples.snli.encoders`), not compiled.

    The layers own the fused-loop rules: ``--fused-loop`` and ``--no-fused-loop`` are passed
    on as given, no option as ``"auto"``. A combination the encoder refuses (``--fused-loop``
    with a model or key their fused loop cannot run, ``--top-units`` with the word-by-word
    model, which has no layer 2) is reported as a command-line error about the option, with
    the encoder's own message, and the script exits with status 2.
    """
    fused_loop = "auto" if args.fused_loop is None else args.fused_loop
    # make_encoder checks the fused loop first; --top-units only the word-by-word model refuses.
    with_top_units = args.top_units is not None and args.model == "word_by_word"
    option = (
        "--fused-loop" if args.fused_loop is True else "--top-units" if with_top_units else None
    )
    with options.reported_as(option) if option else contextlib.nullcontext():
        return snli_model(
            vocabulary_size,
            kind=args.model,
            units=args.units,
            top_units=args.top_units,
            num_copies=args.num_copies,
            dual_key=args.dual_key,
            seed=args.seed,
            init_scale=init_scale,
            fused_loop=fused_loop,
            embedding_dim=args.embedding_dim,
            embeddings=matrix,
            train_embeddings=args.train_embeddings,
            dropout=args.dropout,
        )


# The run settings (digest, directory name, the settings a resumed run is checked against)
# record ``--model`` as ``kind``, ``--num-copies`` as ``copies`` and ``--train-embeddings`` as
# ``freeze_embeddings`` (its negation), the names run directories hold them by.
RECORDED_NAMES = {
    "model": "kind",
    "num_copies": "copies",
    "train_embeddings": ("freeze_embeddings", operator.not_),
}


def run_settings(args, resolved):
    """The settings the run computes with (`resolved_settings`), under their recorded names."""
    return resolved_settings(recorded_names(args, RECORDED_NAMES), resolved)


def run_directory(args, resolved):
    """``--workdir``, or the run's own directory under ``runs/snli_dual_am_gru/``: named after
    the model and the options changed from their defaults, with a digest of the settings
    (`run_workdir`, under the recorded names)."""
    root = os.path.join("runs", "snli_dual_am_gru")
    return run_workdir(recorded_names(args, RECORDED_NAMES), root, args.model, resolved=resolved)


def runs_fused_loop(model):
    """Whether every loop of layer 1 of ``model`` runs fused, as its layers chose."""
    first = model.get_layer("encoder").encoder_layers[0]
    passes = [getattr(first, name, None) for name in ("premise_layer", "hypothesis_layer")]
    layers = passes if all(passes) else [first]  # the Dual AM-GRU's encoder has two passes
    return all(getattr(layer, "uses_fused_loop", False) for layer in layers)


def load_data(args):
    from_files = args.data_dir and args.source in ("auto", "files")
    option = "--data-dir" if from_files else "--download" if args.download else "--source"
    with options.reported_as(option):
        splits, source = snli.load_nli_splits(
            args.source,
            args.data_dir,
            args.tfds_data_dir,
            args.train_size,
            seed=args.seed,
            download=args.download,
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
    with options.reported_as("--embeddings"):
        vectors = word_vectors.load_word_vectors(args.embeddings, vocabulary=set(vocabulary))
    return word_vectors.embedding_matrix(vocabulary, vectors, seed=args.seed)


def main(argv=None, extra_callbacks=()):
    """Runs the example; returns the final metrics dict."""
    args = parse_args(argv)
    # First: a multi-worker strategy sets up the collective operations before any other op.
    strategy = make_strategy(args.strategy)
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    splits, source = load_data(args)
    vocabulary = nli_batches.build_vocabulary(splits["train"])
    matrix, found = initial_embeddings(args, vocabulary)
    # The values the run uses where an option's default depends on the data source.
    init_scale = args.init_scale or (0.2 if source == "generated" else 0.05)
    learning_rate = args.learning_rate or (3e-3 if source == "generated" else 1e-3)

    batch_size = args.batch_size * strategy.num_replicas_in_sync
    common = dict(padding=args.padding, max_length=args.max_length, batch_size=batch_size)
    train_data = nli_batches.make_dataset(
        splits["train"], vocabulary, shuffle=True, repeat=True, seed=args.seed, **common
    )
    dev_data = nli_batches.make_dataset(splits["dev"], vocabulary, **common)
    test_data = nli_batches.make_dataset(splits["test"], vocabulary, **common)
    steps = args.eval_every or max(1, -(-len(splits["train"]) // batch_size))

    with strategy.scope():
        model = build_model(args, len(vocabulary), matrix, init_scale)
        compile_snli_model(model, learning_rate, args.clip_norm, jit_compile=args.jit)
    # Whether the fused loop runs is part of the settings: its results differ from Keras's
    # loop by float rounding.
    resolved = dict(
        source=source,
        init_scale=init_scale,
        learning_rate=learning_rate,
        fused_loop=runs_fused_loop(model),
    )
    workdir = run_directory(args, resolved)
    print(
        f"source={source} train={len(splits['train'])} dev={len(splits['dev'])} "
        f"test={len(splits['test'])} vocabulary={len(vocabulary)} pretrained={found} "
        f"workdir={workdir}",
        flush=True,
    )

    # The chief writes the run directory; other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        log_dir = os.path.join(rundir, "logs")
        probe = next((e for e in splits["dev"] if e.label == 0), splits["dev"][0])
        callbacks = resumable_callbacks(
            rundir,
            monitor="val_accuracy",
            mode="max",
            settings=run_settings(args, resolved),
            spellings=recorded_spellings(RECORDED_NAMES, vars(args)),
            # TensorBoard first: it logs the learning rate the epoch ran with, before the
            # rule halves it for the next epoch (as the run's history records it).
            callbacks=[
                keras.callbacks.TensorBoard(log_dir),
                halve_learning_rate_callback(state_path=os.path.join(rundir, "learning_rate.json")),
                # What the model read from the premise: its associative memory's retrievals
                # or its attention's weights (each draws only where the encoder has it).
                MemoryRetrievalHeatmap(log_dir, probe.premise, probe.hypothesis, vocabulary),
                PairAttentionHeatmap(log_dir, probe.premise, probe.hypothesis, vocabulary),
                *extra_callbacks,
            ],
        )
        # A resumed run restarts the interrupted epoch with the state it began with; the
        # training stream is endless, so it skips what the completed epochs used.
        initial_epoch = resumed_epoch(rundir)
        train_data = train_data.skip(initial_epoch * steps)
        # `fit`, or a custom loop where `fit` fails (several workers: keras-team/keras#20585).
        train(
            model,
            train_data,  # shuffled by the tf.data pipeline
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps,
            validation_data=dev_data,
            callbacks=callbacks,
            verbose=args.verbose,
        )
        history = run_history(rundir)  # every epoch of the run, before and after any restart
        test = evaluate(model, test_data, verbose=args.verbose)
        labels = np.array([e.label for e in splits["test"]])
        metrics = {
            "model": args.model,
            "source": source,
            "workdir": workdir,
            "train_pairs": len(splits["train"]),
            "test_pairs": len(splits["test"]),
            "epochs_run": list(range(resumed_epoch(rundir))),
            "dev_accuracy": history.get("val_accuracy", []),
            "history": history,
            "test_accuracy": float(test["accuracy"]),
            "test_loss": float(test["loss"]),
            "majority_baseline": float(np.bincount(labels, minlength=3).max() / len(labels)),
            "seconds": round(time.time() - started, 1),
        }
        write_metrics(metrics, os.path.join(rundir, "metrics.json"))
        # Under the options' own names (`--model` as ``model``), as every example does.
        log_hparams(
            log_dir,
            resolved_settings(args, resolved),
            {
                "test_accuracy": metrics["test_accuracy"],
                "best_dev_accuracy": max(metrics["dev_accuracy"], default=0.0),
            },
        )
        return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
