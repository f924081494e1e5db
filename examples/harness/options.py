"""Command-line options shared by the example scripts.

The options the examples have in common live here with one spelling each (`OPTIONS`), with
the argparse types that check their values when the command line is parsed. A parser made
by `ArgumentParser` reports a bad value in one line and exits with status 2::

    $ python examples/snli_dual_am_gru.py --epochs 0
    snli_dual_am_gru.py: error: argument --epochs: must be an integer >= 1, got '0' (see --help)

Every option's help shows its default. Each word means one thing in every example, as in
Keras and the model builders: ``--units`` is the width of a recurrent layer (the LSTM under a
memory layer, the SNLI encoder's layer 1), ``--sequence-length`` the time steps of a training
segment, ``--model`` the kind of model. Older spellings (``--kind`` for ``--model``,
``--clipnorm`` for ``--clip-norm``, and those `OPTIONS` lists) still work as aliases left out
of the help, which print a note naming the current spelling.

Example:

>>> parser = ArgumentParser(prog="train.py")
>>> _ = add_option(parser, "epochs", default=3)
>>> _ = add_option(parser, "units", default=100)
>>> args = parser.parse_args(["--epochs", "5", "--units", "64"])
>>> args.epochs, args.units
(5, 64)
>>> parser.format_help().count("(default: 3)")
1
"""

import argparse
import contextlib
import dataclasses
import math
import os
import sys

from examples.harness.training.strategy import STRATEGIES

# -- value types ------------------------------------------------------------------------------


def _integer(text, minimum):
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def positive_int(text):
    """An integer >= 1."""
    return _integer(text, 1)


def non_negative_int(text):
    """An integer >= 0."""
    return _integer(text, 0)


def int_at_least(minimum):
    """An argparse type: an integer >= ``minimum``."""

    def convert(text):
        return _integer(text, minimum)

    convert.__name__ = f"int_at_least_{minimum}"
    return convert


def number_in(low=None, high=None, low_inclusive=True, high_inclusive=False):
    """An argparse type: a finite number within the bounds given (``None``: unbounded)."""
    if low is not None and high is not None:
        allowed = (
            f"in {'[' if low_inclusive else '('}{low:g}, {high:g}{']' if high_inclusive else ')'}"
        )
    elif low is not None:
        allowed = f"{'>=' if low_inclusive else '>'} {low:g}"
    elif high is not None:
        allowed = f"{'<=' if high_inclusive else '<'} {high:g}"
    else:
        allowed = ""

    def convert(text):
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        ok = math.isfinite(value)
        if ok and low is not None:
            ok = value >= low if low_inclusive else value > low
        if ok and high is not None:
            ok = value <= high if high_inclusive else value < high
        if not ok:
            wanted = f"a finite number {allowed}".rstrip()
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        return value

    convert.__name__ = "number"
    return convert


positive_float = number_in(0.0, low_inclusive=False)
positive_float.__doc__ = "A finite number > 0."
non_negative_float = number_in(0.0)
non_negative_float.__doc__ = "A finite number >= 0."
fraction = number_in(0.0, 1.0)
fraction.__doc__ = "A finite number in [0, 1) (e.g. a dropout rate)."


def existing_directory(text):
    """The path of a directory that exists."""
    if not os.path.isdir(text):
        what = "is not a directory" if os.path.exists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {what}")
    return text


def existing_file(text):
    """The path of a file that exists."""
    if not os.path.isfile(text):
        what = "is not a file" if os.path.exists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {what}")
    return text


def directory_to_write(text):
    """The path of a directory to use or create: not a file, nor inside one."""
    path = os.path.abspath(text)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    existing = os.path.dirname(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be created: {existing!r} is a file, not a directory"
        )
    return text


