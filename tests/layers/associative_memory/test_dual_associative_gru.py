"""`DualAssociativeGRU` and `DualAssociativeGRUCell` (the layer against its cell form, over
stateful segments and what its fused loop refuses: test_associative_gru.py)."""

import keras
import numpy as np
import pytest

from tests.layer_test_case import (
    ALL_RNN_FLAGS,
    LayerTestCase,
    masking_checks,
    read_premise_memory,
    rnn_over,
    user_rnn,
)
from tests.layers.associative_memory.test_associative_gru_cell import AM_GRU_CONFIG
from tests.support import BACKEND
from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    DualAssociativeGRU,
    DualAssociativeGRUCell,
)

SEQUENCES = dict(num_copies=2, return_sequences=True)
# The fused loop in Keras's layer suites: TensorFlow's op. On JAX the suites run over the
# Pallas kernels in AssociativeGRU's tests, and the Dual's kernels are compared with its cell
# form, forward and gradients, in test_associative_gru.py.
FUSED_HERE = pytest.mark.skipif(
    BACKEND != "tensorflow", reason="the Pallas kernels' suites run in AssociativeGRU's tests"
)
# (dual_key, fused_loop) of the layer's cases: the fused loop takes the paper's key only.
KEYS_AND_LOOPS = [
    pytest.param("paper", False, id="paper_keras_loop"),
    pytest.param("released", False, id="released_keras_loop"),
    pytest.param("paper", True, marks=FUSED_HERE, id="paper_fused_loop"),
]


class DualAssociativeGRUTest(LayerTestCase):
    layer_cls = DualAssociativeGRU

    @pytest.mark.parametrize("dual_key, fused_loop", KEYS_AND_LOOPS)
    def test_layer_behaviors_and_nan_padding(self, dual_key, fused_loop):
        checks = masking_checks((2, 3, 4), 5 + 2 + (dual_key == "released"))
        options = dict(dual_key=dual_key, fused_loop=fused_loop, **SEQUENCES)
        self.run_layer_test(DualAssociativeGRU, dict(units=4, **options), **checks)
        make = lambda: DualAssociativeGRU(4, **options, zero_output_for_mask=True)  # noqa: E731
        self.run_nan_padding_test(make)

    def test_journey(self, tmp_path):
        # fused_loop="auto": TensorFlow's fused loop; Keras's in training (recurrent_dropout).
        def build(premise, hypothesis):
            premise_layer = AssociativeGRU(8, num_copies=2, return_state=True)
            layer = DualAssociativeGRU(8, num_copies=2, dropout=0.2, recurrent_dropout=0.1)
            return read_premise_memory(premise_layer, layer, premise, hypothesis)

        self.run_journey_test("pair", build, tmp_path)

    def test_config_arguments_and_resets(self):
        config = dict(**AM_GRU_CONFIG, **ALL_RNN_FLAGS, dual_key="released", fused_loop=False)
        self.run_config_test(DualAssociativeGRU, **config, return_retrievals=True, dropout=0.1)
        self.run_flags_test(lambda **kw: DualAssociativeGRU(4, **kw))
        self.run_reset_tests(lambda **kw: DualAssociativeGRU(8, num_copies=3, **kw))

    @pytest.mark.parametrize(
        "kwargs",
        [
            dict(return_sequences=True, return_state=True),
            pytest.param(dict(num_copies=3, fused_loop=True), marks=FUSED_HERE),
            dict(dual_key="released", return_retrievals=True),
        ],
        ids=["states", "fused_last", "retrievals"],
    )
    def test_output_spec(self, kwargs):
        kwargs = {"num_copies": 2, **kwargs}
        make = lambda dtype: DualAssociativeGRU(4, dtype=dtype, **kwargs)  # noqa: E731
        self.run_output_spec_test(make, (2, 5, 4))


def _dual_cell(dual_key="paper", retrievals=False, dtype=None):
    return DualAssociativeGRUCell(
        6, num_copies=2, dual_key=dual_key, return_retrievals=retrievals, dtype=dtype
    )


class DualAssociativeGRUCellTest(LayerTestCase):
    layer_cls = DualAssociativeGRUCell

    @pytest.mark.parametrize("dual_key, retrievals", [("paper", False), ("released", True)])
    def test_layer_cell_and_reset_behaviors(self, dual_key, retrievals):
        make = lambda dtype=None: _dual_cell(dual_key, retrievals, dtype)  # noqa: E731
        self.run_cell_tests(make)
        self.run_reset_tests(lambda: _dual_cell(dual_key, retrievals))
        checks = masking_checks((2, 3, 24 if retrievals else 6), 5 + 2 + (dual_key == "released"))
        self.run_layer_test(rnn_over(make), **checks)

    def test_journey(self, tmp_path):
        def build(premise, hypothesis):
            premise_layer = user_rnn(AssociativeGRUCell(8, num_copies=2), return_state=True)
            layer = user_rnn(DualAssociativeGRUCell(8, num_copies=2))
            return read_premise_memory(premise_layer, layer, premise, hypothesis)

        self.run_journey_test("pair", build, tmp_path)

    def test_config_and_arguments(self):
        config = dict(**AM_GRU_CONFIG, dual_key="released", return_retrievals=True)
        self.run_config_test(DualAssociativeGRUCell, **config)
        self.run_flags_test(lambda **kw: DualAssociativeGRUCell(4, **kw))

    def test_mixed_float16_matches_float32(self):
        rng = np.random.default_rng(14)
        xs = rng.normal(size=(4, 6, 5)).astype("float32")
        memory, last = rng.normal(size=(4, 24)), rng.normal(size=(4, 8))
        states = [np.zeros((4, 24), "float32"), last.astype("float32"), memory.astype("float32")]

        def make():
            return keras.layers.RNN(DualAssociativeGRUCell(8, num_copies=3), return_sequences=True)

        self.run_mixed_precision_test(make, xs, atol=5e-3, initial_state=states)
