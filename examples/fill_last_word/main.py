"""The command line of the last-word example: ``python -m fill_last_word --help``."""

import os

# A quiet start, before anything imports TensorFlow: its C++ start-up lines go to the process's
# standard error on import, where they would break a bad option's one-line error.
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
import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

from tf_memlayers.training import STRATEGIES  # noqa: E402

from . import input_pipeline, train  # noqa: E402

DEFAULT_ROOT = os.path.join("runs", "fill_last_word_cache")


# The options 0.2 spelled otherwise, and their spelling since 0.3.
RENAMED = {
    "--hidden": "--units",
    "--hidden-units": "--units",
}


class ArgumentParser(argparse.ArgumentParser):
    """Errors in one line, ``<prog>: error: <message>``, with exit status 2; an option's 0.2
    spelling (`RENAMED`) is refused naming its new one."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, unknown = super().parse_known_args(args, namespace)
        for old in (text.split("=")[0] for text in unknown):
            if old in RENAMED:
                self.error(f"argument {old}: renamed {RENAMED[old]} in 0.3")
        return namespace, unknown


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless it says itself what that is."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, argparse.SUPPRESS) and "default:" not in text:
            text += " (default: %(default)s)"
        return text


def number(kind, minimum, above=False):
    """An argparse type: a finite ``kind`` (`int` or `float`) >= ``minimum`` (> with ``above``)."""

    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            what = "an integer" if kind is int else "a finite number"
            raise argparse.ArgumentTypeError(
                f"must be {what} {'>' if above else '>='} {minimum}, got {text!r}"
            )
        return value

    return convert


def path(kind):
    """An argparse type (``~`` expanded): an existing ``"file"`` or ``"directory"`` (as an
    absolute path without links but for a file's name, the run's settings: however it is
    spelled, the same data resumes a run), or a ``"workdir"`` to use or create (not a file,
    nor inside one)."""

    def convert(text):
        text = os.path.expanduser(text)
        if kind == "workdir":
            existing = os.path.abspath(text)
            while not os.path.exists(existing):
                existing = os.path.dirname(existing)
            if existing == os.path.abspath(text) and not os.path.isdir(existing):
                raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
            if not os.path.isdir(existing):
                raise argparse.ArgumentTypeError(
                    f"{text!r} cannot be created: {existing!r} is a file"
                )
            return text
        if not (os.path.isfile if kind == "file" else os.path.isdir)(text):
            raise argparse.ArgumentTypeError(f"{text!r} is not an existing {kind}")
        if kind == "directory":
            return os.path.realpath(text)
        head, name = os.path.split(text)  # its ending tells the file's format
        return os.path.join(os.path.realpath(head or "."), name)  # `..` after a link followed

    return convert


def make_parser():
    parser = ArgumentParser(
        prog=_prog(), description=sys.modules[__package__].__doc__, formatter_class=HelpFormatter
    )
    add = parser.add_argument_group("data").add_argument
    add(
        "--data-dir",
        type=path("directory"),
        metavar="DIR",
        help="folder of one-sentence-per-line files, plain or .gz (default: none, the "
        "generated corpus)",
    )
    add(
        "--train-file",
        metavar="NAME",
        help="training file in --data-dir (default: train.txt, else test.txt)",
    )
    add("--eval-file", default="dev.txt", metavar="NAME", help="evaluation file in --data-dir")
    add(
        "--max-train",
        type=number(int, 1),
        metavar="N",
        help="read training sentences of --data-dir until this many are usable, of 2 to "
        "--max-length words (default: all)",
    )
    add(
        "--episodes",
        type=number(int, 1),
        default=20,
        metavar="N",
        help="generated corpus: training episodes per epoch",
    )
    add(
        "--houses",
        type=number(int, 2),
        default=8,
        metavar="N",
        help=f"generated corpus: houses per episode, at most {input_pipeline.GENERATED_HOUSES}",
    )
    add(
        "--max-vocabulary",
        type=number(int, 3),
        metavar="N",
        help="cap the vocabulary, <pad> and <unk> included (so at least one word beside "
        "them); the rarer words become <unk> (default: no cap)",
    )
    add(
        "--max-length",
        type=number(int, 2),
        default=40,
        metavar="N",
        help="context steps of --data-dir's sentences (the paper: 40); longer ones are "
        f"skipped. The generated corpus takes {input_pipeline.GENERATED_STEPS}",
    )
    add(
        "--embeddings",
        type=path("file"),
        metavar="FILE",
        help="pretrained word vectors: a GloVe text file or a JSON {word: vector} file, "
        "optionally .gz (default: none, vectors drawn from N(0, 0.9^2))",
    )
    add = parser.add_argument_group("model").add_argument
    add(
        "--embedding-dim",
        type=number(int, 1),
        default=100,
        metavar="N",
        help="word vector size without --embeddings",
    )
    add("--units", type=number(int, 1), default=128, metavar="N", help="width of the LSTM")
    add(
        "--attention-units",
        type=number(int, 1),
        default=64,
        metavar="N",
        help="width of the attention pooling and cache reads (the paper: 64)",
    )
    add(
        "--pooling",
        choices=("last", "attention"),
        default="attention",
        help="sentence state: the last LSTM state or attention pooling",
    )
    add(
        "--cache-size",
        type=number(int, 0),
        default=1000,
        metavar="N",
        help="cached states (0: no cache)",
    )
    add("--policy", choices=("heap", "topk"), default="heap", help="which states the cache keeps")
    add(
        "--query",
        choices=("none", "additive", "dot"),
        help="cache read: none (the paper's and the reference code's: one read for every "
        "example), additive (each example's state scores the slots too) or dot (finds one "
        "earlier example); default: dot, or none with --faithful-to-code",
    )
    add(
        "--cache-gate-init",
        choices=("ones", "glorot_uniform"),
        help="initial value of the cache read's gate (default: ones with --query dot, else "
        "glorot_uniform as in the reference code)",
    )
    add(
        "--faithful-to-code",
        action="store_true",
        help="reproduce the reference code (sum pooling, frozen batch norm, ...)",
    )
    add = parser.add_argument_group("training").add_argument
    add("--epochs", type=number(int, 1), default=30, metavar="N", help="number of epochs")
    add(
        "--batch-size",
        type=number(int, 1),
        default=64,
        metavar="N",
        help="sentences per batch and replica with --data-dir (the generated corpus is batched "
        "by episode)",
    )
    add(
        "--learning-rate",
        type=number(float, 0, above=True),
        metavar="RATE",
        help="Adam's learning rate (default: 0.01, the paper, or 1e-3 with --faithful-to-code)",
    )
    add(
        "--clipnorm",
        type=number(float, 0),
        metavar="NORM",
        help="each gradient's norm is clipped to this, as Keras's clipnorm (the other examples' "
        "--clip-norm clips the global norm) (0: none; default: 5, the paper, or none with "
        "--faithful-to-code)",
    )
    add(
        "--weight-decay",
        type=number(float, 0),
        default=1e-5,
        metavar="C",
        help="L2 penalty C * sum ||w||^2 / 2 on every weight",
    )
    add(
        "--seed",
        type=number(int, 0),
        default=0,
        metavar="N",
        help="random seed (weights, data order, generated data)",
    )
    add(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="tf.distribute strategy: auto (mirrored over several GPUs, else the default "
        "strategy), default, mirrored, one_device or multi_worker (several machines, from the "
        "TF_CONFIG environment variable)",
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
        type=path("workdir"),
        metavar="DIR",
        help="run directory: checkpoints (the same command resumes), TensorBoard logs and "
        f"metrics.json (default: {DEFAULT_ROOT}/<pooling>-cache<size>-<changed options>-"
        "<digest>, one per set of options)",
    )
    add(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras progress output: 0 silent, 1 progress bar, 2 one line per epoch",
    )
    return parser


def _prog():
    name = os.path.basename(sys.argv[0])
    return f"python -m {__package__}" if name == "__main__.py" else name


def check_combinations(parser, config):
    """Refuses options given together that would be taken and never used."""
    pooled = config.pooling == "attention" and not config.faithful_to_code
    unread = [  # (options, whether this run leaves them unread, why)
        (
            ("train_file", "eval_file", "max_train", "max_length", "batch_size"),
            not config.data_dir,
            "needs --data-dir (the generated corpus has its own)",
        ),
        (("episodes", "houses"), config.data_dir, "sets the generated corpus, not --data-dir"),
        (
            ("policy", "query", "cache_gate_init"),
            not config.cache_size,
            "sets the cache, which --cache-size 0 leaves out",
        ),
        (
            ("attention_units",),
            not (config.cache_size or pooled),
            "sizes the attention pooling and the cache read; --cache-size 0 with --pooling last "
            "or --faithful-to-code has neither",
        ),
        (("embedding_dim",), config.embeddings, "sizes drawn vectors; --embeddings' have theirs"),
        (
            ("jit_compile",),
            config.strategy == "multi_worker",
            "compiles fit's step with XLA; the multi_worker training loop runs without it",
        ),
    ]
    for names, unused, why in unread:
        for name in names:
            if unused and getattr(config, name) != parser.get_default(name):
                parser.error(f"argument --{name.replace('_', '-')}: {why}")


def parse_args(argv=None, parser=None):
    """The options of ``argv`` (default: the command line's), checked against each other."""
    parser = parser or make_parser()
    config = parser.parse_args(argv)
    check_combinations(parser, config)
    if not config.data_dir:
        houses = input_pipeline.GENERATED_HOUSES
        if config.houses > houses:
            parser.error(f"argument --houses: must be <= {houses}, got {config.houses}")
        return config
    train, evaluation = input_pipeline.data_files(config)
    option = "--train-file" if config.train_file else "--data-dir"
    if not train:
        names = [config.train_file] if config.train_file else ["train.txt", "test.txt"]
        parser.error(
            f"argument {option}: {config.data_dir!r} has no {' or '.join(names)}, plain or .gz"
        )
    if not evaluation:
        parser.error(
            f"argument --eval-file: {config.data_dir!r} has no {config.eval_file}, plain or .gz"
        )
    for blamed, name in ((option, train), ("--eval-file", evaluation)):
        if not os.path.isfile(os.path.join(config.data_dir, name)):  # not read in its place
            parser.error(f"argument {blamed}: {name} in {config.data_dir!r} is not a file")
    return config


def _readable(value):
    """A short, file-name-safe spelling of an option's value (a path by its last part)."""
    text = os.path.basename(str(value).rstrip("/")) or str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]


