"""pytest's hooks and the shared fixtures (the helpers the tests import are in ``support.py``).
A test of what exists only on TensorFlow carries the ``tensorflow_only`` marker with the reason,
and is skipped with that reason on another backend (``KERAS_BACKEND=jax``)."""

import atexit
import gc
import importlib.util
import os
import shutil
import tempfile

# XLA's CPU code generation made quick to compile (for this process and those the tests start):
# no LLVM optimisation passes, and XLA's older emitters for fused operations. The tests compile
# thousands of small programs and run each a few times: without LLVM's passes the JAX pass takes
# 40% less time, the TensorFlow suite 4%; the older emitters take the N-gram layer's JAX tests a
# further 35% less. The flags change how fast the code runs, not what it computes (the results
# agree to float rounding). A flag ``XLA_FLAGS`` already sets is kept; the emitters' flag is left
# out on a GPU (``TF_MEMLAYERS_TESTS_DEVICE=gpu``, benchmarks/gpu/run.sh), where another JAX's XLA
# may not know it. Set before TensorFlow or JAX starts XLA.
_XLA_FAST_COMPILE = {"xla_backend_optimization_level": "0"}
if os.environ.get("TF_MEMLAYERS_TESTS_DEVICE", "cpu") == "cpu":
    _XLA_FAST_COMPILE["xla_cpu_use_fusion_emitters"] = "false"
_xla_flags = os.environ.get("XLA_FLAGS", "")
os.environ["XLA_FLAGS"] = " ".join(
    [
        _xla_flags,
        *(
            f"--{flag}={value}"
            for flag, value in _XLA_FAST_COMPILE.items()
            if flag not in _xla_flags
        ),
    ]
).strip()

# On JAX, a compilation cache for each test process, in a folder it removes when it ends: the
# tests compile many equal programs (layers of equal shapes, a `lax.scan` traced afresh at every
# eager call), and a cached program is the one XLA would compile again (the AM-GRU's
# packed-document tests take half the time). One folder per process, since JAX may read an entry
# another process is still writing. A cache folder set outside the tests is used as it is.
_OWN_JAX_CACHE = "TF_MEMLAYERS_TESTS_JAX_CACHE"
if importlib.util.find_spec("jax") and os.environ.get("JAX_COMPILATION_CACHE_DIR") in (
    None,
    os.environ.get(_OWN_JAX_CACHE),
):
    _jax_cache = tempfile.mkdtemp(prefix="tf-memlayers-tests-jax-cache-")
    atexit.register(shutil.rmtree, _jax_cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ[_OWN_JAX_CACHE] = _jax_cache
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
    # TensorFlow's graph optimiser (Grappler) off: on the tests' small graphs, each run a few
    # times, it costs more than it saves (5% of two test files' time). What a graph computes
    # does not change (tests/test_graph_optimizations.py). The processes the tests start
    # optimise, but for those whose runs are compared with this process's.
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
            item.add_marker(
                pytest.mark.skip(reason=f"TensorFlow only ({reason}); backend is {BACKEND}")
            )


def pytest_sessionstart(session):
    # Everything imported so far (TensorFlow, JAX, Keras: millions of objects) lives until the
    # end; moved out of the collector's generations, it is not traversed by every collection.
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts from float32, a fresh Keras session and fixed seeds (without a forced
    garbage collection, which cost 0.3 s a test at the start of the suite and 2 s by its end)."""
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
