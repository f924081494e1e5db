"""Run directories of the example scripts: one per set of options, named after the options
changed from their defaults, with a digest of the settings the run computes with."""

import hashlib
import json
import os
import re

from examples.harness.options import ParsedOptions
from examples.harness.training.run_files import plain_json

# Options of the example scripts that say how long or how verbosely to run, or where to keep
# the run, but not what the run computes: a run resumed with other values is the same run.
RUN_OPTIONS = ("epochs", "verbose", "workdir", "strategy", "jit", "no_jit")


def run_settings(args, run_options=RUN_OPTIONS, added_options=()):
    """The parsed command-line options that define a run (all but ``run_options``).

    Args:
        args: an `argparse.Namespace` (or a dict).
        run_options: option names left out.
        added_options: names of options that define a run only when set to other values
            than their defaults (known when ``args`` is a
            `examples.harness.options.ParsedOptions`): options added to a script after runs
            were named, so that the command lines without them keep their settings, and
            their run directories.

    Returns:
        A dict with JSON values (paths and other objects as strings), sorted by name.
    """
    values = args if isinstance(args, dict) else vars(args)
    defaults = getattr(args, "defaults", None) or {}
    at_default = {
        name
        for name in added_options
        if name in values and name in defaults and values[name] == defaults[name]
    }
    return plain_json(
        {k: v for k, v in sorted(values.items()) if k not in run_options and k not in at_default}
    )


def recorded_names(args, names):
    """``args`` with some options under the names that run settings record them by.

    A run's settings, digest and directory name are recorded by option name. An option whose
    attribute is not its recorded name is recorded under that name (and, where its meaning
    was turned around, with its value converted), so that the run directories already on disk
    keep their names and resume.

    Args:
        args: an `examples.harness.options.ParsedOptions` (or an `argparse.Namespace`).
        names: dict, option attribute -> the name run settings record it under, or a pair
            ``(name, convert)`` whose function ``convert`` turns the option's value (and its
            default) into the recorded one.

    Returns:
        A `ParsedOptions` with the values (and the parser's defaults) of ``args``, the options
        of ``names`` renamed.

    Example:

    >>> args = ParsedOptions(model="gru", units=8, train_embeddings=False)
    >>> args.defaults = {"model": "dual_am_gru", "units": 8, "train_embeddings": True}
    >>> names = {"model": "kind", "train_embeddings": ("freeze_embeddings", lambda v: not v)}
    >>> recorded = recorded_names(args, names)
    >>> vars(recorded)
    {'kind': 'gru', 'units': 8, 'freeze_embeddings': True}
    >>> recorded.defaults["kind"], recorded.defaults["freeze_embeddings"]
    ('dual_am_gru', False)
    """

    def record(name, value):
        recorded = names.get(name, name)
        if isinstance(recorded, tuple):
            recorded, convert = recorded
            value = convert(value)
        return recorded, value

    recorded = ParsedOptions(**dict(record(name, value) for name, value in vars(args).items()))
    defaults = getattr(args, "defaults", None) or {}
    recorded.defaults = dict(record(name, value) for name, value in defaults.items())
    return recorded


def recorded_spellings(names, options=()):
    """How an error names a run's settings: by the option a user types, also where
    `recorded_names` records the option under another name.

    Args:
        names: dict as in `recorded_names`.
        options: the attribute names of the script's options (``vars(args)``), each spelled
            ``--option``.

    Returns:
        Dict, recorded name -> ``--option`` (or ``"<name> (the opposite of --option)"`` for a
        value turned around). Settings that are no option (a value resolved from the data)
        are not in it.

    Example:

    >>> spellings = recorded_spellings({"model": "kind", "train_embeddings": ("frozen", None)})
    >>> spellings["kind"], spellings["frozen"]
    ('--model', 'frozen (the opposite of --train-embeddings)')
    >>> recorded_spellings({"model": "kind"}, ["model", "num_copies"])["num_copies"]
    '--num-copies'
    """
    spellings = {name: "--" + name.replace("_", "-") for name in options}
    for option, recorded in names.items():
        flag = "--" + option.replace("_", "-")
        if isinstance(recorded, tuple):
            spellings[recorded[0]] = f"{recorded[0]} (the opposite of {flag})"
        else:
            spellings[recorded] = flag
    return spellings


def _readable(value):
    """A short, file-name-safe spelling of an option's value."""
    if isinstance(value, (list, tuple)):
        return "+".join(_readable(v) for v in value)
    text = os.path.basename(str(value).rstrip("/\\")) or str(value)
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text)[:24]


def run_name(settings, label=None, changed=None):
    """``<label>-<option=value>_..._<option=value>-<digest>`` for a run.

    Args:
        settings: the run's resolved settings (what it computes with, after presets and
            defaults that depend on the data are applied); the digest is taken over them.
        label: optional leading word, e.g. the model kind.
        changed: optional dict of the options the user set to other values than their
            defaults; they make the name readable (at most about 80 characters of them).

    Returns:
        The directory name. Equal settings give equal names, other settings other digests.
    """
    text = json.dumps(plain_json(settings), sort_keys=True)
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    readable = "_".join(f"{name}={_readable(v)}" for name, v in sorted((changed or {}).items()))
    if len(readable) > 80:
        readable = readable[:80].rsplit("_", 1)[0]
    return "-".join(part for part in (label, readable, digest) if part)


def run_directory(root, settings, label=None, changed=None):
    """``root/`` `run_name`: one directory per distinct run.

    Running the same command again gives the same directory (so it resumes); changing any
    setting gives another one (so runs never mix).
    """
    return os.path.join(root, run_name(settings, label, changed))


def changed_options(args, run_options=RUN_OPTIONS, added_options=()):
    """The options of ``args`` (`run_settings`) whose values differ from the parser's
    defaults (known when ``args`` is a `examples.harness.options.ParsedOptions`)."""
    defaults = getattr(args, "defaults", None) or {}
    return {
        name: value
        for name, value in run_settings(args, run_options, added_options).items()
        if name in defaults and value != plain_json(defaults[name])
    }


def resolved_settings(args, resolved=None, run_options=RUN_OPTIONS, added_options=()):
    """`run_settings` with the values options resolved to (e.g. ``source="auto"`` →
    ``"generated"``, ``learning_rate=None`` → ``0.003``) put in their place."""
    settings = run_settings(args, run_options, added_options)
    return dict(settings, **plain_json(dict(resolved or {})))


def run_workdir(
    args, default_root, label=None, run_options=RUN_OPTIONS, resolved=None, added_options=()
):
    """``args.workdir`` if given, else `run_directory` under ``default_root``: named after
    ``label`` and the options changed from their defaults, with a digest of the resolved
    settings (`resolved_settings`; ``added_options`` as in `run_settings`)."""
    if args.workdir:
        return str(args.workdir)
    settings = resolved_settings(args, resolved, run_options, added_options)
    changed = changed_options(args, run_options, added_options)
    return run_directory(default_root, settings, label, changed)
