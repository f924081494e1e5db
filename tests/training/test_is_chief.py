import tensorflow as tf

from tf_memlayers.training import is_chief, make_strategy


def test_one_process_is_the_chief():
    # The workers of a multi-worker strategy: tests/training/test_train.py.
    assert is_chief() and is_chief(tf.distribute.get_strategy())
    assert is_chief(make_strategy("mirrored"))
