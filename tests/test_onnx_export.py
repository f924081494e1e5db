"""ONNX files exported by Keras on torch (``model.export(path, format="onnx")``) and run by ONNX
Runtime give the model's outputs (float32, 1e-5): the journey model of every exported layer
(tests/layer_test_case.py: padded inputs, so that the masked paths are exported) and the models
that run a set number of steps (the fixed-length SNLI model, a language model's step model, the
last-word model with a filled heap cache, the masked window layers over one step).

Keras on torch traces a model at batch size 1 and its inputs' sequence lengths, its time loops
unrolled; the files run here at a larger batch. On TensorFlow and JAX, Keras converts through
tf2onnx and jax2onnx, which the test environments do not install (docs/streaming.rst)."""

import keras
import numpy as np
import pytest

from tests.support import BACKEND
from tests.test_files_between_backends import prepared_model
from tests.test_layer_test_case import exported_layers
from tf_memlayers.layers import NGramConcat, SlidingWindowAttention

if BACKEND != "torch":
    pytest.skip("the ONNX files of Keras on torch", allow_module_level=True)
FIXED_STEPS = ("snli-fixed_length", "step_model", "last_word-cache")


def one_step():
    """The masked window layers over sequences of one step (traced at batch 1: one element)."""
    tokens = keras.Input((1,), dtype="int32")
    embedded = keras.layers.Embedding(20, 6, mask_zero=True)(tokens)
    outputs = NGramConcat(3, 4)(SlidingWindowAttention(window=2)(embedded))
    return keras.Model(tokens, outputs), np.array([[3], [0], [5]], "int32"), None


@pytest.mark.parametrize("name", [*(c.__name__ for c in exported_layers()), *FIXED_STEPS, "one"])
def test_the_onnx_file_gives_the_model_outputs(tmp_path, name):
    pytest.importorskip("onnxscript", reason="PyTorch's ONNX exporter needs onnx and onnxscript")
    runtime = pytest.importorskip("onnxruntime", reason="ONNX Runtime is not installed")
    model, inputs, _ = one_step() if name == "one" else prepared_model(name)
    expected = keras.tree.flatten(model(inputs))
    model.export(tmp_path / "model.onnx", format="onnx", verbose=False)
    session, arrays = runtime.InferenceSession(tmp_path / "model.onnx"), keras.tree.flatten(inputs)
    assert min(len(array) for array in arrays) > 1  # a batch other than the traced one
    outputs = session.run(None, {x.name: a for x, a in zip(session.get_inputs(), arrays)})
    assert len(outputs) == len(expected)
    for output, value in zip(outputs, expected):
        np.testing.assert_allclose(output, keras.ops.convert_to_numpy(value), 1e-5, 1e-5)
