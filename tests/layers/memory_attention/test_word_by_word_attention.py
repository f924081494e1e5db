"""`WordByWordAttention` against a NumPy reference of Rocktäschel et al.'s (2016) equations."""

import functools
import re

import keras
import numpy as np
import pytest

from tests.layer_test_case import LayerTestCase
from tests.layers.memory_attention.test_attention_wrapper import SEQUENCE_MASK, keras_checks_of
from tests.memory_attention_reference import data, declared_memory
from tests.memory_attention_reference import randomize as _randomize
from tests.memory_attention_reference import word_by_word_reference as reference
from tests.memory_attention_reference import wrapper_weights as _weights
from tests.support import all_pairs, assert_close
from tf_memlayers.layers import AttentionRNN, AttentionWrapper, WordByWordAttention

# `_data`'s memory is narrower than the cells (its width: memory_dim, the cell's by default).
UNITS, MEMORY_DIM = 8, 7
_data = functools.partial(data, memory_dim=MEMORY_DIM)


def _premise_then_hypothesis(premise, hypothesis):
    """The paper's model: the hypothesis LSTM attends over the premise LSTM's outputs."""
    encoded = keras.layers.LSTM(6, return_sequences=True)(premise)
    return AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(6)))(hypothesis, memory=encoded)


def _cell(dtype=None, memory_dim=6, **kwargs):
    cell = keras.layers.GRUCell(4, dtype=dtype)
    return WordByWordAttention(cell, memory_dim=memory_dim, dtype=dtype, **kwargs)


class WordByWordAttentionTest(LayerTestCase):
    layer_cls = WordByWordAttention

    def test_layer_behaviors(self):
        cell = functools.partial(_cell, memory_dim=8)
        checks = keras_checks_of(cell, own_weights=5, return_sequences=True)
        self.run_layer_test(**checks, expected_output_shape=(2, 3, 4))

    def test_journey(self, tmp_path):
        self.run_journey_test("pair", _premise_then_hypothesis, tmp_path)

    def test_config_arguments_cell_resets_and_nan_padding(self):
        config = dict(cell=keras.layers.GRUCell(5), attention_units=4, attention_size=2)
        options = dict(memory_dim=3, return_attention_scores=True, kernel_initializer="orthogonal")
        self.run_config_test(WordByWordAttention, **config, **options)
        # No fixed choice in the config; the sizes default to the cell's width.
        config = WordByWordAttention(keras.layers.GRUCell(5), memory_dim=3).get_config()
        assert not {"score", "position", "normalize", "scale", "input_feeding"} & set(config)
        assert WordByWordAttention.from_config(config).state_size == [5, 3]
        # Without h*_t there is no attention size to give, nor one in the config.
        config = WordByWordAttention(keras.layers.GRUCell(5), output_attention=False).get_config()
        assert config["attention_size"] is None
        assert WordByWordAttention.from_config(config).output_size == 5
        cell = WordByWordAttention(keras.layers.GRUCell(5))  # the paper's k everywhere
        assert (cell.memory_dim, cell.attention_units, cell.attention_size) == (5, 5, 5)
        self.run_flags_test(_cell)
        self.run_reset_tests(_cell, **declared_memory(3))
        # (Keras asks AttentionRNN for its spec, not the cell: `direct_spec=False`.)
        self.run_cell_tests(_cell, False, **declared_memory(2))
        rnn = lambda: AttentionRNN(_cell(), return_sequences=True, zero_output_for_mask=True)  # noqa: E731
        self.run_nan_padding_test(rnn, memory_width=6)

    @pytest.mark.parametrize("policy, atol", [("mixed_float16", 2e-2), ("mixed_bfloat16", 6e-2)])
    def test_mixed_precision_matches_float32(self, policy, atol):
        x, memory, mask = _data(np.random.default_rng(8), "float32")
        self.run_mixed_precision_test(_layer, x, atol, policy, memory=memory, memory_mask=mask)


def _layer(**kwargs):
    cell = WordByWordAttention(keras.layers.SimpleRNNCell(UNITS), memory_dim=MEMORY_DIM, **kwargs)
    return AttentionRNN(cell, return_sequences=True)


