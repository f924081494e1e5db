"""The auto-encoding example's command line: bad options exit 2 with one line, the runs end to
end (TensorBoard, HParams, metrics), the folder run alone, and a run killed in its last epoch
resuming exactly."""

import inspect
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES
from tf_memlayers.layers.associative_memory.dual_associative_gru import DUAL_KEYS

from . import input_pipeline, main, models, probes, train

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
TINY = "--max-train 64 --units 8 --embedding-dim 6 --epochs 1 --verbose 0".split()
GENERATED = ["--train-size", "small"]  # the generated corpus's options
PROBED = ["--probe-sentences", "2"]  # the memory models'


def _error_line(capsys, call, argv):
    """Calls ``call(argv)``; returns the one line it wrote to stderr, exiting with 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        call(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and not captured.out, captured
    return captured.err.strip()


BAD = [
    *(["--epochs", value] for value in ("-1", "0", "2.5")),
    *(["--learning-rate", value] for value in ("-1", "0", "nan", "inf")),
    *(["--batch-size", "0"], ["--embedding-dim", "0"], ["--seed", "-1"], ["--verbose", "3"]),
    *(["--strategy", "tpu"], ["--data-dir", "/nonexistent/corpus"], ["--workdir"]),
    *(["--units", "7"], ["--units", "0"], ["--model", "lstm"], ["--beams", "0"]),
    *(["--max-vocabulary", "4"], ["--max-length", "0"], ["--max-train", "0"]),
    *(["--dual-key", "both"], ["--num-copies", "0"], ["--init-scale", "0"]),
    *(["--clip-norm", "-5"], ["--probe-sentences", "0"], ["--train-size", "huge"]),
    ["--max-length", "3"],  # the generated sentences have 5 to 14 words
    # Options that the other options leave unread. DATA: a folder of sentence files.
    *(["--num-copies", "2", "--model", model] for model in ("attention", "gru")),
    ["--dual-key", "paper", "--model", "attention"],
    ["--train-size", "small", "--data-dir", "DATA"],
    ["--probe-sentences", "4", "--model", "gru"],
    ["--jit-compile", "--strategy", "multi_worker"],
]


def _sentence_files(folder):
    """``folder`` with train, valid and test files of a few generated sentences."""
    words = input_pipeline.generated_sentences(90, seed=2)
    folder.mkdir()
    for split, part in (("train", words[:60]), ("valid", words[60:75]), ("test", words[75:])):
        (folder / f"{split}.txt").write_text("\n".join(" ".join(s) for s in part) + "\n")
    return folder


@pytest.mark.parametrize("argv", BAD, ids=" ".join)
def test_a_bad_value_is_one_line_naming_the_option(capsys, tmp_path, argv):
    if "DATA" in argv:
        argv = [str(_sentence_files(tmp_path / "data")) if a == "DATA" else a for a in argv]
    assert f"error: argument {argv[0]}" in _error_line(capsys, main.parse_args, argv)


def test_bad_paths_and_a_missing_keras_hub_are_named(capsys, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    line = _error_line(capsys, main.parse_args, ["--data-dir", str(tmp_path)])
    assert "error: argument --data-dir" in line and f"{tmp_path} must hold one train" in line
    line = _error_line(capsys, main.parse_args, ["--workdir", str(tmp_path / "notes.txt")])
    assert "error: argument --workdir" in line and "is a file, not a directory" in line
    line = _error_line(capsys, main.parse_args, ["--workdir", str(tmp_path / "notes.txt/run")])
    assert "error: argument --workdir" in line and "cannot be created" in line
    for workdir in (tmp_path / "new" / "run", tmp_path):  # to create, or there
        assert main.parse_args(["--workdir", str(workdir)]).workdir == str(workdir)
    # Files found but unreadable: refused when read, before the run starts.
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("" if split == "valid" else "a b\n")
    run = tmp_path / "run"
    line = _error_line(capsys, main.main, ["--data-dir", str(tmp_path), "--workdir", str(run)])
    assert "error: argument --data-dir" in line and "valid.txt is empty" in line
    assert not run.exists()
    (tmp_path / "valid.txt").write_text("a b\n")  # a folder that cannot be made: a link to none
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    line = _error_line(
        capsys, main.main, ["--data-dir", str(tmp_path), "--workdir", str(tmp_path / "gone/run")]
    )
    assert "error: argument --workdir" in line and "No such file or directory" in line
    monkeypatch.setitem(sys.modules, "keras_hub", None)  # not installed
    line = _error_line(capsys, main.parse_args, ["--beams", "4"])
    assert "error: argument --beams" in line and "tf-memlayers[keras-hub]" in line


def test_help_lists_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main.parse_args(["--help"])
    assert exit_info.value.code == 0
    entries, current = {}, None
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
        else:
            current = None
    entries.pop("-h")
    assert len(entries) == 23
    for text in entries.values():
        assert "default" in text and "default: None" not in text, text
    # The spellings the other examples share, as the layers and builders name them.
    shared = "--units --model --embedding-dim --init-scale --clip-norm --learning-rate"
    shared += (
        " --batch-size --epochs --seed --jit-compile --strategy --data-dir --workdir --verbose"
    )
    assert set(shared.split()) <= set(entries)


def test_the_papers_copies_and_the_dual_keys_are_the_packages():
    # The folder writes them out (a copy runs on the package's documented names only).
    parser = main.make_parser()
    assert parser.parse_args([]).num_copies == NUM_COPIES
    assert (
        inspect.signature(models.build_autoencoder).parameters["num_copies"].default == NUM_COPIES
    )
    assert "{" + ",".join(DUAL_KEYS) + "}" in parser.format_help()


def _run_directory(*argv):
    parser = main.make_parser()
    return main.run_directory(*main.run_settings(main.parse_args(argv, parser), parser))


def test_a_run_directory_is_named_after_the_options_that_change_the_run(tmp_path):
    default = _run_directory()
    assert re.fullmatch(r"runs/seq2seq_autoencoder/dual_am_gru-[0-9a-f]{8}", default)
    # How long, how verbosely or where a run trains, and how it is evaluated, name no other run.
    assert (
        _run_directory("--epochs", "3", "--verbose", "0", "--beams", "2", "--jit-compile")
        == default
    )
    gru = _run_directory("--model", "gru", "--units", "8")
    assert re.fullmatch(r"runs/seq2seq_autoencoder/gru-model=gru_units=8-[0-9a-f]{8}", gru)
    (tmp_path / "ptb").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "ptb" / f"ptb.{split}.txt").write_text("a b\n")
    files = _run_directory("--data-dir", str(tmp_path / "ptb"))
    assert files.startswith("runs/seq2seq_autoencoder/dual_am_gru-data_dir=ptb-")
    assert files[-8:] != default[-8:]


def test_the_script_exits_2_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH")}
    script = REPOSITORY / "examples" / "seq2seq_autoencoder.py"
    argv = ["--units", "7", "--workdir", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr
    # One line: none of TensorFlow's start-up lines either.
    assert (
        done.stderr.startswith("seq2seq_autoencoder.py: error: argument --units: must be even")
        and len(done.stderr.splitlines()) == 1
    ), done.stderr
    assert not (tmp_path / "run").exists()


def _events(folder):
    """``{tag: [step, ...]}`` of the TensorBoard event files under ``folder``."""
    found = {}
    for path in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                found.setdefault(value.tag, []).append(event.step)
    return found


def _hparams(log_dir):
    """The settings logged for TensorBoard's HParams dashboard in ``log_dir``."""
    from tensorboard.plugins.hparams import metadata

    for path in pathlib.Path(log_dir).glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == metadata.SESSION_START_INFO_TAG:
                    content = value.metadata.plugin_data.content
                    hparams = metadata.parse_session_start_info_plugin_data(content).hparams
                    return {k: getattr(v, v.WhichOneof("kind")) for k, v in hparams.items()}
    return None


