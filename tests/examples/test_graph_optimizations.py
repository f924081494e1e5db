"""The examples' tests run with TensorFlow's graph optimiser on (tests/examples/conftest.py)."""

import tensorflow as tf

from tests.support import NO_GRAPH_OPTIMIZATIONS


def test_the_examples_tests_run_with_graph_optimizations():
    assert tf.config.optimizer.get_experimental_options()[NO_GRAPH_OPTIMIZATIONS] is False
