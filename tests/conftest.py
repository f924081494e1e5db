"""Shared test fixtures."""

import glob
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


def logged_hparams(log_dir):
    """The hparams and scalar metrics written in ``log_dir`` (its own event files only)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import metadata

    hparams, scalars = {}, {}
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                plugin = value.metadata.plugin_data
                if plugin.plugin_name == metadata.PLUGIN_NAME and value.tag == (
                    metadata.SESSION_START_INFO_TAG
                ):
                    info = metadata.parse_session_start_info_plugin_data(plugin.content)
                    for name, v in info.hparams.items():
                        hparams[name] = v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                elif plugin.plugin_name == "scalars":
                    scalars[value.tag] = float(tf.make_ndarray(value.tensor))
    return hparams, scalars
