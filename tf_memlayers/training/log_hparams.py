"""`log_hparams`: a run's settings and final metrics for TensorBoard's HParams dashboard."""

import collections.abc
import glob
import json
import numbers
import os

import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_path, errors_named

tf = require_tensorflow("tf_memlayers.training")

# The ending of the event files `log_hparams` writes, by which it finds its own.
_SUFFIX = ".hparams"


def _hparam_value(value):
    """``value`` as a type the HParams plugin accepts (bool, number or string)."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return "none" if value is None else json.dumps(value, default=str)


@errors_named("log_hparams")
def log_hparams(log_dir, settings, metrics, trial_id=None):
    """Writes a run's settings and final metrics where the HParams dashboard finds them.

    `keras.callbacks.TensorBoard` logs scalars during training, not the record of a run's
    settings and results that TensorBoard's HParams dashboard lists; with it, ``tensorboard
    --logdir <folder of runs>`` lists every run with its settings and metrics in the HParams
    tab. A run's earlier record in ``log_dir`` (an event file of ``log_dir`` itself holding
    HParams settings) is replaced, so that a run logged again is listed once; other files are
    left as they are.

    Args:
        log_dir: String or path, the run's TensorBoard folder (the parent of Keras's
            ``train`` and ``validation``).
        settings: Dict of the run's resolved settings by name (the values the run used, after
            defaults). Values that are not bool, number or string are written as JSON text,
            `None` as ``"none"``.
        metrics: Dict of final scalar metrics by name, e.g. ``{"test_accuracy": 0.64}``.
        trial_id: Optional string, the run's name in the dashboard. Default: `None` (derived
            from the settings).

    Raises:
        TypeError: If ``settings`` or ``metrics`` is not a dict, or a metric is not a number
            (text that reads as one included).

    Example:

    >>> import tempfile
    >>> from tf_memlayers.training import log_hparams
    >>> log_hparams(tempfile.mkdtemp(), {"learning_rate": 1e-3, "source": "generated"},
    ...             {"test_accuracy": 0.6})
    """
    from tensorboard.plugins.hparams import api as hparams_api

    for name, value in (("settings", settings), ("metrics", metrics)):
        if not isinstance(value, collections.abc.Mapping):
            raise TypeError(f"`{name}` must be a dict, got {value!r}.")
    values = {str(name): _hparam_value(value) for name, value in sorted(settings.items())}
    scalars = {}
    for name, value in sorted(metrics.items()):
        try:  # a number (a 0-d array or tensor of one too), not text that reads as one
            if isinstance(value, bytearray) or np.asarray(value).dtype.kind not in "biuf":
                raise TypeError(name)
            scalars[name] = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"`metrics[{name!r}]` must be a number, got {value!r}.") from None
    # The earlier records are removed once the new one is written.
    log_dir = check_path("log_dir", log_dir)
    earlier = _hparams_records(log_dir)
    writer = tf.summary.create_file_writer(str(log_dir), filename_suffix=_SUFFIX)
    with writer.as_default():
        hparams_api.hparams(values, trial_id=trial_id)
        for name, value in scalars.items():
            tf.summary.scalar(name, value, step=0)
    writer.flush()
    writer.close()
    for path in earlier:
        os.remove(path)


def _hparams_records(log_dir):
    """The event files of ``log_dir`` itself (not of its subfolders) that hold an HParams
    record: those `log_hparams` writes (ending in `_SUFFIX`), and any other holding one."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(str(log_dir)), "events.out.tfevents.*")):
        if path.endswith(_SUFFIX) or _holds_hparams(path):
            found.append(path)
    return sorted(found)


def _holds_hparams(path):
    """Whether the event file ``path`` holds an HParams session record (read as far as it
    goes: a file cut short by a crash is read up to where it breaks off)."""
    from tensorboard.plugins.hparams import metadata

    try:
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME:
                    return True
    except tf.errors.DataLossError:
        pass
    return False
