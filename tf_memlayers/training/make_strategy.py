"""`make_strategy`: a `tf.distribute` strategy chosen by name."""

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_choice, errors_named

tf = require_tensorflow("tf_memlayers.training")

STRATEGIES = ("auto", "default", "mirrored", "one_device", "multi_worker")

# A process configures its collective operations once: one multi-worker strategy per process.
_MULTI_WORKER = []


@errors_named("make_strategy")
def make_strategy(name="auto"):
    """Returns the `tf.distribute.Strategy` named ``name``, for a script's ``--strategy``.

    Keras has no factory from a name (a command-line option) to a strategy, and a process may
    make its `tf.distribute.MultiWorkerMirroredStrategy` only once.

    Args:
        name: String, one of `STRATEGIES`: `"auto"` (a `tf.distribute.MirroredStrategy` when
            several GPUs are visible, else the default strategy on the one device),
            `"default"`, `"mirrored"` (every visible GPU, else every logical CPU device),
            `"one_device"` (the first GPU, else the CPU) or `"multi_worker"` (a
            `tf.distribute.MultiWorkerMirroredStrategy` over the cluster that the
            ``TF_CONFIG`` environment variable describes, each worker's visible GPUs, else
            its CPU; without ``TF_CONFIG``, this machine alone; the same one on every call).
            Train under it with `train`, which runs a custom loop where Keras's ``fit`` fails
            under this strategy (keras-team/keras#20585). Default: `"auto"`.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: If ``name`` is not one of `STRATEGIES`.

    Example:

    >>> from tf_memlayers.training import make_strategy
    >>> make_strategy("one_device").num_replicas_in_sync
    1
    """
    check_choice("name", name, STRATEGIES)
    if name == "multi_worker":
        if not _MULTI_WORKER:
            _MULTI_WORKER.append(tf.distribute.MultiWorkerMirroredStrategy())
        return _MULTI_WORKER[0]
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)
