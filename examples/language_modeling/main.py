"""The command line: ``python -m language_modeling [options]`` (``--help`` lists them)."""

from . import startup  # noqa: F401  (first: a quiet TensorFlow start)

# isort: split

import argparse
import hashlib
import json
import math
import os
import pathlib
import re
import sys

from tf_memlayers.losses import LOSS_REDUCTIONS
from tf_memlayers.models import DANILUK_DEFAULTS as PAPER
from tf_memlayers.training import STRATEGIES

from . import configs, input_pipeline, models, train

DEFAULT_ROOT = "runs/language_modeling"


# The options 0.2 spelled otherwise, and their spelling since 0.3.
RENAMED = {
    "--kind": "--model",
    "--hidden": "--units",
    "--hidden-units": "--units",
    "--seq-len": "--sequence-length",
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
    """Every option's help ends with its default, which a ``--config`` preset may set."""

    def _get_help_string(self, action):
        preset = "; a --config preset sets its own" if action.dest in PRESET_OPTIONS else ""
        if action.default is None and preset:
            return f"{action.help} (default: none{preset})"
        if action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return action.help
        return f"{action.help} (default: %(default)s{preset})"


PRESET_OPTIONS = set().union(*configs.PRESETS.values())


def checked(convert, test, allowed):
    """An argparse type: ``convert(text)``, refused unless ``test`` accepts it."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not test(value):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}")
        return value

    return parse


positive_int = checked(int, lambda v: v >= 1, "an integer >= 1")
at_least_two = checked(int, lambda v: v >= 2, "an integer >= 2")
non_negative_int = checked(int, lambda v: v >= 0, "an integer >= 0")
positive = checked(float, lambda v: 0 < v < math.inf, "a finite number > 0")
non_negative = checked(float, lambda v: 0 <= v < math.inf, "a finite number >= 0")
fraction = checked(float, lambda v: 0 <= v < 1, "a finite number in [0, 1)")
finite = checked(float, math.isfinite, "a finite number")
decay = checked(float, lambda v: 0 < v <= 1, "a finite number in (0, 1]")


def corpus_directory(text):
    """A folder holding one of the corpora (`input_pipeline.corpus_name`), as an absolute path
    without links (the run's settings: however it is spelled, the same folder resumes a run)."""
    text = os.path.expanduser(text)
    try:
        input_pipeline.corpus_name(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return os.path.realpath(text)


def directory_to_write(text):
    """A folder that exists or can be made: not a file, nor inside one (``~`` expanded)."""
    text = os.path.expanduser(text)
    path = pathlib.Path(text).absolute()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a directory")
    parent = next(p for p in path.parents if p.exists())
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} cannot be created: {str(parent)!r} is a file")
    return text


def file_to_write(text):
    """A file in a folder that exists and may be written (``~`` expanded), checked before the
    run, which writes it at its end."""
    text = os.path.expanduser(text)
    # Its folder as written, and the one a link at its end points into.
    folders = (os.path.dirname(text) or ".", os.path.dirname(os.path.realpath(text)))
    if os.path.isdir(text) or not all(map(os.path.isdir, folders)):
        raise argparse.ArgumentTypeError(f"{text!r} is a directory or in none that exists")
    if not os.access(folders[1], os.W_OK) or (
        os.path.exists(text) and not os.access(text, os.W_OK)
    ):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written (no permission)")
    return text


def make_parser():
    parser = ArgumentParser(description=sys.modules[__package__].__doc__.split("\n\n")[0])
    parser.formatter_class = HelpFormatter
    if os.path.basename(sys.argv[0]) == "__main__.py":
        parser.prog = f"python -m {__package__.rsplit('.', 1)[-1]}"
    presets = ", ".join(configs.PRESETS)
    parser.add_argument(
        "--config",
        choices=tuple(configs.PRESETS),
        metavar="NAME",
        help=f"a recipe of configs.py ({presets}) whose settings become the defaults "
        "(default: none, the paper's settings)",
    )
    add = parser.add_argument_group("data").add_argument
    add(
        "--data-dir",
        type=corpus_directory,
        help="folder with Penn Treebank (ptb.{train,valid,test}.txt), WikiText-2 "
        "(wiki.{train,valid,test}.tokens) or CBT (cbt_*.txt) files, each optionally .gz "
        "(default: the embedded generated corpus)",
    )
    add("--generated-tokens", type=positive_int, default=150_000, help="generated corpus size")
    add("--no-document-resets", action="store_true", help="read each split as one document")
    add(
        "--pack",
        action="store_true",
        help="documents back to back, the model restarting a row where one starts, not each "
        "padded to a segment start",
    )
    add = parser.add_argument_group("model").add_argument
    add("--model", choices=models.KINDS, default="attention", help="the memory on the LSTM")
    add("--form", choices=models.FORMS, default="parallel", help="sequence layer or RNN cell")
    add("--units", type=positive_int, default=PAPER["units"], help="width of each LSTM layer")
    add("--embedding-dim", type=positive_int, default=PAPER["embedding_dim"], help="word vectors")
    add("--num-layers", "--layers", type=positive_int, default=1, help="stacked LSTM layers")
    add("--window", type=positive_int, default=PAPER["window"], help="attention window")
    add("--ngram", type=at_least_two, default=PAPER["ngram"], help="N of the N-gram RNN")
    add(
        "--sizes",
        type=positive_int,
        nargs="+",
        help="piece sizes of the top LSTM's output, key first (default: the memory's equal split)",
    )
    add("--dropout", type=fraction, default=0.0, help="rate on the non-recurrent connections")
    add("--variational-dropout", action="store_true", help="one dropout mask per sequence")
    add("--recurrent-dropout", type=fraction, default=0.0, help="rate on the LSTM states")
    add("--tie-weights", action="store_true", help="the embedding is the output layer too")
    add("--init-scale", type=positive, default=PAPER["init_scale"], help="weights U(-s, s)")
    add("--forget-bias", type=finite, default=PAPER["forget_bias"], help="LSTM forget-gate bias")
    add = parser.add_argument_group("training").add_argument
    add("--epochs", type=positive_int, default=3, help="number of epochs")
    add("--batch-size", type=positive_int, default=PAPER["batch_size"], help="rows per batch")
    add("--sequence-length", type=positive_int, default=PAPER["sequence_length"], help="BPTT")
    add("--optimizer", choices=("adam", "sgd"), default="adam", help="Adam or plain SGD")
    add("--learning-rate", type=positive, default=PAPER["learning_rate"], help="initial rate")
    add("--lr-decay", type=decay, default=1.0, help="factor per epoch after --full-rate-epochs")
    add("--full-rate-epochs", type=positive_int, help="epochs before --lr-decay")
    add(
        "--patience",
        type=positive_int,
        help="halve the learning rate after each epoch without a lower validation perplexity, "
        "stop after N such epochs in a row and score the best epoch's weights (default: none)",
    )
    add(
        "--loss-reduction",
        choices=LOSS_REDUCTIONS,
        default="token_mean",
        help="token_mean: mean NLL per token; sum_over_time: summed over the BPTT steps "
        "(Zaremba et al.)",
    )
    add("--clip-norm", type=non_negative, default=PAPER["clip_norm"], help="0: no clipping")
    add("--max-train-batches", type=positive_int, help="batches per epoch (default: all)")
    add(
        "--strategy",
        choices=STRATEGIES,
        default="auto",
        help="tf.distribute strategy; the model trains on one replica (several are refused)",
    )
    add(
        "--jit-compile",
        "--jit",
        action=argparse.BooleanOptionalAction,
        help="XLA train step (default: on, but off under --strategy multi_worker, whose "
        "training loop runs without XLA)",
    )
    add("--mixed-precision", action="store_true", help="the mixed_float16 policy")
    add("--seed", type=non_negative_int, default=0, help="weights, dropout, generated corpus")
    add = parser.add_argument_group("run").add_argument
    add(
        "--workdir",
        type=directory_to_write,
        help="checkpoints (the same command resumes), TensorBoard logs and metrics.json "
        f"(default: {DEFAULT_ROOT}/<model>-<changed options>-<digest>, one per configuration)",
    )
    add("--probe-sentence", help="words of the attention heatmap (default: validation text)")
    add("--probe-length", type=positive_int, default=25, help="words of the default probe")
    add(
        "--generate",
        type=non_negative_int,
        default=0,
        help="after training, continue --prompt by N words (a finished run only generates: "
        "run its command again)",
    )
    add("--prompt", help="words to continue (default: 5 words of the validation split)")
    add("--temperature", type=non_negative, default=1.0, help="0: the most likely word")
    add("--generate-seed", type=non_negative_int, default=0, help="seed of the draws")
    add("--metrics-file", type=file_to_write, help="a copy of metrics.json (default: none)")
    add("--verbose", type=int, choices=(0, 1, 2), default=1, help="Keras's progress output")
    return parser


def check_combinations(parser, a):
    """Refuses options given together that would be taken and never used. An option is given
    when its value is not its default (a --config preset's, where the preset sets one)."""

    def given(name):
        return getattr(a, name) != parser.get_default(name)

    def refuse(name, why):
        parser.error(f"argument --{name.replace('_', '-')}: {why}")

    if not a.generate:
        for name in ("prompt", "temperature", "generate_seed"):
            if given(name):
                refuse(name, "is read by --generate N alone; give it too")
    elif given("generate_seed") and a.temperature == 0:
        refuse("generate_seed", "seeds the draws; --temperature 0 takes the most likely word")
    if a.data_dir is not None and given("generated_tokens"):
        refuse("generated_tokens", "sizes the generated corpus, which --data-dir replaces")
    if a.pack and a.no_document_resets:
        refuse("pack", "restarts at documents; --no-document-resets has none")
    if a.model == "lstm":
        for name, what in (("sizes", "sizes a memory's pieces"), ("form", "is a memory's form")):
            if given(name):
                refuse(name, f"{what}; --model lstm has no memory")
    if a.model != "ngram" and given("ngram"):
        refuse("ngram", f"is the N of --model ngram; --model {a.model} does not read it")
    if a.model not in models.ATTENTION_KINDS:
        for name in ("window", "probe_sentence", "probe_length"):
            if given(name):
                refuse(name, f"is read by window attention; --model {a.model} has none")
    elif given("probe_sentence") and given("probe_length"):
        refuse("probe_length", "sizes the default probe, which --probe-sentence replaces")
    if a.variational_dropout and not a.dropout:
        refuse("variational_dropout", "shares one --dropout mask over a sequence; --dropout is 0")
    if a.lr_decay != 1.0 and a.full_rate_epochs is None:
        refuse("lr_decay", "applies after --full-rate-epochs N, which is not set")
    if given("full_rate_epochs") and a.lr_decay == 1.0 and not a.patience:
        refuse("full_rate_epochs", "starts --lr-decay, which is 1 (no decay); give it too")
    if a.patience and a.full_rate_epochs is not None:
        undone = f"its halving would be undone by --full-rate-epochs {a.full_rate_epochs}"
        if given("full_rate_epochs"):
            refuse("patience", f"{undone}; give one of the two")
        else:
            preset = f"which --config {a.config} sets and no option unsets"
            refuse("patience", f"{undone}, {preset}; drop --config or --patience")
    if a.jit_compile and a.strategy == "multi_worker":
        refuse(
            "jit_compile",
            "compiles fit's step with XLA; the multi_worker training loop runs without it",
        )


def _readable(value):
    """A short, file-name-safe spelling of an option's value."""
    if isinstance(value, list):
        return "+".join(map(_readable, value))
    text = os.path.basename(str(value).rstrip("/")) or str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]


def run_directory(args, defaults):
    """``DEFAULT_ROOT/<model>-<options changed from their defaults>-<digest of the settings>``:
    the same command gives the same directory (so it resumes), other settings another one."""
    settings = train.run_settings(args)
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    changed = "_".join(
        f"{name}={_readable(value)}"
        for name, value in settings.items()
        if name in defaults and value != defaults[name]
    )
    if len(changed) > 80:
        changed = changed[:80].rsplit("_", 1)[0]
    return os.path.join(DEFAULT_ROOT, "-".join(p for p in (args.model, changed, digest) if p))


def parse_args(argv=None, parser=None):
    parser = parser or make_parser()
    first = argparse.ArgumentParser(add_help=False)  # the preset's defaults first
    first.add_argument("--config")
    config = first.parse_known_args(argv)[0].config
    parser.set_defaults(**configs.PRESETS.get(config, {}))
    args = parser.parse_args(argv)
    check_combinations(parser, args)
    args.jit_compile = (
        args.strategy != "multi_worker" if args.jit_compile is None else args.jit_compile
    )
    defaults = {name: parser.get_default(name) for name in vars(args)}
    args.workdir = args.workdir or run_directory(args, defaults)
    return args


def main(argv=None):
    parser = make_parser()
    args = parse_args(argv, parser)
    try:
        metrics = train.train_and_evaluate(args, args.workdir)
    except train.OptionError as error:
        parser.error(error)
    if "generation" in metrics:
        print("{prompt} >> {generated}".format(**metrics["generation"]))
    print("METRICS " + json.dumps(metrics, sort_keys=True), flush=True)
    return metrics
