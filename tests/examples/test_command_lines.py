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

EXAMPLES = ("ptb_memory_lm", "fill_last_word_cache", "seq2seq_autoencoder")


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
    "ptb_memory_lm": [
        (["--units", "0"], "--units"),
        (["--dropout", "1.5"], "--dropout"),
        (["--clip-norm", "-5"], "--clip-norm"),
        (["--init-scale", "-0.1"], "--init-scale"),
        (["--window", "0"], "--window"),
        (["--ngram", "0"], "--ngram"),
        (["--layers", "0"], "--layers"),
        (["--sequence-length", "0"], "--sequence-length"),
        (["--sizes", "4", "0"], "--sizes"),
        (["--lr-decay", "0"], "--lr-decay"),
        (["--lr-decay", "1.5"], "--lr-decay"),
        (["--full-rate-epochs", "0"], "--full-rate-epochs"),
        (["--forget-bias", "nan"], "--forget-bias"),
        (["--recurrent-dropout", "1"], "--recurrent-dropout"),
        (["--generated-tokens", "0"], "--generated-tokens"),
        (["--probe-length", "0"], "--probe-length"),
        (["--max-train-batches", "0"], "--max-train-batches"),
        (["--config", "zaremba-tiny"], "--config"),
        (["--metrics-file", "/nonexistent/metrics.json"], "--metrics-file"),
        (["--pack", "--no-document-resets"], "--pack"),
        (["--no-document-resets", "--pack"], "--pack"),
        (["--generate", "-2"], "--generate"),
        (["--temperature", "-1"], "--temperature"),
        (["--prompt", "the cat"], "--prompt"),  # without --generate
        (["--lr-decay", "0.5"], "--lr-decay"),  # without --full-rate-epochs: never applied
        (["--model", "lstm", "--sizes", "4", "4"], "--sizes"),
    ],
    "fill_last_word_cache": [
        (["--units", "0"], "--units"),
        (["--max-length", "1"], "--max-length"),
        (["--max-train", "0"], "--max-train"),
        (["--max-vocabulary", "1"], "--max-vocabulary"),
        (["--max-vocabulary", "2"], "--max-vocabulary"),  # <pad> and <unk> only: no word
        (["--attention-units", "0"], "--attention-units"),
        (["--cache-size", "-1"], "--cache-size"),
        (["--weight-decay", "-1e-5"], "--weight-decay"),
        (["--embeddings", "/nonexistent/glove.txt"], "--embeddings"),
        (["--train-file", "train.txt"], "--train-file"),
    ],
}
SPECIFIC_BAD["seq2seq_autoencoder"] = [
    (["--units", "7"], "--units"),  # the dual_am_gru model's units are even
    (["--units", "0"], "--units"),
    (["--model", "lstm"], "--model"),
    (["--beams", "0"], "--beams"),
    (["--max-vocabulary", "4"], "--max-vocabulary"),
    (["--max-length", "0"], "--max-length"),
    (["--max-train", "0"], "--max-train"),
    (["--dual-key", "both"], "--dual-key"),
    (["--num-copies", "0"], "--num-copies"),
    (["--init-scale", "0"], "--init-scale"),
    (["--clip-norm", "-5"], "--clip-norm"),
    (["--probe-sentences", "0"], "--probe-sentences"),
    (["--train-size", "huge"], "--train-size"),
    (["--max-length", "3"], "--max-length"),  # the generated sentences have 5 to 14 words
]
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


# Widths the language model refuses, reported as the option to change, with the layer's message.
PTB_WIDTHS_REFUSED = [
    (["--model", "ngram", "--ngram", "8"], "--ngram", "does not divide into 7 equal pieces"),
    (["--model", "key_value", "--units", "9"], "--units", "does not divide into 2 equal pieces"),
    (["--sizes", "3", "3", "3"], "--sizes", "`sizes` must list 1 piece (key), got 3"),
    (
        ["--model", "lstm", "--tie-weights", "--units", "8", "--embedding-dim", "4"],
        "--tie-weights",
        "needs `units` == `embedding_dim`",
    ),
]


