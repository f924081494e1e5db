import glob
import importlib
import os

import pytest
import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api

from tests.support import logged_hparams
from tf_memlayers.training import log_hparams

module = importlib.import_module("tf_memlayers.training.log_hparams")


def _write(folder, hparams=None, scalar=None):
    """An event file of ``folder`` written as `log_hparams` does not, under the default name."""
    writer = tf.summary.create_file_writer(str(folder))
    with writer.as_default():
        if hparams is not None:
            hparams_api.hparams(hparams)
        if scalar is not None:
            tf.summary.scalar("loss", scalar, step=0)
    writer.close()


def test_a_run_logged_again_keeps_one_record_the_last_as_the_dashboard_takes_it(tmp_path):
    # A record written by another writer (under another name) ...
    _write(tmp_path, hparams={"kind": "gru"})
    # ... and what else the folder holds: an event file of the folder without HParams, a run's
    # events in a subfolder, a file of the user's with the suffix's ending.
    _write(tmp_path, scalar=1.0)
    (tmp_path / "train").mkdir()
    _write(tmp_path / "train", hparams={"units": 1}, scalar=2.0)
    (tmp_path / f"notes{module._SUFFIX}").write_text("kept")
    # An event file cut short (a crash while writing) is read as far as it goes.
    _write(tmp_path / "cut", scalar=3.0)
    (cut,) = glob.glob(str(tmp_path / "cut" / "*"))
    data = open(cut, "rb").read()
    (tmp_path / "events.out.tfevents.0.cut").write_bytes(data[: len(data) - 5])
    files = {p for p in glob.glob(str(tmp_path / "**" / "*"), recursive=True) if os.path.isfile(p)}
    kept = files - set(module._hparams_records(tmp_path))
    assert len(module._hparams_records(tmp_path)) == 1 and len(kept) == 5
    settings = {"rate": 1e-3, "units": 8, "fused": True, "rows": None, "sizes": [2, 3], "m": "gru"}
    log_hparams(tmp_path, settings, {"accuracy": 0.5})
    log_hparams(tmp_path, settings, {"accuracy": 0.75})
    pytest.raises(TypeError, log_hparams, tmp_path, settings, 0.5).match("`metrics` must be a")
    pytest.raises(TypeError, log_hparams, None, {}, {}).match("^log_hparams: `log_dir` must be")
    for bad in (None, "0.5", tf.constant("0.5"), bytearray(b"0.5")):  # text that reads as a number
        pytest.raises(TypeError, log_hparams, tmp_path, {}, {"m": bad}).match(r"`metrics\['m'\]`")
    (record,) = module._hparams_records(tmp_path)
    assert record.endswith(module._SUFFIX) and all(os.path.isfile(path) for path in kept)
    os.remove(tmp_path / "events.out.tfevents.0.cut")  # which this test's reader cannot read
    hparams, scalars = logged_hparams(str(tmp_path))
    # The values as the dashboard takes them: None as "none", a list as JSON text.
    assert hparams == {**settings, "rate": pytest.approx(1e-3), "rows": "none", "sizes": "[2, 3]"}
    assert scalars == {"accuracy": 0.75, "loss": 1.0}
