"""`train_and_evaluate`: the SNLI example's run, from its options to its metrics.

The run directory keeps:

* ``backup/``: the run's `tf_memlayers.training.RunBackup`, so that the same command resumes
  after an interruption at any moment and ends as an uninterrupted run would (the learning-rate
  rule's, the stopping rule's and the best model's state included); another command in it is
  refused;
* ``best.keras`` (the best dev accuracy so far) and ``last.keras``;
* ``logs/``: TensorBoard's scalars, each epoch the premise memory's retrievals of a probe pair
  (``memory/``, Weissenborn's Fig. 2) or the word-by-word attention's weights
  (``attention/``), and the run's settings and final metrics in the HParams dashboard;
* ``metrics.json``: the run's metrics, every epoch's included.
"""

import contextlib
import json
import os
import time

import keras
import numpy as np

from tf_memlayers.callbacks import MemoryRetrievalHeatmap, PairAttentionHeatmap
from tf_memlayers.models import compile_snli_model
from tf_memlayers.training import (
    RunBackup,
    evaluate,
    log_hparams,
    make_strategy,
    train,
    worker_directory,
)

from . import corpora, input_pipeline, models

# Options that say how to run or where to keep a run, not what it computes: a run resumed with
# other values is the same run.
RUN_OPTIONS = ("epochs", "verbose", "workdir", "strategy", "jit_compile")


class OptionError(Exception):
    """A value found wrong once the run reads it, reported as a bad value of ``option``."""

    def __init__(self, option, error):
        super().__init__(f"argument {option}: {' '.join(str(error).split())}")


# Keras compiles the step of every replica into one XLA program, which cannot reach the
# variables' copies on the other devices: such a step fails at its first run.
def jit_replicas_error(strategy):
    """Why ``--jit-compile`` is refused under ``strategy`` (more than one replica)."""
    return (
        f"compiles the train step with XLA, which cannot train over the "
        f"{strategy.num_replicas_in_sync} replicas of {type(strategy).__name__} (one XLA "
        "program cannot reach the variables held on the other devices); use --no-jit-compile"
    )


@contextlib.contextmanager
def reported_as(option, **others):
    """Turns a reader's or layer's refusal inside the block into an `OptionError` of ``option``,
    or of ``others[name]`` where the refusal names the argument ``name``."""
    try:
        yield
    except (ImportError, OSError, ValueError) as error:
        named = [other for name, other in others.items() if f"`{name}" in str(error)]
        raise OptionError(next(iter(named), option), error) from error


def run_settings(config, resolved):
    """What defines a run: the options but `RUN_OPTIONS`, with the values that the options
    left to the data resolved to (``resolved``), under the options' names."""
    settings = {k: v for k, v in vars(config).items() if k not in RUN_OPTIONS}
    return json.loads(json.dumps(dict(settings, **resolved), sort_keys=True, default=str))


def load_data(config):
    """The splits of the source the options name (`input_pipeline.load_splits`), and its name."""
    files = config.data_dir and config.source in ("auto", "files")
    tfds = "--download" if config.download else "--tfds-data-dir" if config.tfds_data_dir else None
    option = "--data-dir" if files else tfds or "--source"
    with reported_as(option):
        splits, source = input_pipeline.load_splits(
            config.source,
            config.data_dir,
            config.tfds_data_dir,
            config.train_size,
            seed=config.seed,
            download=config.download,
        )
    splits["train"] = splits["train"][: config.max_train]
    for name, pairs in splits.items():
        if not pairs:
            raise OptionError(option, f"the {name} split of source {source!r} is empty")
    return splits, source


def train_and_evaluate(config, run_directory, extra_callbacks=()):
    """Trains and tests the model of the options ``config`` (`main.make_parser`).

    Args:
        config: The parsed options.
        run_directory: A function from the values that the options left to the data resolved
            to (the source read, the initial scale, the learning rate, whether the fused loop
            runs) to the run directory.
        extra_callbacks: More Keras callbacks for the training.

    Returns:
        The run's metrics, a dict of JSON values (also in ``metrics.json``).

    Raises:
        OptionError: A file, an optional package or a combination of options the layers
            refuse, found once the run reads them; ``--jit-compile`` under a strategy of several
            replicas.
    """
    # The run's dtype policy, the caller's back after it: runs in one process are as alone.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16" if config.mixed_precision else "float32")
    try:
        return _train_and_evaluate(config, run_directory, extra_callbacks)
    finally:
        keras.config.set_dtype_policy(previous)


