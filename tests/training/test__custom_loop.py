import keras
import numpy as np
import tensorflow as tf

from tests.training.multi_worker_job import train_cache_model
from tf_memlayers.training._custom_loop import train_with_custom_loop


def test_custom_loop_in_one_process_matches_fit():
    """The loop's logs and weights equal fit's, for a `HeapCacheModel`: sparse embedding
    gradients, the cache written after each update, an accuracy metric."""
    strategy = tf.distribute.get_strategy()
    expected, expected_results = train_cache_model(strategy, epochs=2)
    keras.backend.clear_session()
    got, results = train_cache_model(strategy, train_with_custom_loop, epochs=2)
    assert len(got) == len(expected)
    for (path, value), want in zip(got.items(), expected.values()):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, err_msg=path)
    assert results["fill"] == expected_results["fill"] == 8
    for name, values in expected_results["history"].items():
        np.testing.assert_allclose(results["history"][name], values, rtol=1e-6, err_msg=name)
