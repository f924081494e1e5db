"""The command lines of the examples and benchmarks: bad values exit 2 with one line.

Most checks run the examples' parsers in-process (importing an example costs nothing once
TensorFlow is loaded); a subprocess for each stage at which an example refuses (while parsing,
once the corpus is read, when the model is built) checks the real exit status and output.
"""

import importlib
import importlib.util
import os
import re
import subprocess
import sys

import keras
import pytest

from examples.harness import options
from tests.support import REPO_ROOT

EXAMPLES = ("snli_dual_am_gru",)


def _load(name):
    path = REPO_ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"cli_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def examples():
    return {name: _load(name) for name in EXAMPLES}


def _error_line(capsys, parse, argv):
    """Parses ``argv``; returns the one line written to stderr after checking exit status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and not captured.out
    return lines[0]


COMMON_BAD = [
    (["--epochs", "-1"], "--epochs"),
    (["--epochs", "0"], "--epochs"),
    (["--epochs", "2.5"], "--epochs"),
    (["--learning-rate", "-1"], "--learning-rate"),
    (["--learning-rate", "0"], "--learning-rate"),
    (["--learning-rate", "nan"], "--learning-rate"),
    (["--learning-rate", "inf"], "--learning-rate"),
    (["--batch-size", "0"], "--batch-size"),
    (["--embedding-dim", "0"], "--embedding-dim"),
    (["--seed", "-1"], "--seed"),
    (["--verbose", "3"], "--verbose"),
    (["--strategy", "tpu"], "--strategy"),
    (["--data-dir", "/nonexistent/corpus"], "--data-dir"),
    (["--workdir"], "--workdir"),
]
SPECIFIC_BAD = {
    "snli_dual_am_gru": [
        (["--units", "0"], "--units"),
        (["--dropout", "1"], "--dropout"),
        (["--clip-norm", "-5"], "--clip-norm"),
        (["--init-scale", "0"], "--init-scale"),
        (["--max-train", "0"], "--max-train"),
        (["--max-length", "0"], "--max-length"),
        (["--num-copies", "0"], "--num-copies"),
        (["--top-units", "0"], "--top-units"),
        (["--eval-every", "0"], "--eval-every"),
        (["--model", "lstm"], "--model"),
        (["--embeddings", "/nonexistent/glove.txt"], "--embeddings"),
        (["--source", "files"], "--source"),
        (["--download", "--source", "generated"], "--download"),
        (["--tfds-data-dir", "/nonexistent/tfds"], "--tfds-data-dir"),
        (["--tfds-data-dir", ".", "--source", "generated"], "--tfds-data-dir"),
    ],
}
BAD_CASES = [
    (name, argv, option) for name in EXAMPLES for argv, option in COMMON_BAD + SPECIFIC_BAD[name]
]


@pytest.mark.parametrize(
    "name,argv,option", BAD_CASES, ids=[f"{n}:{' '.join(a)}" for n, a, _ in BAD_CASES]
)
def test_a_bad_value_is_one_line_naming_the_option(examples, capsys, name, argv, option):
    line = _error_line(capsys, examples[name].parse_args, argv)
    assert f"error: argument {option}" in line


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_data_dir_without_the_corpus_files_is_refused_when_parsed(
    examples, capsys, tmp_path, name
):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    line = _error_line(capsys, examples[name].parse_args, ["--data-dir", str(tmp_path)])
    assert "error: argument --data-dir" in line and str(tmp_path) in line


# Combinations the encoder refuses, the option reported and the end of the encoder's message.
ENCODER_REFUSED = [
    (["--fused-loop", "--model", "gru"], "the gru model has none"),
    (["--fused-loop", "--model", "word_by_word"], "the word_by_word model has none"),
    (["--fused-loop", "--dual-key", "released"], "dual_key='paper' only"),
    (["--model", "word_by_word", "--top-units", "5"], "which the word_by_word model does not"),
]


@pytest.mark.parametrize("argv,message", ENCODER_REFUSED)
def test_snli_reports_an_option_the_encoder_refuses_with_its_message(
    examples, capsys, argv, message
):
    example = examples["snli_dual_am_gru"]
    line = _error_line(
        capsys, lambda argv: example.build_model(example.parse_args(argv), 20, None, 0.05), argv
    )
    option = "--top-units" if "--top-units" in argv else "--fused-loop"
    assert f"error: argument {option}: " in line and message in line


@pytest.mark.parametrize("source", ["tfds", "generated"])
def test_snli_refuses_a_data_dir_its_source_would_not_read(examples, capsys, tmp_path, source):
    for split in ("train", "dev", "test"):
        (tmp_path / f"snli_1.0_{split}.jsonl").write_text("")
    line = _error_line(
        capsys,
        examples["snli_dual_am_gru"].parse_args,
        ["--data-dir", str(tmp_path), "--source", source],
    )
    assert (
        "error: argument --data-dir: is read with --source auto or files, not with "
        f"--source {source}"
    ) in line


@pytest.mark.parametrize(
    "name,argv,attribute,value,new_spelling",
    [
        ("snli_dual_am_gru", ["--kind", "gru"], "model", "gru", "--model"),
    ],
)
def test_old_spellings_still_work(examples, capsys, name, argv, attribute, value, new_spelling):
    args = examples[name].parse_args(argv)
    assert getattr(args, attribute) == value
    err = capsys.readouterr().err
    if new_spelling:
        assert f"{argv[0]} is an old spelling of {new_spelling}" in err
    with pytest.raises(SystemExit):  # an old spelling is checked like the new one
        examples[name].parse_args([argv[0], "-1"] if new_spelling else [argv[0], "x"])


def test_one_spelling_per_shared_option(examples, capsys):
    spellings = {}
    for name, example in examples.items():
        with pytest.raises(SystemExit):
            example.parse_args(["--help"])
        text = capsys.readouterr().out
        spellings[name] = set(re.findall(r"^  (--[a-z-]+)", text, re.MULTILINE))
        for old in ("--kind", "--clipnorm"):
            assert old not in spellings[name], (name, old)
    for option in (
        "--jit",
        "--seed",
        "--epochs",
        "--learning-rate",
        "--batch-size",
        "--embedding-dim",
        "--data-dir",
        "--workdir",
        "--strategy",
        "--verbose",
        "--clip-norm",
    ):
        assert all(option in found for found in spellings.values()), option
    # One name per concept, as in Keras and the builders: --units is the width of the
    # recurrent layer (the SNLI example's layer 1, the LSTM under the memory or the pooling).
    for name in ("snli_dual_am_gru",):
        assert "--units" in spellings[name] and "--hidden" not in spellings[name], name


def _help_entries(text):
    """``{option: its help text}`` of an argparse help page."""
    entries, current = {}, None
    for line in text.splitlines():
        match = re.match(r"^  (-[-\w]+)", line)
        if match:
            current = match.group(1)
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


@pytest.mark.parametrize("name", EXAMPLES)
def test_help_exits_0_and_shows_every_default(examples, capsys, name):
    with pytest.raises(SystemExit) as exit_info:
        examples[name].parse_args(["--help"])
    assert exit_info.value.code == 0
    entries = _help_entries(capsys.readouterr().out)
    entries.pop("-h")
    assert len(entries) >= 20
    for option, text in entries.items():
        assert "default" in text, f"{option}: {text}"
        assert "default: None" not in text, f"{option}: {text}"


class _FitCalled(Exception):
    pass


@pytest.mark.parametrize(
    "name,argv",
    [
        (
            "snli_dual_am_gru",
            [
                "--train-size",
                "small",
                "--max-train",
                "60",
                "--units",
                "4",
                "--num-copies",
                "2",
                "--embedding-dim",
                "4",
                "--verbose",
                "0",
            ],
        ),
    ],
)
def test_fit_is_told_not_to_shuffle_the_tf_data_pipeline(
    examples, monkeypatch, tmp_path, name, argv
):
    # Keras warns that `shuffle=True` is ignored for a tf.data dataset; the examples' pipelines
    # shuffle (or, for truncated BPTT, must keep their order).
    calls = []

    def fit(self, *args, **kwargs):
        calls.append(kwargs)
        raise _FitCalled

    monkeypatch.setattr(keras.Model, "fit", fit)
    with pytest.raises(_FitCalled):
        examples[name].main([*argv, "--workdir", str(tmp_path / "run")])
    assert calls and calls[0].get("shuffle") is False


def test_unreadable_data_is_a_command_line_error(examples, capsys, tmp_path):
    (tmp_path / "glove.txt").write_text("cat 1 2\ndog 1 2 3\n")
    argv = [
        "--train-size",
        "small",
        "--max-train",
        "30",
        "--workdir",
        str(tmp_path / "run2"),
        "--embeddings",
        str(tmp_path / "glove.txt"),
    ]
    line = _error_line(capsys, examples["snli_dual_am_gru"].main, argv)
    assert "error: argument --embeddings" in line and "glove.txt, line 2" in line


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_workdir_that_is_a_file_is_refused_when_parsed(examples, capsys, tmp_path, name):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a run directory\n")
    line = _error_line(capsys, examples[name].parse_args, ["--workdir", str(a_file)])
    assert "error: argument --workdir" in line and "is a file, not a directory" in line
    line = _error_line(capsys, examples[name].parse_args, ["--workdir", str(a_file / "run")])
    assert "error: argument --workdir" in line and "cannot be created" in line
    # A directory to create, or one that exists, is accepted.
    for workdir in (tmp_path / "new" / "run", tmp_path):
        assert examples[name].parse_args(["--workdir", str(workdir)]).workdir == str(workdir)


SNLI_TINY = [
    "--source",
    "generated",
    "--train-size",
    "small",
    "--max-train",
    "50",
    "--units",
    "8",
    "--num-copies",
    "2",
]


# One run of each script as users start it, each with a refusal found at another stage: while
# parsing, when the encoder is built (SNLI).
# The in-process tests above check every refusal's line.
@pytest.mark.parametrize(
    "name,argv,option,message",
    [
        (
            "snli_dual_am_gru",
            [*ENCODER_REFUSED[0][0], *SNLI_TINY],
            "--fused-loop",
            ENCODER_REFUSED[0][1],
        ),
    ],
    ids=["snli_encoder"],
)
def test_script_exits_2_with_one_error_line(name, argv, option, message, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "examples" / f"{name}.py"),
            *argv,
            "--workdir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "METRICS" not in result.stdout
    # One line: none of TensorFlow's C++ start-up lines either ("cpu_feature_guard", the absl
    # "All log messages before absl::InitializeLog()" and CUDA-stub lines of builds without
    # a GPU driver).
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{name}.py: error: argument {option}: ") and message in lines[0]
    assert not (tmp_path / "run").exists()  # refused before the run started


# --- benchmarks ------------------------------------------------------------------------------

BENCHMARK_BAD = [
    ("benchmarks.speed.__main__", ["--rounds", "0"], "--rounds"),
    ("benchmarks.speed.__main__", ["--lengths", "20", "-5"], "--lengths"),
    ("benchmarks.papers.snli_real_data", ["--learning-rate", "nan"], "--learning-rate"),
    ("benchmarks.papers.snli_real_data", ["--units", "0"], "--units"),
    ("benchmarks.papers.snli_real_data", ["--models", "lstm"], "--models"),
]


@pytest.mark.parametrize(
    "module,argv,option", BENCHMARK_BAD, ids=[f"{m}:{' '.join(a)}" for m, a, _ in BENCHMARK_BAD]
)
def test_benchmark_options_are_checked(capsys, module, argv, option):
    sys.path.insert(0, str(REPO_ROOT))
    try:
        benchmark = importlib.import_module(module)
    finally:
        sys.path.remove(str(REPO_ROOT))
    line = _error_line(capsys, benchmark.parse_args, argv)
    assert f"error: argument {option}" in line


def test_an_option_with_an_old_spelling_keeps_its_own_default(recwarn):
    # argparse's own get_default skips a default of None and takes the old spelling's
    # SUPPRESS: the option would count as changed, and name its run directory.
    parser = options.ArgumentParser(prog="example")
    options.add_option(parser, "clip_norm")
    options.add_option(parser, "model", default="gru")
    args = parser.parse_args([])
    assert args.clip_norm is None and args.defaults == {"clip_norm": None, "model": "gru"}
    old = parser.parse_args(["--clipnorm", "2", "--kind", "lstm"])
    assert (old.clip_norm, old.model) == (2.0, "lstm") and old.defaults == args.defaults


def test_options_module_examples_run():
    import doctest

    result = doctest.testmod(options)
    assert result.attempted > 0 and result.failed == 0
