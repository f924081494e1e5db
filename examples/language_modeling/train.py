"""`train_and_evaluate`: one run of the example, from its settings to its metrics."""

import contextlib
import json
import pathlib
import time

import keras
import numpy as np

from tf_memlayers.callbacks import StateResetCallback, WindowAttentionCallback
from tf_memlayers.models import build_step_model, compile_language_model, generate
from tf_memlayers.training import (
    RunBackup,
    evaluate,
    is_chief,
    log_hparams,
    make_strategy,
    train,
    worker_directory,
)

from . import input_pipeline, models

# Options that say how long, how verbosely or where to run, or what to show, but not what is
# trained: a run resumed with other values is the same run.
RUN_OPTIONS = {
    "epochs",
    "verbose",
    "workdir",
    "strategy",
    "jit_compile",
    "metrics_file",
    "probe_sentence",
}
RUN_OPTIONS |= {"probe_length", "generate", "prompt", "temperature", "generate_seed"}


class OptionError(ValueError):
    """A setting that the data, the model or the run directory refuses, as the command-line
    error ``argument <option>: <why>``."""

    def __init__(self, option, message):
        super().__init__(f"argument {option}: {' '.join(str(message).split())}")


@contextlib.contextmanager
def blame(option):
    """Reports a ``ValueError`` (or ``OSError``) of the block as an `OptionError` of ``option``."""
    try:
        yield
    except OptionError:
        raise
    except (OSError, ValueError) as error:
        raise OptionError(option, error) from error


def run_settings(config):
    """What defines a run: every option but `RUN_OPTIONS`, and the data it reads (``source``)."""
    source = input_pipeline.corpus_name(config.data_dir) if config.data_dir else "generated"
    settings = {k: v for k, v in vars(config).items() if k not in RUN_OPTIONS}
    return json.loads(json.dumps(dict(sorted({**settings, "source": source}.items()))))


def load_corpus(config):
    """The corpus of ``--data-dir``, else the generated one."""
    if config.data_dir is None:
        return input_pipeline.generated_corpus(config.generated_tokens, config.seed)
    with blame("--data-dir"):
        return input_pipeline.read_corpus(config.data_dir)


def encode_words(option, text, corpus):
    with blame(option):
        if not text.split():
            raise ValueError(f"{text!r} has no words")
        return corpus.encode(text.split())


def build_model(config, vocabulary_size, **options):
    """The model the settings describe; a width the layers refuse is reported as the option to
    change (``--sizes``, ``--tie-weights``, ``--ngram`` of the N-gram RNN, else ``--units``)."""
    option = "--sizes" if config.sizes else "--tie-weights" if config.tie_weights else None
    with blame(option or ("--ngram" if config.model == "ngram" else "--units")):
        return models.language_model(
            vocabulary_size,
            config.model,
            window=config.window,
            ngram=config.ngram,
            sizes=config.sizes,
            units=config.units,
            embedding_dim=config.embedding_dim,
            tie_weights=config.tie_weights,
            init_scale=config.init_scale,
            num_layers=config.num_layers,
            dropout=config.dropout,
            variational_dropout=config.variational_dropout,
            recurrent_dropout=config.recurrent_dropout,
            forget_bias=config.forget_bias,
            **options,
        )


def compiled_model(config, vocabulary_size):
    """The model the run trains, compiled."""
    model = build_model(
        config,
        vocabulary_size,
        form=config.form,
        batch_size=config.batch_size,
        sequence_length=config.sequence_length,
        resets=config.pack,
    )
    return compile_language_model(
        model,
        config.learning_rate,
        config.clip_norm,
        jit_compile=config.jit_compile,
        optimizer=config.optimizer,
        loss_reduction=config.loss_reduction,
    )


def callbacks_of(config, batches, rundir):
    """The run's callbacks, and those of them whose state `RunBackup` keeps: state resets,
    the learning-rate rules (Zaremba et al.'s decay, the plateau rule of ``--patience``), the
    best and the last model, TensorBoard."""

    def learning_rate(epoch, rate):
        if config.full_rate_epochs is None:
            return rate
        return config.learning_rate * config.lr_decay ** max(epoch + 1 - config.full_rate_epochs, 0)

    monitor = dict(monitor="val_perplexity", mode="min")
    kept = [
        keras.callbacks.ModelCheckpoint(str(rundir / "best.keras"), save_best_only=True, **monitor)
    ]
    if config.patience:
        kept += [
            keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=1, min_delta=0, **monitor),
            keras.callbacks.EarlyStopping(
                patience=config.patience, restore_best_weights=True, **monitor
            ),
        ]
    callbacks = [
        StateResetCallback(batches["train"].resets, batches["valid"].resets),
        keras.callbacks.LearningRateScheduler(learning_rate),
        *kept,
        keras.callbacks.ModelCheckpoint(str(rundir / "last.keras")),
        keras.callbacks.TensorBoard(str(rundir / "logs"), write_graph=False),
    ]
    return callbacks, kept


def train_and_evaluate(config, workdir, callbacks=()):
    """Trains the model ``config`` (the parsed command line) describes in ``workdir``, or
    continues the run there, and scores it; returns the metrics (also in
    ``workdir/metrics.json``). ``callbacks`` are added to the run's.

    Raises:
        OptionError: a setting that the data, the model or the run directory refuses.
    """
    # The run's dtype policy, the caller's put back after it: runs in one process are
    # as they are alone.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16" if config.mixed_precision else "float32")
    try:
        return _train_and_evaluate(config, workdir, callbacks)
    finally:
        keras.config.set_dtype_policy(previous)


