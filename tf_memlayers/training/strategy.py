"""Choice of `tf.distribute` strategy from a command-line flag."""

import tensorflow as tf

from tf_memlayers._validation import check_choice

STRATEGIES = ("auto", "default", "mirrored", "one_device")


def make_strategy(name="auto"):
    """Returns a `tf.distribute.Strategy`.

    Args:
        name: `"auto"` (a `MirroredStrategy` when several GPUs are visible, otherwise the
            default strategy on the one device: GPU when present, else CPU), `"default"`,
            `"mirrored"` (all visible GPUs, or every logical CPU device when there are no
            GPUs) or `"one_device"` (the first GPU, else the CPU).
    """
    check_choice("strategy", name, STRATEGIES)
    gpus = tf.config.list_logical_devices("GPU")
    if name == "auto":
        name = "mirrored" if len(gpus) > 1 else "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)
