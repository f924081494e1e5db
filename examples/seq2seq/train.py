"""Training and evaluation of the auto-encoding example: `train_and_evaluate`."""

import json
import os
import time

import keras
import numpy as np

from tf_memlayers.training import RunBackup, log_hparams, make_strategy, train, worker_directory

from . import input_pipeline, models, probes

# Of the probe sentences (--probe-sentences), the ones each epoch's TensorBoard summary reads
# (the first is drawn).
PROBE_SENTENCES_PER_EPOCH = 10


class WorkdirError(ValueError):
    """A run directory that `RunBackup` refuses (one holding a run with other settings, or a
    backup it cannot resume): the command line reports it as the error of ``--workdir``."""


class JitError(ValueError):
    """``--jit-compile`` under a strategy of several replicas: the command line reports it as the
    error of ``--jit-compile``."""


# Keras compiles the step of every replica into one XLA program, which cannot reach the
# variables' copies on the other devices: such a step fails at its first run.
def jit_replicas_error(strategy):
    """Why ``--jit-compile`` is refused under ``strategy`` (more than one replica)."""
    return (
        f"compiles the train step with XLA, which cannot train over the "
        f"{strategy.num_replicas_in_sync} replicas of {type(strategy).__name__} (one XLA "
        "program cannot reach the variables held on the other devices); use --no-jit-compile"
    )


def sampler(beams):
    """keras-hub's beam search of ``beams`` beams, or `None` (greedy) for one beam."""
    if beams == 1:
        return None
    try:
        import keras_hub
    except ImportError as error:
        raise ImportError(
            'a beam search needs keras-hub: pip install "tf-memlayers[keras-hub]"'
        ) from error
    return keras_hub.samplers.BeamSampler(num_beams=beams)


def decoded_scores(autoencoder, sentences, vocabulary, max_length, beams):
    """Exact-match rate and word accuracy of decoding ``sentences`` from their encodings
    (each word compared at its position, the decoded ``<eos>`` included)."""
    source, _, target = input_pipeline.encode(sentences, vocabulary, max_length)
    bos, eos = vocabulary.index(input_pipeline.BOS), vocabulary.index(input_pipeline.EOS)
    decoded = np.concatenate(
        [
            autoencoder.decode(source[i : i + 256], max_length + 1, bos, eos, sampler(beams))
            for i in range(0, len(source), 256)
        ]
    )
    words = target > 0
    return {
        "decoded_exact_match": round(float(np.all(decoded == target, axis=1).mean()), 4),
        "decoded_word_accuracy": round(float((decoded == target)[words].mean()), 4),
    }


def teacher_forced_scores(model, dataset):
    """Per-word cross-entropy (its exponential, the perplexity) and accuracy of the target's
    words and ``<eos>``, over the whole dataset."""
    total, count, correct = 0.0, 0, 0
    for (source, decoder_input), target in dataset:
        logits = np.asarray(models.predict(model, [source, decoder_input]), np.float64)
        target = np.asarray(target)
        top = logits.max(-1, keepdims=True)
        log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
        words = target > 0
        total -= np.take_along_axis(log_probs, target[..., None], -1)[..., 0][words].sum()
        correct += (logits.argmax(-1) == target)[words].sum()
        count += words.sum()
    return {
        "test_loss": round(float(total / count), 4),
        "test_perplexity": round(float(np.exp(total / count)), 3),
        "test_word_accuracy": round(float(correct / count), 4),
    }


def probe_pairs(sentences, vocabulary, max_length):
    """``sentences`` as ``(source ids, decoder input ids)`` without padding."""
    source, decoder_input, _ = input_pipeline.encode(sentences, vocabulary, max_length)
    return [(s[s > 0], d[d > 0]) for s, d in zip(source, decoder_input)]


def probe_heatmap(autoencoder, pair, vocabulary):
    """One probe sentence's heatmap (`probes.heatmap_matrix`) with its words, for figures
    drawn after the run; `None` for the GRU."""
    matrix = probes.heatmap_matrix(autoencoder.kind, autoencoder.memory_probe(*pair))
    if matrix is None:
        return None
    return {
        "matrix": np.round(matrix, 4).tolist(),
        "source": [vocabulary[i] for i in pair[0]],
        "decoder_input": [vocabulary[i] for i in pair[1]],
    }


def train_and_evaluate(args, splits, settings, workdir, callbacks=()):
    """Trains the auto-encoder ``args`` describe on ``splits`` and evaluates it.

    Args:
        args: The parsed options (`main.parse_args`).
        splits: Dict ``"train"``, ``"valid"``, ``"test"`` -> lists of token lists
            (`input_pipeline.load_splits`).
        settings: Dict of what defines the run (`main.run_settings`): a ``workdir`` holding
            another run is refused, and the HParams dashboard lists them.
        workdir: The run directory: the same call again resumes the run kept there.
        callbacks: More Keras callbacks for training.

    Returns:
        The metrics dict, also written to ``workdir/metrics.json``.

    Raises:
        WorkdirError: ``workdir`` holds a run with other settings, or a backup `RunBackup`
            cannot resume (refused before the model is built).
        JitError: ``--jit-compile`` under a strategy of several replicas.
    """
    # The run's dtype policy, the caller's put back after it: runs in one process are
    # as they are alone.
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16" if args.mixed_precision else "float32")
    try:
        return _train_and_evaluate(args, splits, settings, workdir, callbacks)
    finally:
        keras.config.set_dtype_policy(previous)


