"""`MemorySequenceLayer` on a running sum (its memory the sum so far): where a call's memory
comes from, its gradient, storage, masked steps, checks and helpers."""

import re

import keras
import numpy as np
import pytest
from keras import ops

from tests.layer_test_case import as_numpy
from tests.support import assert_close, gradients
from tf_memlayers import NGramConcat, SlidingWindowAttention
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer
from tf_memlayers.ops import windows

WIDTH = 3


class RunningSum(MemorySequenceLayer):
    """Outputs ``memory + x_1 + ... + x_t`` over the valid steps; its memory the last output."""

    memory_size = WIDTH

    def build_mechanism(self, width):
        self.mechanism_width = width

    def call(self, inputs, mask=None, initial_memory=None):
        self.check_call_inputs(inputs, mask, initial_memory)
        inputs, _ = self.masked_inputs(inputs, mask)
        memory = self.incoming_memory(inputs, initial_memory)
        outputs = ops.expand_dims(memory, 1) + ops.cumsum(inputs, axis=1)
        return outputs, self.keep_memory(outputs[:, -1:])


def _inputs(batch=2, steps=4, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, steps, WIDTH)).astype("float32")


def test_a_stateless_layer_starts_every_call_from_zeros():
    layer, x = RunningSum(), _inputs()
    for _ in range(2):
        outputs, memory = layer(x)
        assert_close([outputs, memory], [np.cumsum(x, axis=1), x.sum(axis=1)], 0, 1e-6)
    assert layer.memory is None and layer.starts_from_zeros() and not layer.weights
    assert layer.input_width == layer.mechanism_width == WIDTH
    # keep_memory hands the memory on without storing it; reset_state has nothing to clear.
    np.testing.assert_array_equal(as_numpy(layer.keep_memory(ops.ones((2, WIDTH)))), 1.0)
    layer.reset_state()
    assert layer.memory is None
    # No gradient flows into a given initial memory, nor out of the returned memory.
    start = np.ones((2, WIDTH), "float32")
    _, _, (grad_x, grad_start) = gradients(
        lambda x, start: ops.sum(ops.square(layer(x, initial_memory=start)[0])), inputs=[x, start]
    )
    assert np.abs(grad_x).max() > 0.1
    np.testing.assert_array_equal(grad_start, np.zeros_like(start))
    assert not gradients(lambda x: ops.sum(layer(x)[1]), inputs=[x])[2][0].any()


def test_a_stateful_layer_carries_its_memory_until_reset_or_an_initial_memory_in_its_dtype():
    with pytest.raises(TypeError, match=r"^RunningSum: `stateful` must be a bool, got 'yes'"):
        RunningSum(stateful="yes")
    layer = RunningSum(stateful=True, name="sum")
    config = layer.get_config()
    assert config["stateful"] is True and config["name"] == "sum" and layer.supports_masking
    assert RunningSum.from_config(config).stateful is True
    x = _inputs(steps=6)
    layer.build((2, None, WIDTH))
    assert layer.memory.trainable is False and tuple(layer.memory.shape) == (2, WIDTH)
    assert not as_numpy(layer.memory).any() and layer.non_trainable_weights == [layer.memory]
    assert not layer.starts_from_zeros()
    first, _ = layer(x[:, :4])
    second, memory = layer(x[:, 4:])
    whole = np.cumsum(x, axis=1)
    assert_close(ops.concatenate([first, second], axis=1), whole, 1e-6, 1e-5)
    assert_close([layer.memory, memory], [whole[:, -1]] * 2, 1e-6, 1e-5)
    for reset in (layer.reset_state, layer.reset_states):
        layer(x)
        reset()
        assert not as_numpy(layer.memory).any()
        np.testing.assert_allclose(as_numpy(layer(x[:, :2])[0]), whole[:, :2], rtol=1e-6)
    # An initial memory overrides the stored one, and what follows is carried.
    start = np.full((2, WIDTH), 10.0, "float32")
    outputs, _ = layer(x, initial_memory=start)
    np.testing.assert_allclose(as_numpy(outputs), start[:, None] + whole, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_numpy(layer.memory), start + whole[:, -1], rtol=1e-5, atol=1e-5)
    assert not layer.starts_from_zeros(start)
    # The memory is cast to the inputs' dtype, and stored in its own.
    memory = layer.incoming_memory(ops.convert_to_tensor(x.astype("float64")), start)
    assert keras.backend.standardize_dtype(memory.dtype) == "float64"
    assert tuple(layer.keep_memory(ops.ones((2, 1, WIDTH), "float64") * 0.5).shape) == (2, WIDTH)
    assert keras.backend.standardize_dtype(layer.memory.dtype) == "float32"
    np.testing.assert_array_equal(as_numpy(layer.memory), np.full((2, WIDTH), 0.5, "float32"))


def test_masked_steps_read_as_zeros_even_when_not_finite():
    layer, x = RunningSum(), _inputs(steps=5)
    mask = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], "int32")
    poisoned = np.where(mask[..., None] > 0, x, np.nan).astype("float32")
    outputs, memory = layer(poisoned, mask=mask)
    expected = np.cumsum(x * mask[..., None], axis=1)
    assert_close([outputs, memory], [expected, expected[:, -1]], 0, 1e-6)
    zeroed, as_bool = layer.masked_inputs(ops.convert_to_tensor(poisoned), mask)
    assert keras.backend.standardize_dtype(as_bool.dtype) == "bool"
    np.testing.assert_array_equal(as_numpy(as_bool), mask > 0)
    np.testing.assert_array_equal(as_numpy(zeroed), x * mask[..., None])
    unchanged, none = layer.masked_inputs(poisoned, None)
    assert unchanged is poisoned and none is None