@pytest.mark.parametrize("argv, option, message", PTB_WIDTHS_REFUSED)
def test_ptb_reports_widths_the_model_refuses_as_the_option(
    examples, capsys, tmp_path, argv, option, message
):
    main = examples["ptb_memory_lm"].main
    run = tmp_path / "run"
    line = _error_line(
        capsys, main, [*argv, "--generated-tokens", "2000", "--verbose", "0", "--workdir", str(run)]
    )
    assert f"error: argument {option}: " in line and message in line
    assert not run.exists()


def test_fill_reports_files_without_a_usable_sentence_as_max_length(examples, capsys, tmp_path):
    for name in ("train.txt", "dev.txt"):
        (tmp_path / name).write_text("one two three four five six\n")
    run = tmp_path / "run"
    argv = ["--data-dir", str(tmp_path), "--max-length", "3", "--workdir", str(run)]
    line = _error_line(capsys, examples["fill_last_word_cache"].main, argv)
    assert "error: argument --max-length: no usable sentences in" in line
    assert not run.exists()


def test_fill_names_the_evaluation_file_it_lacks(examples, capsys, tmp_path):
    (tmp_path / "train.txt").write_text("a b c\n")
    parse = examples["fill_last_word_cache"].parse_args
    line = _error_line(capsys, parse, ["--data-dir", str(tmp_path)])
    assert "--eval-file" in line and "dev.txt" in line
    line = _error_line(capsys, parse, ["--data-dir", str(tmp_path), "--train-file", "x.txt"])
    assert "--train-file" in line and "x.txt" in line


