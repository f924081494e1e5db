"""pytest's hooks and the shared fixtures (the helpers the tests import are in ``support.py``).

The layer tests run under TensorFlow (the default) and a second time under JAX
(``KERAS_BACKEND=jax``). A test of something that exists only on TensorFlow (``tf.function``,
``tf.data``, ``tf.distribute``, the fused AM-GRU loop, the examples) carries the
``tensorflow_only`` marker with the reason, and is skipped with that reason on another backend.
"""

import atexit
import gc
import importlib.util
import os
import shutil
import tempfile

# XLA's CPU code generation made quick to compile, for this process and the examples' processes
# the tests start: without LLVM's optimisation passes, and with XLA's older emitters for fused
# operations instead of its MLIR fusion emitters (whose code takes longer to generate). The tests
# compile thousands of small programs (on JAX every operation run outside `jit` is one) and run
# each a few times, so compiling is most of their time: without LLVM's passes the JAX pass takes
# 40% less machine time, the TensorFlow suite 4%; with the older emitters besides, the JAX tests
# of the N-gram layer take a further 35% less. The flags change how fast the compiled code runs,
# not what it computes: the results agree with the optimised code's to float rounding, and every
# comparison of two runs in the tests compiles both in the same way. A flag that ``XLA_FLAGS``
# already sets is left as it is. The emitters' flag is for the CPU compiler: where the tests run
# on a GPU (``TF_MEMLAYERS_TESTS_DEVICE=gpu``, set by ``benchmarks/gpu/run.sh``) it is left out,
# so that another JAX's XLA, which may not know it, starts. Set before TensorFlow or JAX starts
# XLA.
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

# On JAX, a compilation cache for each test process (a pytest-xdist worker, or a pytest run
# a test starts), in a folder of its own that the process removes when it ends. JAX keys each
# compiled program by its HLO, the compile options and the XLA flags, and reuses the program
# when the same computation comes again: the tests run many layers of equal shapes, eagerly (a
# `lax.scan` traced afresh at every call) and in Keras's jitted steps, so much of the
# compiling is a repeat (the AM-GRU's packed-document tests take half the time with the
# cache). A program read from the cache is the program XLA would compile again: what the
# tests compute does not change. One folder per process, since JAX may read an entry that
# another process is still writing (it then warns and compiles). JAX reads these variables
# when it starts; a cache folder set outside the tests is used as it is.
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

if BACKEND == "jax":
    import jax
    from keras.src.backend.common import dtypes as keras_dtypes

    # The NumPy reference tests compare float64 results to 1e-10. Keras leaves JAX in 32-bit
    # mode, where float64 silently becomes float32, and on every backend but TensorFlow its
    # type promotion turns float64 into float32 too (`keras.ops.tanh` of a float64 tensor is
    # float32). The JAX pass enables 64-bit JAX and keeps float64 as TensorFlow does.
    jax.config.update("jax_enable_x64", True)
    keras_dtypes.BIT64_TO_BIT32_DTYPE["float64"] = "float64"

if BACKEND == "tensorflow":
    # TensorFlow's graph optimiser (Grappler) off in this process. It rewrites each graph
    # function for speed when the function first runs (folding constants, fusing and pruning
    # operations): on the tests' small graphs, each run a few times, that costs more than it
    # saves (two of the test files took 5% less time without it, in a paired comparison). What
    # a graph computes does not change; the results agree with the optimised graph's to float
    # rounding.
    # tests/test_graph_optimizations.py checks that the optimised graphs of the package's models
    # compute what the graphs as traced do. The processes the tests start optimise, as a
    # user's do, but for those whose runs are compared with this process's (the kill tests'
    # killed runs, the multi-worker tests' workers).
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
    """Every test starts from float32, a fresh Keras session and fixed seeds.

    The session is cleared without a full garbage collection (``free_memory=False``): Python's
    own collector frees the old models' cycles, and a forced collection before every test cost
    0.3 s at the start of the suite and grew with it (2 s and more per test by the end).
    """
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
