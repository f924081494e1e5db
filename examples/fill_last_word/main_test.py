"""The command line end to end: bad options, the run directory, a forked run, kill and resume,
two workers."""

import glob
import gzip
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

from tf_memlayers.layers.cache_attention.heap_cache_attention import POLICIES, QUERIES
from tf_memlayers.models import fill_last_word

from . import input_pipeline, main, models, train

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = "--epochs 1 --units 8 --attention-units 4 --cache-size 64 --verbose 0".split()
TINY = [*MODEL, *"--embedding-dim 6 --episodes 2 --houses 4".split()]  # the generated corpus


def _error_line(capsys, argv, call=main.main):
    """Runs ``call(argv)``; returns its one line on stderr after checking exit status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        call(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and not captured.out, captured
    return captured.err.strip()


BAD = [
    *[(["--epochs", value], "--epochs") for value in ("-1", "0", "2.5")],
    *[(["--learning-rate", value], "--learning-rate") for value in ("-1", "0", "nan", "inf")],
    (["--clipnorm", "-5"], "--clipnorm"),
    (["--weight-decay", "-1e-5"], "--weight-decay"),
    (["--batch-size", "0"], "--batch-size"),
    (["--embedding-dim", "0"], "--embedding-dim"),
    (["--units", "0"], "--units"),
    (["--attention-units", "0"], "--attention-units"),
    (["--cache-size", "-1"], "--cache-size"),
    (["--cache-gate-init", "zeros"], "--cache-gate-init"),
    (["--seed", "-1"], "--seed"),
    (["--verbose", "3"], "--verbose"),
    (["--strategy", "tpu"], "--strategy"),
    (["--workdir"], "--workdir"),
    (["--data-dir", "/nonexistent/corpus"], "--data-dir: '/nonexistent/corpus' is not an"),
    (["--embeddings", "/nonexistent/glove.txt"], "--embeddings"),
    (["--max-length", "1"], "--max-length"),
    (["--max-train", "0"], "--max-train"),
    # Options this run would take and never read.
    *[([option, "2"], f"{option}: needs --data-dir") for option in ("--max-length", "--max-train")],
    (["--train-file", "train.txt"], "--train-file: needs --data-dir"),
    (["--eval-file", "x.txt"], "--eval-file: needs --data-dir"),
    (["--batch-size", "8"], "--batch-size: needs --data-dir"),
    (["--data-dir", ".", "--episodes", "5"], "--episodes: sets the generated corpus"),
    (["--data-dir", ".", "--houses", "4"], "--houses: sets the generated corpus"),
    *[
        (["--cache-size", "0", *option], f"{option[0]}: sets the cache")
        for option in (["--query", "additive"], ["--policy", "topk"], ["--cache-gate-init", "ones"])
    ],
    *[
        (["--cache-size", "0", *pooling, "--attention-units", "4"], "--attention-units: sizes")
        for pooling in (["--pooling", "last"], ["--faithful-to-code"])
    ],
    (["--embeddings", __file__, "--embedding-dim", "6"], "--embedding-dim: sizes drawn"),
    (
        ["--jit-compile", "--strategy", "multi_worker"],
        "--jit-compile: compiles fit's step with XLA",
    ),
    (["--max-vocabulary", "2"], "--max-vocabulary"),  # <pad> and <unk> only: no word
    (["--houses", "1"], "--houses"),
    (["--houses", "133"], "--houses: must be <= 132"),
    (["--episodes", "0"], "--episodes"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_a_bad_value_is_one_line_naming_the_option(capsys, argv, message):
    line = _error_line(capsys, argv, main.parse_args)
    assert f": error: argument {message}" in line


def test_the_papers_values_and_the_caches_choices_are_the_packages():
    # The folder writes them out (a copy runs on the package's documented names only).
    parser = main.make_parser()
    assert parser.parse_args([]).attention_units == fill_last_word.PAPER_ATTENTION_UNITS
    rates = (train.PAPER_LEARNING_RATE, train.CODE_LEARNING_RATE, train.PAPER_CLIP_NORM)
    package = fill_last_word.PAPER_LEARNING_RATE, fill_last_word.CODE_LEARNING_RATE
    assert rates == (*package, fill_last_word.PAPER_CLIP_NORM)
    for choices in (POLICIES, QUERIES):
        assert "{" + ",".join(choices) + "}" in parser.format_help()


@pytest.mark.parametrize("old", sorted(main.RENAMED))
def test_an_option_spelled_as_in_0_2_is_refused_naming_its_new_spelling(capsys, old):
    new = main.RENAMED[old]
    help_text = main.make_parser().format_help()
    assert new in help_text.replace("[", " ").replace(",", " ").split()  # an option now
    for argv in ([old, "1"], [f"{old}=1"], ["--seed", "2", old], ["--bogus", old]):
        assert f"error: argument {old}: renamed {new} in 0.3" in _error_line(
            capsys, argv, main.parse_args
        )


def test_files_the_options_name_are_checked(capsys, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    line = _error_line(capsys, ["--data-dir", str(tmp_path)], main.parse_args)
    assert "argument --data-dir" in line and "train.txt or test.txt" in line
    (tmp_path / "train.txt").write_text("a b c\n")
    line = _error_line(capsys, ["--data-dir", str(tmp_path)], main.parse_args)
    assert "argument --eval-file" in line and "dev.txt" in line
    line = _error_line(
        capsys, ["--data-dir", str(tmp_path), "--train-file", "x.txt"], main.parse_args
    )
    assert "argument --train-file" in line and "x.txt" in line
    # A train.txt that cannot be read (a link to nothing) is refused, not replaced by test.txt.
    (tmp_path / "dev.txt").write_text("a b c\n")
    (tmp_path / "test.txt").write_text("a b c\n")
    (tmp_path / "train.txt").unlink()
    (tmp_path / "train.txt").symlink_to(tmp_path / "gone.txt")
    line = _error_line(capsys, ["--data-dir", str(tmp_path)], main.parse_args)
    assert "argument --data-dir: train.txt in" in line and "is not a file" in line
    # `~` is expanded (the shell leaves `--option=~/x` alone) and links are followed: another
    # spelling of the same folder is the same run's data.
    (tmp_path / "train.txt").unlink()
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main.parse_args(["--data-dir=~/link"]).data_dir == str(tmp_path)
    assert main.parse_args(["--workdir=~/run"]).workdir == str(tmp_path / "run")
    (tmp_path / "v.txt.gz").symlink_to(tmp_path / "dev.txt")  # a file's name tells its format
    embeddings = main.parse_args(["--embeddings=~/link/v.txt.gz"]).embeddings
    assert embeddings == str(tmp_path / "v.txt.gz")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "v.txt").write_text("the 1 2\n")
    (tmp_path / "down").symlink_to(tmp_path / "deep" / "er")  # `down/..` is where it points
    embeddings = main.parse_args(["--embeddings", f"{tmp_path}/down/../v.txt"]).embeddings
    assert embeddings == str(tmp_path / "deep" / "v.txt")
    for workdir, message in [("notes.txt", "is a file"), ("notes.txt/run", "cannot be created")]:
        line = _error_line(capsys, ["--workdir", str(tmp_path / workdir)], main.parse_args)
        assert "argument --workdir" in line and message in line
    for workdir in (tmp_path / "new" / "run", tmp_path):  # to create, or there
        assert main.parse_args(["--workdir", str(workdir)]).workdir == str(workdir)


def test_the_data_files_may_be_gzipped(tmp_path):
    for name in ("test.txt.gz", "dev.txt.gz", "mine.txt.gz"):
        (tmp_path / name).write_bytes(gzip.compress(b"the cat sat .\na dog ran .\n"))
    data = ["--data-dir", str(tmp_path)]
    config = main.parse_args(data)
    assert input_pipeline.source_name(config) == f"{tmp_path}:test.txt.gz/dev.txt.gz"
    assert input_pipeline.FileCorpus(config).train_sentences == 2
    (tmp_path / "long.txt").write_text("a b c d e f g h\nthe cat sat\nx\na dog ran .\nzz yy\n")
    first = main.parse_args(
        [*data, "--train-file", "long.txt", "--max-train", "2", "--max-length", "5"]
    )
    corpus = input_pipeline.FileCorpus(first)  # the long and the one-word lines are not counted
    assert (
        corpus.train_sentences == 2 and "." in corpus.vocabulary and "zz" not in corpus.vocabulary
    )
    mine = ["--train-file", "mine.txt", "--eval-file", "mine.txt.gz"]
    assert input_pipeline.data_files(main.parse_args([*data, *mine])) == ("mine.txt.gz",) * 2
    for name in ("train.txt.gz", "train.txt"):  # train.txt first, then its .gz, then test.txt
        (tmp_path / name).write_text("a b c\n")
        assert input_pipeline.data_files(main.parse_args(data)) == (name, "dev.txt.gz")


def test_a_file_corpus_learns_its_words_from_training_and_resumes_its_epochs(tmp_path):
    (tmp_path / "train.txt").write_text("a b c\nb c d\nc d e\nd e f\ne f g\n")
    (tmp_path / "dev.txt").write_text("a b zebra\n")
    config = main.parse_args(["--data-dir", str(tmp_path), "--seed", "3"])
    corpus = input_pipeline.FileCorpus(config)
    # The vocabulary is the training sentences' words: an evaluation word is <unk> (id 1).
    assert "zebra" not in corpus.vocabulary and corpus.y_eval.tolist() == [1]
    stream, steps, _ = corpus.datasets(2, 0)
    assert steps == 3  # 5 sentences in batches of 2, the last one partial
    batches = [y.numpy().tolist() for _, y in stream.take(3 * steps)]
    epochs = [sum(batches[epoch * steps : (epoch + 1) * steps], []) for epoch in range(3)]
    assert all(sorted(epoch) == sorted(corpus.y_train.tolist()) for epoch in epochs)
    assert len({tuple(epoch) for epoch in epochs}) > 1  # reshuffled every epoch
    # A run resumed at epoch 2 sees the batches an uninterrupted run sees there.
    resumed = corpus.datasets(2, 2)[0]
    assert [y.numpy().tolist() for _, y in resumed.take(steps)] == batches[2 * steps :]


def test_the_generated_corpus_and_the_cache_follow_the_options():
    default, corpus = main.parse_args([]), input_pipeline.GeneratedCorpus
    seeded = corpus(main.parse_args(["--seed", "1"])).episodes(0)[0][0].facts
    assert seeded != corpus(default).episodes(0)[0][0].facts
    houses = input_pipeline.GENERATED_HOUSES  # every made-up house may be asked for
    assert main.parse_args(["--houses", str(houses)]).houses == houses
    # The default cache masks its empty slots, and its dot read's gate starts open (at 1);
    # the reference code's masks none.
    cache = models.memory_layers(default, 3)[1]
    assert cache.mask_empty and cache.query == "dot"
    gate = keras.ops.convert_to_numpy(cache.gate_initializer(shape=(4,)))
    np.testing.assert_array_equal(gate, 1.0)
    assert not models.memory_layers(main.parse_args(["--faithful-to-code"]), 40)[1].mask_empty


def test_what_is_found_wrong_once_the_run_began_is_the_options_error(capsys, tmp_path):
    (tmp_path / "train.txt").write_bytes(bytes(range(128, 256)) * 20)
    (tmp_path / "dev.txt").write_text("a b c\n")
    run = ["--data-dir", str(tmp_path), "--workdir", str(tmp_path / "run")]
    line = _error_line(capsys, run)
    assert "argument --data-dir" in line and "train.txt is not UTF-8 text" in line
    (tmp_path / "train.txt").write_text("cat sat .\ndog ran .\n")
    (tmp_path / "glove.txt").write_text("cat 1 2\ndog 1 2 3\n")
    line = _error_line(capsys, [*run, "--embeddings", str(tmp_path / "glove.txt")])
    assert "argument --embeddings" in line and "glove.txt, line 2" in line
    # A run directory holding another run's settings.
    (tmp_path / "run" / "backup").mkdir(parents=True)
    (tmp_path / "run" / "backup" / "settings.json").write_text('{"units": 3}')
    line = _error_line(capsys, run)
    assert "argument --workdir" in line and "units: 3 there, 128 now" in line


def test_the_script_refuses_in_one_line_what_it_finds_once_tensorflow_is_loaded(tmp_path):
    for name in ("train.txt", "dev.txt"):
        (tmp_path / name).write_text("one two three four five six\n")
    run = tmp_path / "run"
    argv = ["--data-dir", str(tmp_path), "--max-length", "3", "--workdir", str(run)]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH")}
    script = REPO_ROOT / "examples" / "fill_last_word_cache.py"
    done = subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, env=env, timeout=300
    )
    # One line: none of TensorFlow's C++ start-up lines either.
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        "fill_last_word_cache.py: error: argument --max-length: no usable sentences in"
    )
    assert not run.exists()  # refused before the run started


def test_help_shows_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main.parse_args(["--help"])
    assert exit_info.value.code == 0
    entries, current = {}, None
    for line in capsys.readouterr().out.splitlines():
        if re.match(r"^  --", line):
            current = line.split()[0].rstrip(",")
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += " " + line.strip()
    assert len(entries) >= 25
    for option, text in entries.items():  # once: in its own words, else as "(default: X)"
        assert text.count("default:") == 1 and "default: None" not in text, f"{option}: {text}"
    # One name per concept, as the package's builders and the other examples spell it (each
    # gradient's clipping is Keras's clipnorm, not the others' global --clip-norm).
    for option in ("--units", "--epochs", "--batch-size", "--learning-rate", "--clipnorm"):
        assert option in entries


def test_the_run_directory_names_the_changes_and_digests_the_settings():
    def name(argv):
        workdir = main.run_directory(main.parse_args(["--episodes", "2", "--houses", "4", *argv]))
        assert os.path.dirname(workdir) in ("", main.DEFAULT_ROOT)
        return os.path.basename(workdir)

    default = name([])
    assert re.fullmatch(r"attention-cache1000-episodes=2_houses=4-[0-9a-f]{8}", default)
    assert name(["--epochs", "3", "--verbose", "0"]) == default  # how long, not what
    # The learning rate the run uses, spelled out: the same digest, the change in the name.
    explicit = name(["--learning-rate", "0.01"])
    assert explicit[-8:] == default[-8:] and "learning_rate=0.01" in explicit
    assert name(["--faithful-to-code"])[-8:] != default[-8:]  # 1e-3 then
    assert name(["--clipnorm", "5"])[-8:] == default[-8:]  # the paper's clipping
    assert name(["--cache-gate-init", "ones"])[-8:] == default[-8:]  # the dot read's
    assert name(["--cache-gate-init", "glorot_uniform"])[-8:] != default[-8:]
    # The additive read's gate starts as the reference code's, its settings those of the flag.
    additive = name(["--query", "additive"])
    assert (
        name(["--query", "additive", "--cache-gate-init", "glorot_uniform"])[-8:] == additive[-8:]
    )
    vectors = main.parse_args(["--embeddings", __file__])  # whose width --embedding-dim is not
    assert train.run_settings(vectors)["embedding_dim"] is None
    assert name(["--pooling", "last", "--units", "32"]).startswith(
        "last-cache1000-episodes=2_houses=4_pooling=last_units=32-"
    )
    assert name(["--workdir", "mine"]) == "mine"


class _FitCalled(Exception):
    pass


@pytest.mark.parametrize(
    "argv,expected_clipnorm,rate",
    [
        ([], 5.0, 0.01),  # the paper's
        (["--faithful-to-code"], None, 1e-3),  # the reference code's: no clipping
        (["--faithful-to-code", "--clipnorm", "2", "--learning-rate", "0.1"], 2.0, 0.1),
    ],
)
def test_fit_gets_the_optimizer_of_the_options_and_keeps_the_pipelines_order(
    tmp_path, monkeypatch, argv, expected_clipnorm, rate
):
    # Keras warns that `shuffle=True` is ignored for a tf.data dataset: the pipeline shuffles,
    # or keeps the episodes' order.
    calls = []

    def fit(model, *args, **kwargs):
        calls.append((model.optimizer.clipnorm, model.optimizer.learning_rate.numpy(), kwargs))
        raise _FitCalled

    monkeypatch.setattr(keras.Model, "fit", fit)
    with pytest.raises(_FitCalled):
        main.main([*TINY, *argv, "--workdir", str(tmp_path / "run")])
    ((clipnorm, learning_rate, kwargs),) = calls
    assert clipnorm == expected_clipnorm and learning_rate == pytest.approx(rate)
    assert kwargs["shuffle"] is False


@pytest.mark.slow
def test_the_folder_runs_forked_without_a_cache(run_forked, tmp_path):
    done = run_forked("fill_last_word", *TINY, "--cache-size", "0", "--workdir", tmp_path / "run")
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads(done.stdout.split("METRICS ")[-1])
    assert metrics["cache_fill"] == {} and metrics["eval_attention_on_fact"] is None
    assert metrics["epochs_run"] == [0] and 0 <= metrics["eval_accuracy"] <= 1
    saved = keras.saving.load_model(tmp_path / "run" / "last.keras")
    names = [layer.name for layer in saved.layers]
    assert names == ["context", "embedding", "encoder", "pooling", "logits"]


def test_real_sentences_from_data_dir(shared_data, tmp_path):
    data = ["--data-dir", shared_data / "pwkp_gaffney", "--max-train", "300", "--batch-size", "32"]
    embeddings = ["--embeddings", shared_data / "glove_subset" / "glove-50d-5k.json"]
    options = ["--max-vocabulary", "2000", "--pooling", "last", "--query", "none"]
    argv = [*MODEL, *data, *embeddings, *options, "--workdir", tmp_path / "pwkp"]
    metrics = main.main(list(map(str, argv)))
    assert metrics["source"].endswith("pwkp_gaffney:test.txt/dev.txt")
    assert metrics["train_sentences"] <= 300 and metrics["eval_sentences"] > 5000


# -- kill and resume ----------------------------------------------------------------------------

# Runs the example with sys.argv[1] (JSON) in a new process and kills it with SIGKILL (no
# clean-up of any kind) at the end of the middle batch of its last epoch; without TensorFlow's
# graph optimiser, as in the tests' own process, whose straight run the resumed run must match.
KILLER = """
import json, os, signal, sys
import keras, tensorflow as tf
from examples.fill_last_word import main
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

