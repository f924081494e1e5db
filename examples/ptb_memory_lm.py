#!/usr/bin/env python
"""Memory-augmented LSTM language models on PTB / WikiText-2 / CBT (Daniluk et al. 2017).

Trains an LSTM language model with one of the memory layers of *Frustratingly Short Attention
Spans in Neural Language Modeling* on top (``--model lstm | attention | key_value |
key_value_predict | ngram``), with truncated BPTT over consecutive batches, states reset at
the start of every epoch and at document boundaries, and reports validation and test
perplexity (exp of the mean negative log-likelihood over all target tokens) as JSON. Each
document starts at a segment boundary (padded to it), or, with ``--pack``, documents follow
each other back to back and the model restarts its rows inside the graph where one starts.

Data: ``--data-dir`` holding Penn Treebank (``ptb.{train,valid,test}.txt``), WikiText-2
(``wiki.{train,valid,test}.tokens``, optionally .gz) or the Children's Book Test
(``cbt_*.txt``); without it, an embedded generated corpus in which the next word is often a
copy of a word a few steps back, so a window-attention model clearly beats the plain LSTM.

Defaults follow the paper (§4.1): Adam 1e-3, batch 64, global-norm clipping 5, forget bias 1,
U(-0.1, 0.1) init, BPTT 20. ``--config`` picks a named recipe (``zaremba-small``,
``zaremba-medium``, ``zaremba-large``: Zaremba et al. 2014 with plain SGD and the per-epoch
learning-rate decay; ``short-attention-spans``: the paper's settings at a CPU-sized width)
whose settings become the defaults; explicit options still win. The blog baselines are
flags: ``--dropout``, ``--variational-dropout``, ``--tie-weights``.

Runs are resumable: the same command (or the same ``--workdir``) continues a run interrupted
at any point and ends as an uninterrupted run would (the interrupted epoch starts again from the
state it began with: weights, optimizer, random seed states and the logs so far; carried states
start each epoch from zero). The metrics cover the whole run. Each set of settings has its own
run directory, by default ``runs/ptb_memory_lm/<model>-<options changed from their
defaults>-<digest of the resolved settings>``; a ``--workdir`` holding a run with other
settings is refused. TensorBoard logs (scalars and, for attention models, the
per-epoch attention heatmaps) go to ``<workdir>/logs``.

Example::

    python examples/ptb_memory_lm.py                  # attention LM on the generated corpus
    python examples/ptb_memory_lm.py --model lstm     # the baseline on the same data
    python examples/ptb_memory_lm.py --model ngram --data-dir ../shared/data/ptb
    python examples/ptb_memory_lm.py --config zaremba-small --data-dir ../shared/data/ptb
    python examples/ptb_memory_lm.py --model lstm --pack --data-dir ../shared/data/wikitext2
    tensorboard --logdir runs/ptb_memory_lm        # all runs side by side
"""

import os
import pathlib
import sys
import time

if __package__ in (None, ""):  # run as a file: the harness is in the repository's examples/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from examples.harness.startup import keras  # noqa: E402  (first: a quiet TensorFlow start)

# isort: split
import numpy as np  # noqa: E402

from examples.harness import options  # noqa: E402
from examples.harness.run_directory import (  # noqa: E402
    RUN_OPTIONS,  # noqa: E402
    recorded_names,
    recorded_spellings,
    resolved_settings,
    run_workdir,
)
from examples.harness.training import (  # noqa: E402
    is_chief,
    make_strategy,
    resumable_callbacks,
    resumed_epoch,
    run_history,
    worker_directory,
    write_metrics,
)
from examples.harness.training.distributed import train as train_model  # noqa: E402
from examples.harness.training.hparams import log_hparams  # noqa: E402
from examples.harness.training.learning_rate import EpochLearningRate  # noqa: E402
from examples.language_modeling import (  # noqa: E402
    generated_lm,
    lm_batches,
    lm_corpora,
    token_streams,
)
from examples.language_modeling.evaluation import evaluate_language_model  # noqa: E402
from examples.language_modeling.memories import (  # noqa: E402
    ATTENTION_KINDS,
    FORMS,
    KINDS,
    language_model,
)
from examples.language_modeling.presets import PRESETS, get_preset  # noqa: E402
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback  # noqa: E402
from tf_memlayers.callbacks.window_attention_callback import WindowAttentionCallback  # noqa: E402
from tf_memlayers.models.language_model import (  # noqa: E402
    DANILUK_DEFAULTS,
    LOSS_REDUCTIONS,
    OPTIMIZERS,
    compile_language_model,
)
from tf_memlayers.models.step_model import build_step_model, generate  # noqa: E402

