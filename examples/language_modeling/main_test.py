"""The command line end to end: options, runs on tiny settings, resuming, several workers."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import metadata

from tf_memlayers.callbacks.window_attention_callback import average_attention_by_position
from tf_memlayers.models import build_step_model, generate
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights

from . import input_pipeline, main, models, train
from .models_test import numpy_perplexity

FOLDER = pathlib.Path(__file__).resolve().parent
SCRIPT = FOLDER.parent / "ptb_memory_lm.py"
SIZES = (
    "--units 16 --embedding-dim 8 --batch-size 4 --sequence-length 10 --no-jit-compile --verbose 0"
)
SIZES = SIZES.split()
TINY = [*SIZES, "--generated-tokens", "1500"]  # on a small generated corpus


def error_line(capsys, call, argv):
    """Runs ``call(argv)``; returns the one line on stderr after checking exit status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        call(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and not captured.out, captured.err
    return captured.err.strip()


def write_ptb(folder, lines=(300, 40, 40)):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)] + ["<unk>"]
    for split, count in zip(input_pipeline.SPLITS, lines):
        text = "".join(" " + " ".join(rng.choice(words, 8)) + " \n" for _ in range(count))
        (folder / f"ptb.{split}.txt").write_text(text)
    return folder


def run(tmp_path, name, *argv, callbacks=()):
    args = main.parse_args([*argv, "--workdir", str(tmp_path / name)])
    return train.train_and_evaluate(args, args.workdir, callbacks)


BAD = [
    ("--epochs 0", "--epochs"),
    ("--epochs 2.5", "--epochs"),
    ("--learning-rate -1", "--learning-rate"),
    ("--learning-rate nan", "--learning-rate"),
    ("--learning-rate inf", "--learning-rate"),
    ("--batch-size 0", "--batch-size"),
    ("--embedding-dim 0", "--embedding-dim"),
    ("--seed -1", "--seed"),
    ("--verbose 3", "--verbose"),
    ("--strategy tpu", "--strategy"),
    ("--data-dir /nonexistent/corpus", "--data-dir"),
    ("--workdir", "--workdir"),
    ("--units 0", "--units"),
    ("--dropout 1.5", "--dropout"),
    ("--clip-norm -5", "--clip-norm"),
    ("--init-scale -0.1", "--init-scale"),
    ("--window 0", "--window"),
    ("--ngram 0", "--ngram"),
    ("--num-layers 0", "--num-layers"),
    ("--sequence-length 0", "--sequence-length"),
    ("--sizes 4 0", "--sizes"),
    ("--model ngram --ngram 1", "--ngram"),  # NGramConcat's n >= 2
    ("--lr-decay 0", "--lr-decay"),
    ("--lr-decay 1.5", "--lr-decay"),
    ("--full-rate-epochs 0", "--full-rate-epochs"),
    ("--patience 0", "--patience"),
    ("--forget-bias nan", "--forget-bias"),
    ("--recurrent-dropout 1", "--recurrent-dropout"),
    ("--generated-tokens 0", "--generated-tokens"),
    ("--probe-length 0", "--probe-length"),
    ("--max-train-batches 0", "--max-train-batches"),
    ("--config zaremba-tiny", "--config"),
    ("--metrics-file /nonexistent/metrics.json", "--metrics-file"),
    ("--pack --no-document-resets", "--pack"),
    ("--generate -2", "--generate"),
    ("--temperature -1", "--temperature"),
    ("--prompt the", "--prompt"),  # without --generate
    ("--lr-decay 0.5", "--lr-decay"),  # without --full-rate-epochs: never applied
    ("--model lstm --sizes 4 4", "--sizes"),
    ("--patience 2 --config zaremba-small", "--patience"),  # two learning-rate rules
    ("--patience 2 --full-rate-epochs 2", "--patience"),  # the schedule would undo the rule
    ("--patience 2 --full-rate-epochs 2 --lr-decay 0.5", "--patience"),
    # Options that the other options leave unread. DATA: a folder of PTB files.
    ("--temperature 0.5", "--temperature"),  # without --generate
    ("--generate-seed 3", "--generate-seed"),
    ("--generate 3 --temperature 0 --generate-seed 3", "--generate-seed"),  # no draws
    ("--generated-tokens 5000 --data-dir DATA", "--generated-tokens"),
    ("--model lstm --window 9", "--window"),
    ("--model ngram --window 9", "--window"),
    ("--model attention --ngram 7", "--ngram"),
    ("--model lstm --form cell", "--form"),
    ("--model lstm --probe-sentence w1", "--probe-sentence"),
    ("--model ngram --probe-length 9", "--probe-length"),
    ("--probe-sentence w1 --probe-length 9", "--probe-length"),
    ("--variational-dropout", "--variational-dropout"),  # without --dropout
    ("--full-rate-epochs 2", "--full-rate-epochs"),  # without --lr-decay
    ("--jit-compile --strategy multi_worker", "--jit-compile"),  # its loop runs without XLA
]


