"""The examples' run directories (`examples/harness/run_directory.py`) keep their names and
digests whatever spelling of an option the command line uses, so that the runs on disk
resume."""

import pytest

from examples.harness.options import ParsedOptions
from examples.harness.run_directory import recorded_names, resolved_settings, run_workdir
from tests.support import load_script


@pytest.fixture(scope="module")
def examples():
    names = ("snli_dual_am_gru",)
    return {name: load_script("examples", name) for name in names}


# Command lines -> the run directory they have always been given (with the generated data).
# Each spelling of a renamed option must keep giving the same directory.
SNLI = {
    "runs/snli_dual_am_gru/dual_am_gru-353eabab": [[], ["--train-embeddings"]],
    "runs/snli_dual_am_gru/gru-kind=gru-8ad4104e": [["--model", "gru"], ["--kind", "gru"]],
    "runs/snli_dual_am_gru/am_gru-kind=am_gru_units=50-0593458b": [
        ["--model", "am_gru", "--units", "50"],
        ["--kind", "am_gru", "--units", "50"],
    ],
    "runs/snli_dual_am_gru/dual_am_gru-dual_key=released-92353551": [["--dual-key", "released"]],
    "runs/snli_dual_am_gru/dual_am_gru-fused_loop=False-8b2d2369": [["--no-fused-loop"]],
    "runs/snli_dual_am_gru/am_gru-fused_loop=True_kind=am_gru-82e40766": [
        ["--fused-loop", "--model", "am_gru"],
    ],
    # --num-copies is recorded as copies, the name of its older spelling.
    "runs/snli_dual_am_gru/dual_am_gru-copies=4-a558f7a2": [
        ["--num-copies", "4"],
        ["--copies", "4"],
    ],
    "runs/snli_dual_am_gru/am_gru-copies=2_kind=am_gru-5fea1077": [
        ["--model", "am_gru", "--num-copies", "2"],
    ],
    # --no-train-embeddings is recorded as freeze_embeddings=True, its older spelling.
    "runs/snli_dual_am_gru/dual_am_gru-freeze_embeddings=True-fc4c06de": [
        ["--no-train-embeddings"],
        ["--freeze-embeddings"],
    ],
    "runs/snli_dual_am_gru/gru-copies=3_freeze_embeddings=True_kind=gru-41d71ba2": [
        ["--no-train-embeddings", "--num-copies", "3", "--model", "gru"],
    ],
}


def _cases(table):
    return [(directory, argv) for directory, lines in table.items() for argv in lines]


@pytest.mark.parametrize("directory,argv", _cases(SNLI))
def test_snli_run_directories_keep_their_names(examples, directory, argv):
    snli = examples["snli_dual_am_gru"]
    args = snli.parse_args(argv)
    fused = snli.runs_fused_loop(snli.build_model(args, 20, None, 0.2))
    resolved = dict(source="generated", init_scale=0.2, learning_rate=3e-3, fused_loop=fused)
    assert snli.run_directory(args, resolved) == directory
    settings = snli.run_settings(args, resolved)
    assert settings["kind"] == args.model and "model" not in settings


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
