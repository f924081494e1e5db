"""The examples' tests run with TensorFlow's graph optimiser on, as the examples run for a
user and in the processes these tests start (`tests/conftest.py` turns it off for the other
tests): a run here and its subprocess compare graphs optimised alike."""

import pytest

from tests.support import graph_optimizations


@pytest.fixture(autouse=True)
def _graph_optimizations_on():
    with graph_optimizations(True):
        yield