# With and without h*_t, sizes of its own and a mask of the sequence, by pairs (`all_pairs`).
@pytest.mark.parametrize(
    "output_attention, sized, masked", all_pairs([True, False], [False, True], [False, True])
)
def test_matches_the_reference_in_float64(float64_policy, output_attention, sized, masked):
    # A memory row of padding only reads nothing: r stays tanh(W^t 0) = 0.
    rng = np.random.default_rng(0)
    x, memory, mask = _data(rng)
    sizes = {"attention_units": 5} if sized else {}
    if sized and output_attention:  # (no h*_t to size without it)
        sizes["attention_size"] = 6
    sequence_mask = SEQUENCE_MASK if masked else None
    layer = _layer(output_attention=output_attention, return_attention_scores=True, **sizes)
    _randomize(layer, rng, x, memory, mask)
    outputs, alignments = layer(x, memory=memory, memory_mask=mask, mask=sequence_mask)
    cell_weights, own = _weights(layer)
    want, want_alignments = reference(
        x, memory, mask, cell_weights, own, output_attention, sequence_mask=sequence_mask
    )
    assert_close([outputs, alignments], [want, want_alignments], atol=1e-10)
    # Not vacuous: the padding mask, W^r and W^t each change the weights over the memory
    # (and h*, where it is the output; the cell's own output never reads the attention).
    masks, names = [np.ones_like(mask), mask, mask], [None, "query_kernel", "transition_kernel"]
    for changed_mask, name in zip(masks, names):
        changed = dict(own)
        if name:
            changed[name] = own[name].copy()
            changed[name][UNITS if name == "query_kernel" else 0 :] = 0.0
        other, other_alignments = reference(
            x, memory, changed_mask, cell_weights, changed, output_attention, sequence_mask
        )
        assert np.abs(other_alignments - want_alignments).max() > 1e-3, name
        assert (np.abs(other - want).max() > 1e-3) == output_attention, name


def test_matches_the_reference_in_float32_and_has_the_paper_s_weights_at_k_100():
    rng = np.random.default_rng(1)
    x, memory, mask = _data(rng, "float32")
    layer = _layer(return_attention_scores=True)
    _randomize(layer, rng, x, memory, mask)
    got = layer(x, memory=memory, memory_mask=mask)  # the outputs and the alignments
    want = reference(x.astype(np.float64), memory.astype(np.float64), mask, *_weights(layer))
    assert_close(got, want, atol=1e-5)
    # A memory of another width than memory_dim (the cell's width by default) is named;
    # AttentionRNN's own checks of the memory: test_attention_wrapper.py.
    layer = AttentionRNN(WordByWordAttention(keras.layers.GRUCell(UNITS)))
    with pytest.raises(ValueError, match=r"the memory is 7 wide, but memory_dim=8"):
        layer(x, memory=memory)
    # Rocktäschel et al.'s weights at k = 100: six k × k, W^y, [W^h; W^r], W^t, [W^p; W^x], and w.
    cell = WordByWordAttention(keras.layers.LSTMCell(100))
    cell.build((None, 300), (None, 20, 100))
    own = [v for v in cell.weights if all(v is not c for c in cell.cell.weights)]
    square, stacked = (100, 100), (200, 100)  # k × k, and two of them stacked
    shapes = dict(query_kernel=stacked, memory_kernel=square, score_vector=(100,))
    shapes.update(attention_kernel=stacked, transition_kernel=square)
    assert {v.path.split("/")[-1]: tuple(v.shape) for v in own} == shapes
    assert sum(int(np.prod(v.shape)) for v in own) == 6 * 100 * 100 + 100
    # The cell reads the hypothesis alone: nothing is fed back into its input.
    assert tuple(cell.cell.kernel.shape) == (300, 400)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"memory_dim": 0}, ValueError, "`memory_dim` must be >= 1"),
        ({"attention_units": 0}, ValueError, "`attention_units` must be >= 1"),
        ({"attention_size": -1}, ValueError, "`attention_size` must be >= 1"),
        ({"score": "dot"}, TypeError, "`score` is fixed by the word-by-word attention"),
        ({"position": "before"}, TypeError, "`position` is fixed"),
        ({"input_feeding": True}, TypeError, "`input_feeding` is fixed"),
        ({"cell": "lstm"}, TypeError, "`cell` must be a Keras RNN cell"),
        (
            {"attention_size": 2, "output_attention": False},
            ValueError,
            "never computes with output_attention=False; got attention_size=2",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        WordByWordAttention(**{"cell": keras.layers.GRUCell(4), **kwargs})


def test_with_w_r_and_w_t_zero_it_is_the_additive_wrapper_without_input_feeding(float64_policy):
    # W^r = W^t = 0 leaves the additive attention after the cell, reading the hypothesis alone.
    rng = np.random.default_rng(13)
    x, memory, mask = _data(rng)
    ours = _layer()
    _randomize(ours, rng, x, memory, mask)
    options = dict(score="additive", attention_units=MEMORY_DIM, input_feeding=False)
    wrapper = AttentionWrapper(keras.layers.SimpleRNNCell(UNITS), **options)
    luong = AttentionRNN(wrapper, return_sequences=True)
    luong(x, memory=memory, memory_mask=mask)
    wrapper, other = ours.cell, luong.cell
    query = keras.ops.convert_to_numpy(wrapper.query_kernel)
    wrapper.query_kernel.assign(np.concatenate([query[:UNITS], np.zeros_like(query[UNITS:])]))
    wrapper.transition_kernel.assign(np.zeros((MEMORY_DIM, MEMORY_DIM)))
    other.query_kernel.assign(query[:UNITS])
    for name in ("memory_kernel", "score_vector", "attention_kernel"):
        getattr(other, name).assign(getattr(wrapper, name))
    for mine, theirs in zip(wrapper.cell.weights, other.cell.weights):
        theirs.assign(mine)
    kwargs = dict(memory=memory, memory_mask=mask)
    assert_close(ours(x, **kwargs), luong(x, **kwargs), atol=1e-12)
