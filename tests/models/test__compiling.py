"""`compile_and_build_optimizer`: the model compiled with its optimizer built, so that the
train step is traced once."""

import keras
import numpy as np
import pytest

from tests.support import count_train_step_traces
from tf_memlayers.models._compiling import compile_and_build_optimizer


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_the_optimizer_is_built_and_the_step_traced_once(policy):
    keras.config.set_dtype_policy(policy)
    try:
        inputs = keras.Input((3,))
        hidden = keras.layers.Dense(4)(inputs)
        model = keras.Model(inputs, keras.layers.Dense(2, dtype="float32")(hidden))
        returned = compile_and_build_optimizer(model, keras.optimizers.Adam(0.1), loss="mse")
    finally:
        keras.config.set_dtype_policy("float32")
    assert returned is model and model.optimizer.built
    # Under mixed_float16 Keras wraps the optimizer in a LossScaleOptimizer: built with it.
    wrapped = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert wrapped == (policy == "mixed_float16")
    traces = count_train_step_traces(model)
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    before = [keras.ops.convert_to_numpy(w).copy() for w in model.trainable_weights]
    for _ in range(2):
        model.train_on_batch(x, y)
    assert len(traces) == 1 and int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 2
    after = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    assert all(not np.array_equal(a, b) for a, b in zip(after, before))


class SubclassedModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, inputs):
        return self.dense(inputs)


def test_a_model_not_built_yet_is_left_to_keras():
    model = SubclassedModel()
    compile_and_build_optimizer(model, keras.optimizers.Adam(0.1), loss="mse")
    # Its optimizer built now would know no variable, and the first step would fail.
    assert not model.optimizer.built
    model.train_on_batch(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"))
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 1