def _train_and_evaluate(config, workdir, callbacks=()):
    """`train_and_evaluate` under the run's dtype policy."""
    started = time.time()
    # First: a multi-worker strategy sets up its collective operations before any other op.
    strategy = make_strategy(config.strategy)
    if strategy.num_replicas_in_sync > 1:
        raise OptionError(
            "--strategy",
            "truncated BPTT carries per-row states in the model's variables, which every "
            "replica of a tf.distribute strategy holds as one mirrored copy, so the model "
            f"trains on one replica only; got {config.strategy} with "
            f"{strategy.num_replicas_in_sync} replicas. Use --strategy default (or "
            "multi_worker with one worker and at most one GPU).",
        )
    keras.utils.set_random_seed(config.seed)
    corpus = load_corpus(config)
    probe_ids = corpus.splits["valid"][0][: config.probe_length]
    if config.probe_sentence is not None:
        probe_ids = encode_words("--probe-sentence", config.probe_sentence, corpus)
    prompt = corpus.splits["valid"][0][:5]
    if config.prompt is not None:
        prompt = encode_words("--prompt", config.prompt, corpus)
    batches = {
        split: input_pipeline.bptt_batches(
            ids,
            [0] if config.no_document_resets else starts,
            config.batch_size,
            config.sequence_length,
            config.pack,
        )
        for split, (ids, starts) in corpus.splits.items()
    }
    if config.model in models.ATTENTION_KINDS:  # the attention views' validation text
        rows = batches["valid"].inputs[: 4 * config.window // config.sequence_length + 1]
        text = np.concatenate(list(rows), axis=1)
        if text.shape[1] <= config.window:
            raise OptionError(
                "--window",
                "the attention views average over validation text longer than the window, and "
                f"the validation split gives {text.shape[1]} tokens a row at --batch-size "
                f"{config.batch_size}; got {config.window}",
            )
    # An epoch of the first --max-train-batches batches, with their resets.
    batches["train"] = batches["train"].take(config.max_train_batches or len(batches["train"][0]))
    with strategy.scope():
        model = compiled_model(config, len(corpus.vocabulary))
        probe = None
        if config.model in models.ATTENTION_KINDS:
            probe = build_model(
                config,
                len(corpus.vocabulary),
                stateful=False,
                sequence_length=None,
                return_attention_scores=True,
            )
    # The chief writes the run directory; other workers a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        rundir = pathlib.Path(rundir)
        run_callbacks, kept = callbacks_of(config, batches, rundir)
        if probe is not None:  # the attention over the window (Daniluk et al.'s Fig. 3)
            views = WindowAttentionCallback(
                probe, rundir / "logs", probe_ids, corpus.decode(probe_ids), text, config.window
            )
            run_callbacks.append(views)
        with blame("--workdir"):
            backup = RunBackup(rundir / "backup", kept, settings=run_settings(config))
        epochs_before = backup.epoch
        # A resumed run repeats the interrupted epoch from the state it began with (the
        # carried states start every epoch from zero).
        train(
            model,
            batches["train"].dataset(),
            validation_data=batches["valid"].dataset(),
            epochs=config.epochs,
            initial_epoch=backup.epoch,
            callbacks=[*run_callbacks, *callbacks, backup],
            verbose=config.verbose,
        )
        scores = {
            split: evaluate(
                model,
                batches[split].dataset(),
                callbacks=[StateResetCallback(eval_resets=batches[split].resets)],
            )
            for split in ("valid", "test")
        }
        history = backup.history
        last = {name: values[-1] if values else None for name, values in history.items()}
        metrics = {
            "config": config.config,
            "workdir": str(workdir),
            "model": config.model,
            "form": config.form,
            "corpus": corpus.name,
            "vocabulary": len(corpus.vocabulary),
            "units": config.units,
            "parameters": models.parameter_count(model),
            "epochs": config.epochs,
            "epochs_run": backup.epoch,
            "epochs_run_now": backup.epoch - epochs_before,
            "best_epoch": int(np.argmin(history["val_perplexity"])) + 1 if history else None,
            "last_epoch_train_perplexity": last.get("perplexity"),
            "last_epoch_learning_rate": last.get("learning_rate"),
            "train_batches_per_epoch": len(batches["train"].inputs),
            "train_tokens_per_epoch": batches["train"].num_targets,
            "train_padding_fraction": round(batches["train"].padding_fraction, 6),
            **{f"{split}_perplexity": float(s["perplexity"]) for split, s in scores.items()},
            **{f"{split}_tokens": batches[split].num_targets for split in scores},
            "history": history,
        }
        if probe is not None:  # Daniluk et al.'s Fig. 3b, with the weights scored
            average = views.probe()[1]
            metrics["attention_by_position"] = [round(float(w), 4) for w in average]
        if config.generate:
            tokens = generate(
                build_step_model(model),
                prompt[None],
                config.generate,
                temperature=config.temperature,
                seed=config.generate_seed,
            )
            metrics["generation"] = {
                "prompt": " ".join(corpus.decode(prompt)),
                "generated": " ".join(corpus.decode(tokens[0])),
            }
        metrics["seconds"] = round(time.time() - started, 1)
        log_hparams(
            rundir / "logs",
            run_settings(config),
            {name: metrics[name] for name in ("valid_perplexity", "test_perplexity")},
        )
        text = json.dumps(metrics, sort_keys=True)
        if is_chief(strategy):
            for path in (rundir / "metrics.json", config.metrics_file):
                if path:
                    pathlib.Path(path).write_text(text + "\n", encoding="utf-8")
    return json.loads(text)
