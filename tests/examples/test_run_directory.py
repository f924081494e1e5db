"""The examples' run directories (`examples/harness/run_directory.py`) keep their names and
digests whatever spelling of an option the command line uses, so that the runs on disk
resume."""

import types

import pytest

from examples.harness.options import ParsedOptions
from examples.harness.run_directory import recorded_names, resolved_settings, run_workdir
from tests.support import load_script


@pytest.fixture(scope="module")
def examples():
    names = ("ptb_memory_lm", "fill_last_word_cache")
    return {name: load_script("examples", name) for name in names}


# Command lines -> the run directory they have always been given (with the generated data).
# Each spelling of a renamed option must keep giving the same directory.
PTB = {
    "runs/ptb_memory_lm/attention-ea79d72d": [[]],
    # --units and --sequence-length are recorded as hidden and seq_len, their older names.
    "runs/ptb_memory_lm/attention-hidden=64-4a647320": [["--units", "64"]],
    "runs/ptb_memory_lm/attention-hidden=32-420e2367": [
        ["--model", "attention", "--units", "32"],
        ["--kind", "attention", "--units", "32"],
    ],
}
FILL = {
    "runs/fill_last_word_cache/attention-cache1000-d9d613fb": [[]],
    # --units is recorded as hidden_units, its older name.
    "runs/fill_last_word_cache/attention-cache1000-hidden_units=64-9324dee4": [["--units", "64"]],
    "runs/fill_last_word_cache/last-cache1000-hidden_units=32_pooling=last-5b18450d": [
        ["--pooling", "last", "--units", "32"],
    ],
}


def _cases(table):
    return [(directory, argv) for directory, lines in table.items() for argv in lines]


@pytest.mark.parametrize("directory,argv", _cases(PTB))
def test_ptb_run_directories_keep_their_names(examples, directory, argv):
    ptb = examples["ptb_memory_lm"]
    args = ptb.parse_args(argv)
    workdir = run_workdir(
        recorded_names(args, ptb.RECORDED_NAMES),
        ptb.DEFAULT_ROOT,
        args.model,
        ptb.PTB_RUN_OPTIONS,
        resolved={"corpus": "ptb"},
        added_options=ptb.PTB_ADDED_OPTIONS,
    )
    assert str(workdir) == directory


@pytest.mark.parametrize("directory,argv", _cases(FILL))
def test_fill_run_directories_keep_their_names(examples, directory, argv):
    fill = examples["fill_last_word_cache"]
    args = fill.parse_args(argv)
    workdir, resolved = fill.run_directory(args, types.SimpleNamespace(source="generated"))
    assert workdir == directory
    # The settings a resumed run is checked against keep their recorded names too.
    settings = fill.run_settings(args, resolved)
    assert settings["hidden_units"] == args.units and "units" not in settings


def test_recorded_names_rename_values_and_defaults_alike():
    args = ParsedOptions(model="gru", units=8, workdir=None)
    args.defaults = {"model": "dual_am_gru", "units": 8, "workdir": None}
    recorded = recorded_names(args, {"model": "kind"})
    assert vars(recorded) == {"kind": "gru", "units": 8, "workdir": None}
    assert recorded.defaults == {"kind": "dual_am_gru", "units": 8, "workdir": None}
    assert vars(args) == {"model": "gru", "units": 8, "workdir": None}  # left as it was
    # Renamed before or recorded from the start: the same settings, name and digest.
    same = ParsedOptions(kind="gru", units=8, workdir=None)
    same.defaults = {"kind": "dual_am_gru", "units": 8, "workdir": None}
    assert resolved_settings(recorded) == resolved_settings(same)
    assert run_workdir(recorded, "runs", "gru") == run_workdir(same, "runs", "gru")
    assert "kind=gru" in run_workdir(recorded, "runs", "gru")


def test_run_directory_module_examples_run():
    import doctest

    from examples.harness import run_directory

    result = doctest.testmod(run_directory)
    assert result.attempted and not result.failed
