"""The generic AM-RNN cell (paper §3.2, eqs. 8-12) around Keras cells."""

import keras
import numpy as np
import pytest

from tests.am_gru_reference import (
    as_complex,
    as_real,
    bound,
    key_copies,
    memory_to_real,
    permutations,
)
from tests.layer_test_case import LayerTestCase, masking_checks, rnn_over, user_rnn
from tests.support import as_numpy, assert_close
from tf_memlayers.layers import AssociativeMemoryCell

# (the wrapped cell, num_copies, return_retrievals) of the cases.
CELLS = pytest.mark.parametrize(
    "inner, copies, retrievals",
    [(keras.layers.LSTMCell, 2, False), (keras.layers.GRUCell, 3, True)],
    ids=["lstm", "gru_retrievals"],
)


def _cell(inner=keras.layers.GRUCell, copies=2, retrievals=False, dtype=None, **kwargs):
    options = dict(num_copies=copies, return_retrievals=retrievals, dtype=dtype)
    return AssociativeMemoryCell(inner(6, dtype=dtype), **options, **kwargs)


class AssociativeMemoryCellTest(LayerTestCase):
    layer_cls = AssociativeMemoryCell

    @CELLS
    def test_layer_cell_and_reset_behaviors(self, inner, copies, retrievals):
        make = lambda dtype=None: _cell(inner, copies, retrievals, dtype)  # noqa: E731
        self.run_cell_tests(make)
        self.run_reset_tests(lambda: _cell(inner, copies, retrievals))
        width = 18 if retrievals else 6
        checks = masking_checks((2, 3, width), 3 + 1, expected_num_seed_generators=1)
        self.run_layer_test(rnn_over(make), **checks)

    def test_journey(self, tmp_path):
        cell = lambda: AssociativeMemoryCell(keras.layers.LSTMCell(8), num_copies=2)  # noqa: E731
        build = lambda e: user_rnn(cell(), return_sequences=True)(e)  # noqa: E731
        self.run_journey_test("step", build, tmp_path)

    def test_config_and_arguments(self):
        config = dict(num_copies=3, memory_state_index=0, seed=9, return_retrievals=True)
        config.update(cell=keras.layers.LSTMCell(4), key_initializer="orthogonal")
        self.run_config_test(AssociativeMemoryCell, **config)
        self.run_flags_test(lambda **kw: AssociativeMemoryCell(keras.layers.GRUCell(4), **kw))

    def test_mixed_float16_matches_float32(self):
        inputs = np.random.default_rng(8).normal(size=(4, 5, 3)).astype("float32")
        make = lambda: keras.layers.RNN(_cell(keras.layers.GRUCell, 2))  # noqa: E731
        self.run_mixed_precision_test(make, inputs, atol=5e-3)


def reference_run(xs, inner, key_kernel, copies, memory_index, output_size):
    """Eqs. 8-12 in complex NumPy, each step's output followed by the written and read vectors
    (the retrievals); the wrapped cell ``f`` is the Keras cell itself."""
    batch, steps, _ = xs.shape
    sizes = inner.state_size if isinstance(inner.state_size, (list, tuple)) else [inner.state_size]
    states, m = [np.zeros((batch, s)) for s in sizes], sizes[memory_index] // 2
    perms = permutations(m, copies)
    memory, previous = np.zeros((batch, copies, m), complex), np.zeros((batch, output_size))
    outputs = []
    for t in range(steps):
        controller = np.concatenate([xs[:, t], previous], 1)
        a = controller @ key_kernel
        K = key_copies(bound(as_complex(a)), perms)
        states[memory_index] = s_prev = as_real((np.conj(K) * memory).mean(1))
        out, new_states = inner(controller, [s for s in states])
        new_states = [as_numpy(s) for s in new_states]
        diff = new_states[memory_index] - s_prev
        memory, states = memory + K * as_complex(diff)[:, None], new_states
        previous = as_numpy(out)
        outputs.append(np.concatenate([previous, diff, s_prev], 1))
    return np.stack(outputs, 1), memory_to_real(memory)


@keras.saving.register_keras_serializable(package="tf_memlayers_tests")
class TwoStateCell(keras.layers.Layer):
    """A user cell with two states: a tanh RNN state and a running sum of inputs."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.state_size = [units, units]
        self.output_size = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent = self.add_weight(shape=(self.units, self.units), name="recurrent")

    def call(self, inputs, states, training=None):
        h = keras.ops.tanh(inputs @ self.kernel + states[0] @ self.recurrent)
        total = states[1] + inputs[:, : self.units]
        return h + total, [h, total]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@pytest.mark.parametrize(
    "make_cell, index, options",
    [
        (lambda: keras.layers.GRUCell(6), 0, {"return_retrievals": True}),
        (lambda: keras.layers.LSTMCell(6), 1, {}),
        (lambda: TwoStateCell(4), 1, {"memory_state_index": 1}),  # a user's cell
    ],
    ids=["gru_retrievals", "lstm", "user_cell"],
)
@pytest.mark.parametrize("copies", [1, 3])
def test_generic_cell_matches_equations_8_to_12(float64_policy, make_cell, index, options, copies):
    rng = np.random.default_rng(copies)
    xs = rng.normal(size=(2, 5, 4))
    cell = AssociativeMemoryCell(make_cell(), num_copies=copies, **options)
    assert cell.memory_state_index == index
    pytest.raises(AttributeError, setattr, cell, "permutations", cell.permutations[::-1])
    if "memory_state_index" in options:
        assert cell.state_size == [4 * copies, 4, 4]
    layer = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    layer.build(xs.shape)
    cell.key_kernel.assign(rng.uniform(-1.5, 1.5, size=cell.key_kernel.shape))
    outputs, memory, *_ = layer(xs)
    key_kernel, width = as_numpy(cell.key_kernel), cell.cell.output_size
    ref_outputs, ref_memory = reference_run(xs, cell.cell, key_kernel, copies, index, width)
    outputs = as_numpy(outputs)  # with retrievals: the output, the written and the read vectors
    assert outputs.shape[-1] == width * (3 if "return_retrievals" in options else 1)
    assert_close([outputs, memory], [ref_outputs[..., : outputs.shape[-1]], ref_memory], 1e-10)
    assert np.abs(ref_memory).max() > 0.05
