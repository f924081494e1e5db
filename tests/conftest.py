"""pytest's hooks and the shared fixtures (the helpers the tests import are in ``support.py``).
A test of what exists only on TensorFlow carries the ``tensorflow_only`` marker with the reason,
and is skipped with that reason on another backend (``KERAS_BACKEND=jax``)."""

import atexit
import gc
import importlib.util
import os
import shutil
import tempfile

from tests.xla_flags import compile_quickly

compile_quickly()

# On JAX, one compilation cache for the test run, in a folder removed when it ends: the processes
# the run starts (pytest-xdist's workers, the tests' own) inherit it, so a program one of them
# compiled is read by the others (the tests compile many equal programs; the layers' tests take 10%
# less time than with a cache for each process). JAX writes an entry without a lock: an entry read
# while another process writes it cannot be decompressed, and JAX compiles the program again with a
# warning. A cache folder set outside the tests is used as it is.
if importlib.util.find_spec("jax") and "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _jax_cache = tempfile.mkdtemp(prefix="tf-memlayers-tests-jax-cache-")
    atexit.register(shutil.rmtree, _jax_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _jax_cache
    # Every program, however quick to compile or small.
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "-1"

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests.selection import collected  # noqa: E402
from tests.support import BACKEND, turn_off_graph_optimizations  # noqa: E402

if BACKEND in ("jax", "torch"):
    from keras.src.backend.common import dtypes as keras_dtypes

    # The NumPy reference tests compare float64 results to 1e-10: float64 kept by Keras's type
    # promotion (which otherwise turns it into float32 off TensorFlow), and 64-bit JAX.
    keras_dtypes.BIT64_TO_BIT32_DTYPE["float64"] = "float64"
if BACKEND == "jax":
    import jax

    jax.config.update("jax_enable_x64", True)

if BACKEND == "tensorflow":
    # Grappler off: on the tests' small graphs it costs more than it saves; what a graph
    # computes does not change (tests/test_graph_optimizations.py).
    turn_off_graph_optimizations()

# pytester: the test case's own tests run pytest on a toy test class.
pytest_plugins = ("pytester",)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "tensorflow_only(reason): the test needs the TensorFlow backend; skipped, with the "
        "reason, on any other backend.",
    )


def pytest_ignore_collect(collection_path, config):
    # On another backend than TensorFlow only the backend-neutral tests run (tests/selection.py).
    return None if collected(BACKEND, collection_path) else True


def pytest_collection_modifyitems(config, items):
    if BACKEND == "tensorflow":
        return
    for item in items:
        marker = item.get_closest_marker("tensorflow_only")
        if marker is not None:
            reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            only = f"TensorFlow only ({reason}); backend is {BACKEND}"
            item.add_marker(pytest.mark.skip(reason=only))


def pytest_sessionstart(session):
    # What is imported so far lives until the end: out of the garbage collector's way.
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts from float32, a fresh Keras session and fixed seeds (without a forced
    garbage collection, which costs up to 2 s a test)."""
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def float64_policy():
    keras.config.set_dtype_policy("float64")
    yield
    keras.config.set_dtype_policy("float32")