def assert_reported(workdir, metrics, argv, epochs):
    """What a finished run reports: its metrics, HParams and TensorBoard views."""
    model = metrics["model"]
    assert json.loads((workdir / "metrics.json").read_text()) == metrics
    for name in ("test_perplexity", "test_word_accuracy", "decoded_word_accuracy"):
        assert np.isfinite(metrics[name]), name
    assert (
        metrics["epochs_run"] == list(range(epochs)) and len(metrics["history"]["loss"]) == epochs
    )
    assert set(metrics["memory"]) == set(probes.STATISTICS[model])
    heatmap = metrics["probe_heatmap"]
    if model != "gru":  # one row per decoder input word, one column per source word
        assert np.shape(heatmap["matrix"]) == (len(heatmap["source"]) + 1, len(heatmap["source"]))
        assert heatmap["decoder_input"][1:] == heatmap["source"]
    hparams = _hparams(workdir / "logs")
    assert hparams["model"] == model and hparams["source"] == metrics["source"]
    # Logged under the options' own names, as in every example.
    assert set(hparams) - {"source"} <= set(vars(main.parse_args(argv)))
    assert {"test_perplexity", "decoded_exact_match"} <= set(_events(workdir / "logs"))
    # Each memory draws in its own run (the attention in ``attention``, as in the SNLI
    # example), after every epoch; the GRU has nothing to draw and leaves no empty run.
    drawn = {run for run in probes.RUNS.values() if (workdir / "logs" / run).exists()}
    assert drawn == ({probes.RUNS[model]} if model != "gru" else set())
    for run in drawn:
        image = f"{run}/retrieval" if run == "memory" else f"{run}/alignment"
        tags = {f"{run}/{name}" for name in probes.STATISTICS[model]} | {image, f"{image}/table"}
        events = _events(workdir / "logs" / run)
        assert set(events) == tags and all(events[t] == list(range(epochs)) for t in tags)


