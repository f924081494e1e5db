"""`train_and_evaluate`: one run of the last-word example, resumable, on one or several machines."""

import contextlib
import json
import os
import time

import keras
import numpy as np

from tf_memlayers.callbacks import CacheAttentionCallback
from tf_memlayers.training import (
    RunBackup,
    evaluate,
    log_hparams,
    make_strategy,
    train,
    worker_directory,
)

from . import input_pipeline, models

# Options that say how long, how verbosely or where to run, not what the run computes: a run
# resumed with other values of them is the same run.
RUN_OPTIONS = ("epochs", "verbose", "workdir", "strategy", "jit_compile")
# Adam's learning rate in the paper and in the reference code, and the paper's clipping of each
# gradient's norm (the code clips none): `compile_fill_last_word_model`'s defaults, which the
# run's settings record.
PAPER_LEARNING_RATE, CODE_LEARNING_RATE, PAPER_CLIP_NORM = 0.01, 1e-3, 5.0


class OptionError(ValueError):
    """An option's value found wrong once the run began (a file that cannot be read, a run
    directory that holds another run); `main` reports it as a command-line error."""

    def __init__(self, option, message):
        super().__init__(" ".join(str(message).split()))
        self.option = option


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
def reported_as(option):
    """A file error or `ValueError` raised in the block becomes an `OptionError` of ``option``."""
    try:
        yield
    except (OSError, ValueError) as error:
        raise OptionError(option, error) from error


def run_settings(config):
    """What defines a run: the options but `RUN_OPTIONS`, the data source it reads and the
    learning rate, clipping, cache read and its gate it uses (their defaults depend on
    ``--faithful-to-code``), as JSON values; no embedding width with ``--embeddings`` (the
    vectors', not ``--embedding-dim``)."""
    settings = {k: v for k, v in vars(config).items() if k not in RUN_OPTIONS}
    faithful = config.faithful_to_code
    settings["source"] = input_pipeline.source_name(config)
    settings["learning_rate"] = config.learning_rate or (
        CODE_LEARNING_RATE if faithful else PAPER_LEARNING_RATE
    )
    default_clip = 0.0 if faithful else PAPER_CLIP_NORM  # 0: none
    settings["clipnorm"] = default_clip if config.clipnorm is None else config.clipnorm
    settings["embedding_dim"] = None if config.embeddings else config.embedding_dim
    settings["query"] = models.cache_query(config)
    settings["cache_gate_init"] = models.cache_gate_init(config)
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def _write_json(path, value):
    """Writes ``path`` in one step: a run killed meanwhile leaves the old file or none."""
    with open(path + ".partial", "w", encoding="utf-8") as handle:
        json.dump(value, handle, sort_keys=True)
    os.replace(path + ".partial", path)


def train_and_evaluate(config, workdir, extra_callbacks=()):
    """Trains and evaluates the model of ``config`` (the parsed options), in ``workdir``.

    The run directory keeps the backup of every epoch (`tf_memlayers.training.RunBackup`: the
    same command resumes after an interruption at any point, cache and data order included,
    and ends as an uninterrupted run would; other options in the same directory are refused),
    ``best.keras`` (best ``val_accuracy``) and ``last.keras``, TensorBoard logs (scalars, the
    cache-attention weight by heap index and the cache fill of `CacheAttentionCallback`, the
    HParams record) and ``metrics.json``. Under ``--strategy multi_worker`` every worker runs
    this; the chief writes the directory.

    Args:
        config: The `argparse.Namespace` of `main.parse_args`.
        workdir: The run directory.
        extra_callbacks: More Keras callbacks for ``fit`` (called before the checkpoints).

    Returns:
        The metrics dict, as written to ``metrics.json``.

    Raises:
        OptionError: A file of ``--data-dir`` or ``--embeddings`` cannot be read or holds no
            usable sentence, ``workdir`` holds a run with other settings, or ``--jit-compile`` is
            given under a strategy of several replicas.
    """
    # The run's dtype policy, the caller's put back after it: runs in one process are
    # as they are alone.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16" if config.mixed_precision else "float32")
    try:
        return _train_and_evaluate(config, workdir, extra_callbacks)
    finally:
        keras.config.set_dtype_policy(previous)


