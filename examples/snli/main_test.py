"""The SNLI example's command line and its runs end to end: a bad option exits 2 with one line,
one run directory per set of options, the folder forked, a run killed and resumed exactly, and
two workers training as one process."""

import glob
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import metadata

from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES
from tf_memlayers.layers.associative_memory.dual_associative_gru import DUAL_KEYS
from tf_memlayers.models.snli import PAPER_UNITS

from . import main, train

EXAMPLES = pathlib.Path(__file__).resolve().parents[1]
SIZES = "--train-size small --max-train 100 --units 8 --embedding-dim 8 --batch-size 25".split()
TINY = [*SIZES, "--eval-every", "2", "--verbose", "0", "--padding", "fixed"]


def _error_line(capsys, call, argv):
    """Calls ``call(argv)``; returns the one line it wrote to stderr, exiting with status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        call(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and not captured.out, captured
    return captured.err.strip()


BAD = [
    (["--epochs", "0"], "--epochs"),
    (["--epochs", "2.5"], "--epochs"),
    (["--patience", "0"], "--patience"),
    (["--learning-rate", "0"], "--learning-rate"),
    (["--learning-rate", "nan"], "--learning-rate"),
    (["--learning-rate", "inf"], "--learning-rate"),
    (["--batch-size", "0"], "--batch-size"),
    (["--embedding-dim", "0"], "--embedding-dim"),
    (["--seed", "-1"], "--seed"),
    (["--verbose", "3"], "--verbose"),
    (["--strategy", "tpu"], "--strategy"),
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
    (["--dual-key", "both"], "--dual-key"),
    (["--train-size", "huge"], "--train-size"),
    (["--embeddings", "/nonexistent/glove.txt"], "--embeddings"),
    (["--data-dir", "/nonexistent/snli"], "--data-dir"),
    (["--workdir"], "--workdir"),
    (["--source", "files"], "--source"),
    (["--download", "--source", "generated"], "--download"),
    (["--tfds-data-dir", "/nonexistent/tfds"], "--tfds-data-dir"),
    (["--tfds-data-dir", ".", "--source", "generated"], "--tfds-data-dir"),
    (["--fused-loop", "--model", "gru"], "--fused-loop"),
    (["--fused-loop", "--model", "word_by_word"], "--fused-loop"),
    # Options this run would take and never read.
    (["--model", "word_by_word", "--top-units", "5"], "--top-units"),
    (["--no-fused-loop", "--model", "gru"], "--fused-loop"),
    (["--model", "gru", "--num-copies", "4"], "--num-copies"),
    (["--model", "word_by_word", "--num-copies", "4"], "--num-copies"),
    (["--model", "am_gru", "--dual-key", "released"], "--dual-key"),
    (["--model", "word_by_word", "--dual-key", "released"], "--dual-key"),
    (["--train-size", "small", "--source", "tfds"], "--train-size"),
    (["--train-size", "small", "--download"], "--train-size"),
    (["--train-size", "small", "--tfds-data-dir", "."], "--train-size"),
    (["--embeddings", __file__, "--embedding-dim", "8"], "--embedding-dim"),
    (["--jit-compile", "--strategy", "multi_worker"], "--jit-compile"),
]


@pytest.mark.parametrize("argv,option", BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_a_bad_value_is_one_line_naming_the_option(capsys, argv, option):
    assert f"error: argument {option}: " in _error_line(capsys, main.parse_args, argv)


def test_the_papers_sizes_and_the_dual_keys_are_the_packages():
    # The folder writes them out (a copy runs on the package's documented names only).
    parser = main.make_parser()
    defaults = parser.parse_args([])
    assert (defaults.units, defaults.num_copies) == (PAPER_UNITS, NUM_COPIES)
    assert "{" + ",".join(DUAL_KEYS) + "}" in parser.format_help()


@pytest.mark.parametrize("old", sorted(main.RENAMED))
def test_an_option_spelled_as_in_0_2_is_refused_naming_its_new_spelling(capsys, old):
    new = main.RENAMED[old]
    help_text = main.make_parser().format_help()
    assert new in help_text.replace("[", " ").replace(",", " ").split()  # an option now
    for argv in ([old, "1"], [f"{old}=1"], ["--seed", "2", old], ["--bogus", old]):
        assert f"error: argument {old}: renamed {new} in 0.3" in _error_line(
            capsys, main.parse_args, argv
        )


def test_paths_are_checked_when_parsed(capsys, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    line = _error_line(capsys, main.parse_args, ["--data-dir", str(tmp_path)])
    assert "argument --data-dir: " in line and "holds no SNLI 1.0 files" in line
    for split in ("train", "dev", "test"):
        (tmp_path / f"snli_1.0_{split}.jsonl").write_text("")
    for source in ("tfds", "generated"):
        line = _error_line(
            capsys, main.parse_args, ["--data-dir", str(tmp_path), "--source", source]
        )
        assert (
            f"--data-dir: is read with --source auto or files, not with --source {source}" in line
        )
    line = _error_line(
        capsys, main.parse_args, ["--data-dir", str(tmp_path), "--train-size", "full"]
    )
    assert "argument --train-size: sizes the generated corpus" in line
    a_file = tmp_path / "notes.txt"
    line = _error_line(capsys, main.parse_args, ["--workdir", str(a_file)])
    assert "argument --workdir: " in line and "is a file, not a directory" in line
    line = _error_line(capsys, main.parse_args, ["--workdir", str(a_file / "run")])
    assert "argument --workdir: " in line and "cannot be created" in line
    for workdir in (tmp_path / "new" / "run", tmp_path):
        assert main.parse_args(["--workdir", str(workdir)]).workdir == str(workdir)
    # `~` is expanded (the shell leaves `--option=~/x` alone) and links are followed: another
    # spelling of the same folder is the same run's data.
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main.parse_args(["--data-dir=~/link"]).data_dir == str(tmp_path)
    assert main.parse_args(["--workdir=~/run"]).workdir == str(tmp_path / "run")
    (tmp_path / "v.txt.gz").symlink_to(tmp_path / "notes.txt")  # a file's name tells its format
    embeddings = main.parse_args(["--embeddings=~/link/v.txt.gz"]).embeddings
    assert embeddings == str(tmp_path / "v.txt.gz")


def test_what_the_run_finds_wrong_is_one_line_naming_the_option(capsys, tmp_path, monkeypatch):
    (tmp_path / "glove.txt").write_text("cat 1 2\ndog 1 2 3\n")
    small = ["--max-train", "30", "--workdir", str(tmp_path / "run")]
    generated = ["--train-size", "small"]
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # as if not installed
    for argv, option, message in [
        (
            [*generated, "--embeddings", str(tmp_path / "glove.txt")],
            "--embeddings",
            "glove.txt, line 2",
        ),
        (
            [*generated, "--fused-loop", "--dual-key", "released"],
            "--fused-loop",
            "dual_key='paper' only",
        ),
        ([*generated, "--units", "7"], "--units", "7"),  # an associative memory's width is even
        ([*generated, "--units", "7", "--fused-loop"], "--units", "7"),
        (["--source", "tfds"], "--source", "pip install tensorflow-datasets"),
        # A folder given is the source asked for: no falling back to the generated corpus.
        (["--tfds-data-dir", str(tmp_path)], "--tfds-data-dir", "pip install tensorflow-datasets"),
        # --download prepares SNLI in --tfds-data-dir: what fails is the download asked for.
        (["--download", "--tfds-data-dir", str(tmp_path)], "--download", "pip install tensorflow"),
    ]:
        line = _error_line(capsys, main.main, [*small, *argv])
        assert f"error: argument {option}: " in line and message in line, line
    assert not (tmp_path / "run").exists()  # each refused before the run started


def test_the_script_exits_2_with_one_line(tmp_path):
    # None of TensorFlow's C++ start-up lines either (its absl and CUDA-stub lines).
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH")}
    argv = ["--fused-loop", "--dual-key", "released", "--train-size", "small", "--units", "8"]
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "snli_dual_am_gru.py"), *argv, "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 2 and not done.stdout, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("snli_dual_am_gru.py: error: argument --fused-loop: ")
    assert not os.listdir(tmp_path)


def test_help_shows_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main.parse_args(["--help"])
    assert exit_info.value.code == 0
    entries, current = {}, None
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  --"):
            current = line.split()[0].split(",")[0]
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
        else:
            current = None
    options = {"--" + name.replace("_", "-") for name in vars(main.parse_args([]))}
    assert set(entries) == options, sorted(set(entries) ^ options)
    for text in entries.values():  # once: in its own words, else as "(default: X)"
        assert text.count("default:") == 1 and "default: None" not in text, text


class _TrainingBegan(Exception):
    pass


def test_the_run_directory_is_one_per_set_of_options(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    def fit(self, *args, **kwargs):  # stops each run where training begins
        calls.append(kwargs)
        raise _TrainingBegan

    monkeypatch.setattr(keras.Model, "fit", fit)
    argv = [*TINY, "--model", "gru"]
    for extra in ([], ["--epochs", "3"], ["--units", "10"]):  # --epochs: the same run
        with pytest.raises(_TrainingBegan):
            main.main([*argv, *extra])
    # The tf.data pipeline shuffles: fit must not (Keras warns that it ignores shuffle=True).
    assert [call["shuffle"] for call in calls] == [False] * 3
    runs = sorted(os.listdir(tmp_path / main.DEFAULT_ROOT))
    # Named after the model and the options changed from their defaults (cut to 80
    # characters), then a digest of the settings.
    assert len(runs) == 2, runs
    assert all(run.startswith("gru-batch_size=25_embedding_dim=8_eval_every=2_") for run in runs)
    workdir = os.path.join(main.DEFAULT_ROOT, runs[0])
    (tmp_path / "tfds").mkdir()  # a folder however spelled: one run
    spellings = ("tfds", "./tfds/", str(tmp_path / "tfds"))
    tfds = [main.parse_args(["--source", "tfds", "--tfds-data-dir", s]) for s in spellings]
    assert len({main.run_directory(config, {}) for config in tfds}) == 1
    line = _error_line(capsys, main.main, [*TINY, "--workdir", workdir])
    assert "argument --workdir: " in line and "model: 'gru' there, 'dual_am_gru' now" in line


def _events(folder):
    """``{tag: [(step, value)]}`` of the TensorBoard event files under ``folder``."""
    events = {}
    for path in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                events.setdefault(value.tag, []).append((event.step, value))
    return events


def test_the_stopping_rule_ends_the_run_after_patience_checks_without_improvement(
    tmp_path, capsys, monkeypatch
):
    argv = [*TINY, "--model", "gru", "--epochs", "6", "--patience", "1"]
    given, fit = [], train.train
    monkeypatch.setattr(
        train,
        "train",
        lambda *a, callbacks, **k: fit(*a, callbacks=given.extend(callbacks) or callbacks, **k),
    )
    metrics = main.main([*argv, "--workdir", str(tmp_path / "run")])
    # The learning-rate and stopping rules count a dev check as an improvement by 0.001.
    kinds = (keras.callbacks.ReduceLROnPlateau, keras.callbacks.EarlyStopping)
    rules = [callback for callback in given if isinstance(callback, kinds)]
    assert len(rules) == 2 and all(rule.min_delta == 1e-3 for rule in rules)
    # --verbose 0 is silent: the rules' messages too (the learning rate was halved, the run
    # stopped).
    printed = capsys.readouterr().out
    assert "ReduceLROnPlateau" not in printed and "early stopping" not in printed, printed
    best, waited, stop = -1.0, 0, None
    for epoch, accuracy in enumerate(metrics["dev_accuracy"]):  # the rule, written out
        best, waited = (accuracy, 0) if accuracy - 1e-3 > best else (best, waited + 1)
        if waited >= 1:
            stop = epoch
            break
    assert stop is not None and metrics["epochs_run"] == list(range(stop + 1))


@pytest.mark.slow
def test_the_forked_folder_trains_the_word_by_word_model(run_forked, tmp_path):
    workdir = tmp_path / "run"
    argv = [*TINY, "--model", "word_by_word", "--epochs", "1", "--workdir", workdir]
    done = run_forked("snli", *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.split("METRICS ")[-1])
    assert metrics["model"] == "word_by_word" and metrics["source"] == "generated"
    assert metrics["epochs_run"] == [0] and metrics["train_pairs"] == 100
    assert json.loads((workdir / "metrics.json").read_text()) == metrics
    # The attention's weights over the premise, drawn once; no memory to draw.
    assert [step for step, _ in _events(workdir / "logs" / "attention")["attention/alignment"]] == [
        0
    ]
    assert not (workdir / "logs" / "memory").exists()


# Runs the example in a new process: "kill" (SIGKILL, no clean-up of any kind, at the end of the
# middle batch of the last epoch) or "twice" (one epoch, then the same run continued to two,
# with the model's weights and the results written to OUT.npz and OUT.json). Without
# TensorFlow's graph optimiser, as in the tests' own process (examples/conftest.py).
JOB = """
import json, os, signal, sys
import keras, numpy as np, tensorflow as tf
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
from examples.snli import main

