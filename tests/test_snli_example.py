"""End-to-end runs of examples/snli_dual_am_gru.py on a tiny setting."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
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


def test_end_to_end_run_and_resume_after_interruption(tmp_path, capsys):
    example = _load_example()
    workdir = tmp_path / "run"
    argv = TINY + ["--epochs", "2", "--workdir", str(workdir)]
    with pytest.raises(KeyboardInterrupt):
        example.main(argv, extra_callbacks=[_Interrupt()])
    metrics = example.main(argv)
    assert metrics["epochs_run"] == [1]  # epoch 0 was restored from the backup, not re-run
    assert metrics["source"] == "generated" and metrics["train_pairs"] == 100
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and len(metrics["dev_accuracy"]) == 1
    printed = capsys.readouterr().out.split("METRICS ")[-1]
    assert json.loads((workdir / "metrics.json").read_text()) == json.loads(printed)
    assert (workdir / "last.keras").exists() and (workdir / "best.keras").exists()
    assert os.listdir(workdir / "logs" / "memory")  # the retrieval heatmap was written