def _train_and_evaluate(config, workdir, extra_callbacks=()):
    """`train_and_evaluate` under the run's dtype policy."""
    # First: a multi-worker strategy sets up its collective operations before any other op.
    strategy = make_strategy(config.strategy)
    if config.jit_compile and strategy.num_replicas_in_sync > 1:
        raise OptionError("--jit-compile", jit_replicas_error(strategy))
    keras.utils.set_random_seed(config.seed)
    started = time.time()
    with reported_as("--data-dir"):
        corpus = input_pipeline.make_corpus(config)
    vocabulary, y_eval = corpus.vocabulary, corpus.y_eval
    if not corpus.train_sentences or not len(y_eval):
        raise OptionError(
            "--max-length",
            f"no usable sentences in {corpus.source} (2 to {corpus.sequence_length} tokens)",
        )
    matrix, found = None, 0
    if config.embeddings:
        with reported_as("--embeddings"):
            vectors = input_pipeline.load_word_vectors(config.embeddings, vocabulary)
        # Words without a vector keep the reference code's N(0, 0.9^2) initialisation.
        matrix, found = input_pipeline.embedding_matrix(vocabulary, vectors, seed=config.seed)
    batch_size = config.batch_size * strategy.num_replicas_in_sync
    # The chief writes the run directory; the other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        log_dir = os.path.join(rundir, "logs")
        best = keras.callbacks.ModelCheckpoint(
            os.path.join(rundir, "best.keras"),
            monitor="val_accuracy",
            mode="max",
            save_best_only=True,
        )
        with reported_as("--workdir"):
            backup = RunBackup(os.path.join(rundir, "backup"), [best], run_settings(config))
        print(
            f"source={corpus.source} train={corpus.train_sentences} eval={len(y_eval)} "
            f"vocabulary={len(vocabulary)} pretrained={found} workdir={workdir}",
            flush=True,
        )
        # A resumed run repeats the interrupted epoch from the state (cache included) and the
        # place in the data stream it began with.
        train_data, steps, eval_data = corpus.datasets(batch_size, backup.epoch)
        with strategy.scope():
            model = models.build_model(config, len(vocabulary), corpus.sequence_length, matrix)
        episodes = corpus.callbacks()  # first: the other callbacks see the episode's cache
        callbacks = [*episodes, keras.callbacks.TensorBoard(log_dir)]
        if config.cache_size:
            probe = corpus.probe(batch_size)
            callbacks.append(CacheAttentionCallback(log_dir, probe_inputs=probe))
        last = keras.callbacks.ModelCheckpoint(os.path.join(rundir, "last.keras"))
        # The backup last: it keeps what the others did at the epoch's end.
        callbacks += [*extra_callbacks, best, last, backup]
        # `fit`, or a custom loop where `fit` fails (several workers); the tf.data pipeline
        # shuffles (or, for episodes, keeps their order).
        train(
            model,
            train_data,
            epochs=config.epochs,
            initial_epoch=backup.epoch,
            steps_per_epoch=steps,
            validation_data=eval_data,
            callbacks=callbacks,
            verbose=config.verbose,
        )
        final = evaluate(model, eval_data, callbacks=episodes)
        history = backup.history  # every epoch of the run, before and after any restart
        metrics = {
            "source": corpus.source,
            "workdir": str(workdir),
            "pooling": config.pooling,
            "cache_size": config.cache_size,
            "policy": config.policy,
            "query": models.cache_query(config),
            "faithful_to_code": config.faithful_to_code,
            "train_sentences": corpus.train_sentences,
            "eval_sentences": len(y_eval),
            "vocabulary": len(vocabulary),
            "pretrained": found,  # words whose vector --embeddings gave
            "epochs_run": list(range(backup.epoch)),
            "val_accuracy": history.get("val_accuracy", []),
            "history": history,
            "eval_accuracy": float(final["accuracy"]),
            "eval_loss": float(final["loss"]),
            # The best constant answer: what the answers' frequencies alone can reach.
            "eval_majority_baseline": float(np.bincount(y_eval).max() / len(y_eval)),
            # The share of each cache's slots that hold a state.
            "cache_fill": {
                layer.name: float(layer.fill_count()) / layer.cache_size
                for layer in model.cache_layers
            },
            # Generated corpus: the read's mean weight on the fact about the asked house.
            "eval_attention_on_fact": corpus.attention_on_fact(model),
            "seconds": round(time.time() - started, 1),
        }
        _write_json(os.path.join(rundir, "metrics.json"), metrics)
        final_metrics = {name: metrics[name] for name in ("eval_accuracy", "eval_loss")}
        log_hparams(log_dir, run_settings(config), final_metrics)
    return metrics
