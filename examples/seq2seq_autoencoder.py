"""Auto-encodes sentences with a sequence-to-sequence model (Weissenborn 2016, §5.3): an AM-GRU
encoder and a Dual AM-GRU decoder without shared parameters, beside an attention decoder and a
plain GRU encoder-decoder.

The decoder reads ``<s>`` and the sentence and predicts the sentence and ``<eos>`` (teacher
forcing); after training, the test sentences are decoded from their encodings alone, one word
at a time through the decoder's step model (`tf_memlayers.models.generate`: greedy, or a beam
search with ``--beams`` and keras-hub installed).

Data: ``--data-dir`` with one sentence per line, tokens separated by spaces (``train.txt``,
``valid.txt``, ``test.txt``, or names ending in ``.train.txt`` and so on, as Penn Treebank's
``ptb.train.txt``); sentences longer than ``--max-length`` are left out. Else an embedded
generated corpus (`examples.seq2seq.sentences.generated_sentences`), which runs anywhere in a
few minutes.

Examples::

    python examples/seq2seq_autoencoder.py                        # Dual AM-GRU decoder
    python examples/seq2seq_autoencoder.py --model attention
    python examples/seq2seq_autoencoder.py --data-dir ../shared/data/ptb --max-length 20 \\
        --max-train 20000 --units 128 --epochs 10

The run directory (``--workdir``; by default ``runs/seq2seq_autoencoder/<model>-<options
changed from their defaults>-<digest>``) keeps checkpoints (the same command resumes after an
interruption; a different one in the same ``--workdir`` is refused), TensorBoard logs (the
losses; each epoch the paper's Figure 3 for the Dual AM-GRU, the cosine similarity between what
the encoder wrote and what the decoder read, or the attention weights, with the probe
statistics of `examples.seq2seq.probes`) and ``metrics.json``.
"""

import os
import sys
import time

if __package__ in (None, ""):  # run as a file: the harness is in the repository's examples/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from examples.harness.startup import keras  # noqa: E402  (first: a quiet TensorFlow start)

# isort: split
import numpy as np  # noqa: E402

from examples.harness import options  # noqa: E402
from examples.harness.run_directory import (  # noqa: E402
    RUN_OPTIONS,
    resolved_settings,
    run_workdir,
)
from examples.harness.training import (  # noqa: E402
    make_strategy,
    resumable_callbacks,
    resumed_epoch,
    run_history,
    train,
    worker_directory,
    write_metrics,
)
from examples.harness.training.hparams import log_hparams  # noqa: E402
from examples.seq2seq import probes, sentences  # noqa: E402
from examples.seq2seq.models import MODELS, build_autoencoder, compile_autoencoder  # noqa: E402
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES  # noqa: E402
from tf_memlayers.layers.associative_memory.dual_associative_gru import DUAL_KEYS  # noqa: E402

# Of the probe sentences (--probe-sentences), the ones each epoch's TensorBoard summary reads
# (the first is drawn).
PROBE_SENTENCES_PER_EPOCH = 10


