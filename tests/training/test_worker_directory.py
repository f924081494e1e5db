import importlib
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers.training import RunBackup, worker_directory


def test_the_chief_writes_the_workdir_and_another_worker_a_copy_of_its_backups(
    tmp_path, monkeypatch
):
    with worker_directory(tmp_path / "run") as directory:
        assert directory == str(tmp_path / "run")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    backup = RunBackup(tmp_path / "run" / "backup", settings={"units": 1})
    model.fit(np.ones((2, 2)), np.ones((2, 1)), epochs=2, verbose=0, callbacks=[backup])
    (tmp_path / "run" / "logs").mkdir()  # what else the chief writes is not copied
    module = importlib.import_module("tf_memlayers.training.worker_directory")
    monkeypatch.setattr(module, "is_chief", lambda strategy: False)
    with worker_directory(tmp_path / "run", tf.distribute.get_strategy()) as directory:
        copy = os.path.join(directory, "backup")
        assert sorted(os.listdir(directory)) == ["backup"]
        assert sorted(os.listdir(copy)) == ["run.json", "settings.json", "variables-00002.npz"]
        assert RunBackup(copy, settings={"units": 1}).history == backup.history
    assert not os.path.exists(directory)
    with pytest.raises(TypeError, match="^worker_directory: `strategy` must be a tf.distribute"):
        worker_directory(tmp_path, "mirrored").__enter__()
    pytest.raises(TypeError, worker_directory(None).__enter__).match("^worker_directory: `workdir`")