def test_the_attention_model_runs_and_a_finished_run_decodes_again(tmp_path, capsys, monkeypatch):
    fits, fit = [], keras.Model.fit
    monkeypatch.setattr(keras.Model, "fit", lambda *a, **k: fits.append(k) or fit(*a, **k))
    argv = [*TINY, *GENERATED, *PROBED, "--model", "attention", "--workdir", str(tmp_path / "run")]
    metrics = main.main(argv)
    # Keras warns that shuffle=True does nothing for a tf.data pipeline, which shuffles.
    assert fits[0]["shuffle"] is False
    printed = capsys.readouterr().out.split("METRICS ")[-1]
    assert json.loads(printed) == metrics and metrics["train_sentences"] == 64
    assert_reported(tmp_path / "run", metrics, argv, epochs=1)
    # The same command resumes the finished run: nothing more to train. It decodes the test
    # sentences again, here with keras-hub's beam search (--beams names no other run).
    again = main.main([*argv, "--beams", "3"])
    assert again["history"] == metrics["history"] and again["epochs_run"] == [0]
    assert 0 <= again["decoded_word_accuracy"] <= 1
    # Another command in the same run directory is refused, before the model is built.
    monkeypatch.setattr(train.models, "build_autoencoder", None)
    line = _error_line(capsys, main.main, [*argv, "--units", "10"])
    assert "error: argument --workdir: " in line and "units: 8 there, 10 now" in line


def test_the_folder_runs_alone_on_sentence_files(run_forked, tmp_path):
    data = _sentence_files(tmp_path / "data")
    argv = [*TINY, "--model", "gru", "--data-dir", data, "--workdir", tmp_path / "run"]
    done = run_forked("seq2seq", *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.split("METRICS ")[-1])
    assert metrics["source"] == "files" and metrics["test_sentences"] == 15
    assert metrics["probe_heatmap"] is None and metrics["memory"] == {}
    assert_reported(tmp_path / "run", metrics, [*map(str, argv)], epochs=1)


# Runs the example in a new process and kills it with SIGKILL (no clean-up of any kind) at the
# end of the middle batch of its last epoch. Without TensorFlow's graph optimiser, as in the
# tests' own process (examples/conftest.py): the resumed run continues from this process's
# weights, and must end where the straight run ends.
KILLER = """
import os, signal, sys
import keras, tensorflow as tf
from examples.seq2seq import main, train

tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})


class Kill(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.last = epoch == self.params["epochs"] - 1

    def on_train_batch_end(self, batch, logs=None):
        if self.last and batch == self.params["steps"] // 2:
            os.kill(os.getpid(), signal.SIGKILL)


fit = train.train
train.train = lambda *args, callbacks, **kw: fit(*args, callbacks=[Kill(), *callbacks], **kw)
main.main(sys.argv[1:])
"""


class _Epochs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


def _saved_state(path):
    """Weights and optimizer variables of a saved model, by position."""
    model = keras.saving.load_model(path)
    return [v.numpy() for v in model.weights + model.optimizer.variables]