DEFAULT_ROOT = "runs/ptb_memory_lm"
# Options that do not change what is trained: a run resumed with other values is the same run.
PTB_RUN_OPTIONS = (
    *RUN_OPTIONS,
    "metrics_file",
    "probe_sentence",
    "probe_length",
    "generate",
    "prompt",
    "temperature",
    "generate_seed",
)
# Options added after runs were named: they enter a run's settings (and its directory's
# digest) only when given, so earlier command lines keep their run directories.
PTB_ADDED_OPTIONS = ("pack", "mixed_precision")
# The run settings (digest, directory name, the settings a resumed run is checked against)
# record the LSTM width and the segment length under the names run directories hold them by.
RECORDED_NAMES = {"units": "hidden", "sequence_length": "seq_len"}


BASE_DEFAULTS = {
    **DANILUK_DEFAULTS,
    "kind": "attention",
    "layers": 1,
    "dropout": 0.0,
    "optimizer": "adam",
    "lr_decay": 1.0,
    "full_rate_epochs": None,
    "epochs": 3,
    "loss_reduction": "token_mean",
}


def preset_defaults(config):
    """Argument defaults: the paper's settings, overridden by the preset named ``config``."""
    defaults = dict(BASE_DEFAULTS)
    if config:
        preset = get_preset(config)
        defaults.update(preset.model)
        defaults.update(preset.training)
    return defaults


