"""A run's resolved settings and final metrics for TensorBoard's HParams dashboard."""

import glob
import json
import numbers
import os

import tensorflow as tf
from tensorboard.plugins.hparams import api as hparams_api
from tensorboard.plugins.hparams import metadata as hparams_metadata

# The ending of the event files `log_hparams` writes, by which it finds its own.
SUFFIX = ".hparams"


def _hparam_value(value):
    """``value`` as a type the HParams plugin accepts (bool, number or string)."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return "none" if value is None else json.dumps(value, default=str)


def log_hparams(log_dir, settings, metrics, trial_id=None):
    """Writes a run's settings and final metrics where the HParams dashboard finds them.

    `tensorboard --logdir <folder of runs>` then lists every run with its settings and metrics
    in the HParams tab, so that runs of one example compare at a glance.

    Args:
        log_dir: String or path, the run's TensorBoard folder (the parent of Keras's
            ``train``/``validation``).
        settings: Dict, the run's resolved settings by name (the values the run used, after
            presets and defaults: a learning rate, not `None`). Values that are not bool,
            number or string are written as JSON text, `None` as ``"none"``.
        metrics: Dict of final scalar metrics by name, e.g. ``{"test_accuracy": 0.64}``.
        trial_id: Optional string, the name of the run in the dashboard. Default: `None`
            (derived from the settings).

    A run's earlier record in ``log_dir`` (an event file of ``log_dir`` itself holding HParams
    settings, as this function writes) is replaced; other files are left as they are.

    Example:

    >>> import tempfile
    >>> log_hparams(tempfile.mkdtemp(), {"learning_rate": 1e-3, "source": "generated"},
    ...             {"test_accuracy": 0.6})
    """
    values = {str(name): _hparam_value(value) for name, value in sorted(settings.items())}
    # One record per run: the same command run again on a finished run (which evaluates it
    # again) replaces the record it wrote, where a second one would list the run twice. The
    # earlier records are removed once the new one is written.
    earlier = hparams_records(log_dir)
    writer = tf.summary.create_file_writer(str(log_dir), filename_suffix=SUFFIX)
    with writer.as_default():
        hparams_api.hparams(values, trial_id=trial_id)
        for name, value in sorted(metrics.items()):
            tf.summary.scalar(name, float(value), step=0)
    writer.flush()
    writer.close()
    for path in earlier:
        os.remove(path)


def hparams_records(log_dir):
    """The event files of ``log_dir`` itself (not of its runs' subfolders) that hold an HParams
    record: those `log_hparams` writes (ending in `SUFFIX`), and those it wrote without the
    suffix."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(str(log_dir)), "events.out.tfevents.*")):
        if path.endswith(SUFFIX) or _holds_hparams(path):
            found.append(path)
    return sorted(found)


def _holds_hparams(path):
    """Whether the event file ``path`` holds an HParams session record (read up to where it
    ends or breaks off: a file cut short by a crash is read as far as it goes)."""
    try:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == hparams_metadata.PLUGIN_NAME:
                    return True
    except tf.errors.DataLossError:
        pass
    return False
