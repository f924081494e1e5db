"""Base class of the sequence layers that carry a 2-D memory across calls."""

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_mask_shape,
    check_rank,
    check_same_batch,
    check_width,
    shape_of,
)
from tf_memlayers.layers.memory_cell_wrapper import RematerializedByPosition
from tf_memlayers.layers.resets import check_reset
from tf_memlayers.ops import windows


class MemorySequenceLayer(RematerializedByPosition, keras.layers.Layer):
    """A layer on ``[batch, time, width]`` sequences with a memory ``[batch, memory_size]``.

    The memory comes, in order of precedence, from the ``initial_memory`` call argument, the
    layer's own non-trainable ``memory`` variable (``stateful=True``), or zeros; no gradient
    flows into it. Subclasses define `memory_size` and `build_mechanism(width)`.

    Call inputs are checked up front: inputs of another width than the layer was built for,
    a mask whose shape is not ``[batch, time]``, and an ``initial_memory`` (or, when
    stateful, a batch) of another batch size raise a `ValueError` naming the argument and the
    shapes.

    Args:
        stateful: Boolean, (default `False`), whether to keep the memory in a non-trainable
            variable (saved with the model, where Keras saves no RNN's states) and carry it
            to the next call; needs a fixed batch size. `reset_state()` clears it. A layer of
            another batch size or window, or not stateful, loads the other weights of a file
            and keeps its own memory. The memory is one of the layer's weights, so
            ``get_weights()`` of a stateful layer has one more array than a stateless twin's
            ``set_weights`` takes: move trained weights between them through a weights file.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.
    """

    def __init__(self, stateful=False, **kwargs):
        super().__init__(**kwargs)
        self.stateful = check_bool("stateful", stateful, type(self).__name__)
        self.supports_masking = True
        self.memory = None
        self.input_width = None

    def build(self, input_shape):
        owner = type(self).__name__
        check_rank("inputs", input_shape, 3, owner)
        if input_shape[-1] is None:
            raise ValueError(f"{owner}: the last dimension of `inputs` must be known.")
        self.input_width = int(input_shape[-1])
        self.build_mechanism(self.input_width)
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

    def check_call_inputs(self, inputs, mask=None, initial_memory=None, reset=None):
        """Checks the shapes of the call arguments (known dimensions only).

        Args:
            inputs: Tensor (or array) ``[batch, time, width]``.
            mask: Optional tensor ``[batch, time]``. Default: `None`.
            initial_memory: Optional tensor ``[batch, memory_size]``. Default: `None`.
            reset: Optional bool tensor ``[batch, time]``. Default: `None`.

        Returns:
            Tuple, the shape of ``inputs``.

        Raises:
            ValueError: If a shape does not fit; the message names the argument and the
                shapes.
        """
        owner = type(self).__name__
        shape = check_rank("inputs", shape_of(inputs), 3, owner)
        if self.input_width is not None:
            check_width(
                "inputs", shape, self.input_width, "the width the layer was built for", owner
            )
        if mask is not None:
            check_mask_shape(shape_of(mask), shape, owner)
        if initial_memory is not None:
            memory_shape = check_rank("initial_memory", shape_of(initial_memory), 2, owner)
            if self.input_width is not None or shape[-1] is not None:
                memory_size = self.memory_size_for(self.input_width or shape[-1])
                check_width(
                    "initial_memory", memory_shape, memory_size, "the layer's memory_size", owner
                )
            check_same_batch("initial_memory", memory_shape, "inputs", shape, owner)
        if reset is not None:
            check_reset(reset, shape[:2], owner)
        if self.memory is not None:
            batch = shape[0]
            if batch is not None and batch != self.memory.shape[0]:
                raise ValueError(
                    f"{owner}: the stateful layer keeps the memory of {self.memory.shape[0]} "
                    f"streams (memory of shape {tuple(self.memory.shape)}), but `inputs` of "
                    f"shape {shape} has batch size {batch}; every batch must have "
                    f"{self.memory.shape[0]} sequences."
                )
        return shape

    def memory_size_for(self, width):
        """The memory width for inputs of width ``width``.

        Subclasses with a memory that depends on the width override this.

        Args:
            width: Positive integer, the width of the inputs.

        Returns:
            Integer, the memory width (here `memory_size`).
        """
        return self.memory_size

    def masked_inputs(self, inputs, mask):
        """``inputs`` with the masked steps set to zero, and the mask as bool.

        A masked step is never read, and a non-finite value there must not reach the outputs
        or the gradients.

        Args:
            inputs: A 3D tensor ``[batch, time, width]``.
            mask: Optional tensor ``[batch, time]`` (nonzero: a real step), or `None`.

        Returns:
            Tuple ``(inputs, mask)``: the inputs with zeros at the masked steps and the mask
            as bool, or ``(inputs, None)`` unchanged without a mask.
        """
        if mask is None:
            return inputs, None
        mask = ops.cast(mask, "bool")
        inputs = ops.where(ops.expand_dims(mask, -1), inputs, ops.zeros_like(inputs))
        return inputs, mask

    def documents(self, reset, compaction, window):
        """The `windows.Documents` of a call's ``reset``, or `None` without one.

        Args:
            reset: Optional bool tensor ``[batch, time]``.
            compaction: The `windows.Compaction` of the call's mask.
            window: Non-negative integer, the number of earlier items a step reads.

        Returns:
            A `windows.Documents`, or `None`.
        """
        if reset is None:
            return None
        return windows.Documents(ops.convert_to_tensor(reset), compaction, window)

    def reset_state(self):
        """Clears the carried memory (stateful layers), e.g. between documents."""
        if self.memory is not None:
            self.memory.assign(ops.zeros(self.memory.shape, self.memory.dtype))

    def reset_states(self):
        """Alias of `reset_state`."""
        self.reset_state()

    def starts_from_zeros(self, initial_memory=None):
        """Whether a call with this ``initial_memory`` starts from the zero memory: none given
        and no stored memory (the layer is not stateful).

        Args:
            initial_memory: The call's ``initial_memory`` argument, or `None`.

        Returns:
            Python bool, known when the call is traced.
        """
        return initial_memory is None and self.memory is None

    def incoming_memory(self, inputs, initial_memory=None):
        """The memory this call starts from, in the dtype of ``inputs``, without gradient.

        Args:
            inputs: A 3D tensor ``[batch, time, width]``, the call's inputs (for the batch
                size and dtype).
            initial_memory: Optional tensor ``[batch, memory_size]``, as ``check_call_inputs``
                checked it. Default: `None` (the stored memory when stateful, else zeros).

        Returns:
            A tensor ``[batch, memory_size]``.
        """
        if self.starts_from_zeros(initial_memory):
            return ops.zeros((ops.shape(inputs)[0], self.memory_size), inputs.dtype)
        if initial_memory is not None:
            memory = ops.convert_to_tensor(initial_memory)
        else:
            # A copy: the keys and values read from it are slices, on torch views of its
            # storage, and torch.compile refuses views of a variable that the step updates.
            memory = ops.copy(self.memory.value)
        return ops.stop_gradient(ops.cast(memory, inputs.dtype))

    def keep_memory(self, new_memory):
        """Stores the memory after this call (stateful layers); returns it without gradient.

        Args:
            new_memory: Tensor reshapeable to ``[batch, memory_size]``, the memory after the
                call.

        Returns:
            The tensor ``[batch, memory_size]``, without gradient.
        """
        # The batch size, not -1: the memory of N-gram with n = 2 is empty.
        batch = ops.shape(new_memory)[0]
        new_memory = ops.reshape(ops.stop_gradient(new_memory), (batch, self.memory_size))
        if self.stateful:
            self.memory.assign(ops.cast(new_memory, self.memory.dtype))
        return new_memory

    def load_own_variables(self, store):
        # The stored memory is the stream of the layer that saved it (its last variable, when
        # it was stateful). A layer of another batch size or memory width (another `window`),
        # or not stateful, or one reading weights saved without a memory, takes the weights and
        # keeps its own memory, as a Keras RNN keeps its states (Keras saves none). Any other
        # difference is an error.
        own, given = {}, {key: store[key] for key in store.keys()}
        self.save_own_variables(own)
        count = len(own) - (self.memory is not None)
        stored = given.get(str(count))  # the memory's place in a file of a stateful layer
        a_memory = stored is not None and len(given) == count + 1 and len(stored.shape) == 2
        if a_memory and (self.memory is None or tuple(stored.shape) != tuple(self.memory.shape)):
            del given[str(count)]
        if self.memory is not None and len(given) == count:
            given[str(count)] = own[str(count)]
        super().load_own_variables(given)

    def get_config(self):
        return {**super().get_config(), "stateful": self.stateful}