def _train_and_evaluate(args, splits, settings, workdir, callbacks=()):
    """`train_and_evaluate` under the run's dtype policy."""
    # First: a multi-worker strategy sets up the collective operations before any other op.
    strategy = make_strategy(args.strategy)
    if args.jit_compile and strategy.num_replicas_in_sync > 1:
        raise JitError(jit_replicas_error(strategy))
    keras.utils.set_random_seed(args.seed)
    started = time.time()
    # The chief writes the run directory; other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        log_dir = os.path.join(rundir, "logs")
        best = keras.callbacks.ModelCheckpoint(
            os.path.join(rundir, "best.keras"), monitor="val_loss", save_best_only=True
        )
        # Before the slow work: a directory that holds another run is refused. Last of the
        # callbacks: it backs up what the others did at each epoch's end, and restores them.
        try:
            backup = RunBackup(os.path.join(rundir, "backup"), [best], settings=settings)
        except (OSError, ValueError) as error:  # another run's, or one that cannot be made
            raise WorkdirError(error) from error
        vocabulary = input_pipeline.build_vocabulary(splits["train"], max_size=args.max_vocabulary)
        batch_size = args.batch_size * strategy.num_replicas_in_sync
        common = dict(vocabulary=vocabulary, max_length=args.max_length, batch_size=batch_size)
        train_data = input_pipeline.make_dataset(
            splits["train"], shuffle=True, seed=args.seed, repeat=True, **common
        )
        valid_data = input_pipeline.make_dataset(splits["valid"], **common)
        test_data = input_pipeline.make_dataset(splits["test"], **common)
        steps = -(-len(splits["train"]) // batch_size)
        with strategy.scope():
            autoencoder = models.build_autoencoder(
                args.model,
                len(vocabulary),
                units=args.units,
                embedding_dim=args.embedding_dim,
                num_copies=args.num_copies,
                dual_key=args.dual_key,
                seed=args.seed,
                init_scale=args.init_scale,
            )
            model = models.compile_autoencoder(
                autoencoder.model, args.learning_rate, args.clip_norm, jit_compile=args.jit_compile
            )
        print(
            f"source={settings['source']} train={len(splits['train'])} "
            f"valid={len(splits['valid'])} test={len(splits['test'])} "
            f"vocabulary={len(vocabulary)} workdir={workdir}",
            flush=True,
        )
        pairs = probe_pairs(splits["test"][: args.probe_sentences], vocabulary, args.max_length)
        # Before training: where the memory starts (the paper's finding is about what it learns).
        initial_statistics = probes.probe_statistics(autoencoder, pairs)
        # The training stream is endless: a resumed run skips what the completed epochs used.
        train(
            model,
            train_data.skip(backup.epoch * steps),
            epochs=args.epochs,
            initial_epoch=backup.epoch,
            steps_per_epoch=steps,
            validation_data=valid_data,
            callbacks=[
                keras.callbacks.TensorBoard(log_dir),
                probes.MemoryProbe(
                    log_dir, autoencoder, pairs[:PROBE_SENTENCES_PER_EPOCH], vocabulary
                ),
                best,
                keras.callbacks.ModelCheckpoint(os.path.join(rundir, "last.keras")),
                *callbacks,
                backup,
            ],
            verbose=args.verbose,
        )
        metrics = {
            "model": args.model,
            "source": settings["source"],
            "workdir": workdir,
            "train_sentences": len(splits["train"]),
            "test_sentences": len(splits["test"]),
            "vocabulary": len(vocabulary),
            "parameters": int(model.count_params()),
            # The epochs the whole run trained, before and after any restart.
            "epochs_run": list(range(backup.epoch)),
            "history": backup.history,
            **teacher_forced_scores(model, test_data),
            **decoded_scores(autoencoder, splits["test"], vocabulary, args.max_length, args.beams),
            "memory_before_training": initial_statistics,
            "memory": probes.probe_statistics(autoencoder, pairs),
            "probe_heatmap": probe_heatmap(autoencoder, pairs[0], vocabulary),
            "seconds": round(time.time() - started, 1),
        }
        with open(os.path.join(rundir, "metrics.json.partial"), "w", encoding="utf-8") as handle:
            json.dump(metrics, handle, sort_keys=True)
        os.replace(handle.name, os.path.join(rundir, "metrics.json"))
        scores = ("test_perplexity", "decoded_exact_match")
        log_hparams(log_dir, settings, {name: metrics[name] for name in scores})
    return metrics