def existing_path(text):
    """The path of a file or directory that exists."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    return text


def output_file(text):
    """The path of a file to write, in a directory that exists."""
    folder = os.path.dirname(text) or "."
    if os.path.isdir(text) or not os.path.isdir(folder):
        what = "is a directory" if os.path.isdir(text) else f"is in no directory ({folder!r})"
        raise argparse.ArgumentTypeError(f"{text!r} {what}")
    return text


def checked_path(check, must_exist=existing_directory):
    """An argparse type: an existing path (``must_exist``) that ``check(path)`` accepts.

    ``check`` raises ``ValueError`` (or ``OSError``) with a message saying what is wrong; the
    message is reported as the option's error.
    """

    def convert(text):
        must_exist(text)
        try:
            check(text)
        except (OSError, ValueError) as error:
            raise argparse.ArgumentTypeError(" ".join(str(error).split())) from error
        return text

    convert.__name__ = "path"
    return convert


# -- the shared options -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Option:
    """One command-line option: its spelling, value type and help.

    Attributes:
        flag: the option's one spelling, e.g. ``"--clip-norm"``.
        help: what it does (the default is appended to it in ``--help``).
        type: the argparse type that checks its value (``None`` for flags).
        choices: the allowed values, or ``None``.
        aliases: older spellings, still accepted but not shown in ``--help``.
        action: an argparse action instead of storing a value (e.g. ``"store_true"``).
        metavar: the value's name in ``--help``.
    """

    flag: str
    help: str
    type: object = None
    choices: tuple = None
    aliases: tuple = ()
    action: object = None
    metavar: str = None


OPTIONS = {
    # data
    "data_dir": Option(
        "--data-dir", "folder of the corpus files", existing_directory, metavar="DIR"
    ),
    "embeddings": Option(
        "--embeddings",
        "pretrained word vectors: a GloVe text file (optionally .gz) or a JSON {word: vector} file",
        existing_file,
        metavar="FILE",
    ),
    "max_train": Option(
        "--max-train",
        "use at most this many training examples (default: all)",
        positive_int,
        metavar="N",
    ),
    "max_length": Option("--max-length", "longest sentence, in tokens", positive_int, metavar="N"),
    # model
    "model": Option("--model", "the model to train", aliases=("--kind",)),
    "units": Option("--units", "width of the recurrent layer", positive_int, metavar="N"),
    "embedding_dim": Option("--embedding-dim", "word vector size", positive_int, metavar="N"),
    "num_copies": Option(
        "--num-copies",
        "redundant copies of the associative memory",
        positive_int,
        aliases=("--copies",),
        metavar="N",
    ),
    "dropout": Option("--dropout", "dropout rate", fraction, metavar="RATE"),
    "init_scale": Option(
        "--init-scale", "kernels start uniform in ±this", positive_float, metavar="SCALE"
    ),
    # training
    "epochs": Option("--epochs", "number of epochs", positive_int, metavar="N"),
    "batch_size": Option(
        "--batch-size", "examples per batch (per replica)", positive_int, metavar="N"
    ),
    "learning_rate": Option(
        "--learning-rate", "initial learning rate", positive_float, metavar="RATE"
    ),
    "clip_norm": Option(
        "--clip-norm",
        "gradient-norm clipping threshold (0: none)",
        non_negative_float,
        aliases=("--clipnorm",),
        metavar="NORM",
    ),
    "seed": Option(
        "--seed", "random seed (weights, data order, generated data)", non_negative_int, metavar="N"
    ),
    "strategy": Option(
        "--strategy",
        "tf.distribute strategy: auto (mirrored over several "
        "GPUs, else the default strategy), default, mirrored, one_device or "
        "multi_worker (several machines, from the TF_CONFIG environment "
        "variable; see docs/backends.rst)",
        choices=STRATEGIES,
    ),
    "jit": Option(
        "--jit", "compile the train step with XLA", action=argparse.BooleanOptionalAction
    ),
    "mixed_precision": Option(
        "--mixed-precision", "train under the mixed_float16 policy", action="store_true"
    ),
    "workdir": Option(
        "--workdir",
        "run directory: checkpoints (the same command resumes), TensorBoard logs and metrics.json",
        directory_to_write,
        metavar="DIR",
    ),
    "verbose": Option(
        "--verbose",
        "Keras progress output: 0 silent, 1 progress bar, 2 one line per epoch",
        int,
        choices=(0, 1, 2),
    ),
}

PRESET_NOTE = "a --config preset sets its own"


class DeprecatedAlias(argparse.Action):
    """Stores the value of an old spelling in the option's ``dest`` and says so on stderr
    (a flag's alias, ``nargs=0``, stores its ``const``)."""

    def __init__(self, option_strings, dest, replacement=None, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(self, parser, namespace, values, option_string=None):
        print(
            f"{parser.prog}: note: {option_string} is an old spelling of {self.replacement}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_option(parser, name, default=None, help=None, dest=None, preset=False, **overrides):
    """Adds the shared option ``name`` (a key of `OPTIONS`) to ``parser`` or an argument group.

    Args:
        parser: an `argparse.ArgumentParser` or argument group.
        name: the option's key in `OPTIONS`.
        default: its default value.
        help: the help text, replacing the shared one (the default is appended to it; when
            ``default`` is ``None`` the text must say what happens without the option).
        dest: the attribute of the parsed namespace (default: ``name``).
        preset: the default comes from a ``--config`` preset when one is given; the help
            says so.
        **overrides: other `Option` fields to replace, e.g. ``type`` or ``choices``.

    Returns:
        The argparse action.
    """
    option = dataclasses.replace(OPTIONS[name], **overrides)
    dest = dest or name
    text = help or option.help
    if preset:
        text += f" (default: %(default)s; {PRESET_NOTE})"
    kwargs = {"default": default, "help": text, "dest": dest}
    if option.action is not None:
        kwargs["action"] = option.action
    else:
        kwargs.update(type=option.type, choices=option.choices, metavar=option.metavar)
    action = add_argument(parser, option.flag, **kwargs)
    for alias in option.aliases:
        parser.add_argument(
            alias,
            action=DeprecatedAlias,
            replacement=option.flag,
            dest=dest,
            default=argparse.SUPPRESS,
            type=option.type,
            choices=option.choices,
            help=argparse.SUPPRESS,
        )
    return action


def add_run_options(parser, seed, default_workdir, jit=False):
    """Adds how a run executes and where it is kept: ``--seed``, ``--strategy``,
    ``--jit/--no-jit``, ``--mixed-precision``, ``--workdir`` and ``--verbose``.

    Args:
        parser: an `argparse.ArgumentParser` or argument group.
        seed: the default seed.
        default_workdir: how the default run directory is named, for the help text.
        jit: whether the train step is compiled with XLA by default.
    """
    add_option(parser, "seed", default=seed)
    add_option(parser, "strategy", default="auto")
    add_option(parser, "jit", default=jit)
    add_option(parser, "mixed_precision", default=False)
    add_option(
        parser,
        "workdir",
        help="run directory: checkpoints (the same command resumes), "
        f"TensorBoard logs and metrics.json (default: {default_workdir}, one per configuration)",
    )
    add_option(parser, "verbose", default=1)


# -- the parser -------------------------------------------------------------------------------


def add_argument(parser, *flags, **kwargs):
    """``parser.add_argument(*flags, **kwargs)``, with the default appended to the help.

    The help gets `` (default: <value>)`` unless it already names the default or the
    default is ``None`` (then the help must say what happens without the option).

    Returns:
        The argparse action.
    """
    action = parser.add_argument(*flags, **kwargs)
    text = action.help or ""
    if action.help != argparse.SUPPRESS and action.default not in (None, argparse.SUPPRESS):
        if "%(default)" not in text:
            action.help = text + " (default: %(default)s)"
    return action


class ParsedOptions(argparse.Namespace):
    """The parsed options, which also know the parser's defaults.

    ``defaults`` (option name → default) is kept out of ``vars()``, so the options themselves
    stay what `vars` and `examples.harness.run_directory.run_settings` see.
    """

    __slots__ = ("defaults",)


class ArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors are one line, with exit status 2.

    Its description is shown as written (`argparse.RawDescriptionHelpFormatter`). It parses
    into `ParsedOptions`, whose ``defaults`` name what the run directory calls a changed
    option.
    """

    def __init__(self, *args, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def get_default(self, dest):
        """The default of the option stored in ``dest``: that of the option itself, not the
        `argparse.SUPPRESS` of an old spelling of it (argparse's own skips a default of
        `None` and takes the next option with the same ``dest``)."""
        for action in self._actions:
            if action.dest == dest and action.default is not argparse.SUPPRESS:
                return action.default
        return self._defaults.get(dest)

    def parse_known_args(self, args=None, namespace=None):
        if namespace is None:
            namespace = ParsedOptions()
        parsed, extras = super().parse_known_args(args, namespace)
        if isinstance(parsed, ParsedOptions):
            parsed.defaults = {name: self.get_default(name) for name in vars(parsed)}
        return parsed, extras

    def error(self, message):
        """Prints ``<prog>: error: <message> (see --help)`` on stderr and exits with 2."""
        message = " ".join(str(message).split())
        hint = " (see --help)" if self.add_help else ""
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")


@contextlib.contextmanager
def reported_as(option, prog=None):
    """Reports a bad file read inside the block as a command-line error about ``option``.

    A ``ValueError`` or ``OSError`` raised in the block (a reader refusing an empty, corrupt
    or missing file), or an ``ImportError`` (an optional dependency the option needs), is
    printed as one line, ``<prog>: error: argument <option>: <message>``, and the program
    exits with status 2.

    Args:
        option: the option that named the file, e.g. ``"--data-dir"``.
        prog: the program name (default: the script's file name).
    """
    try:
        yield
    except (ImportError, OSError, ValueError) as error:
        refuse(option, str(error), prog, cause=error)


def refuse(option, message, prog=None, cause=None):
    """Exits with status 2 after one line, ``<prog>: error: argument <option>: <message>``,
    as argparse does for a bad value: for a value found wrong after parsing.

    Args:
        option: the option at fault, e.g. ``"--strategy"``.
        message: what is wrong (its white space is folded onto one line).
        prog: the program name (default: the script's file name).
        cause: the exception behind the refusal, chained to the `SystemExit` (default: a
            ``ValueError`` of ``message``).
    """
    prog = prog or os.path.basename(sys.argv[0])
    message = " ".join(str(message).split())
    print(f"{prog}: error: argument {option}: {message}", file=sys.stderr)
    raise SystemExit(2) from (cause or ValueError(message))
