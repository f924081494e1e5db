"""`examples.harness.training.hparams.log_hparams`: what the HParams dashboard reads."""

import glob
import os

import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from examples.harness.training.hparams import SUFFIX, hparams_records, log_hparams
from tests.support import logged_hparams


def _write(folder, hparams=None, scalar=None):
    """An event file in ``folder`` written without `log_hparams` (its default name), holding
    an HParams record and/or a scalar."""
    writer = tf.summary.create_file_writer(str(folder))
    with writer.as_default():
        if hparams is not None:
            hparams_api.hparams(hparams)
        if scalar is not None:
            tf.summary.scalar("loss", scalar, step=0)
    writer.close()


def test_values_are_written_as_the_dashboard_takes_them(tmp_path):
    log_hparams(
        tmp_path,
        {"rate": 1e-3, "units": 8, "fused": True, "rows": None, "sizes": [2, 3], "model": "gru"},
        {"accuracy": 0.5},
    )
    hparams, scalars = logged_hparams(str(tmp_path))
    assert hparams == {
        "rate": pytest.approx(1e-3),
        "units": 8,
        "fused": True,
        "rows": "none",
        "sizes": "[2, 3]",
        "model": "gru",
    }
    assert scalars == {"accuracy": 0.5}


def test_a_run_logged_again_keeps_one_record_the_last(tmp_path):
    # A record written before the files had their suffix (under another name) ...
    _write(tmp_path, hparams={"kind": "gru"})
    # ... and what else the folder holds: an event file of the folder without HParams, a run's
    # events in a subfolder, a file of the user's with the suffix's ending.
    _write(tmp_path, scalar=1.0)
    (tmp_path / "train").mkdir()
    _write(tmp_path / "train", hparams={"units": 1}, scalar=2.0)
    (tmp_path / f"notes{SUFFIX}").write_text("kept")
    # An event file cut short (a crash while writing) is read as far as it goes.
    _write(tmp_path / "cut", scalar=3.0)
    (cut,) = glob.glob(str(tmp_path / "cut" / "*"))
    data = open(cut, "rb").read()
    (tmp_path / "events.out.tfevents.0.cut").write_bytes(data[: len(data) - 5])
    kept = {
        path
        for path in glob.glob(str(tmp_path / "**" / "*"), recursive=True)
        if os.path.isfile(path)
    } - set(hparams_records(tmp_path))
    assert len(hparams_records(tmp_path)) == 1 and len(kept) == 5

    log_hparams(tmp_path, {"units": 8}, {"accuracy": 0.5})
    log_hparams(tmp_path, {"units": 8}, {"accuracy": 0.75})
    (record,) = hparams_records(tmp_path)
    assert record.endswith(SUFFIX)
    assert all(os.path.isfile(path) for path in kept)
    os.remove(tmp_path / "events.out.tfevents.0.cut")  # which this test's reader cannot read
    hparams, scalars = logged_hparams(str(tmp_path))
    assert hparams == {"units": 8} and scalars == {"accuracy": 0.75, "loss": 1.0}
