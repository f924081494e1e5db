"""Base class of the cells that wrap a Keras RNN cell and keep one extra 2-D memory state."""

import keras


def flat_state_sizes(state_size):
    """A cell's `state_size` as a flat list of ints."""
    sizes = list(state_size) if isinstance(state_size, (list, tuple)) else [state_size]
    return [int(s) for s in sizes]


class MemoryCellWrapper(keras.layers.Layer):
    """Wraps ``cell``; the state is the wrapped cell's states followed by one memory.

    Subclasses define `memory_size`, `output_size` and `call` (using `run_cell`).

    Args:
        cell: a Keras RNN cell (any object with `state_size` that is called as
            ``cell(inputs, states) -> (output, new_states)``).
    """

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{type(self).__name__}: `cell` must be a Keras RNN cell with a "
                f"`state_size`, got {cell!r}."
            )
        self.cell = cell
        self.cell_state_sizes = flat_state_sizes(cell.state_size)
        output_size = getattr(cell, "output_size", None)
        self.cell_output_size = int(output_size if output_size else self.cell_state_sizes[0])

    @property
    def state_size(self):
        return [*self.cell_state_sizes, self.memory_size]

    def build(self, input_shape):
        if not self.cell.built:
            self.cell.build(input_shape)

    def run_cell(self, inputs, states, training=None):
        """Runs the wrapped cell; returns ``(h, new_cell_states, memory)``."""
        states = list(states)
        cell_states, memory = states[:-1], states[-1]
        kwargs = {}
        if getattr(self.cell, "_call_has_training_arg", False):
            kwargs["training"] = training
        if not isinstance(self.cell.state_size, (list, tuple)):
            cell_states = cell_states[0]
        h, new_states = self.cell(inputs, cell_states, **kwargs)
        if not isinstance(new_states, (list, tuple)):
            new_states = [new_states]
        return h, list(new_states), memory

    def get_config(self):
        config = super().get_config()
        config["cell"] = keras.saving.serialize_keras_object(self.cell)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["cell"] = keras.saving.deserialize_keras_object(config["cell"])
        return cls(**config)
