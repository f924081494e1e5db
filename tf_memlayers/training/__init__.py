"""Training on TensorFlow where Keras falls short: exact resumption and several machines.

Keras covers checkpoints, TensorBoard logs and learning-rate rules; this subpackage adds what
it lacks, for any Keras model trained on TensorFlow:

* `RunBackup` — a callback that makes ``fit`` resume exactly after an interruption at any
  moment: the model's and optimizer's variables, the layers' random states, the global random
  generators, the other callbacks' state and every epoch's logs, committed atomically at each
  epoch's end (`keras.callbacks.BackupAndRestore` keeps the weights and the epoch only);
* `train` and `evaluate` — ``fit`` and ``evaluate`` under any `tf.distribute` strategy,
  `tf.distribute.MultiWorkerMirroredStrategy` included, where Keras 3's ``fit`` fails
  (keras-team/keras#20585);
* `make_strategy`, `worker_directory` and `is_chief` — the strategy a ``--strategy`` option
  names (one of `STRATEGIES`), and which process writes a multi-worker run's files;
* `log_hparams` — a run's settings and final metrics in TensorBoard's HParams dashboard.

``import tf_memlayers`` does not import this subpackage; it needs TensorFlow.
"""

from tf_memlayers._tensorflow import require_tensorflow

require_tensorflow("tf_memlayers.training")

from tf_memlayers.training.evaluate import evaluate  # noqa: E402
from tf_memlayers.training.is_chief import is_chief  # noqa: E402
from tf_memlayers.training.log_hparams import log_hparams  # noqa: E402
from tf_memlayers.training.make_strategy import STRATEGIES, make_strategy  # noqa: E402
from tf_memlayers.training.run_backup import RunBackup  # noqa: E402
from tf_memlayers.training.train import train  # noqa: E402
from tf_memlayers.training.worker_directory import worker_directory  # noqa: E402

__all__ = [
    "STRATEGIES",
    "RunBackup",
    "evaluate",
    "is_chief",
    "log_hparams",
    "make_strategy",
    "train",
    "worker_directory",
]
