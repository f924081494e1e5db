"""`weight_role` and `copy_trainable_weights` between a language model's forms."""

import re

import keras
import numpy as np
import pytest

from tf_memlayers import SlidingWindowAttention, SlidingWindowAttentionCell
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights, weight_role
from tf_memlayers.models.language_model import build_language_model

VOCAB, HIDDEN, EMBEDDING = 11, 4, 3


def test_weight_role_names_a_weight_by_what_it_does():
    roles = [
        # The LSTMs: in the parallel form, in the cell form (the top one inside the memory
        # cell), in ResettableRNN (models with resets), and past ten layers.
        ("lstm_0/lstm_cell/kernel", "lstm_0/kernel"),
        ("lstm_1/lstm_cell/recurrent_kernel", "lstm_1/recurrent_kernel"),
        ("memory_rnn/sliding_window_attention_cell/lstm_1/bias", "lstm_1/bias"),
        ("lstm_0/resettable_cell/lstm_cell/kernel", "lstm_0/kernel"),
        ("lstm_12/lstm_cell/bias", "lstm_12/bias"),
        # The memory's own weights, over the top LSTM or around it.
        ("sliding_window_attention/memory_kernel", "memory/memory_kernel"),
        ("memory_rnn/sliding_window_attention_cell/memory_kernel", "memory/memory_kernel"),
        ("ngram_concat/ngram_kernel", "memory/ngram_kernel"),
        ("memory_rnn/n_gram_concat_cell/ngram_bias", "memory/ngram_bias"),
        # A layer named lstm_ without a number is not an LSTM of the builder.
        ("lstm_top/kernel", "memory/kernel"),
        # The embedding and the softmax keep their paths.
        ("embedding/embeddings", "embedding/embeddings"),
        ("softmax/kernel", "softmax/kernel"),
        ("softmax/bias", "softmax/bias"),
    ]
    assert [weight_role(path) for path, _ in roles] == [role for _, role in roles]


def _parallel(num_layers=2, units=HIDDEN):
    memory = SlidingWindowAttention(2, mode="key_value", stateful=True)
    shape = dict(batch_size=2, sequence_length=3, num_layers=num_layers)
    return build_language_model(VOCAB, memory, units, EMBEDDING, **shape)


def _cell():
    memory = lambda cell: SlidingWindowAttentionCell(cell, window=2, mode="key_value")  # noqa: E731
    options = dict(num_layers=2, stateful=False, sequence_length=None)
    return build_language_model(VOCAB, memory, HIDDEN, EMBEDDING, **options)


def _values(model, trainable=True):
    weights = model.trainable_weights if trainable else model.non_trainable_weights
    return {w.path: np.asarray(keras.ops.convert_to_numpy(w)) for w in weights}


def test_a_cell_form_model_copies_into_the_parallel_form_and_carried_states_are_not_copied():
    source, target, rng = _cell(), _parallel(), np.random.default_rng(0)
    for weight in source.trainable_weights:  # distinct values in every weight
        weight.assign(rng.normal(size=weight.shape))
    # The cell form lists the memory's weights before the top LSTM's: not to copy in order.
    order = [[weight_role(w.path) for w in m.trainable_weights] for m in (source, target)]
    assert order[0] != order[1] and sorted(order[0]) == sorted(order[1])
    copy_trainable_weights(source, target)
    got, given = _values(target), _values(source)
    cell = "memory_rnn/sliding_window_attention_cell"
    lstm, memory = ("kernel", "recurrent_kernel", "bias"), ("memory_kernel", "query_kernel")
    memory += ("score_vector", "context_kernel", "predict_kernel")
    expected = {path: path for path in ("embedding/embeddings", "softmax/kernel", "softmax/bias")}
    expected.update({f"lstm_0/lstm_cell/{name}": f"lstm_0/lstm_cell/{name}" for name in lstm})
    expected.update({f"lstm_1/lstm_cell/{name}": f"{cell}/lstm_1/{name}" for name in lstm})
    expected.update({f"sliding_window_attention/{name}": f"{cell}/{name}" for name in memory})
    assert sorted(got) == sorted(expected)
    for path, source_path in expected.items():
        np.testing.assert_array_equal(got[path], given[source_path], err_msg=path)
    # Carried states are not copied. (A model of another batch size and statefulness computes,
    # from the copied weights, what the source computes: test_language_model.py, every kind.)
    source, target = _parallel(), _parallel()
    source(np.random.default_rng(1).integers(0, VOCAB, (2, 3)))  # the window now holds it
    assert all(np.abs(v).max() > 0 for v in _values(source, trainable=False).values())
    states = _values(target, trainable=False)
    copy_trainable_weights(source, target)
    for path, value in _values(target, trainable=False).items():
        np.testing.assert_array_equal(value, states[path], err_msg=path)


class _TwoDenseMemory(keras.layers.Layer):
    """A memory layer with two sublayers whose weights have the same last path part."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.first, self.second = keras.layers.Dense(HIDDEN), keras.layers.Dense(HIDDEN)

    def call(self, inputs):
        return self.second(self.first(inputs))


def _two_dense():
    options = dict(units=HIDDEN, embedding_dim=EMBEDDING, num_layers=1, sequence_length=3)
    return build_language_model(VOCAB, _TwoDenseMemory(), stateful=False, **options)


# An LSTM's kernel is [input width, 4 gates x units].
SHAPES = (EMBEDDING, 4 * HIDDEN), (EMBEDDING, 4 * 6)
REFUSED = {
    "other_weights": (
        lambda: (_parallel(num_layers=2), _parallel(num_layers=1)),
        r"^copy_trainable_weights: `source` and `target` have different trainable weights: "
        r"(?=.*'lstm_1/kernel')(?=.*'memory/memory_kernel')",
    ),
    "other_shape": (
        lambda: (_parallel(num_layers=1), _parallel(num_layers=1, units=6)),
        re.escape(
            f"weight 'lstm_0/kernel' has shape {SHAPES[0]} in `source` but {SHAPES[1]} in `target`."
        ),
    ),
    "two_of_one_role": (
        lambda: (_two_dense(), _two_dense()),
        r"^copy_trainable_weights: `source` has two trainable weights of the role "
        r"'memory/kernel' \(\S+/kernel and \S+/kernel\)",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_model_of_another_design_is_refused_and_nothing_written(case):
    models, message = REFUSED[case]
    source, target = models()
    before = _values(target)
    pytest.raises(ValueError, copy_trainable_weights, source, target).match(message)
    for path, value in _values(target).items():
        np.testing.assert_array_equal(value, before[path], err_msg=path)
