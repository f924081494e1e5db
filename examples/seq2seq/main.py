"""The command line of the auto-encoding example: options, run directory, `main`."""

import argparse
import hashlib
import json
import math
import os
import re
import sys

# A quiet start, before anything imports TensorFlow: its start-up lines go to the process's
# standard error on import, which TF_CPP_MIN_LOG_LEVEL does not silence, and a bad option's
# error must stay one line.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_stderr, _devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
os.dup2(_devnull, 2)
try:
    import keras  # noqa: F401
finally:
    os.dup2(_stderr, 2)
    os.close(_stderr)
    os.close(_devnull)

# isort: split
from tf_memlayers.training import STRATEGIES  # noqa: E402

from . import input_pipeline, models, probes, train  # noqa: E402

# Options that say how long or how verbosely to run, or where, or only how the finished model
# is evaluated: a run resumed with other values is the same run.
RUN_OPTIONS = (
    "epochs",
    "verbose",
    "workdir",
    "strategy",
    "jit_compile",
    "beams",
    "probe_sentences",
)
# The options of the AM-GRU layers, which only the dual_am_gru model has.
AM_GRU_OPTIONS = ("num_copies", "dual_key")
DEFAULT_ROOT = os.path.join("runs", "seq2seq_autoencoder")


class ArgumentParser(argparse.ArgumentParser):
    """Reports a bad option in one line, with exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default; those without one say what happens."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def number(kind=int, low=0, strict=False):
    """An argparse type: a finite ``kind`` >= ``low`` (> with ``strict``)."""

    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > low if strict else value >= low)):
            what = "an integer" if kind is int else "a finite number"
            raise argparse.ArgumentTypeError(
                f"must be {what} {'>' if strict else '>='} {low}, got {text!r}"
            )
        return value

    return convert


def data_dir(text):
    """A folder holding the train, valid and test files, as an absolute path without links (the
    run's settings: however it is spelled, the same folder resumes a run); ``~`` expanded."""
    text = os.path.expanduser(text)
    try:
        input_pipeline.find_sentence_files(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return os.path.realpath(text)


def workdir(text):
    """A folder to use or create: not a file, nor inside one (``~`` expanded)."""
    text = os.path.expanduser(text)
    path = os.path.abspath(text)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    while not os.path.exists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {path!r} is a file")
    return text


def make_parser():
    parser = ArgumentParser(
        # `python -m seq2seq` is named so, a script by its file name.
        prog=f"python -m {__package__}" if sys.argv[0].endswith("__main__.py") else None,
        description="Auto-encodes sentences with a sequence-to-sequence model (Weissenborn "
        "2016, §5.3): an AM-GRU encoder and a Dual AM-GRU decoder, an attention decoder or a "
        "plain GRU encoder-decoder.",
        formatter_class=_HelpFormatter,
    )
    add = parser.add_argument_group("data").add_argument
    add(
        "--data-dir",
        type=data_dir,
        metavar="DIR",
        help="folder of train, valid and test files, one sentence per line "
        "(default: none, the generated corpus)",
    )
    add(
        "--train-size",
        choices=tuple(input_pipeline.GENERATED_SIZES),
        default="medium",
        help="size of the generated corpus (not with --data-dir)",
    )
    add(
        "--max-train",
        type=number(int, 1),
        metavar="N",
        help="use at most this many training sentences (default: all)",
    )
    add(
        "--max-length",
        type=number(int, 1),
        default=16,
        metavar="N",
        help="longest sentence, in words (longer ones are left out)",
    )
    add(
        "--max-vocabulary",
        type=number(int, 5),
        default=10000,
        metavar="N",
        help="the most frequent words kept, special tokens included (the rest read as <unk>)",
    )
    add = parser.add_argument_group("model").add_argument
    add(
        "--model",
        choices=models.MODELS,
        default="dual_am_gru",
        help="dual_am_gru: AM-GRU encoder, Dual AM-GRU decoder reading its memory; attention: "
        "GRU encoder, GRU decoder with Luong's attention over its outputs; gru: GRU encoder, "
        "GRU decoder from its final state",
    )
    add(
        "--units",
        type=number(int, 1),
        default=64,
        metavar="N",
        help="width of the encoder and the decoder (even for dual_am_gru)",
    )
    add("--embedding-dim", type=number(int, 1), default=32, metavar="N", help="word vector size")
    add(
        "--num-copies",
        type=number(int, 1),
        default=8,
        metavar="N",
        help="redundant copies of the AM-GRU's associative memory (dual_am_gru only; the paper: 8)",
    )
    add(
        "--dual-key",
        choices=("paper", "released"),
        default="released",
        help="the Dual AM-GRU decoder's read key: 'released', the layout of the paper's "
        "auto-encoding code (share_key=False), or 'paper', the write key itself",
    )
    add(
        "--init-scale",
        type=number(float, 0, strict=True),
        default=0.1,
        metavar="SCALE",
        help="kernels start uniform in ±this",
    )
    add(
        "--probe-sentences",
        type=number(int, 1),
        default=100,
        metavar="N",
        help="test sentences whose memory the probes read before and after training; the "
        f"first {train.PROBE_SENTENCES_PER_EPOCH} also at each epoch's end (not for gru: no "
        "memory)",
    )
    add = parser.add_argument_group("training").add_argument
    add("--epochs", type=number(int, 1), default=10, metavar="N", help="number of epochs")
    add(
        "--batch-size",
        type=number(int, 1),
        default=32,
        metavar="N",
        help="sentences per batch (per replica)",
    )
    add(
        "--learning-rate",
        type=number(float, 0, strict=True),
        default=3e-3,
        metavar="RATE",
        help="Adam's learning rate",
    )
    add(
        "--clip-norm",
        type=number(float, 0),
        default=5.0,
        metavar="NORM",
        help="gradient-norm clipping threshold (0: none)",
    )
    add(
        "--beams",
        type=number(int, 1),
        default=1,
        metavar="N",
        help="decode the test sentences with a beam search of N beams (keras-hub's "
        "BeamSampler; needs keras-hub); 1: greedily",
    )
    add(
        "--seed",
        type=number(int, 0),
        default=123,
        metavar="N",
        help="random seed (weights, data order, generated data)",
    )
    add(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="tf.distribute strategy: multi_worker trains on the machines the TF_CONFIG "
        "environment variable names (tf-memlayers' docs: Resumable and multi-machine training)",
    )
    add(
        "--jit-compile",
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="compile the train step with XLA",
    )
    add("--mixed-precision", action="store_true", help="train under the mixed_float16 policy")
    add(
        "--workdir",
        type=workdir,
        metavar="DIR",
        help="run directory: checkpoints (the same command resumes), TensorBoard logs and "
        f"metrics.json (default: {DEFAULT_ROOT}/<model>-<changed options>-<digest>)",
    )
    add(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras progress output: 0 silent, 1 progress bar, 2 one line per epoch",
    )
    return parser


def parse_args(argv=None, parser=None):
    """The options of ``argv``, each checked; a bad one exits 2 with one line."""
    parser = parser or make_parser()
    args = parser.parse_args(argv)
    shortest, longest = input_pipeline.GENERATED_LENGTHS
    if not args.data_dir and args.max_length < shortest:
        parser.error(
            f"argument --max-length: the generated corpus's sentences have {shortest} to "
            f"{longest} words; got {args.max_length}"
        )
    if args.model == "dual_am_gru" and args.units % 2:
        parser.error(
            "argument --units: must be even for the dual_am_gru model (its memory is complex, "
            f"n/2 numbers); got {args.units}"
        )
    try:
        train.sampler(args.beams)
    except ImportError as error:
        parser.error(f"argument --beams: {error}")
    check_combinations(parser, args)
    return args


def check_combinations(parser, args):
    """Refuses options given together that would be taken and never used (given: set to
    another value than its default)."""

    def refuse_given(name, why):
        if getattr(args, name) != parser.get_default(name):
            parser.error(f"argument --{name.replace('_', '-')}: {why}")

    if args.model != "dual_am_gru":
        for name in AM_GRU_OPTIONS:
            refuse_given(
                name, f"sets the AM-GRU layers of dual_am_gru; --model {args.model} has none"
            )
    if args.data_dir:
        refuse_given("train_size", "sizes the generated corpus, which --data-dir replaces")
    if args.strategy == "multi_worker":
        refuse_given(
            "jit_compile",
            "compiles fit's step with XLA; the multi_worker training loop runs without it",
        )
    if not probes.STATISTICS[args.model]:
        refuse_given(
            "probe_sentences", f"are read by the memory probes; --model {args.model} has no memory"
        )


def run_settings(args, parser):
    """``(settings, changed)``: the options that define the run (all but `RUN_OPTIONS`, and
    the AM-GRU's for the other models) with the data it read as ``source``, and those of them
    set to other values than their defaults."""
    ignored = RUN_OPTIONS + (() if args.model == "dual_am_gru" else AM_GRU_OPTIONS)
    settings = {k: v for k, v in sorted(vars(args).items()) if k not in ignored}
    changed = {k: v for k, v in settings.items() if v != parser.get_default(k)}
    settings["source"] = "files" if args.data_dir else "generated"
    return settings, changed


def run_directory(settings, changed):
    """``runs/seq2seq_autoencoder/<model>-<option=value>_...-<digest of the settings>``."""
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]

    def readable(value):
        text = os.path.basename(str(value).rstrip("/\\")) or str(value)
        return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]

    named = "_".join(f"{k}={readable(v)}" for k, v in changed.items())
    if len(named) > 80:
        named = named[:80].rsplit("_", 1)[0]
    parts = (settings["model"], named, digest)
    return os.path.join(DEFAULT_ROOT, "-".join(part for part in parts if part))


def main(argv=None):
    """Runs the example; prints and returns the final metrics."""
    parser = make_parser()
    args = parse_args(argv, parser)
    try:
        splits = input_pipeline.load_splits(
            args.data_dir, args.train_size, args.max_length, args.max_train, args.seed
        )
    except (OSError, ValueError) as error:
        parser.error(f"argument --data-dir: {error}")
    settings, changed = run_settings(args, parser)
    workdir = args.workdir or run_directory(settings, changed)
    try:
        metrics = train.train_and_evaluate(args, splits, settings, workdir)
    except train.WorkdirError as error:
        parser.error(f"argument --workdir: {error}")
    except train.JitError as error:
        parser.error(f"argument --jit-compile: {error}")
    print("METRICS " + json.dumps(metrics, sort_keys=True), flush=True)
    return metrics
