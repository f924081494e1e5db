"""Shared test fixtures."""

import os
import pathlib

import keras
import numpy as np
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def shared_data_dir():
    """The read-only corpora folder: $TF_MEMLAYERS_DATA, else ../shared/data beside the repo."""
    env = os.environ.get("TF_MEMLAYERS_DATA")
    return pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data():
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real corpora not available at {path} (set TF_MEMLAYERS_DATA)")
    return path


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts from float32, a fresh Keras session and fixed seeds."""
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()
    keras.utils.set_random_seed(1234)
    np.random.seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def float64_policy():
    keras.config.set_dtype_policy("float64")
    yield
    keras.config.set_dtype_policy("float32")