def parse_args(argv=None):
    config_parser = options.ArgumentParser(add_help=False)
    config_parser.add_argument("--config", choices=tuple(PRESETS))
    config = config_parser.parse_known_args(argv)[0].config
    d = preset_defaults(config)
    note = f"(default: %(default)s; {options.PRESET_NOTE})"
    parser = options.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument(
        parser,
        "--config",
        choices=tuple(PRESETS),
        help="a named recipe whose settings become the defaults of the other options "
        "(explicit options still win): "
        + "; ".join(f"{name}: {preset.description}" for name, preset in PRESETS.items())
        + " (default: none, the paper's settings)",
    )
    data = parser.add_argument_group("data")
    options.add_option(
        data,
        "data_dir",
        type=options.checked_path(lm_corpora.detect_corpus),
        help="folder with Penn Treebank (ptb.{train,valid,test}.txt), "
        "WikiText-2 (wiki.{train,valid,test}.tokens, optionally .gz) or CBT "
        "(cbt_*.txt) files (default: none, the embedded generated corpus)",
    )
    options.add_argument(
        data,
        "--generated-tokens",
        type=options.positive_int,
        default=150_000,
        metavar="N",
        help="training tokens of the generated corpus (valid/test: a tenth)",
    )
    options.add_argument(
        data,
        "--no-document-resets",
        action="store_true",
        help="treat each split as one stream (no state resets between documents)",
    )

    model = parser.add_argument_group("model")
    options.add_option(
        model,
        "model",
        default=d["kind"],
        choices=KINDS,
        preset=True,
        help="the memory layer on top of the LSTM (lstm: none)",
    )
    options.add_argument(
        model,
        "--form",
        choices=FORMS,
        default="parallel",
        help="memory layer over the LSTM's output sequence, or as an RNN cell",
    )
    options.add_option(
        model, "units", default=d["units"], preset=True, help="width of each LSTM layer"
    )
    options.add_option(model, "embedding_dim", default=d["embedding_dim"], preset=True)
    options.add_argument(
        model,
        "--layers",
        type=options.positive_int,
        default=d["layers"],
        metavar="N",
        help="stacked LSTM layers " + note,
    )
    options.add_argument(
        model,
        "--window",
        type=options.positive_int,
        default=d["window"],
        metavar="L",
        help="attention window: previous outputs attended to " + note,
    )
    options.add_argument(
        model,
        "--ngram",
        type=options.positive_int,
        default=d["ngram"],
        metavar="N",
        help="N of the N-gram RNN " + note,
    )
    options.add_argument(
        model,
        "--sizes",
        type=options.positive_int,
        nargs="+",
        metavar="N",
        help="explicit piece sizes of the top LSTM output, key first "
        "(default: the model's equal split)",
    )
    options.add_option(
        model,
        "dropout",
        default=d["dropout"],
        preset=True,
        help="dropout rate on the embeddings and before the softmax",
    )
    options.add_argument(
        model,
        "--variational-dropout",
        action="store_true",
        help="one dropout mask per sequence (locked dropout)",
    )
    options.add_argument(
        model,
        "--recurrent-dropout",
        type=options.fraction,
        default=0.0,
        metavar="RATE",
        help="dropout rate on the LSTM's recurrent state",
    )
    options.add_argument(
        model,
        "--tie-weights",
        action="store_true",
        help="share the input embedding with the output layer",
    )
    options.add_argument(
        model,
        "--pack",
        action="store_true",
        help="pack documents back to back in each row, the model restarting "
        "a row's states inside the graph where a document starts, instead "
        "of padding each document to a segment start",
    )
    options.add_option(
        model,
        "init_scale",
        default=d["init_scale"],
        preset=True,
        help="weights start uniform in ±this",
    )
    options.add_argument(
        model,
        "--forget-bias",
        type=options.number_in(),
        default=d["forget_bias"],
        metavar="B",
        help="initial LSTM forget-gate bias " + note,
    )

    train = parser.add_argument_group("training")
    options.add_option(train, "epochs", default=d["epochs"], preset=True)
    options.add_option(
        train, "batch_size", default=d["batch_size"], preset=True, help="rows advanced in parallel"
    )
    options.add_argument(
        train,
        "--sequence-length",
        type=options.positive_int,
        default=d["sequence_length"],
        metavar="N",
        help="truncated-BPTT length " + note,
    )
    options.add_argument(
        train,
        "--optimizer",
        choices=OPTIMIZERS,
        default=d["optimizer"],
        help="adam (Daniluk et al.) or plain sgd (Zaremba et al.) " + note,
    )
    options.add_option(train, "learning_rate", default=d["learning_rate"], preset=True)
    options.add_argument(
        train,
        "--lr-decay",
        type=options.number_in(0.0, 1.0, False, True),
        default=d["lr_decay"],
        metavar="FACTOR",
        help="learning-rate factor per epoch after --full-rate-epochs " + note,
    )
    options.add_argument(
        train,
        "--full-rate-epochs",
        type=options.positive_int,
        default=d["full_rate_epochs"],
        metavar="N",
        help="epochs at the initial learning rate before the decay starts "
        f"(default: no decay; {options.PRESET_NOTE})",
    )
    options.add_argument(
        train,
        "--loss-reduction",
        choices=LOSS_REDUCTIONS,
        default=d["loss_reduction"],
        help="token_mean: mean NLL per token; sum_over_time: summed over the "
        "BPTT steps (Zaremba et al.) " + note,
    )
    options.add_option(
        train,
        "clip_norm",
        default=d["clip_norm"],
        preset=True,
        help="global gradient-norm clipping threshold (0: none)",
    )
    options.add_argument(
        train,
        "--max-train-batches",
        type=options.positive_int,
        metavar="N",
        help="train on only the first N batches of each epoch (default: all)",
    )
    options.add_option(train, "strategy", default="auto")
    options.add_option(train, "jit", default=True)
    options.add_option(train, "mixed_precision", default=False)
    options.add_option(train, "seed", default=0)

    run = parser.add_argument_group("run")
    options.add_option(
        run,
        "workdir",
        help="checkpoints, resume state and TensorBoard logs (default: "
        f"{DEFAULT_ROOT}/<model>-<changed options>-<digest>, one per "
        "configuration)",
    )
    options.add_argument(
        run,
        "--probe-sentence",
        help="sentence shown in the attention heatmap, in words of the "
        "corpus's vocabulary (default: the start of the validation split)",
    )
    options.add_argument(
        run,
        "--probe-length",
        type=options.positive_int,
        default=25,
        metavar="N",
        help="tokens of the default probe sentence",
    )
    options.add_argument(
        run,
        "--generate",
        type=options.non_negative_int,
        default=0,
        metavar="N",
        help="after training, continue --prompt by N words "
        "(a finished run only generates: run its command again with this)",
    )
    options.add_argument(
        run,
        "--prompt",
        help="words of the corpus's vocabulary that --generate continues "
        "(default: the first 5 words of the validation split)",
    )
    options.add_argument(
        run,
        "--temperature",
        type=options.number_in(0.0),
        default=1.0,
        help="softmax temperature of --generate; 0 picks the most likely word",
    )
    options.add_argument(
        run,
        "--generate-seed",
        type=options.non_negative_int,
        default=0,
        metavar="SEED",
        help="seed of --generate's draws",
    )
    options.add_argument(
        run,
        "--metrics-file",
        type=options.output_file,
        metavar="FILE",
        help="also write the final metrics JSON here (default: only print them)",
    )
    options.add_option(run, "verbose", default=1)
    args = parser.parse_args(argv)
    if args.prompt is not None and not args.generate:
        parser.error("argument --prompt: is continued by --generate N; give it too")
    if args.pack and args.no_document_resets:
        parser.error(
            "argument --pack: packs documents with a restart at each one, but "
            "--no-document-resets reads each split as one stream; give one of them"
        )
    # Options that would be taken and never used.
    if args.lr_decay != 1.0 and args.full_rate_epochs is None:
        parser.error(
            f"argument --lr-decay: applies after --full-rate-epochs N, which neither "
            f"the command nor --config sets; got --lr-decay {args.lr_decay} alone"
        )
    if args.sizes is not None and args.model == "lstm":
        parser.error(
            "argument --sizes: sizes the pieces of a memory's input; --model lstm has no memory"
        )
    return args


