"""Base class of the sequence layers that carry a 2-D memory across calls."""

import keras
from keras import ops

from tf_memlayers._validation import check_bool, check_rank


class MemorySequenceLayer(keras.layers.Layer):
    """A layer on ``[batch, time, width]`` sequences with a memory ``[batch, memory_size]``.

    The memory comes, in order of precedence, from the ``initial_memory`` call argument, the
    layer's own non-trainable ``memory`` variable (``stateful=True``), or zeros; no gradient
    flows into it. Subclasses define `memory_size` and `build_mechanism(width)`.

    Args:
        stateful: keep the memory in a non-trainable variable (saved with the model) and carry
            it to the next call; needs a fixed batch size. `reset_state()` clears it.
    """

    def __init__(self, stateful=False, **kwargs):
        super().__init__(**kwargs)
        self.stateful = check_bool("stateful", stateful, type(self).__name__)
        self.supports_masking = True
        self.memory = None

    def build(self, input_shape):
        owner = type(self).__name__
        check_rank("inputs", input_shape, 3, owner)
        if input_shape[-1] is None:
            raise ValueError(f"{owner}: the last dimension of `inputs` must be known.")
        self.build_mechanism(int(input_shape[-1]))
        if self.stateful:
            if input_shape[0] is None:
                raise ValueError(
                    f"{owner}: `stateful=True` needs a fixed batch size; got inputs of shape "
                    f"{tuple(input_shape)}. Pass `batch_size=` to `keras.Input`."
                )
            self.memory = self.add_weight(
                name="memory",
                shape=(int(input_shape[0]), self.memory_size),
                initializer="zeros",
                trainable=False,
            )

    def reset_state(self):
        """Clears the carried memory (stateful layers), e.g. between documents."""
        if self.memory is not None:
            self.memory.assign(ops.zeros_like(self.memory))

    def reset_states(self):
        self.reset_state()

    def incoming_memory(self, inputs, initial_memory=None):
        """The memory this call starts from, in the compute dtype, without gradient."""
        if initial_memory is not None:
            memory = ops.convert_to_tensor(initial_memory)
            owner = type(self).__name__
            check_rank("initial_memory", memory.shape, 2, owner)
            if memory.shape[-1] is not None and memory.shape[-1] != self.memory_size:
                raise ValueError(
                    f"{owner}: `initial_memory` must have width {self.memory_size} (the "
                    f"layer's memory_size), got shape {tuple(memory.shape)}."
                )
        elif self.memory is not None:
            memory = self.memory.value
        else:
            return ops.zeros((ops.shape(inputs)[0], self.memory_size), inputs.dtype)
        return ops.stop_gradient(ops.cast(memory, inputs.dtype))

    def keep_memory(self, new_memory):
        """Stores the memory after this call (stateful layers); returns it without gradient."""
        new_memory = ops.reshape(ops.stop_gradient(new_memory), (-1, self.memory_size))
        if self.stateful:
            self.memory.assign(ops.cast(new_memory, self.memory.dtype))
        return new_memory

    def get_config(self):
        return {**super().get_config(), "stateful": self.stateful}
