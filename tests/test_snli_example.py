"""End-to-end runs of examples/snli_dual_am_gru.py on a tiny setting."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "examples" / "snli_dual_am_gru.py"
TINY = [
    "--train-size", "small", "--max-train", "100", "--units", "8", "--copies", "2",
    "--embedding-dim", "8", "--eval-every", "2", "--batch-size", "25", "--verbose", "0",
    "--padding", "fixed",
]


def _load_example():
    spec = importlib.util.spec_from_file_location("snli_dual_am_gru", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_runs_as_a_script():
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, env=env,
        timeout=120,
    )
    assert result.returncode == 0 and "--data-dir" in result.stdout and "--strategy" in result.stdout


class _Interrupt(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if self.model.optimizer.iterations.numpy() >= 3:  # inside the second epoch
            raise KeyboardInterrupt("simulated interruption")


def _final_weights(workdir):
    model = keras.saving.load_model(workdir / "last.keras")
    return [w.numpy() for w in model.weights]


def test_end_to_end_run_and_resume_after_interruption(tmp_path, capsys):
    # Four batches per pass, two per epoch: epoch 2 of an uninterrupted run trains on the
    # stream's batches 3 and 4, and so must epoch 2 of a resumed run.
    example = _load_example()
    argv = TINY + ["--epochs", "2", "--dropout", "0", "--padding", "bucket"]
    example.main(argv + ["--workdir", str(tmp_path / "straight")])
    workdir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        example.main(argv + ["--workdir", str(workdir)], extra_callbacks=[_Interrupt()])
    capsys.readouterr()
    metrics = example.main(argv + ["--workdir", str(workdir)])
    assert metrics["epochs_run"] == [1]  # epoch 0 was restored from the backup, not re-run
    assert metrics["source"] == "generated" and metrics["train_pairs"] == 100
    assert len(metrics["dev_accuracy"]) == 1
    printed = capsys.readouterr().out.split("METRICS ")[-1]
    assert json.loads((workdir / "metrics.json").read_text()) == json.loads(printed)
    assert (workdir / "last.keras").exists() and (workdir / "best.keras").exists()
    assert os.listdir(workdir / "logs" / "memory")  # the retrieval heatmap was written
    expected, got = _final_weights(tmp_path / "straight"), _final_weights(workdir)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)


def test_default_run_directory_is_one_per_configuration(tmp_path, monkeypatch):
    example = _load_example()
    monkeypatch.chdir(tmp_path)
    argv = TINY + ["--epochs", "1"]
    first = example.main(argv)
    gru = example.main(argv + ["--kind", "gru"])
    assert gru["workdir"] != first["workdir"] and gru["epochs_run"] == [0]
    assert os.path.dirname(gru["workdir"]) == os.path.join("runs", "snli_dual_am_gru")
    with pytest.raises(ValueError, match="kind: 'dual_am_gru' there, 'gru' now"):
        example.main(argv + ["--kind", "gru", "--workdir", first["workdir"]])