@pytest.mark.parametrize("argv, option", BAD, ids=[argv for argv, _ in BAD])
def test_a_bad_value_is_one_line_naming_the_option(capsys, tmp_path, argv, option):
    argv = argv.replace("DATA", str(write_ptb(tmp_path))) if "DATA" in argv else argv
    assert f"error: argument {option}" in error_line(capsys, main.parse_args, argv.split())


@pytest.mark.parametrize("old", sorted(main.RENAMED))
def test_an_option_spelled_as_in_0_2_is_refused_naming_its_new_spelling(capsys, old):
    new = main.RENAMED[old]
    help_text = main.make_parser().format_help()
    assert new in help_text.replace("[", " ").replace(",", " ").split()  # an option now
    for argv in ([old, "1"], [f"{old}=1"], ["--seed", "2", old], ["--bogus", old]):
        assert f"error: argument {old}: renamed {new} in 0.3" in error_line(
            capsys, main.parse_args, argv
        )


def test_an_option_a_preset_sets_is_named_with_the_preset(capsys):
    line = error_line(capsys, main.parse_args, ["--config", "zaremba-small", "--patience", "2"])
    assert "--full-rate-epochs 4, which --config zaremba-small sets" in line
    assert "drop --config or --patience" in line


def test_files_and_folders_are_checked_when_parsed(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    line = error_line(capsys, main.parse_args, ["--data-dir", str(tmp_path)])
    assert "error: argument --data-dir" in line and str(tmp_path) in line
    assert "ptb.train.txt" in line and "wiki.train.tokens" in line and "cbt_test.txt" in line
    a_file = tmp_path / "notes.txt"
    line = error_line(capsys, main.parse_args, ["--workdir", str(a_file)])
    assert "error: argument --workdir" in line and "is a file, not a directory" in line
    line = error_line(capsys, main.parse_args, ["--workdir", str(a_file / "run")])
    assert "error: argument --workdir" in line and "cannot be created" in line
    assert main.parse_args(["--workdir", str(tmp_path / "new")]).workdir == str(tmp_path / "new")
    # Checked before the run, which writes it at its end: a link into a folder that is gone.
    (tmp_path / "link.json").symlink_to(tmp_path / "gone" / "metrics.json")
    for bad in ("link.json", "gone/../m.json", "gone/"):
        line = error_line(capsys, main.parse_args, ["--metrics-file", f"{tmp_path}/{bad}"])
        assert "error: argument --metrics-file" in line and "in none that exists" in line


REFUSED = [
    # Widths the model refuses, reported as the option to change with the layer's message.
    ("--model ngram --ngram 8", "--ngram", "does not divide into 7 equal pieces"),
    ("--model key_value --units 9", "--units", "does not divide into 2 equal pieces"),
    ("--sizes 3 3 3", "--sizes", "`sizes` must list 1 piece (key), got 3"),
    ("--model lstm --tie-weights --units 12", "--tie-weights", "`embedding_dim` (8) wide"),
    # Words the vocabulary cannot encode.
    ("--probe-sentence again_zzzqqq", "--probe-sentence", "token 'again_zzzqqq' is not in"),
    ("--generate 3 --prompt again_zzzqqq", "--prompt", "token 'again_zzzqqq' is not in"),
    ("--probe-sentence=", "--probe-sentence", "'' has no words"),
    ("--window 100", "--window", "the validation split gives 40 tokens a row"),
]


@pytest.mark.parametrize("argv, option, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_what_the_data_or_the_model_refuses_is_reported_as_the_option(
    capsys, tmp_path, argv, option, message
):
    workdir = tmp_path / "run"
    line = error_line(capsys, main.main, [*TINY, *argv.split(), "--workdir", str(workdir)])
    assert f"error: argument {option}: " in line and message in line
    assert not workdir.exists()  # refused before the run started


def test_unreadable_data_is_a_command_line_error(capsys, tmp_path):
    write_ptb(tmp_path)
    (tmp_path / "ptb.valid.txt").write_text("")
    line = error_line(capsys, main.main, ["--data-dir", str(tmp_path)])
    assert "error: argument --data-dir" in line and "ptb.valid.txt is empty" in line


def test_the_script_exits_2_with_one_error_line(tmp_path):
    # After TensorFlow is imported and the corpus read: none of TensorFlow's start-up lines.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    argv = ["--probe-sentence", "again zzzqqq", "--workdir", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2 and not done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ptb_memory_lm.py: error: argument --probe-sentence: token 'zzzqqq'")


def test_help_shows_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main.parse_args(["--config", "zaremba-small", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    entries = text.split("\n  -")[2:]  # after usage and -h
    assert len(entries) >= 40 and all("default" in entry for entry in entries)
    text = " ".join(text.split())
    assert "key_value_predict" in text and "zaremba-small" in text
    assert "width of each LSTM layer (default: 200; a --config preset sets its own)" in text
    assert "before --lr-decay (default: 4; a --config preset sets its own)" in text
    with pytest.raises(SystemExit):
        main.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "before --lr-decay (default: none; a --config preset sets its own)" in text


def test_config_sets_defaults_and_explicit_options_win():
    args = main.parse_args(["--config", "zaremba-small"])
    assert (args.model, args.num_layers, args.units, args.embedding_dim) == ("lstm", 2, 200, 200)
    assert (args.optimizer, args.learning_rate, args.lr_decay, args.full_rate_epochs) == (
        "sgd",
        1.0,
        0.5,
        4,
    )
    assert (args.epochs, args.batch_size, args.sequence_length, args.clip_norm) == (13, 20, 20, 5)
    assert (args.loss_reduction, args.forget_bias, args.init_scale) == ("sum_over_time", 0.0, 0.1)
    mixed = main.parse_args(["--model", "ngram", "--config", "zaremba-medium", "--epochs", "2"])
    assert (mixed.model, mixed.epochs, mixed.units, mixed.dropout) == ("ngram", 2, 650, 0.5)
    plain = main.parse_args([])
    assert (plain.optimizer, plain.model, plain.full_rate_epochs) == ("adam", "attention", None)
    large = main.parse_args(["--config", "zaremba-large"])
    assert (large.clip_norm, large.full_rate_epochs, large.epochs) == (10.0, 14, 55)
    assert large.lr_decay == pytest.approx(1 / 1.15) and large.dropout == 0.65
    spans = main.parse_args(["--config", "short-attention-spans"])
    assert (spans.model, spans.optimizer, spans.forget_bias, spans.units) == (
        "attention",
        "adam",
        1.0,
        200,
    )


def test_the_learning_rate_decays_per_epoch_after_the_full_rate_epochs(tmp_path):
    ids = np.arange(50)
    batches = dict.fromkeys(("train", "valid"), input_pipeline.bptt_batches(ids, [0], 2, 5))
    for argv, rates in (
        (["--config", "zaremba-medium"], [1.0] * 6 + [0.8, 0.64]),
        (["--learning-rate", "0.3"], [0.25] * 8),  # no decay: the optimizer's rate stays
    ):
        config = main.parse_args(argv)
        (schedule,) = [
            c.schedule
            for c in train.callbacks_of(config, batches, tmp_path)[0]
            if isinstance(c, keras.callbacks.LearningRateScheduler)
        ]
        np.testing.assert_allclose([schedule(epoch, 0.25) for epoch in range(8)], rates)


def test_run_directories_are_one_per_configuration(tmp_path):
    def workdir(*argv):
        return main.parse_args(list(argv)).workdir

    plain = workdir("--model", "lstm")
    assert plain.startswith("runs/language_modeling/lstm-model=lstm-") and plain == workdir(
        "--model",
        "lstm",
        "--epochs",
        "9",
        "--verbose",
        "0",  # how long or verbose: the same run
    )
    assert "pack=True" in workdir("--model", "lstm", "--pack")
    assert workdir("--model", "lstm", "--pack") != plain
    assert workdir("--data-dir", str(write_ptb(tmp_path))) != workdir()


def summaries(folder):
    """``{tag: [value, ...]}`` of the TensorBoard event files under ``folder``."""
    found = {}
    for path in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append(value)
    return found


def test_a_tiny_run_reports_logs_and_refuses_other_settings_in_its_workdir(tmp_path, capsys):
    # Packed documents (a model with in-graph resets), and generation from its step model.
    workdir = tmp_path / "run"
    argv = [*TINY, "--window", "3", "--epochs", "1", "--pack", "--generate", "3"]
    argv += ["--workdir", str(workdir)]
    metrics = main.main(argv)
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("METRICS ")]
    assert json.loads(line[len("METRICS ") :]) == metrics
    assert json.loads((workdir / "metrics.json").read_text()) == metrics
    corpus = input_pipeline.generated_corpus(1500)
    assert metrics["corpus"] == "generated" and metrics["model"] == "attention"
    for split in ("valid", "test"):
        assert metrics[f"{split}_tokens"] == len(corpus.splits[split][0]) - 1
        assert 1.0 < metrics[f"{split}_perplexity"] < len(corpus.vocabulary)
    assert sum(metrics["attention_by_position"]) == pytest.approx(1, abs=1e-3)
    assert len(metrics["generation"]["generated"].split()) == 3
    train_ids, starts = corpus.splits["train"]
    assert len(starts) > 1 and metrics["train_tokens_per_epoch"] == len(train_ids) - 1
    assert (workdir / "best.keras").is_file()
    assert set(keras.saving.load_model(workdir / "last.keras").input) == {"tokens", "reset"}
    tags = summaries(workdir / "logs")
    assert {"window_attention/probe_sentence", "window_attention/average_by_position"} <= set(tags)
    assert {"epoch_loss", "epoch_perplexity", "epoch_learning_rate"} <= set(tags)
    # The settings under the options' names and the data as "source", with the final metrics.
    (start,) = tags[metadata.SESSION_START_INFO_TAG]
    info = metadata.parse_session_start_info_plugin_data(start.metadata.plugin_data.content)
    hparams = {name: getattr(v, v.WhichOneof("kind")) for name, v in info.hparams.items()}
    assert set(hparams) - {"source"} <= set(vars(main.parse_args(argv)))
    assert (hparams["model"], hparams["source"], hparams["units"]) == ("attention", "generated", 16)
    (logged,) = tags["test_perplexity"]
    assert float(tf.make_ndarray(logged.tensor)) == pytest.approx(metrics["test_perplexity"])
    line = error_line(capsys, main.main, [*argv, "--units", "12"])
    assert "error: argument --workdir: " in line and "units: 16 there, 12 now" in line


def test_the_folder_runs_forked(run_forked):
    argv = [*TINY, "--epochs", "1", "--model", "lstm", "--max-train-batches", "3"]
    done = run_forked("language_modeling", *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("METRICS ")]
    metrics = json.loads(line[len("METRICS ") :])
    assert metrics["epochs_run"] == 1 and metrics["workdir"].startswith("runs/language_modeling/")
    assert metrics["train_batches_per_epoch"] == 3


def test_ptb_files_with_padded_or_packed_documents_and_the_cell_form(tmp_path):
    # PTB is one document: packing changes nothing in the batches, and the model with in-graph
    # resets has the plain model's weights, so the two runs agree.
    argv = [*SIZES, "--model", "lstm", "--epochs", "1", "--data-dir", str(write_ptb(tmp_path))]
    padded = run(tmp_path, "padded", *argv)
    packed = run(tmp_path, "packed", *argv, "--pack")
    assert packed["train_padding_fraction"] == padded["train_padding_fraction"]
    assert padded["corpus"] == "ptb" and padded["vocabulary"] == 32  # 30 words, <unk>, <eos>
    assert packed["valid_tokens"] == padded["valid_tokens"] == 40 * 9 - 1
    for key in ("valid_perplexity", "test_perplexity"):
        np.testing.assert_allclose(packed[key], padded[key], rtol=1e-5)
    cell = run(tmp_path, "cell", *argv, "--model", "ngram", "--form", "cell", "--units", "18")
    assert cell["form"] == "cell" and np.isfinite(cell["test_perplexity"])


def test_a_finished_run_only_generates_with_its_trained_model(tmp_path, capsys):
    # Trained in mixed precision: float16 layers, a perplexity of a model that learned.
    argv = [*TINY, "--model", "key_value", "--window", "3", "--epochs", "1", "--mixed-precision"]
    argv += ["--workdir", str(tmp_path / "run")]
    trained = main.main(argv)
    assert 1.0 < trained["test_perplexity"] < 202
    assert keras.config.dtype_policy().name == "float32"  # the caller's policy, put back
    corpus = input_pipeline.generated_corpus(1500)
    prompt = " ".join(corpus.decode(corpus.splits["valid"][0][:3]))
    metrics = main.main([*argv, "--generate", "6", "--prompt", prompt, "--temperature", "0"])
    assert metrics["epochs_run_now"] == 0 and metrics["workdir"] == trained["workdir"]
    assert metrics["test_perplexity"] == pytest.approx(trained["test_perplexity"])
    assert metrics["generation"]["prompt"] == prompt
    model = keras.saving.load_model(tmp_path / "run" / "last.keras")
    assert model.get_layer("embedding").dtype_policy.name == "mixed_float16"
    expected = generate(build_step_model(model), corpus.encode(prompt.split())[None], 6, 0)
    assert metrics["generation"]["generated"].split() == corpus.decode(expected[0])
    assert f"{prompt} >> {metrics['generation']['generated']}" in capsys.readouterr().out


# Runs the example in a new process (argv[1]: its arguments as JSON) and kills it with SIGKILL,
# no clean-up of any kind, after the middle batch of its last epoch; without TensorFlow's graph
# optimiser, as in the tests' own process (examples/conftest.py).
KILLER = """
import json, os, signal, sys
import keras
import tensorflow as tf
from examples.language_modeling import main, train

tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


class Kill(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == self.params["epochs"] - 1 and batch == self.params["steps"] // 2:
            os.kill(os.getpid(), signal.SIGKILL)


args = main.parse_args(json.loads(sys.argv[1]))
train.train_and_evaluate(args, args.workdir, [Kill()])
"""


class EpochsRun(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def saved_state(path):
    model = keras.saving.load_model(path)
    state = {f"model/{i}/{v.name}": v.numpy() for i, v in enumerate(model.weights)}
    state.update({f"optimizer/{i}": v.numpy() for i, v in enumerate(model.optimizer.variables)})
    return state


@pytest.mark.slow
def test_killed_in_its_last_epoch_it_resumes_exactly(tmp_path):
    # Window attention with dropout, carried states and document resets, and Zaremba et al.'s
    # learning-rate decay, which the resumed epoch must continue (0.5, not 1 again).
    argv = [*TINY, "--config", "zaremba-small", "--model", "attention", "--full-rate-epochs", "1"]
    argv += ["--window", "3", "--dropout", "0.3", "--epochs", "2"]
    killed = [*argv, "--workdir", str(tmp_path / "resumed")]
    root = FOLDER.parents[1]
    with open(tmp_path / "killed.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", KILLER, json.dumps(killed)],
            cwd=root,
            env=dict(os.environ, PYTHONPATH=str(root), TF_CPP_MIN_LOG_LEVEL="3"),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            straight = run(tmp_path, "straight", *argv)
        finally:
            returncode = process.wait(timeout=900)
    assert returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    keras.backend.clear_session()
    epochs = EpochsRun()
    resumed = run(tmp_path, "resumed", *argv, callbacks=[epochs])
    assert epochs.epochs == [1] and resumed["epochs_run_now"] == 1  # the killed epoch again
    assert resumed["last_epoch_learning_rate"] == 0.5
    same = {"seconds": 0, "workdir": "", "epochs_run_now": 0}
    assert {**resumed, **same} == {**straight, **same}
    for name in ("last.keras", "best.keras"):
        expected, got = (saved_state(tmp_path / run / name) for run in ("straight", "resumed"))
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name}: {key}")


def test_several_replicas_are_refused(capsys, tmp_path, monkeypatch):
    """The model carries per-row states in its variables, which a tf.distribute strategy holds
    as one mirrored copy per replica: with two workers it would train on one replica's states,
    so the run refuses, with status 2 and one line naming --strategy."""
    two_workers = types.SimpleNamespace(num_replicas_in_sync=2)  # multi_worker's, over two
    monkeypatch.setattr(train, "make_strategy", lambda name: two_workers)
    argv = [*TINY, "--strategy", "multi_worker", "--workdir", str(tmp_path / "run")]
    line = error_line(capsys, main.main, argv)
    assert "error: argument --strategy: " in line and "per-row states" in line
    assert "multi_worker with 2 replicas" in line and not (tmp_path / "run").exists()
    # XLA by default, but not for multi_worker's loop, which runs without it.
    assert main.parse_args(["--strategy", "multi_worker"]).jit_compile is False
    assert main.parse_args([]).jit_compile is True


def test_a_run_puts_back_the_callers_dtype_policy(monkeypatch):
    seen = []
    policy = keras.config.dtype_policy
    monkeypatch.setattr(train, "_train_and_evaluate", lambda *_: seen.append(policy().name))
    keras.config.set_dtype_policy("bfloat16")  # the caller's
    for mixed in (True, False):
        train.train_and_evaluate(types.SimpleNamespace(mixed_precision=mixed), *[None] * 2)
    assert seen == ["mixed_float16", "float32"] and policy().name == "bfloat16"


# Valid and test splits of ~1,000 tokens: several documents each, laid out differently; weights
# large enough that the carried state shows in the perplexity.
MANY_DOCUMENTS = [*SIZES, "--generated-tokens", "10000", "--max-train-batches", "2"]
MANY_DOCUMENTS += ["--init-scale", "1.0"]


def _expected_perplexities(workdir):
    """``{(split, document_resets): perplexity}`` of the run's final model, computed in NumPy
    from a stateless copy: each document (or, without document resets, only each BPTT row)
    read from a zero state."""
    trained = keras.saving.load_model(workdir / "last.keras")
    corpus = input_pipeline.generated_corpus(10000)
    alone = models.language_model(
        len(corpus.vocabulary),
        "lstm",
        units=16,
        embedding_dim=8,
        stateful=False,
        sequence_length=None,
    )
    copy_trainable_weights(trained, alone)
    expected = {}
    for split in ("valid", "test"):
        ids, documents = corpus.splits[split]
        for document_resets in (True, False):
            starts = list(documents) if document_resets else [0]
            rows = input_pipeline.bptt_batches(np.arange(len(ids)), starts, 4, 10)
            found = numpy_perplexity(alone, ids, [*starts, *rows.inputs[0, :, 0]])
            expected[split, document_resets] = found
    return corpus, expected


def test_each_split_is_scored_with_its_own_document_resets(tmp_path):
    metrics = run(tmp_path, "run", *MANY_DOCUMENTS, "--model", "lstm", "--epochs", "1")
    corpus, expected = _expected_perplexities(tmp_path / "run")
    # Not vacuous: the two splits start their documents at other places.
    valid, test = (corpus.splits[s][1] for s in ("valid", "test"))
    assert len(valid) > 2 and len(test) > 2 and list(valid) != list(test)
    for split in ("valid", "test"):
        # Not vacuous: the resets change the figure far more than the tolerance.
        assert abs(expected[split, True] / expected[split, False] - 1) > 1e-4
        np.testing.assert_allclose(
            metrics[f"{split}_perplexity"], expected[split, True], rtol=1e-5, err_msg=split
        )


def test_no_document_resets_carries_the_state_across_documents(tmp_path):
    argv = [*MANY_DOCUMENTS, "--model", "lstm", "--epochs", "1", "--no-document-resets"]
    metrics = run(tmp_path, "run", *argv)
    corpus, expected = _expected_perplexities(tmp_path / "run")
    for split in ("valid", "test"):
        assert abs(expected[split, True] / expected[split, False] - 1) > 1e-4
        np.testing.assert_allclose(
            metrics[f"{split}_perplexity"], expected[split, False], rtol=1e-5, err_msg=split
        )
    # Back to back, the documents leave only the last row's tail as padding.
    ids, _ = corpus.splits["train"]
    full = input_pipeline.bptt_batches(ids, [0], 4, 10).take(2)
    assert metrics["train_tokens_per_epoch"] == full.num_targets == 2 * 4 * 10


class _ScrambleBefore(keras.callbacks.Callback):
    """Scrambles the trainable weights before epoch ``epoch``: that epoch ends worse."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            rng = np.random.default_rng(0)
            for weight in self.model.trainable_weights:
                weight.assign(rng.uniform(-3, 3, weight.shape).astype(weight.dtype))


def test_patience_scores_the_best_epoch_and_reports_it_counted_from_one(tmp_path):
    argv = [*TINY, "--model", "lstm", "--epochs", "2", "--patience", "2"]
    metrics = run(tmp_path, "run", *argv, callbacks=[_ScrambleBefore(1)])
    validation = metrics["history"]["val_perplexity"]
    assert validation[1] > 2 * validation[0]  # the last epoch is not the best
    assert metrics["best_epoch"] == 1
    # The weights EarlyStopping keeps are the best epoch's: the scores are that epoch's.
    assert metrics["valid_perplexity"] == pytest.approx(validation[0], rel=1e-4)


def test_the_attention_views_read_the_validation_split_and_parameters_are_trainable(tmp_path):
    argv = [*TINY, "--model", "attention", "--window", "3", "--epochs", "1"]
    argv += ["--probe-length", "4", "--init-scale", "1.0"]
    metrics = run(tmp_path, "run", *argv)
    corpus = input_pipeline.generated_corpus(1500)
    ids, starts = corpus.splits["valid"]
    # The probe sentence: the validation split's first words.
    (text,) = summaries(tmp_path / "run" / "logs")["window_attention/probe_sentence_text"]
    words = " ".join(corpus.decode(ids[:4]))
    assert words in tf.make_ndarray(text.tensor).item().decode()
    # The average attention per position: over the validation text, as the run lays it out.
    trained = keras.saving.load_model(tmp_path / "run" / "last.keras")
    options = dict(units=16, embedding_dim=8, window=3, stateful=False, sequence_length=None)
    probe = models.language_model(
        len(corpus.vocabulary), "attention", return_attention_scores=True, **options
    )
    copy_trainable_weights(trained, probe)

    def average(split):
        rows = input_pipeline.bptt_batches(*corpus.splits[split], 4, 10).inputs[:2]
        _, scores = probe(np.concatenate(list(rows), axis=1))
        return average_attention_by_position(np.asarray(scores, np.float64), 3)

    expected, other = average("valid"), average("train")
    assert np.abs(expected - other).max() > 1e-3  # not vacuous
    np.testing.assert_allclose(metrics["attention_by_position"], expected, atol=1e-4)
    # The parameters: the trainable ones, not the carried window of outputs.
    stateless = models.language_model(len(corpus.vocabulary), "attention", **options)
    assert metrics["parameters"] == stateless.count_params()
