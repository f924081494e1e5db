"""examples/fill_last_word_cache.py end to end (tiny settings). A run's report, logs and resume
are checked on the runs of tests/examples/test_kill_resume.py (`assert_generated_run_reports`)."""

import json
import os

import keras
import numpy as np
import pytest

from tests.support import assert_hparams_named_as_options, load_script, logged_hparams

TINY = [
    "--epochs",
    "1",
    "--embedding-dim",
    "6",
    "--units",
    "8",
    "--attention-units",
    "4",
    "--cache-size",
    "64",
    "--batch-size",
    "32",
    "--episodes",
    "2",
    "--houses",
    "4",
    "--verbose",
    "0",
]


def load_example():
    return load_script("examples", "fill_last_word_cache")


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_example().parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "--data-dir" in capsys.readouterr().out


class CacheAtEpochBegin(keras.callbacks.Callback):
    """Records the cache as each epoch begins (after a resumed run restored its checkpoint):
    ``caches[epoch]``."""

    def __init__(self):
        super().__init__()
        self.caches = {}

    def on_epoch_begin(self, epoch, logs=None):
        cache = self.model.get_layer("cache_attention").cache
        self.caches[epoch] = keras.ops.convert_to_numpy(cache).copy()


def assert_generated_run_reports(workdir, metrics, args):
    """What a two-epoch run on the generated corpus (``TINY``, ``--max-length 12``) reports,
    saves and logs for TensorBoard. Checked on the straight run of
    `tests.examples.test_kill_resume`'s last-word test, which trains that run."""
    example = load_example()
    assert metrics["source"] == "generated" and metrics["epochs_run"] == [0, 1]
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    train, evaluation = example.data.generated_last_word_corpus(episodes=2, houses=4)
    answers = [q.split()[-1] for e in evaluation for q in e.questions]
    assert metrics["eval_sentences"] == len(answers) == 40
    commonest = max(answers.count(a) for a in answers)
    assert metrics["eval_majority_baseline"] == pytest.approx(commonest / len(answers))
    assert metrics["train_sentences"] == sum(len(e.facts) + len(e.questions) for e in train)
    assert 0.0 <= metrics["eval_attention_on_fact"] <= 1.0
    # The last evaluation episode's 4 facts, written to the emptied cache.
    assert metrics["cache_fill"]["cache_attention"] == pytest.approx(4 / 64)
    with open(os.path.join(workdir, "metrics.json")) as handle:
        assert json.load(handle)["eval_accuracy"] == metrics["eval_accuracy"]
    saved = keras.saving.load_model(os.path.join(workdir, "last.keras"))
    assert saved.get_layer("cache_attention").query == "dot"
    assert np.any(saved.get_layer("cache_attention").cache.numpy() != 0)
    cache_logs = os.listdir(os.path.join(workdir, "logs", "cache"))
    assert any(name.startswith("events") for name in cache_logs)
    # HParams: the resolved settings under the options' names, and the final metrics.
    hparams, scalars = logged_hparams(os.path.join(workdir, "logs"))
    assert hparams["learning_rate"] == pytest.approx(0.01)  # the paper's, left at None
    assert hparams["source"] == metrics["source"] and hparams["query"] == "dot"
    assert hparams["units"] == example.parse_args(TINY).units
    assert_hparams_named_as_options(hparams, args)
    assert scalars["eval_accuracy"] == pytest.approx(metrics["eval_accuracy"])


def test_without_a_cache_the_same_encoder_is_trained_on_the_same_stream(tmp_path):
    example = load_example()
    metrics = example.main(TINY + ["--cache-size", "0", "--workdir", str(tmp_path / "run")])
    assert metrics["cache_fill"] == {} and metrics["eval_attention_on_fact"] is None
    saved = keras.saving.load_model(tmp_path / "run" / "last.keras")
    names = [layer.name for layer in saved.layers]
    assert names == ["context", "embedding", "encoder", "pooling", "logits"]


def test_default_run_directory_names_changes_and_digests_resolved_values():
    example = load_example()

    def name(argv):
        args = example.parse_args(["--episodes", "2", "--houses", "4"] + argv)
        workdir, resolved = example.run_directory(args, example.GeneratedCorpus(args))
        if not args.workdir:
            assert os.path.dirname(workdir) == os.path.join("runs", "fill_last_word_cache")
        return os.path.basename(workdir), resolved

    default, resolved = name([])
    assert default.startswith("attention-cache1000-episodes=2_houses=4-")
    assert resolved == {"source": "generated", "learning_rate": 0.01}
    # The same learning rate spelled out: same digest, the change in the readable part.
    explicit, _ = name(["--learning-rate", "0.01"])
    assert explicit.endswith(default[-8:]) and "learning_rate=0.01" in explicit
    faithful, resolved = name(["--faithful-to-code"])
    assert resolved["learning_rate"] == 1e-3 and faithful[-8:] != default[-8:]
    assert name(["--workdir", "mine"])[0] == "mine"
    # --clip-norm was added after runs were named: only a run that gives it changes.
    clipped, _ = name(["--clip-norm", "1"])
    assert "clip_norm=1.0" in clipped and clipped[-8:] != default[-8:]


@pytest.mark.parametrize(
    "argv, clip_norm",
    [
        ([], 5.0),  # the paper's
        (["--faithful-to-code", "--clip-norm", "2"], 2.0),  # the reference code never clips
    ],
)
def test_clip_norm_reaches_the_optimizer(tmp_path, argv, clip_norm):
    example = load_example()
    captured = {}

    class Reached(Exception):
        pass

    class Optimizer(keras.callbacks.Callback):
        # The optimizer as training begins; nothing needs to train for that.
        def on_train_begin(self, logs=None):
            captured["clipnorm"] = self.model.optimizer.clipnorm
            raise Reached

    argv = [*TINY, "--cache-size", "0", "--workdir", str(tmp_path / "run"), *argv]
    with pytest.raises(Reached):
        example.main(argv, extra_callbacks=[Optimizer()])
    assert captured["clipnorm"] == clip_norm


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["--max-train", "10"], "argument --max-train: needs --data-dir"),
        (["--houses", "133"], "argument --houses: must be <= 132"),
        (["--houses", "1"], "argument --houses"),
        (["--max-length", "2"], "argument --max-length: the generated sentences need 3"),
        (["--episodes", "0"], "argument --episodes"),
        (["--cache-gate-init", "zeros"], "argument --cache-gate-init"),
    ],
)
def test_generated_corpus_options_are_checked(capsys, argv, fragment):
    with pytest.raises(SystemExit) as exit_info:
        load_example().parse_args(argv)
    assert exit_info.value.code == 2
    assert fragment in capsys.readouterr().err


def test_real_sentences_from_data_dir(tmp_path, shared_data):
    example = load_example()
    metrics = example.main(
        TINY
        + [
            "--data-dir",
            str(shared_data / "pwkp_gaffney"),
            "--max-train",
            "300",
            "--max-vocabulary",
            "2000",
            "--pooling",
            "last",
            "--query",
            "none",
            "--workdir",
            str(tmp_path / "pwkp"),
        ]
    )
    assert metrics["source"].endswith("test.txt/dev.txt")
    assert metrics["train_sentences"] <= 300 and metrics["eval_sentences"] > 5000
