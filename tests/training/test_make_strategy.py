import pytest
import tensorflow as tf

from tf_memlayers.training import make_strategy


def test_each_name_makes_its_strategy():
    # "multi_worker" sets up this process's collectives: tests/training/test_train.py's workers.
    several_gpus = len(tf.config.list_logical_devices("GPU")) > 1
    assert make_strategy("default") is tf.distribute.get_strategy()
    assert isinstance(make_strategy("one_device"), tf.distribute.OneDeviceStrategy)
    assert isinstance(make_strategy("mirrored"), tf.distribute.MirroredStrategy)
    assert isinstance(make_strategy(), tf.distribute.MirroredStrategy) == several_gpus
    with pytest.raises(ValueError, match="`name` must be one of 'auto', .*; got 'tpu'"):
        make_strategy("tpu")
    # Python's own message about the call, which names the function already, is left alone.
    pytest.raises(TypeError, make_strategy, bogus=1).match(r"^make_strategy\(\) got an unexpected")
