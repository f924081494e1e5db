"""examples/fill_last_word_cache.py end to end, resume included (tiny settings)."""

import importlib.util
import json
import os

import keras
import numpy as np
import pytest

from conftest import REPO_ROOT, logged_hparams

TINY = ["--epochs", "1", "--embedding-dim", "6", "--hidden-units", "8", "--attention-units", "4",
        "--cache-size", "64", "--batch-size", "32", "--verbose", "0"]


def load_example():
    path = REPO_ROOT / "examples" / "fill_last_word_cache.py"
    spec = importlib.util.spec_from_file_location("fill_last_word_cache", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_example().parse_args(["--help"])
    assert exit_info.value.code == 0
    assert "--data-dir" in capsys.readouterr().out


class CacheAtStart(keras.callbacks.Callback):
    """Records the cache when training (re)starts, after checkpoints are restored."""

    def on_epoch_begin(self, epoch, logs=None):
        if not hasattr(self, "cache"):
            self.cache = self.model.get_layer("cache_attention").cache.numpy().copy()


def test_generated_run_then_resume(tmp_path):
    example = load_example()
    workdir = str(tmp_path / "run")
    short = ["--max-length", "12"]  # the generated sentences have at most 10 tokens
    first = example.main(TINY + short + ["--workdir", workdir])
    assert first["source"] == "generated" and first["epochs_run"] == [0]
    assert 0.0 <= first["eval_accuracy"] <= 1.0
    answers = [s.split()[-1] for s in example.data.generated_last_word_corpus()[1]]
    commonest = max(answers.count(a) for a in answers)
    assert first["eval_majority_baseline"] == pytest.approx(commonest / len(answers))
    assert first["train_sentences"] == len(example.data.generated_last_word_corpus()[0])
    assert first["cache_fill"]["cache_attention"] > 0
    with open(os.path.join(workdir, "metrics.json")) as handle:
        assert json.load(handle)["eval_accuracy"] == first["eval_accuracy"]
    saved = keras.saving.load_model(os.path.join(workdir, "last.keras"))
    cache_after_first = saved.get_layer("cache_attention").cache.numpy()
    assert np.any(cache_after_first != 0)
    cache_logs = os.listdir(os.path.join(workdir, "logs", "cache"))
    assert any(name.startswith("events") for name in cache_logs)

    keras.backend.clear_session()
    probe = CacheAtStart()
    args = list(TINY)
    args[args.index("--epochs") + 1] = "2"
    second = example.main(args + short + ["--workdir", workdir], extra_callbacks=[probe])
    assert second["epochs_run"] == [0, 1]  # the whole run, resumed after the first epoch
    np.testing.assert_array_equal(probe.cache, cache_after_first)


def test_real_sentences_from_data_dir(tmp_path, shared_data):
    example = load_example()
    metrics = example.main(
        TINY + ["--data-dir", str(shared_data / "pwkp_gaffney"), "--max-train", "300",
                "--max-vocabulary", "2000", "--pooling", "last", "--query", "none",
                "--workdir", str(tmp_path / "pwkp")]
    )
    assert metrics["source"].endswith("test.txt/dev.txt")
    assert metrics["train_sentences"] <= 300 and metrics["eval_sentences"] > 5000


def test_run_logs_resolved_settings_and_final_metrics_for_hparams(tmp_path):
    example = load_example()
    workdir = str(tmp_path / "run")
    metrics = example.main(TINY + ["--workdir", workdir])
    hparams, scalars = logged_hparams(os.path.join(workdir, "logs"))
    assert hparams["learning_rate"] == pytest.approx(0.01)  # the paper's, left at None
    assert hparams["source"] == metrics["source"] and hparams["query"] == "additive"
    assert scalars["eval_accuracy"] == pytest.approx(metrics["eval_accuracy"])