class Job(keras.callbacks.Callback):
    def __init__(self, kill):
        super().__init__()
        self.kill, self.epochs = kill, []
    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)
    def on_train_batch_end(self, batch, logs=None):
        last = self.epochs[-1] == self.params["epochs"] - 1
        if self.kill and last and batch == self.params["steps"] // 2:
            os.kill(os.getpid(), signal.SIGKILL)
    def on_train_end(self, logs=None):
        self.weights = [w.numpy() for w in self.model.weights]

what, argv, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if what == "kill":
    main.main(argv, extra_callbacks=[Job(kill=True)])
first = main.main([*argv, "--epochs", "1"])
job = Job(kill=False)
metrics = main.main([*argv, "--epochs", "2"], extra_callbacks=[job])
np.savez(out + ".npz", *job.weights)
with open(out + ".json", "w") as handle:
    json.dump(dict(metrics, first_run=first, epochs_run_by_second_run=job.epochs), handle)
"""


def _start(what, argv, out, **env):
    environment = dict(os.environ, PYTHONPATH=str(EXAMPLES.parent), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen(
        [sys.executable, "-c", JOB, what, json.dumps([*map(str, argv)]), str(out)],
        env=dict(environment, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _saved_state(path):
    """The weights and optimizer variables of a saved model, by position."""
    model = keras.saving.load_model(path)
    return [v.numpy() for v in model.weights] + [v.numpy() for v in model.optimizer.variables]


class _EpochCounter(keras.callbacks.Callback):
    epochs = ()

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs = [*self.epochs, epoch]


@pytest.mark.slow
def test_a_run_killed_in_its_last_epoch_resumes_exactly(tmp_path, capsys):
    # Dropout on the word vectors; a shuffled, bucketed, endless training stream; the learning
    # rate halved at the end (the tiny model's dev accuracy stays flat).
    argv = [*TINY, "--num-copies", "2", "--padding", "bucket", "--epochs", "2"]
    killed = _start("kill", [*argv, "--workdir", tmp_path / "resumed"], tmp_path / "killed")
    try:
        straight = main.main([*argv, "--workdir", str(tmp_path / "straight")])
    finally:
        output = killed.communicate(timeout=900)[0]
    assert killed.returncode == -signal.SIGKILL, output[-3000:]
    keras.backend.clear_session()
    counter = _EpochCounter()
    resumed = main.main([*argv, "--workdir", str(tmp_path / "resumed")], [counter])
    assert counter.epochs == [1]  # only the interrupted epoch ran again
    assert resumed["epochs_run"] == [0, 1] and len(resumed["dev_accuracy"]) == 2
    printed = capsys.readouterr().out.split("METRICS ")[-1]
    assert json.loads((tmp_path / "resumed" / "metrics.json").read_text()) == json.loads(printed)
    for metrics in (straight, resumed):
        del metrics["seconds"], metrics["workdir"]
    assert resumed == straight
    for name in ("last.keras", "best.keras"):
        for got, want in zip(
            *(_saved_state(tmp_path / run / name) for run in ("resumed", "straight"))
        ):
            np.testing.assert_array_equal(got, want, err_msg=name)
    # What the run logged, on the run never interrupted: the learning rate each epoch ran with
    # (halved after the second, for an epoch that never runs) ...
    workdir = tmp_path / "straight"
    used = straight["history"]["learning_rate"]
    assert used == [pytest.approx(3e-3)] * 2  # the generated corpus's default
    logged = _events(workdir / "logs" / "train")["epoch_learning_rate"]
    assert [step for step, _ in logged] == [0, 1]
    np.testing.assert_allclose([tf.make_ndarray(v.tensor) for _, v in logged], used, rtol=1e-6)
    last = keras.saving.load_model(workdir / "last.keras")
    assert float(last.optimizer.learning_rate) == np.float32(used[-1] / 2)
    # ... the memory's retrievals (the Dual AM-GRU has no attention to draw) ...
    assert os.listdir(workdir / "logs" / "memory")
    assert not (workdir / "logs" / "attention").exists()
    # ... and the settings under the options' names, with the values the run resolved.
    hparams, scalars = _logged(workdir)
    assert hparams["learning_rate"] == pytest.approx(3e-3) and hparams["init_scale"] == 0.2
    assert hparams["source"] == "generated" and hparams["model"] == "dual_am_gru"
    assert hparams["units"] == 8 and hparams["num_copies"] == 2 and hparams["fused_loop"]
    assert hparams["top_units"] == 8 and hparams["eval_every"] == 2  # layer 2 as wide as 1
    assert set(hparams) - {"source"} <= set(vars(main.parse_args(argv)))
    assert scalars["test_accuracy"] == pytest.approx(straight["test_accuracy"])


def _logged(workdir):
    """The HParams and the scalars of the run in ``workdir``'s logs."""
    hparams, scalars = {}, {}
    for path in glob.glob(str(workdir / "logs" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data
                if value.tag == metadata.SESSION_START_INFO_TAG:
                    info = metadata.parse_session_start_info_plugin_data(plugin.content)
                    for name, v in info.hparams.items():
                        hparams[name] = getattr(v, v.WhichOneof("kind"))
                elif plugin.plugin_name == "scalars":
                    scalars[value.tag] = float(tf.make_ndarray(value.tensor))
    return hparams, scalars


def test_the_hparams_show_the_steps_between_dev_checks_and_no_layer_2_where_there_is_none(
    tmp_path,
):
    """Without --eval-every, a dev check after each pass over the training pairs (50 in
    batches of 25); the word-by-word model has no layer 2 for --top-units to size."""
    argv = [
        *SIZES,
        "--max-train",
        "50",
        "--model",
        "word_by_word",
        "--epochs",
        "1",
        "--verbose",
        "0",
    ]
    main.main([*argv, "--workdir", str(tmp_path)])
    hparams, _ = _logged(tmp_path)
    assert hparams["eval_every"] == 2 and hparams["top_units"] == "none"


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class _KeepWeights(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        self.weights = [w.numpy() for w in self.model.weights]


@pytest.mark.slow
def test_two_workers_train_as_one_process(tmp_path):
    """Two workers on localhost (``--strategy multi_worker``) train one epoch, then resume to
    two; they end with the weights and history of one process trained on the same global
    batches."""
    argv = [*TINY, "--model", "gru", "--max-train", "60", "--max-length", "16", "--dropout", "0"]
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    workdir, temporary = tmp_path / "workers", tmp_path / "tmp"
    temporary.mkdir()
    workers = [
        _start(
            "twice",
            [*argv, "--batch-size", "10", "--strategy", "multi_worker", "--workdir", workdir],
            tmp_path / f"worker{index}",
            CUDA_VISIBLE_DEVICES="",
            TMPDIR=str(temporary),
            TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        )
        for index in range(2)
    ]
    try:
        keep = _KeepWeights()
        one = [*argv, "--batch-size", "20", "--epochs", "2", "--workdir", str(tmp_path / "one")]
        single = main.main(one, extra_callbacks=[keep])
    finally:
        outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output[-6000:]
    results = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(2)]
    weights = [list(np.load(tmp_path / f"worker{i}.npz").values()) for i in range(2)]
    for got, want in zip(weights[1], weights[0]):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(weights[0], keep.weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for metrics in results:
        assert metrics["first_run"]["epochs_run"] == [0]
        assert metrics["epochs_run_by_second_run"] == [1]  # resumed, not started again
        assert metrics["epochs_run"] == [0, 1] and metrics["workdir"] == str(workdir)
        for name, values in single["history"].items():
            np.testing.assert_allclose(metrics["history"][name], values, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(metrics["test_accuracy"], single["test_accuracy"], rtol=1e-6)
    # The chief wrote the run directory; the other worker wrote a temporary copy, removed.
    assert json.loads((workdir / "metrics.json").read_text())["history"] == results[0]["history"]
    for name in ("last.keras", "best.keras", "backup/run.json", "backup/settings.json"):
        assert (workdir / name).is_file(), name
    deadline = time.monotonic() + 30
    while glob.glob(str(temporary / "tf_memlayers-*")):
        assert time.monotonic() < deadline, "a worker left its temporary folder"
        time.sleep(0.5)


def test_jit_is_refused_under_several_replicas(capsys, monkeypatch, tmp_path):
    mirrored = type("MirroredStrategy", (), {"num_replicas_in_sync": 2})
    monkeypatch.setattr(train, "make_strategy", lambda name: mirrored())
    line = _error_line(
        capsys, main.main, [*TINY, "--jit-compile", "--workdir", str(tmp_path / "run")]
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
        train.train_and_evaluate(types.SimpleNamespace(mixed_precision=mixed), *[None] * 2)
    assert seen == ["mixed_float16", "float32"] and policy().name == "bfloat16"