class KillInLastEpoch(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == self.params["epochs"] - 1 and batch == self.params["steps"] // 2:
            os.kill(os.getpid(), signal.SIGKILL)

main.main(json.loads(sys.argv[1]), extra_callbacks=[KillInLastEpoch()])
"""


class CacheAtEpochBegin(keras.callbacks.Callback):
    """The cache as each epoch begins (after a resumed run restored its backup), and the
    epochs the run trained."""

    def __init__(self):
        super().__init__()
        self.caches = {}

    def on_epoch_begin(self, epoch, logs=None):
        cache = self.model.get_layer("cache_attention").cache
        self.caches[epoch] = keras.ops.convert_to_numpy(cache).copy()


def _saved_state(path):
    """Weights and optimizer variables of a saved model, by position."""
    model = keras.saving.load_model(path)
    state = {f"model/{i}/{v.name}": v.numpy() for i, v in enumerate(model.weights)}
    state.update({f"optimizer/{i}": v.numpy() for i, v in enumerate(model.optimizer.variables)})
    return state


def _logged_hparams(log_dir):
    """The HParams record's settings and the scalars of the event files of ``log_dir``."""
    from tensorboard.plugins.hparams import metadata

    hparams, scalars = {}, {}
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
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


def _assert_generated_run_reports(workdir, metrics, config):
    """What a two-epoch run on the generated corpus (``TINY``) reports, saves and logs."""
    assert metrics["source"] == "generated" and metrics["epochs_run"] == [0, 1]
    train, evaluation = input_pipeline.generated_last_word_corpus(episodes=2, houses=4)
    answers = [q.split()[-1] for e in evaluation for q in e.questions]
    assert metrics["eval_sentences"] == len(answers) == 40
    commonest = max(answers.count(a) for a in answers)
    assert metrics["eval_majority_baseline"] == pytest.approx(commonest / len(answers))
    assert metrics["train_sentences"] == sum(len(e.facts) + len(e.questions) for e in train)
    assert 0.0 <= metrics["eval_attention_on_fact"] <= 1.0
    # The last evaluation episode's 4 facts, written to the emptied cache.
    assert metrics["cache_fill"]["cache_attention"] == pytest.approx(4 / 64)
    assert json.loads((workdir / "metrics.json").read_text()) == metrics
    saved = keras.saving.load_model(workdir / "last.keras").get_layer("cache_attention")
    assert saved.query == "dot" and np.any(saved.cache.numpy() != 0)
    assert glob.glob(str(workdir / "logs" / "cache" / "events.*"))  # heap index, cache fill
    assert glob.glob(str(workdir / "logs" / "train" / "events.*"))
    # HParams: the settings under the options' names, the data as `source`, final metrics.
    hparams, scalars = _logged_hparams(str(workdir / "logs"))
    assert hparams["learning_rate"] == pytest.approx(0.01)  # the paper's, left unset
    assert hparams["source"] == "generated" and hparams["query"] == "dot"
    assert hparams["cache_gate_init"] == "ones"  # the dot read's, left unset
    assert hparams["units"] == 8 and set(hparams) - {"source"} <= set(vars(config))
    assert scalars["eval_accuracy"] == pytest.approx(metrics["eval_accuracy"])


@pytest.mark.slow
def test_killed_in_its_last_epoch_it_resumes_exactly(tmp_path):
    # A heap cache written by every training step, episodes of a stream drawn for each epoch.
    argv = [*TINY, "--epochs", "2"]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    killed_argv = [*argv, "--workdir", str(tmp_path / "resumed")]
    with open(tmp_path / "killed.log", "w") as log:
        killed = subprocess.Popen(
            [sys.executable, "-c", KILLER, json.dumps(killed_argv)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            straight_caches = CacheAtEpochBegin()
            straight_argv = [*argv, "--workdir", str(tmp_path / "straight")]
            straight = main.main(straight_argv, extra_callbacks=[straight_caches])
        finally:
            returncode = killed.wait(timeout=900)
    assert returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    keras.backend.clear_session()
    resumed_caches = CacheAtEpochBegin()
    resumed = main.main(killed_argv, extra_callbacks=[resumed_caches])
    assert list(resumed_caches.caches) == [1]  # only the interrupted epoch ran again
    # It starts that epoch from the cache the first epoch left.
    assert np.any(resumed_caches.caches[1] != 0)
    np.testing.assert_array_equal(resumed_caches.caches[1], straight_caches.caches[1])
    process = {"seconds", "workdir"}
    assert {k: v for k, v in resumed.items() if k not in process} == {
        k: v for k, v in straight.items() if k not in process
    }
    for name in ("last.keras", "best.keras"):
        expected = _saved_state(tmp_path / "straight" / name)
        got = _saved_state(tmp_path / "resumed" / name)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name}: {key}")
    # What the run reports and logs, on the run that was never interrupted.
    _assert_generated_run_reports(tmp_path / "straight", straight, main.parse_args(argv))


# -- several workers ----------------------------------------------------------------------------

# One worker of a local cluster (TF_CONFIG): runs sys.argv[1] (JSON), writes its weights and
# metrics into sys.argv[2].
WORKER = """
import json, os, sys
import keras, numpy as np, tensorflow as tf
from examples.fill_last_word import main
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

class KeepWeights(keras.callbacks.Callback):
    def on_train_end(self, logs=None):
        self.weights = {w.path: np.asarray(w.numpy()) for w in self.model.weights}

keep = KeepWeights()
metrics = main.main(json.loads(sys.argv[1]), extra_callbacks=[keep])
name = os.path.join(sys.argv[2], str(json.loads(os.environ["TF_CONFIG"])["task"]["index"]))
np.savez(name + ".npz", **keep.weights)
with open(name + ".json", "w") as handle:
    json.dump(metrics, handle)
"""


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("localhost", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
def test_two_workers_train_as_one_process_on_the_global_batches(tmp_path):
    """Episodes of facts then questions: each global batch split between the workers, the
    caches written with the whole batch's states, validation with the facts written first."""
    argv = [*TINY, "--cache-size", "16", "--no-jit-compile"]
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    workers = []
    for index in range(2):
        config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config), CUDA_VISIBLE_DEVICES="")
        env.update(PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="3")
        worker_argv = [*argv, "--strategy", "multi_worker", "--workdir", str(tmp_path / "fill")]
        command = [sys.executable, "-c", WORKER, json.dumps(worker_argv), str(tmp_path)]
        workers.append(
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        )
    try:

        class KeepWeights(keras.callbacks.Callback):
            def on_train_end(self, logs=None):
                self.weights = [np.asarray(w.numpy()) for w in self.model.weights]

        keep = KeepWeights()
        one_argv = [*argv, "--strategy", "default", "--workdir", str(tmp_path / "one")]
        single = main.main(one_argv, extra_callbacks=[keep])
    finally:
        outputs = [worker.communicate(timeout=900)[0] for worker in workers]
    for worker, output in zip(workers, outputs):
        assert worker.returncode == 0, output.decode()[-6000:]
    assert (tmp_path / "fill" / "metrics.json").is_file()
    weights = [dict(np.load(tmp_path / f"{index}.npz")) for index in range(2)]
    assert list(weights[0]) == list(weights[1]) and len(weights[0]) == len(keep.weights)
    for (path, first), second, one in zip(weights[0].items(), weights[1].values(), keep.weights):
        np.testing.assert_array_equal(second, first, err_msg=path)
        np.testing.assert_allclose(first, one, rtol=1e-5, atol=1e-6, err_msg=path)
    assert any("cache" in path and np.abs(value).sum() for path, value in weights[0].items())
    for index in range(2):
        metrics = json.loads((tmp_path / f"{index}.json").read_text())
        for name, values in single["history"].items():
            np.testing.assert_allclose(metrics["history"][name], values, rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(metrics["eval_accuracy"], single["eval_accuracy"], rtol=1e-6)
        np.testing.assert_allclose(metrics["eval_loss"], single["eval_loss"], rtol=1e-5)


def test_jit_is_refused_under_several_replicas(capsys, monkeypatch, tmp_path):
    mirrored = type("MirroredStrategy", (), {"num_replicas_in_sync": 2})
    monkeypatch.setattr(train, "make_strategy", lambda name: mirrored())
    line = _error_line(capsys, [*TINY, "--jit-compile", "--workdir", str(tmp_path / "run")])
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