def load_data(args):
    """The corpus named by the arguments: files in ``--data-dir``, else the generated one."""
    if args.data_dir:
        with options.reported_as("--data-dir"):
            return lm_corpora.load_corpus(args.data_dir)
    size = args.generated_tokens
    return generated_lm.generate_copy_corpus(
        train_tokens=size,
        valid_tokens=max(size // 10, 1),
        test_tokens=max(size // 10, 1),
        seed=args.seed,
    )


def encoded_words(option, text, vocabulary):
    """The ids of the words of ``text``, given as ``option``; a text without words or with a
    word outside the vocabulary is one command-line error line (exit status 2), before
    anything is built or trained."""
    with options.reported_as(option):
        words = text.split()
        if not words:
            raise ValueError(f"{text!r} has no words")
        return np.asarray(vocabulary.encode(words))


def prompt_ids(args, corpus):
    """The ids of ``--prompt``, or of the first 5 words of the validation split."""
    if args.prompt is None:
        return np.asarray(corpus.split("valid").ids[:5])
    return encoded_words("--prompt", args.prompt, corpus.vocabulary)


def generated_text(args, model, corpus, prompt):
    """``--generate`` words after ``prompt``, from the step model of the trained ``model``."""
    step_model = build_step_model(model)
    tokens = generate(
        step_model,
        prompt[None, :],
        args.generate,
        temperature=args.temperature,
        seed=args.generate_seed,
    )
    return {
        "prompt": " ".join(corpus.vocabulary.decode(prompt)),
        "generated": " ".join(corpus.vocabulary.decode(tokens[0])),
    }


def sizes_option(args):
    """The option a refusal of the model's widths is reported under (exit status 2, the
    layer's own message): the explicit ``--sizes``, else ``--tie-weights``, else what the
    memory splits, ``--ngram`` of the N-gram model or the LSTM's ``--units``."""
    if args.sizes is not None:
        return "--sizes"
    if args.tie_weights:
        return "--tie-weights"
    return "--ngram" if args.model == "ngram" else "--units"


def model_kwargs(args, vocabulary_size):
    return dict(
        vocabulary_size=vocabulary_size,
        kind=args.model,
        units=args.units,
        embedding_dim=args.embedding_dim,
        window=args.window,
        ngram=args.ngram,
        sizes=args.sizes,
        layers=args.layers,
        dropout=args.dropout,
        variational_dropout=args.variational_dropout,
        recurrent_dropout=args.recurrent_dropout,
        tie_weights=args.tie_weights,
        init_scale=args.init_scale,
        forget_bias=args.forget_bias,
    )


def probe_inputs(args, corpus, valid):
    """The probe sentence (ids and tokens) and a validation batch for the attention views."""
    vocab = corpus.vocabulary
    if args.probe_sentence:
        tokens = args.probe_sentence.split()
        ids = encoded_words("--probe-sentence", args.probe_sentence, vocab)
    else:
        ids = corpus.valid.ids[: args.probe_length]
        tokens = vocab.decode(ids)
    rows = valid.inputs[0 : max(1, 4 * args.window // args.sequence_length + 1)]
    # Consecutive segments of each row joined: long enough for full windows.
    validation = np.concatenate(list(rows), axis=1)
    return ids, tokens, validation


def make_callbacks(args, workdir, corpus, train, valid, strategy, extra_callbacks=()):
    """The run's callbacks; the last one backs the run up (`resumable_callbacks`)."""
    settings = resolved_settings(
        recorded_names(args, RECORDED_NAMES),
        {"corpus": corpus.name},
        PTB_RUN_OPTIONS,
        PTB_ADDED_OPTIONS,
    )
    callbacks = [
        StateResetCallback(train.resets, valid.resets),
        EpochLearningRate(args.learning_rate, args.lr_decay, args.full_rate_epochs),
        keras.callbacks.TensorBoard(str(workdir / "logs"), write_graph=False),
    ]
    if args.model in ATTENTION_KINDS:
        with strategy.scope():
            probe = language_model(
                **model_kwargs(args, len(corpus.vocabulary)),
                stateful=False,
                sequence_length=None,
                return_attention_scores=True,
            )
        ids, tokens, validation = probe_inputs(args, corpus, valid)
        callbacks.append(
            WindowAttentionCallback(
                probe, workdir / "logs", ids, tokens, validation, window=args.window
            )
        )
    return resumable_callbacks(
        str(workdir),
        monitor="val_loss",
        settings=settings,
        spellings=recorded_spellings(RECORDED_NAMES, vars(args)),
        callbacks=[*callbacks, *extra_callbacks],
    )


def truncate(batches, limit):
    return batches if limit is None else batches.take(limit)


def last_logged(history, key):
    """The last epoch's value of ``key`` in a run's history (`None` if no epoch ran)."""
    values = history.get(key) or [None]
    return None if values[-1] is None else float(values[-1])


def run(args, extra_callbacks=()):
    """Trains and evaluates; returns the metrics dict."""
    # First: a multi-worker strategy sets up the collective operations before any other op.
    strategy = make_strategy(args.strategy)
    if strategy.num_replicas_in_sync > 1:
        options.refuse(
            "--strategy",
            "truncated BPTT carries per-row states in the model's variables, which every "
            "replica of a tf.distribute strategy holds as one mirrored copy, so the model "
            f"trains on one replica only; got {args.strategy} with "
            f"{strategy.num_replicas_in_sync} replicas. Use --strategy default (or "
            "multi_worker with one worker and at most one GPU).",
        )
    keras.utils.set_random_seed(args.seed)
    if args.mixed_precision:
        keras.config.set_dtype_policy("mixed_float16")
    started = time.time()
    corpus = load_data(args)
    if args.probe_sentence is not None:
        encoded_words("--probe-sentence", args.probe_sentence, corpus.vocabulary)
    prompt = prompt_ids(args, corpus) if args.generate else None
    # The options already hold the preset's values; the corpus is what --data-dir resolved to.
    resolved = {"corpus": corpus.name}
    workdir = pathlib.Path(
        run_workdir(
            recorded_names(args, RECORDED_NAMES),
            DEFAULT_ROOT,
            args.model,
            PTB_RUN_OPTIONS,
            resolved=resolved,
            added_options=PTB_ADDED_OPTIONS,
        )
    )
    documents = not args.no_document_resets
    split_batches = {
        split: lm_batches.make_bptt_batches(
            corpus.split(split),
            args.batch_size,
            args.sequence_length,
            reset_at_documents=documents,
            pack=args.pack,
        )
        for split in token_streams.SPLITS
    }
    train = truncate(split_batches["train"], args.max_train_batches)
    with strategy.scope(), options.reported_as(sizes_option(args)):
        model = language_model(
            **model_kwargs(args, len(corpus.vocabulary)),
            batch_size=args.batch_size,
            sequence_length=args.sequence_length,
            stateful=True,
            form=args.form,
            resets=args.pack,
        )
        compile_language_model(
            model,
            args.learning_rate,
            args.clip_norm,
            jit_compile=args.jit,
            optimizer=args.optimizer,
            loss_reduction=args.loss_reduction,
        )
    # The chief writes the run directory; other workers write to a temporary copy of it.
    with worker_directory(workdir, strategy) as local:
        rundir = pathlib.Path(local)
        callbacks = make_callbacks(
            args, rundir, corpus, train, split_batches["valid"], strategy, extra_callbacks
        )
        # A resumed run restarts the interrupted epoch with the state it began with (the carried
        # states start every epoch from zero).
        initial_epoch = resumed_epoch(rundir)
        # `fit`, or a custom loop where `fit` fails (several workers: keras-team/keras#20585).
        fitted = train_model(
            model,
            train.dataset(),  # truncated BPTT: batches stay in order
            validation_data=split_batches["valid"].dataset(),
            epochs=args.epochs,
            initial_epoch=initial_epoch,
            callbacks=callbacks,
            verbose=args.verbose,
        )
        history = run_history(rundir)  # every epoch of the run, before and after any restart
        results = {
            split: evaluate_language_model(model, split_batches[split])
            for split in ("valid", "test")
        }
        metrics = {
            "config": args.config,
            "workdir": str(workdir),
            "model": args.model,
            "form": args.form,
            "corpus": corpus.name,
            "vocabulary": len(corpus.vocabulary),
            "parameters": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
            "epochs": args.epochs,
            "epochs_run_now": len(fitted.history.get("loss", [])),
            "epochs_run": list(range(resumed_epoch(rundir))),
            "last_epoch_train_perplexity": last_logged(history, "perplexity"),
            "last_epoch_learning_rate": last_logged(history, "learning_rate"),
            "train_batches_per_epoch": train.num_batches,
            "train_tokens_per_epoch": int(train.num_targets),
            "pack": args.pack,
            "train_padding_fraction": round(train.padding_fraction, 6),
            "valid_perplexity": results["valid"]["perplexity"],
            "test_perplexity": results["test"]["perplexity"],
            "valid_tokens": results["valid"]["tokens"],
            "test_tokens": results["test"]["tokens"],
            "history": history,
            "seconds": round(time.time() - started, 1),
        }
        if args.generate:
            metrics["generation"] = generated_text(args, model, corpus, prompt)
            print(f"{metrics['generation']['prompt']} >> {metrics['generation']['generated']}")
        write_metrics(metrics, args.metrics_file if is_chief(strategy) else None)
        # The corpus as ``source``, the data a run read in every example's HParams.
        settings = resolved_settings(args, {"source": corpus.name}, PTB_RUN_OPTIONS)
        log_hparams(
            rundir / "logs",
            settings,
            {
                "valid_perplexity": metrics["valid_perplexity"],
                "test_perplexity": metrics["test_perplexity"],
            },
        )
        return metrics


def main(argv=None):
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
