"""The SNLI example's command line: ``python -m snli --help``."""

import os

# A quiet start, before anything imports TensorFlow: it prints C++ start-up lines to the
# process's standard error on import, which would break a bad option's one-line error.
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

from . import corpora, input_pipeline, models, train  # noqa: E402

DEFAULT_ROOT = os.path.join("runs", "snli_dual_am_gru")


# The options 0.2 spelled otherwise, and their spelling since 0.3.
RENAMED = {
    "--kind": "--model",
    "--hidden": "--units",
    "--hidden-units": "--units",
    "--copies": "--num-copies",
    "--freeze-embeddings": "--no-train-embeddings",
    "--clipnorm": "--clip-norm",
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


def number(kind, minimum, below=None, above=False):
    """An argparse type: a finite ``kind`` (`int` or `float`) >= ``minimum`` (> with
    ``above``), and < ``below`` where given."""

    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        low = value > minimum if above else value >= minimum
        if not (math.isfinite(value) and low and (below is None or value < below)):
            what = "an integer" if kind is int else "a finite number"
            bound = f"{'>' if above else '>='} {minimum}" + (f" and < {below}" if below else "")
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, got {text!r}")
        return value

    return convert


def snli_files(text):
    """An argparse type: a folder (or ``snli_1.0.zip``, or a folder holding only that archive)
    holding every split of SNLI, as an absolute path without links (the run's settings:
    however it is spelled, the same data resumes a run); ``~`` expanded."""
    text = folder(text)
    archive = os.path.join(text, "snli_1.0.zip")
    if os.path.isdir(text) and not corpora.find_files(text) and os.path.isfile(archive):
        text = archive
    try:
        corpora.check_files(text)
    except (OSError, ValueError) as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def existing_file(text):
    if not os.path.isfile(text := folder(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing file")
    return text


def folder(text):
    """An argparse type: a path as the run records it (absolute, ``~`` expanded, no links)."""
    head, name = os.path.split(os.path.expanduser(text))  # `..` after a link: where it points
    path = os.path.join(os.path.realpath(head or "."), name)  # a file's name tells its format
    return os.path.realpath(path) if os.path.isdir(path) else path


def workdir(text):
    """An argparse type: a directory to use or create (not a file, nor inside one)."""
    text = os.path.expanduser(text)
    existing = os.path.abspath(text)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if existing == os.path.abspath(text) and not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    if not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {existing!r} is a file")
    return text


def make_parser():
    description = sys.modules[__package__].__doc__.split("\n\n")[0]
    parser = ArgumentParser(prog=_prog(), description=description, formatter_class=HelpFormatter)
    positive = number(int, 1)
    count = dict(type=positive, metavar="N")  # a positive number
    add = parser.add_argument_group("data").add_argument
    add(
        "--source",
        choices=input_pipeline.SOURCES,
        default="auto",
        help="auto: --data-dir if given, else the prepared tensorflow-datasets snli, else the "
        "generated corpus; files: --data-dir only; tfds: tensorflow-datasets only; generated: "
        "the generated corpus",
    )
    add(
        "--data-dir",
        type=snli_files,
        metavar="PATH",
        help="official SNLI 1.0 files (snli_1.0_<split>.jsonl or .txt, in a folder, or the "
        "snli_1.0.zip archive or a folder holding it) or InferSent files (s1.<split>, "
        "s2.<split>, labels.<split>) (default: none, see --source)",
    )
    add(
        "--tfds-data-dir",
        type=folder,
        metavar="DIR",
        help="tensorflow-datasets data_dir (default: tensorflow-datasets' own, "
        "~/tensorflow_datasets)",
    )
    add(
        "--download",
        action="store_true",
        help="let tensorflow-datasets download and prepare SNLI (needs internet and "
        "tensorflow-datasets; --source auto or tfds, without --data-dir). Without it nothing "
        "is downloaded",
    )
    add(
        "--train-size",
        choices=tuple(input_pipeline.GENERATED_SIZES),
        default="medium",
        help="size of the generated corpus",
    )
    add("--max-train", **count, help="use at most this many training pairs (default: all)")
    add("--max-length", **count, default=64, help="truncate sentences to this many tokens")
    add(
        "--padding",
        choices=input_pipeline.PADDINGS,
        default="bucket",
        help="bucket: pad each batch to a multiple of 8 steps; fixed: pad every batch to "
        "--max-length (one shape, one XLA compilation)",
    )
    add(
        "--embeddings",
        type=existing_file,
        metavar="FILE",
        help="pretrained word vectors: a GloVe text file or a JSON {word: vector} file, "
        "optionally .gz (default: none, vectors drawn from N(0, 1))",
    )
    add(
        "--train-embeddings",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tune the word vectors (--no-train-embeddings: keep them fixed)",
    )
    add = parser.add_argument_group("model").add_argument
    add(
        "--model",
        choices=models.KINDS,
        default="dual_am_gru",
        help="layer 1: gru, am_gru (associative memory GRU) or dual_am_gru (AM-GRU over the "
        "premise, Dual AM-GRU over the hypothesis); or word_by_word: an LSTM over the premise "
        "and an LSTM with word-by-word attention over the hypothesis, without layer 2",
    )
    add(
        "--units",
        **count,
        default=100,
        help="width of layer 1 (the paper: 100 for the Dual AM-GRU, 108 AM-GRU, 126 GRU, 100 "
        "word_by_word)",
    )
    add("--top-units", **count, help="width of layer 2 and of the classifier (default: --units)")
    add(
        "--embedding-dim",
        **count,
        default=50,
        help="word vector size without --embeddings (the paper: 300d GloVe)",
    )
    add("--num-copies", **count, default=8, help="redundant copies of the memory (the paper: 8)")
    add(
        "--dual-key",
        choices=("paper", "released"),
        default="paper",
        help="the Dual AM-GRU's read key: as in the paper or as in the released code",
    )
    add(
        "--dropout",
        type=number(float, 0, below=1),
        default=0.1,
        metavar="RATE",
        help="dropout rate on the word vectors",
    )
    add(
        "--fused-loop",
        action=argparse.BooleanOptionalAction,
        help="run the (Dual) AM-GRU loops fused, with a hand-written backward: faster steps, "
        "the same results as Keras's loop up to float rounding (default: each layer runs it "
        "where it supports the layer's options, e.g. not with --dual-key released; "
        "--no-fused-loop: Keras's loop)",
    )
    add(
        "--init-scale",
        type=number(float, 0, above=True),
        metavar="SCALE",
        help="kernels start uniform in ±this (default: 0.05, the paper, on real data; 0.2 on "
        "the generated corpus, whose short run needs a better-conditioned start)",
    )
    add = parser.add_argument_group("training").add_argument
    add("--epochs", **count, default=4, help="dev checks (epochs of --eval-every batches)")
    add(
        "--patience",
        **count,
        help="stop when the dev accuracy has not improved by 0.001 for N dev checks "
        "(default: run all --epochs)",
    )
    add(
        "--eval-every",
        **count,
        help="batches between dev checks, an epoch of the schedule (default: one pass over "
        "the training data; the paper: 1000)",
    )
    add("--batch-size", type=positive, default=50, metavar="N", help="pairs per batch and replica")
    add(
        "--learning-rate",
        type=number(float, 0, above=True),
        metavar="RATE",
        help="Adam's learning rate, halved after a dev check that does not improve by 0.001 "
        "(default: 1e-3, the paper, on real data; 3e-3 on the generated corpus)",
    )
    add(
        "--clip-norm",
        type=number(float, 0),
        default=5.0,
        metavar="NORM",
        help="the gradients' global norm is clipped to this (0: none)",
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
        type=workdir,
        metavar="DIR",
        help="run directory: checkpoints (the same command resumes), TensorBoard logs and "
        f"metrics.json (default: {DEFAULT_ROOT}/<model>-<changed options>-<digest>, one per "
        "set of options)",
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


def parse_args(argv=None, parser=None):
    """The options of ``argv`` (default: the command line's), checked against each other."""
    parser = parser or make_parser()
    config = parser.parse_args(argv)
    source, data_dir = config.source, config.data_dir
    if source == "files" and not data_dir:
        parser.error("argument --source: 'files' needs --data-dir")
    if data_dir and source in ("tfds", "generated"):
        parser.error(
            f"argument --data-dir: is read with --source auto or files, not with --source {source}"
        )
    if config.tfds_data_dir is not None:
        if data_dir or source in ("files", "generated"):
            parser.error(
                "argument --tfds-data-dir: is read with --source auto or tfds, without --data-dir"
            )
        if not config.download and not os.path.isdir(config.tfds_data_dir):
            parser.error(
                f"argument --tfds-data-dir: no folder {config.tfds_data_dir!r} (with "
                "--download, tensorflow-datasets prepares SNLI there)"
            )
    if config.download and (source in ("files", "generated") or data_dir):
        parser.error(
            "argument --download: fetches SNLI through tensorflow-datasets; use --source auto "
            "or tfds without --data-dir"
        )
    check_combinations(parser, config)
    return config


def check_combinations(parser, config):
    """Refuses options given together that would be taken and never used."""
    unread = [
        (name, config.model not in kinds, f"is read by --model {' or '.join(kinds)} only")
        for name, kinds in models.READERS.items()
    ]
    unread += [
        (
            "train_size",
            config.data_dir or config.download or config.tfds_data_dir or config.source == "tfds",
            "sizes the generated corpus, which --data-dir or tensorflow-datasets data replace",
        ),
        ("embedding_dim", config.embeddings, "sizes drawn vectors; --embeddings' have theirs"),
        (
            "jit_compile",
            config.strategy == "multi_worker",
            "compiles fit's step with XLA; the multi_worker training loop runs without it",
        ),
    ]
    for name, unused, why in unread:
        if unused and getattr(config, name) != parser.get_default(name):
            parser.error(f"argument --{name.replace('_', '-')}: {why}")


def _readable(value):
    """A short, file-name-safe spelling of an option's value (a path by its last part)."""
    text = os.path.basename(str(value).rstrip("/\\")) or str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]


def run_directory(config, resolved, parser=None):
    """``--workdir``, else ``runs/snli_dual_am_gru/<model>-<options changed from their
    defaults>-<digest of train.run_settings>``: the same command gives the same directory (so
    that it resumes), other settings another one."""
    if config.workdir:
        return config.workdir
    parser = parser or make_parser()
    settings = json.dumps(train.run_settings(config, resolved), sort_keys=True)
    digest = hashlib.sha1(settings.encode("utf-8")).hexdigest()[:8]
    changed = "_".join(
        f"{name}={_readable(value)}"
        for name, value in sorted(vars(config).items())
        if name not in train.RUN_OPTIONS and value != parser.get_default(name)
    )
    if len(changed) > 80:
        changed = changed[:80].rsplit("_", 1)[0]
    name = "-".join(part for part in (config.model, changed, digest) if part)
    return os.path.join(DEFAULT_ROOT, name)


def main(argv=None, extra_callbacks=()):
    """Runs the example (`train.train_and_evaluate`), prints ``METRICS <json>`` and returns the
    metrics; a bad option exits with status 2 after one line."""
    parser = make_parser()
    config = parse_args(argv, parser)
    try:
        metrics = train.train_and_evaluate(
            config, lambda resolved: run_directory(config, resolved, parser), extra_callbacks
        )
    except train.OptionError as error:
        parser.error(str(error))
    print("METRICS " + json.dumps(metrics, sort_keys=True), flush=True)
    return metrics