def run_directory(config, parser=None):
    """``--workdir``, else ``runs/fill_last_word_cache/<pooling>-cache<size>-<options changed
    from their defaults>-<digest of train.run_settings>``: the same command gives the same
    directory (so it resumes), other settings another one."""
    if config.workdir:
        return config.workdir
    parser = parser or make_parser()
    settings = train.run_settings(config)
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    changed = "_".join(
        f"{name}={_readable(value)}"
        for name, value in sorted(vars(config).items())
        if name not in train.RUN_OPTIONS and value != parser.get_default(name)
    )
    if len(changed) > 80:
        changed = changed[:80].rsplit("_", 1)[0]
    label = f"{config.pooling}-cache{config.cache_size}"
    return os.path.join(DEFAULT_ROOT, "-".join(part for part in (label, changed, digest) if part))


def main(argv=None, extra_callbacks=()):
    """Runs the example (`train.train_and_evaluate`), prints ``METRICS <json>`` and returns
    the metrics; a bad option exits with status 2 after one line."""
    parser = make_parser()
    config = parse_args(argv, parser)
    try:
        metrics = train.train_and_evaluate(config, run_directory(config, parser), extra_callbacks)
    except train.OptionError as error:
        parser.error(f"argument {error.option}: {error}")
    print("METRICS " + json.dumps(metrics, sort_keys=True), flush=True)
    return metrics
