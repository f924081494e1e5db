"""Choice of `tf.distribute` strategy from a command-line flag."""

import tensorflow as tf

from examples.harness.checks import check_choice

STRATEGIES = ("auto", "default", "mirrored", "one_device", "multi_worker")

# A process configures its collective operations once: one multi-worker strategy per process.
_MULTI_WORKER = []


def make_strategy(name="auto"):
    """Returns a `tf.distribute.Strategy`.

    Args:
        name: `"auto"` (a `MirroredStrategy` when several GPUs are visible, otherwise the
            default strategy on the one device: GPU when present, else CPU), `"default"`,
            `"mirrored"` (all visible GPUs, or every logical CPU device when there are no
            GPUs), `"one_device"` (the first GPU, else the CPU) or `"multi_worker"` (a
            `tf.distribute.MultiWorkerMirroredStrategy` over the cluster that the
            ``TF_CONFIG`` environment variable describes, every visible GPU of each worker,
            else its CPU; without ``TF_CONFIG``, this machine alone). The same multi-worker
            strategy is returned on every call in a process. Train under it with
            `examples.harness.training.train`, which runs a custom loop while Keras's ``fit``
            fails under this strategy (keras-team/keras#20585).
    """
    check_choice("strategy", name, STRATEGIES)
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