def _train_and_evaluate(config, run_directory, extra_callbacks=()):
    """`train_and_evaluate` under the run's dtype policy."""
    # First: a multi-worker strategy sets up its collective operations before any other op.
    strategy = make_strategy(config.strategy)
    if config.jit_compile and strategy.num_replicas_in_sync > 1:
        raise OptionError("--jit-compile", jit_replicas_error(strategy))
    keras.utils.set_random_seed(config.seed)
    started = time.time()
    splits, source = load_data(config)
    vocabulary = input_pipeline.build_vocabulary(splits["train"])
    matrix, found = None, 0
    if config.embeddings:
        with reported_as("--embeddings"):
            vectors = corpora.load_word_vectors(config.embeddings, vocabulary=set(vocabulary))
        matrix, found = corpora.embedding_matrix(vocabulary, vectors, seed=config.seed)
    # The defaults that depend on the source: the generated corpus's short run needs a
    # better-conditioned start and a faster rate than the paper's.
    generated = source == "generated"
    init_scale = config.init_scale or (0.2 if generated else 0.05)
    learning_rate = config.learning_rate or (3e-3 if generated else 1e-3)

    batch_size = config.batch_size * strategy.num_replicas_in_sync
    batching = dict(padding=config.padding, max_length=config.max_length, batch_size=batch_size)
    stream = input_pipeline.make_dataset(
        splits["train"], vocabulary, shuffle=True, repeat=True, seed=config.seed, **batching
    )
    dev, test = (
        input_pipeline.make_dataset(splits[s], vocabulary, **batching) for s in ("dev", "test")
    )
    steps = config.eval_every or -(-len(splits["train"]) // batch_size)

    # A width or combination the layers refuse (an odd width of an associative memory, the
    # fused loop with --dual-key released) is reported with the layer's message.
    with strategy.scope(), reported_as("--units", fused_loop="--fused-loop"):
        model = models.build_model(
            len(vocabulary),
            config.model,
            config.units,
            config.top_units,
            init_scale,
            config.seed,
            num_copies=config.num_copies,
            dual_key=config.dual_key,
            fused_loop="auto" if config.fused_loop is None else config.fused_loop,
            embedding_dim=config.embedding_dim,
            embeddings=matrix,
            train_embeddings=config.train_embeddings,
            dropout=config.dropout,
        )
        compile_snli_model(model, learning_rate, config.clip_norm, jit_compile=config.jit_compile)
    # Whether the fused loop runs is part of the settings: its results differ from Keras's
    # loop by float rounding.
    resolved = dict(
        source=source,
        init_scale=init_scale,
        learning_rate=learning_rate,
        fused_loop=models.runs_fused_loop(model),
    )
    workdir = run_directory(resolved)

    # The chief writes the run directory; the other workers a temporary copy of its backup.
    with worker_directory(workdir, strategy) as rundir:
        logs = os.path.join(rundir, "logs")
        probe = next((p for p in splits["dev"] if p.label == 0), splits["dev"][0])
        # The learning-rate and stopping rules, on dev checks without an improvement by 0.001
        # (their counts are in the backup).
        rule = dict(monitor="val_accuracy", min_delta=1e-3, mode="max", verbose=config.verbose)
        halve = keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=0, **rule)
        best = keras.callbacks.ModelCheckpoint(
            os.path.join(rundir, "best.keras"), "val_accuracy", mode="max", save_best_only=True
        )
        patience = [config.patience] if config.patience else []
        stop = [keras.callbacks.EarlyStopping(patience=p, **rule) for p in patience]
        settings = run_settings(config, resolved)
        with reported_as("--workdir"):
            backup = RunBackup(os.path.join(rundir, "backup"), [halve, best, *stop], settings)
        sizes = " ".join(f"{name}={len(pairs)}" for name, pairs in splits.items())
        print(f"source={source} {sizes} vocabulary={len(vocabulary)} pretrained={found}", end="")
        print(f" workdir={workdir}", flush=True)
        callbacks = [
            # First: it logs the learning rate an epoch ran with, before the rule halves it.
            keras.callbacks.TensorBoard(logs),
            halve,
            # What the model read from the premise: its memory's retrievals, or its
            # attention's weights (each draws only where the encoder has it).
            MemoryRetrievalHeatmap(logs, probe.premise, probe.hypothesis, vocabulary),
            PairAttentionHeatmap(logs, probe.premise, probe.hypothesis, vocabulary),
            best,
            *stop,
            keras.callbacks.ModelCheckpoint(os.path.join(rundir, "last.keras")),
            *extra_callbacks,
            backup,
        ]
        # A resumed run repeats the interrupted epoch; the endless training stream skips the
        # batches of the epochs done.
        train(
            model,
            stream.skip(backup.epoch * steps),
            epochs=config.epochs,
            initial_epoch=backup.epoch,
            steps_per_epoch=steps,
            validation_data=dev,
            callbacks=callbacks,
            verbose=config.verbose,
        )
        results = evaluate(model, test, verbose=config.verbose)
        labels = np.bincount([p.label for p in splits["test"]], minlength=3)
        history = backup.history  # every epoch, before and after any restart
        metrics = {
            "model": config.model,
            "source": source,
            "workdir": workdir,
            "train_pairs": len(splits["train"]),
            "test_pairs": len(splits["test"]),
            "epochs_run": list(range(backup.epoch)),
            "dev_accuracy": history.get("val_accuracy", []),
            "history": history,
            "test_accuracy": float(results["accuracy"]),
            "test_loss": float(results["loss"]),
            "majority_baseline": float(labels.max() / labels.sum()),
            "seconds": round(time.time() - started, 1),
        }
        path = os.path.join(rundir, "metrics.json")
        with open(path + ".partial", "w", encoding="utf-8") as handle:  # replaced whole
            json.dump(metrics, handle, sort_keys=True)
        os.replace(path + ".partial", path)
        final = {"test_accuracy": metrics["test_accuracy"]}
        final["best_dev_accuracy"] = max(metrics["dev_accuracy"], default=0.0)
        # The HParams also show what the options left to the model and the data, as used.
        layer_2 = config.model in models.READERS["top_units"]
        top = (config.top_units or config.units) if layer_2 else None
        log_hparams(logs, dict(settings, eval_every=steps, top_units=top), final)
    return metrics