def parse_args(argv=None):
    parser = options.ArgumentParser(description=__doc__.split("\n\n")[0])
    data = parser.add_argument_group("data")
    options.add_option(
        data,
        "data_dir",
        metavar="PATH",
        type=options.checked_path(sentences.find_sentence_files),
        help="folder of train, valid and test files, one sentence per line "
        "(default: none, the generated corpus)",
    )
    options.add_argument(
        data,
        "--train-size",
        choices=tuple(sentences.GENERATED_SIZES),
        default="medium",
        help="size of the generated corpus",
    )
    options.add_option(
        data, "max_train", help="use at most this many training sentences (default: all)"
    )
    options.add_option(
        data, "max_length", default=16, help="longest sentence, in words (longer ones are left out)"
    )
    options.add_argument(
        data,
        "--max-vocabulary",
        type=options.int_at_least(5),
        default=10000,
        metavar="N",
        help="cap the vocabulary: the most frequent words kept, "
        "special tokens included (the rest read as <unk>)",
    )
    model = parser.add_argument_group("model")
    options.add_option(
        model,
        "model",
        default="dual_am_gru",
        choices=MODELS,
        help="dual_am_gru: AM-GRU encoder, Dual AM-GRU decoder reading its "
        "memory; attention: GRU encoder, GRU decoder with Luong's attention over "
        "its outputs; gru: GRU encoder, GRU decoder from its final state",
    )
    options.add_option(
        model,
        "units",
        default=64,
        help="width of the encoder and the decoder (even for dual_am_gru)",
    )
    options.add_option(model, "embedding_dim", default=32)
    options.add_option(model, "num_copies", default=NUM_COPIES)
    options.add_argument(
        model,
        "--dual-key",
        choices=DUAL_KEYS,
        default="released",
        help="the Dual AM-GRU decoder's read key: 'released', the layout of "
        "the paper's auto-encoding code (share_key=False), or 'paper', the "
        "write key itself",
    )
    options.add_option(model, "init_scale", default=0.1)
    options.add_argument(
        model,
        "--probe-sentences",
        type=options.positive_int,
        default=100,
        metavar="N",
        help="test sentences whose memory the probes read "
        "before and after training (examples/seq2seq/probes.py); the first "
        f"{PROBE_SENTENCES_PER_EPOCH} also at each epoch's end",
    )
    train = parser.add_argument_group("training")
    options.add_option(train, "epochs", default=10)
    options.add_option(train, "batch_size", default=32)
    options.add_option(train, "learning_rate", default=3e-3, help="Adam's learning rate")
    options.add_option(train, "clip_norm", default=5.0)
    options.add_argument(
        train,
        "--beams",
        type=options.positive_int,
        default=1,
        metavar="N",
        help="decode the test sentences with a beam search of N beams "
        "(keras-hub's BeamSampler; needs keras-hub); 1: greedily",
    )
    options.add_run_options(
        train,
        seed=123,
        default_workdir="runs/seq2seq_autoencoder/<model>-<changed options>-<digest>",
    )
    args = parser.parse_args(argv)
    shortest, longest = sentences.GENERATED_LENGTHS
    if not args.data_dir and args.max_length < shortest:
        parser.error(
            f"argument --max-length: the generated corpus's sentences have {shortest} "
            f"to {longest} words; got {args.max_length}"
        )
    if args.model == "dual_am_gru" and args.units % 2:
        parser.error(
            f"argument --units: must be even for the dual_am_gru model (its memory "
            f"is complex, n/2 numbers); got {args.units}"
        )
    if args.beams > 1:
        with options.reported_as("--beams"):
            sampler(args.beams)
    return args


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


def load_data(args):
    if args.data_dir:
        with options.reported_as("--data-dir"):
            splits = sentences.read_sentence_files(args.data_dir, args.max_length)
        source = "files"
    else:
        splits = sentences.generated_splits(args.train_size, seed=args.seed)
        splits = {
            name: [s for s in found if len(s) <= args.max_length] for name, found in splits.items()
        }
        source = "generated"
    if args.max_train:
        splits["train"] = splits["train"][: args.max_train]
    for name, found in splits.items():
        if not found:
            raise ValueError(f"The {name} split of source {source!r} is empty.")
    return splits, source


def decoded_scores(autoencoder, splits_test, vocabulary, max_length, beams):
    """Exact-match rate and word accuracy of decoding the test sentences from their encodings
    (each word compared at its position, the decoded ``<eos>`` included)."""
    source, _, target = sentences.encode(splits_test, vocabulary, max_length)
    bos, eos = vocabulary.index(sentences.BOS), vocabulary.index(sentences.EOS)
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
        logits = np.asarray(model.predict_on_batch([source, decoder_input]), np.float64)
        target = np.asarray(target)
        top = logits.max(-1, keepdims=True)
        log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
        words = target > 0
        total -= np.take_along_axis(log_probs, target[..., None], -1)[..., 0][words].sum()
        correct += (logits.argmax(-1) == target)[words].sum()
        count += words.sum()
    return {
        "test_loss": round(total / count, 4),
        "test_perplexity": round(float(np.exp(total / count)), 3),
        "test_word_accuracy": round(correct / count, 4),
    }


def probe_pairs(splits_test, vocabulary, max_length, count):
    """The first ``count`` test sentences as ``(source ids, decoder input ids)``."""
    source, decoder_input, _ = sentences.encode(splits_test[:count], vocabulary, max_length)
    return [(s[s > 0], d[d > 0]) for s, d in zip(source, decoder_input)]


def probe_heatmap(autoencoder, pair, vocabulary):
    """The first probe sentence's heatmap (`examples.seq2seq.probes.heatmap_matrix`) with its
    words, for figures drawn after the run; `None` for the GRU."""
    source, decoder_input = pair
    matrix = probes.heatmap_matrix(autoencoder.kind, autoencoder.memory_probe(*pair))
    if matrix is None:
        return None
    return {
        "matrix": np.round(matrix, 4).tolist(),
        "source": [vocabulary[i] for i in source],
        "decoder_input": [vocabulary[i] for i in decoder_input],
    }