@pytest.mark.parametrize(
    "name,argv,attribute,value,new_spelling",
    [
        ("ptb_memory_lm", ["--clipnorm", "0"], "clip_norm", 0.0, "--clip-norm"),
        ("ptb_memory_lm", ["--no-jit"], "jit", False, None),
        ("fill_last_word_cache", ["--jit"], "jit", True, None),
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
    # recurrent layer (the LSTM under the memory or the pooling).
    for name in ("ptb_memory_lm", "fill_last_word_cache"):
        assert "--units" in spellings[name] and "--hidden" not in spellings[name], name
    assert "--sequence-length" in spellings["ptb_memory_lm"]
    for option in ("--model", "--dropout", "--init-scale"):
        assert option in spellings["ptb_memory_lm"], option


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


def test_ptb_help_says_which_defaults_a_config_preset_sets(examples, capsys):
    with pytest.raises(SystemExit):
        examples["ptb_memory_lm"].parse_args(["--config", "zaremba-small", "--help"])
    entries = _help_entries(capsys.readouterr().out)
    for option in (
        "--model",
        "--units",
        "--layers",
        "--epochs",
        "--learning-rate",
        "--lr-decay",
        "--clip-norm",
        "--dropout",
        "--sequence-length",
        "--full-rate-epochs",
    ):
        assert options.PRESET_NOTE in entries[option], option
    assert "(default: 200;" in entries["--units"]  # the preset's value
    for option in ("--strategy", "--workdir", "--probe-length"):
        assert options.PRESET_NOTE not in entries[option], option


class _FitCalled(Exception):
    pass


@pytest.mark.parametrize(
    "name,argv",
    [
        (
            "ptb_memory_lm",
            [
                "--generated-tokens",
                "600",
                "--units",
                "8",
                "--embedding-dim",
                "4",
                "--batch-size",
                "4",
                "--sequence-length",
                "5",
                "--no-jit",
                "--verbose",
                "0",
            ],
        ),
        (
            "fill_last_word_cache",
            [
                "--units",
                "4",
                "--embedding-dim",
                "4",
                "--attention-units",
                "2",
                "--cache-size",
                "8",
                "--max-length",
                "12",
                "--verbose",
                "0",
            ],
        ),
        (
            "seq2seq_autoencoder",
            [
                "--train-size",
                "small",
                "--units",
                "4",
                "--num-copies",
                "2",
                "--embedding-dim",
                "4",
                "--probe-sentences",
                "2",
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
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text("" if split == "valid" else "a b\n")
    argv = ["--data-dir", str(tmp_path), "--workdir", str(tmp_path / "run")]
    line = _error_line(capsys, examples["ptb_memory_lm"].main, argv)
    assert "error: argument --data-dir" in line and "ptb.valid.txt is empty" in line
    (tmp_path / "train.txt").write_bytes(os.urandom(3000))
    (tmp_path / "dev.txt").write_text("a b c\n")
    argv = ["--data-dir", str(tmp_path), "--workdir", str(tmp_path / "run3")]
    line = _error_line(capsys, examples["fill_last_word_cache"].main, argv)
    assert "error: argument --data-dir" in line and "train.txt" in line


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


@pytest.mark.parametrize(
    "option",
    [["--probe-sentence"], ["--generate", "3", "--prompt"]],
    ids=["probe_sentence", "prompt"],
)
@pytest.mark.parametrize(
    "sentence,message",
    [("again zzzqqq", "token 'zzzqqq' is not in the vocabulary"), ("  ", "has no words")],
)
def test_words_the_vocabulary_cannot_encode_are_refused(
    examples, capsys, tmp_path, option, sentence, message
):
    argv = ["--generated-tokens", "2000", *option, sentence, "--workdir", str(tmp_path / "run")]
    line = _error_line(capsys, examples["ptb_memory_lm"].main, argv)
    assert f"error: argument {option[-1]}" in line and message in line
    assert not (tmp_path / "run").exists()  # refused before the run started


# One run of each script as users start it, each with a refusal found at another stage: while
# parsing, once the corpus is read (PTB's probe sentence).
# The in-process tests above check every refusal's line (the seq2seq script's run is in its own
# test module).
@pytest.mark.parametrize(
    "name,argv,option,message",
    [
        (
            "ptb_memory_lm",
            ["--probe-sentence", "again zzzqqq", "--generated-tokens", "2000"],
            "--probe-sentence",
            "",
        ),
        ("ptb_memory_lm", ["--learning-rate", "nan"], "--learning-rate", ""),
        ("fill_last_word_cache", ["--data-dir", "/nonexistent"], "--data-dir", ""),
    ],
    ids=["ptb_probe_sentence", "ptb_parse", "fill_last_word_cache"],
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
    ("benchmarks.papers.fill_last_word_real_data", ["--max-epochs", "0"], "--max-epochs"),
    ("benchmarks.papers.fill_last_word_real_data", ["--batch-size", "-4"], "--batch-size"),
    ("benchmarks.papers.fill_last_word_real_data", ["--held-out", "1"], "--held-out"),
    ("benchmarks.papers.lm_equal_budget", ["--max-epochs", "0"], "--max-epochs"),
    ("benchmarks.papers.lm_equal_budget", ["--dropout", "1"], "--dropout"),
    ("benchmarks.papers.lm_equal_budget_cost", ["--steps", "0"], "--steps"),
    ("benchmarks.papers.lm_equal_budget_cost", ["--repeats", "x"], "--repeats"),
    ("benchmarks.papers.lm_equal_budget_cost", ["--hidden", "-3"], "--hidden"),
    ("benchmarks.papers.lm_real_data", ["--hidden", "0"], "--hidden"),
    ("benchmarks.papers.lm_real_data", ["--seq-len", "0"], "--seq-len"),
    ("benchmarks.papers.seq2seq_autoencoding", ["--epochs", "0"], "--epochs"),
    ("benchmarks.papers.seq2seq_autoencoding", ["--models", "lstm"], "--models"),
    ("benchmarks.papers.seq2seq_autoencoding", ["--seeds", "-1"], "--seeds"),
    ("benchmarks.papers.seq2seq_autoencoding", ["--corpus", "wmt14"], "--corpus"),
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