@pytest.mark.parametrize(
    "make", [SlidingWindowAttention, lambda window, **a: NGramConcat(4, 2, **a)]
)
def test_a_twin_of_another_batch_size_or_statefulness_loads_the_weights_beside_its_memory(
    make, tmp_path
):
    def model(batch, stateful, window=3, **more):
        inputs = keras.Input((None, WIDTH), batch_size=batch)
        return keras.Model(inputs, make(window=window, stateful=stateful, **more)(inputs))

    trained, x, path = model(4, True), _inputs(batch=4), str(tmp_path / "{}.weights.h5")
    trained(x)  # its memory now holds the streams of 4 rows
    trained.save_weights(path.format("stateful"))
    stateless = model(None, False)
    stateless.load_weights(path.format("stateful"))
    model(None, False, window=5).load_weights(path.format("stateful"))  # a memory 5 wide: not read
    stateless.save_weights(path.format("stateless"))
    expected = as_numpy(stateless(x))  # from zeros, with the trained weights
    for batch, saved in ((1, "stateful"), (2, "stateful"), (4, "stateless"), (4, "stateful")):
        twin = model(batch, True)
        twin.load_weights(path.format(saved))
        if saved == "stateful" and batch == 4:  # the same batch size: the streams' memory too
            assert_close(twin.layers[1].memory, trained.layers[1].memory, 0)
        else:
            np.testing.assert_array_equal(as_numpy(twin(x[:batch])), expected[:batch])
    model(None, False, use_bias=True).save_weights(path.format("biased"))
    with pytest.raises(ValueError):  # a bias where a stateful layer's memory is: no memory
        model(4, True).load_weights(path.format("biased"))


@pytest.mark.parametrize(
    "shape, stateful, message",
    [
        ((2, WIDTH), False, "`inputs` must have rank 3, got shape (2, 3) (rank 2)"),
        ((2, 4, None), False, "the last dimension of `inputs` must be known"),
        ((None, 4, WIDTH), True, "`stateful=True` needs a fixed batch size; got inputs of shape "),
    ],
)
def test_build_refuses_shapes_it_cannot_serve(shape, stateful, message):
    if stateful:
        message += "(None, 4, 3). Pass `batch_size=` to `keras.Input`"
    with pytest.raises(ValueError, match="^" + re.escape(f"RunningSum: {message}")):
        RunningSum(stateful=stateful).build(shape)


MEMORY_WIDTH = "`initial_memory` must have width 3 (the layer's memory_size)"
# (a call's arguments, its ValueError's start after the layer's name); stateful: one batch size.
CALL_ERRORS = [
    (
        dict(inputs=np.zeros((2, 4, 5))),
        "`inputs` must have width 3 (the width the layer was built for); got shape (2, 4, 5)",
    ),
    (dict(inputs=np.zeros((2, 4))), "`inputs` must have rank 3"),
    (dict(mask=np.ones((2, 5), bool)), "`mask` must have shape (batch, time) = (2, 4)"),
    (dict(initial_memory=np.zeros((2, 1, WIDTH))), "`initial_memory` must have rank 2"),
    (dict(initial_memory=np.zeros((2, 4))), MEMORY_WIDTH + "; got shape (2, 4)"),
    (
        dict(initial_memory=np.zeros((3, 3))),
        "`initial_memory` of shape (3, 3) has batch size 3, but `inputs` of shape (2, 4, 3)",
    ),
    (dict(reset=np.ones((2, 4), "int32")), "`reset` must be a bool tensor"),
    (
        dict(inputs=np.zeros((3, 4, WIDTH)), stateful=True),
        "the stateful layer keeps the memory of 2 streams (memory of shape (2, 3)), but `inputs`"
        " of shape (3, 4, 3) has batch size 3",
    ),
]


@pytest.mark.parametrize("arguments, message", CALL_ERRORS)
def test_call_inputs_are_checked_naming_the_argument(arguments, message):
    layer = RunningSum(stateful=arguments.pop("stateful", False))
    layer.build((2 if layer.stateful else None, None, WIDTH))
    arguments = {"inputs": np.zeros((2, 4, WIDTH)), **arguments}
    with pytest.raises(ValueError, match="^" + re.escape(f"RunningSum: {message}")):
        layer.check_call_inputs(**arguments)


def test_the_checks_pass_what_fits_and_return_the_inputs_shape_and_documents_need_a_reset():
    layer, compaction = RunningSum(), windows.Compaction(None)
    # Before the build, an initial memory is checked against memory_size_for(input width).
    assert layer.check_call_inputs(
        np.zeros((2, 4, WIDTH)), np.ones((2, 4)), np.zeros((2, WIDTH)), np.ones((2, 4), bool)
    ) == (2, 4, WIDTH)
    assert layer.memory_size_for(WIDTH) == layer.memory_size == WIDTH
    layer.build((None, None, WIDTH))
    # Dimensions not known yet are not compared.
    assert layer.check_call_inputs(
        keras.KerasTensor((None, None, WIDTH)),
        keras.KerasTensor((None, None), "bool"),
        keras.KerasTensor((None, WIDTH)),
    ) == (None, None, WIDTH)
    # Documents come with a reset only.
    assert layer.documents(None, compaction, 2) is None
    reset = np.array([[False, True, False], [False, False, True]])
    documents = layer.documents(reset, compaction, 2)
    assert isinstance(documents, windows.Documents)
    # Window position j of step t (the step t - 2 + j) is in step t's document when no reset
    # lies after it up to t; the steps before the sequence belong to its first document.
    expected = [
        [[not reset[r, max(t - 2 + j, -1) + 1 : t + 1].any() for j in range(2)] for t in range(3)]
        for r in range(2)
    ]
    np.testing.assert_array_equal(as_numpy(documents.same), np.array(expected))