@pytest.mark.slow
def test_a_run_killed_in_its_last_epoch_resumes_exactly(tmp_path, monkeypatch):
    # The Dual AM-GRU, two epochs long enough to learn; its memory probed after each.
    argv = [*TINY, *GENERATED, *PROBED, "--num-copies", "2", "--epochs", "2", "--max-train", "200"]
    argv += ["--learning-rate", "1e-2"]
    env = dict(os.environ, PYTHONPATH=str(REPOSITORY), TF_CPP_MIN_LOG_LEVEL="3")
    with open(tmp_path / "killed.log", "w") as log:
        killed = subprocess.Popen(
            [sys.executable, "-c", KILLER, *argv, "--workdir", str(tmp_path / "resumed")],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            straight = main.main([*argv, "--workdir", str(tmp_path / "straight")])
        finally:
            returncode = killed.wait(timeout=900)
    assert returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    keras.backend.clear_session()
    epochs, fit = _Epochs(), train.train
    monkeypatch.setattr(
        train, "train", lambda *a, callbacks, **k: fit(*a, callbacks=[epochs, *callbacks], **k)
    )
    resumed = main.main([*argv, "--workdir", str(tmp_path / "resumed")])
    assert epochs.epochs == [1]  # only the interrupted epoch ran again
    process = ("seconds", "workdir")
    assert {k: v for k, v in resumed.items() if k not in process} == {
        k: v for k, v in straight.items() if k not in process
    }
    for name in ("last.keras", "best.keras"):
        for got, expected in zip(
            _saved_state(tmp_path / "resumed" / name), _saved_state(tmp_path / "straight" / name)
        ):
            np.testing.assert_array_equal(got, expected, err_msg=name)
    # What the run reports and logs, on the run that was never interrupted (the resumed run's
    # event files also hold the killed process's records).
    assert straight["history"]["loss"][1] < straight["history"]["loss"][0]
    assert_reported(tmp_path / "straight", straight, argv, epochs=2)


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
def test_two_workers_train_as_one_process_on_their_global_batches(tmp_path):
    # Two local workers of --batch-size 16 each, one process of 32: the same global batches.
    argv = [*TINY, *GENERATED, "--model", "gru", "--workdir", str(tmp_path / "workers")]
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    workers = []
    for index in range(2):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config), PYTHONPATH=str(REPOSITORY))
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU: one device per worker
        command = [sys.executable, "-m", "examples.seq2seq", *argv, "--batch-size", "16"]
        workers.append(
            subprocess.Popen(
                [*command, "--strategy", "multi_worker"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        alone = main.main([*argv[:-1], str(tmp_path / "alone"), "--strategy", "default"])
        outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [worker.returncode for worker in workers] == [0, 0], outputs[-1][-3000:]
    chief, other = (json.loads(output.split("METRICS ")[-1]) for output in outputs)
    assert {k: v for k, v in other.items() if k != "seconds"} == {
        k: v for k, v in chief.items() if k != "seconds"
    }
    assert json.loads((tmp_path / "workers" / "metrics.json").read_text()) == chief
    for name, values in alone["history"].items():
        np.testing.assert_allclose(chief["history"][name], values, rtol=1e-5, err_msg=name)
    for got, expected in zip(
        _saved_state(tmp_path / "workers" / "last.keras"),
        _saved_state(tmp_path / "alone" / "last.keras"),
    ):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_jit_is_refused_under_several_replicas(capsys, monkeypatch, tmp_path):
    mirrored = type("MirroredStrategy", (), {"num_replicas_in_sync": 2})
    monkeypatch.setattr(train, "make_strategy", lambda name: mirrored())
    line = _error_line(
        capsys, main.main, [*TINY, *GENERATED, "--jit-compile", "--workdir", str(tmp_path / "run")]
    )
    assert line.endswith(
        "argument --jit-compile: compiles the train step with XLA, which cannot train over the 2 "
        "replicas of MirroredStrategy (one XLA program cannot reach the variables held on the "
        "other devices); use --no-jit-compile"
    )
    assert not (tmp_path / "run").exists()


def test_a_run_puts_back_the_callers_dtype_policy(monkeypatch):
    seen = []
    policy = keras.config.dtype_policy
    monkeypatch.setattr(train, "_train_and_evaluate", lambda *_: seen.append(policy().name))
    keras.config.set_dtype_policy("bfloat16")  # the caller's
    for mixed in (True, False):
        train.train_and_evaluate(types.SimpleNamespace(mixed_precision=mixed), *[None] * 4)
    assert seen == ["mixed_float16", "float32"] and policy().name == "bfloat16"


def test_max_length_5_is_accepted_for_the_generated_corpus():
    assert main.parse_args(["--max-length", "5"]).max_length == 5  # the shortest sentences


def test_the_am_gru_options_name_another_dual_am_gru_run():
    default = _run_directory()
    assert _run_directory("--num-copies", "2") != default
    assert _run_directory("--dual-key", "paper") != default


class _Decoder:
    """An auto-encoder stub whose decode returns the given rows."""

    def __init__(self, rows):
        self.rows = rows

    def decode(self, source, max_steps, bos_id, eos_id, sampler=None):
        assert max_steps == source.shape[1] + 1  # room for the longest sentence's <eos>
        return self.rows[: len(source)]


def test_the_decoded_scores_count_the_words_and_eos_only():
    vocabulary = input_pipeline.build_vocabulary([["a", "b", "c"]])
    sentences = [["a", "b", "c"], ["a"]]
    _, _, target = input_pipeline.encode(sentences, vocabulary, 4)
    decoded = target.copy()
    decoded[0, 1] = vocabulary.index("c")  # one word of 6 (4 + 2 with <eos>) wrong
    scores = train.decoded_scores(_Decoder(decoded), sentences, vocabulary, 4, beams=1)
    assert scores == {"decoded_exact_match": 0.5, "decoded_word_accuracy": round(5 / 6, 4)}


def test_the_teacher_forced_scores_count_the_words_and_eos_only():
    # Logits favouring id 1 everywhere, with probability p = 0.6 at the words and <eos>.
    target = np.array([[4, 5, 3, 0], [4, 3, 0, 0]])
    logits = np.zeros((2, 4, 6))
    logits[..., 1] = np.log(0.6 / 0.4 * 5)  # softmax: 0.6 on id 1, 0.08 on each other
    logits[target == 0, 0] = 20.0  # the padding predicted with certainty: not counted
    stub = types.SimpleNamespace(distribute_strategy=None, predict_on_batch=lambda _: logits)
    data = [((np.zeros((2, 3)), np.zeros((2, 4))), target)]
    scores = train.teacher_forced_scores(stub, data)
    assert scores["test_loss"] == round(-np.log(0.08), 4)  # 5 words and <eos>, none correct
    assert scores["test_word_accuracy"] == 0.0


def test_a_run_scores_and_probes_the_test_sentences_with_the_training_vocabulary(tmp_path):
    words = input_pipeline.generated_sentences(90, seed=2)
    folder = tmp_path / "data"
    folder.mkdir()
    parts = (("train", words[:60]), ("valid", words[60:75]), ("test", words[75:]))
    for split, part in parts:
        lines = [" ".join(s + (["zebra"] if split == "test" else [])) for s in part]
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n")
    # Large weights: each split's loss its own, far from the uniform guess's.
    argv = "--units 8 --embedding-dim 6 --epochs 1 --verbose 0 --model attention".split()
    argv += ["--init-scale", "1.0"]
    argv += [
        "--probe-sentences",
        "2",
        "--data-dir",
        str(folder),
        "--workdir",
        str(tmp_path / "run"),
    ]
    metrics = main.main(argv)
    vocabulary = input_pipeline.build_vocabulary(words[:60])  # the training words only: no zebra
    assert metrics["vocabulary"] == len(vocabulary)
    test = [s + ["zebra"] for s in words[75:]]
    # The probes read the first test sentence (zebra read as <unk>).
    assert metrics["probe_heatmap"]["source"] == [
        w if w in vocabulary else "<unk>" for w in test[0]
    ]
    # The teacher-forced test loss: the trained model's, over the test sentences' words and <eos>.
    model = keras.saving.load_model(tmp_path / "run" / "last.keras")
    source, decoder_input, target = input_pipeline.encode(test, vocabulary, 16)
    logits = np.asarray(model.predict_on_batch([source, decoder_input]), np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    words_ = target > 0
    expected = -np.take_along_axis(log_probs, target[..., None], -1)[..., 0][words_].mean()
    assert metrics["test_loss"] == pytest.approx(expected, abs=1e-4)  # rounded to 4 digits
