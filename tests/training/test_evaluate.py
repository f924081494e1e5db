import importlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers.training import evaluate


def test_evaluate_gives_the_numbers_of_keras_evaluate_on_either_path(monkeypatch):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile("sgd", loss, metrics=["accuracy"], weighted_metrics=["accuracy"])
    rng = np.random.default_rng(0)
    x, y, w = rng.normal(size=(10, 3)), rng.integers(0, 4, 10), rng.random(10)
    data = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(4)  # a partial last batch
    expected = model.evaluate(data, verbose=0, return_dict=True)
    assert evaluate(model, data) == expected
    # Where fit fails (several workers): the custom loop's evaluation, on this process.
    module = importlib.import_module("tf_memlayers.training.evaluate")
    monkeypatch.setattr(module, "fit_works_under", lambda strategy: False)
    results = evaluate(model, data)
    assert results.keys() == expected.keys() == {"loss", "accuracy", "weighted_accuracy"}
    for name, value in results.items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, err_msg=name)
    pytest.raises(TypeError, evaluate, model, x).match("`x` must be a tf.data.Dataset")
