"""`examples.harness.training.hparams.log_hparams`: what the HParams dashboard reads."""

import glob
import os

import pytest

from examples.harness.training.hparams import SUFFIX, log_hparams
from tests.support import logged_hparams, summary_events


def _records(log_dir):
    """The HParams session records in ``log_dir`` itself (not its subfolders)."""
    events = summary_events(log_dir)
    return len(events.get("_hparams_/session_start_info", []))


def test_values_are_written_as_the_dashboard_takes_them(tmp_path):
    log_hparams(tmp_path, {"rate": 1e-3, "units": 8, "fused": True, "rows": None,
                           "sizes": [2, 3], "model": "gru"}, {"accuracy": 0.5})  # fmt: skip
    hparams, scalars = logged_hparams(str(tmp_path))
    assert hparams == {"rate": pytest.approx(1e-3), "units": 8, "fused": True, "rows": "none",
                       "sizes": "[2, 3]", "model": "gru"}  # fmt: skip
    assert scalars == {"accuracy": 0.5}


def test_a_run_logged_again_keeps_one_record_the_last(tmp_path):
    # Another file in the folder (as a user's own writer might leave) is kept.
    (tmp_path / "notes.txt").write_text("kept")
    log_hparams(tmp_path, {"units": 8}, {"accuracy": 0.5})
    log_hparams(tmp_path, {"units": 8}, {"accuracy": 0.75})
    assert len(glob.glob(os.path.join(tmp_path, f"*{SUFFIX}"))) == 1
    assert _records(str(tmp_path)) == 1
    assert logged_hparams(str(tmp_path))[1] == {"accuracy": 0.75}
    assert (tmp_path / "notes.txt").read_text() == "kept"
