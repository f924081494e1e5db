"""The set-up of the examples' tests (``python -m pytest examples``). Part of the repository's
test runs, not of any example: a folder copied out of ``examples/`` runs without it, and its
tests (``*_test.py``), which use these fixtures and the scripts beside the folders, run here.

As for the package's tests (``tests/xla_flags.py`` and ``tests/conftest.py`` say why): XLA
compiles for the CPU quickly rather than well, TensorFlow's graph optimiser is off in the test
processes, and every test starts from float32, a fresh Keras session and fixed seeds. The
examples need TensorFlow: without it (the JAX pass's environment) nothing here is collected.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

from tests.xla_flags import compile_quickly

compile_quickly()

EXAMPLES = pathlib.Path(__file__).resolve().parent
# The real corpora: $TF_MEMLAYERS_DATA, else ../shared/data beside the repository; the tests that
# read them skip without.
SHARED_DATA = pathlib.Path(
    os.environ.get("TF_MEMLAYERS_DATA", EXAMPLES.parent.parent / "shared" / "data")
)

if importlib.util.find_spec("tensorflow") is None:
    collect_ignore_glob = ["*"]
else:
    import keras
    import numpy as np
    import pytest
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

    @pytest.fixture(autouse=True)
    def _fresh_keras_state():
        keras.config.set_dtype_policy("float32")
        keras.backend.clear_session(free_memory=False)
        keras.utils.set_random_seed(1234)
        np.random.seed(1234)
        yield
        keras.config.set_dtype_policy("float32")

    @pytest.fixture
    def shared_data():
        """The folder of the real corpora; the test skips where it is absent."""
        if not SHARED_DATA.is_dir():
            pytest.skip(f"real corpora not available at {SHARED_DATA} (set TF_MEMLAYERS_DATA)")
        return SHARED_DATA

    @pytest.fixture
    def run_forked(tmp_path):
        """``run_forked(name, *args)`` copies ``examples/<name>/`` alone (without its tests)
        into a temporary directory outside the repository and runs ``python -m <name> *args``
        there, where only the installed packages are importable: what a user who forks the
        example runs. Returns the `subprocess.CompletedProcess` (output captured as text)."""

        def run(name, *args, timeout=900):
            shutil.copytree(
                EXAMPLES / name,
                tmp_path / name,
                ignore=shutil.ignore_patterns("*_test.py", "__pycache__"),
            )
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            return subprocess.run(
                [sys.executable, "-m", name, *map(str, args)],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )

        return run