def recorded_run_options(args):
    """The options that do not define what a run trains (`RUN_OPTIONS`), here with the ones
    that only decide its evaluation (``--beams``, ``--probe-sentences``: a finished run's
    command with other values evaluates it again) and the AM-GRU's options for the other
    models."""
    ignored = () if args.model == "dual_am_gru" else ("num_copies", "dual_key")
    return RUN_OPTIONS + ("beams", "probe_sentences") + ignored


def main(argv=None):
    """Runs the example; returns the final metrics dict."""
    args = parse_args(argv)
    # First: a multi-worker strategy sets up the collective operations before any other op.
    strategy = make_strategy(args.strategy)
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    splits, source = load_data(args)
    vocabulary = sentences.build_vocabulary(splits["train"], max_size=args.max_vocabulary)
    batch_size = args.batch_size * strategy.num_replicas_in_sync
    common = dict(vocabulary=vocabulary, max_length=args.max_length, batch_size=batch_size)
    train_data = sentences.make_dataset(
        splits["train"], shuffle=True, seed=args.seed, repeat=True, **common
    )
    valid_data = sentences.make_dataset(splits["valid"], **common)
    test_data = sentences.make_dataset(splits["test"], **common)
    steps = -(-len(splits["train"]) // batch_size)

    with strategy.scope():
        autoencoder = build_autoencoder(
            args.model,
            len(vocabulary),
            units=args.units,
            embedding_dim=args.embedding_dim,
            num_copies=args.num_copies,
            dual_key=args.dual_key,
            seed=args.seed,
            init_scale=args.init_scale,
        )
        model = compile_autoencoder(
            autoencoder.model, args.learning_rate, args.clip_norm, jit_compile=args.jit
        )
    resolved = {"source": source}
    run_options = recorded_run_options(args)
    settings = resolved_settings(args, resolved, run_options)
    workdir = run_workdir(
        args, os.path.join("runs", "seq2seq_autoencoder"), args.model, run_options, resolved
    )
    print(
        f"source={source} train={len(splits['train'])} valid={len(splits['valid'])} "
        f"test={len(splits['test'])} vocabulary={len(vocabulary)} workdir={workdir}",
        flush=True,
    )

    pairs = probe_pairs(splits["test"], vocabulary, args.max_length, args.probe_sentences)
    # Before training: where the memory starts (the paper's finding is about what it learns).
    initial_statistics = probes.probe_statistics(autoencoder, pairs)
    # The chief writes the run directory; other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as rundir:
        log_dir = os.path.join(rundir, "logs")
        probe = probes.MemoryProbe(
            log_dir, autoencoder, pairs[:PROBE_SENTENCES_PER_EPOCH], vocabulary
        )
        callbacks = resumable_callbacks(
            rundir,
            monitor="val_loss",
            mode="min",
            settings=settings,
            callbacks=[keras.callbacks.TensorBoard(log_dir), probe],
        )
        # A resumed run restarts the interrupted epoch; the training stream is endless, so it
        # skips what the completed epochs used.
        initial_epoch = resumed_epoch(rundir)
        train(
            model,
            train_data.skip(initial_epoch * steps),
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=steps,
            validation_data=valid_data,
            callbacks=callbacks,
            verbose=args.verbose,
        )
        history = run_history(rundir)
        metrics = {
            "model": args.model,
            "source": source,
            "workdir": workdir,
            "train_sentences": len(splits["train"]),
            "test_sentences": len(splits["test"]),
            "vocabulary": len(vocabulary),
            "parameters": int(model.count_params()),
            # The epochs the whole run trained, before and after any restart, as in the
            # other examples.
            "epochs_run": list(range(resumed_epoch(rundir))),
            "history": history,
            **teacher_forced_scores(model, test_data),
            **decoded_scores(autoencoder, splits["test"], vocabulary, args.max_length, args.beams),
            "memory_before_training": initial_statistics,
            "memory": probes.probe_statistics(autoencoder, pairs),
            "probe_heatmap": probe_heatmap(autoencoder, pairs[0], vocabulary),
            "seconds": round(time.time() - started, 1),
        }
        write_metrics(metrics, os.path.join(rundir, "metrics.json"))
        log_hparams(
            log_dir,
            settings,
            {
                "test_perplexity": metrics["test_perplexity"],
                "decoded_exact_match": metrics["decoded_exact_match"],
            },
        )
        return metrics


if __name__ == "__main__":
    main(sys.argv[1:])
