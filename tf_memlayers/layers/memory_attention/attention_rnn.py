"""`AttentionRNN`: `keras.layers.RNN` over an `AttentionWrapper`, with the memory it attends
over as a call argument."""

import weakref

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.memory_attention.attention_wrapper import AttentionWrapper
from tf_memlayers.layers.memory_cell_wrapper import call_cell
from tf_memlayers.layers.resets import zero_where
from tf_memlayers.layers.resettable_rnn import ResettableRNN
from tf_memlayers.ops.precision import floating


class _CellAlone:
    """Stands in for an `AttentionWrapper` whose attention does not feed back, inside the loop
    of `AttentionRNN`: runs the wrapped cell alone on the step's input, after the step's
    resets; the fed-back state passes through (`AttentionRNN` sets it after the loop).

    With ``marked`` (a call with a mask), the output carries one more column of ones, which
    the loop's masking carries over or zeroes as it does the output, and two more states
    follow the wrapper's: the cell's output and a one, which masked steps keep."""

    def __init__(self, wrapper, training, marked):
        self.wrapper = wrapper
        self.training = training
        self.marked = marked
        self.compute_dtype = wrapper.compute_dtype
        self.output_size = wrapper.cell_output_size + int(marked)
        self.state_size = [*wrapper.state_size, *((wrapper.cell_output_size, 1) if marked else ())]

    def __call__(self, inputs, states, reset=None):
        states = list(states)
        if reset is not None:
            states = zero_where(reset, states)
        count = len(self.wrapper.cell_state_sizes)
        output, cell_states = call_cell(self.wrapper.cell, inputs, states[:count], self.training)
        new_states = [*cell_states, states[count]]
        if self.marked:
            one = ops.ones_like(output[:, :1])
            new_states += [output, one]
            output = ops.concatenate([output, one], -1)
        return output, new_states


# `AttentionRNN.attention_scores`'s copies of each layer, by the memory's length: kept
# outside the layer, so that saving, loading and cloning never see them.
_ATTENTION_PROBES = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionRNN(ResettableRNN):
    """`keras.layers.RNN` over an `AttentionWrapper`, with the memory as a call argument.

    The memory's keys are computed once per call, and every step of the loop attends over the
    memory given to that call (so a stateful layer may read another memory at each call).
    Where the cell's attention feeds nothing back (`AttentionWrapper.feeds_back` is false:
    ``position="after"`` without input feeding), the loop runs the wrapped cell alone and the
    attention of all steps follows it in batched products, with the step-by-step loop's
    outputs, states and gradients. A subclass of `AttentionWrapper` or of
    `AttentionMechanism` that overrides how a step attends (``attend``, ``attention_vector``,
    ``step`` or ``call``) runs step by step, calling its methods.

    Args:
        cell: An `AttentionWrapper` (or a `WordByWordAttention`, which is one).
        **kwargs: The arguments of `keras.layers.RNN` (``return_sequences``,
            ``return_state``, ``stateful``, ``unroll``, ``zero_output_for_mask``, ...).

    Call arguments:
        sequences: Tensor ``[batch, time, features]``.
        memory: Tensor ``[batch, length, memory_dim]``, the vectors attended over; with the
            cell's ``mechanisms``, a list of one per mechanism (or one tensor for all).
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding (with
            ``mechanisms``, a list of one per mechanism, or one for all). Default: `None`.
        initial_state: Optional list of the cell's initial states (`AttentionWrapper`'s
            ``states``). Default: `None`.
        mask: Optional bool tensor ``[batch, time]`` of the sequences. Default: `None`.
        sequences_mask: Where the call has other tensors (``memory``, ``initial_state``,
            ``reset``), Keras passes the mask of ``sequences`` (from
            ``Embedding(mask_zero=True)``, say) here rather than as ``mask``; used where
            ``mask`` is `None`. Default: `None`.
        training: Python boolean. Default: `False`.
        reset: Optional bool tensor ``[batch, time]``, true where a new sequence starts.
            Default: `None`.

    Returns:
        As `keras.layers.RNN`: the last output ``[batch, size]``, or every step's ``[batch,
        time, size]`` with ``return_sequences=True``; with the cell's ``return_attention_scores``,
        followed by the weights over the memory (``[batch, length]`` or ``[batch, time,
        length]``; with ``mechanisms``, a list of each mechanism's); with
        ``return_state=True``, the final states after them.

    Raises:
        ValueError: If ``memory``, ``memory_mask`` or a state of ``initial_state`` has another
            batch size than ``sequences`` (one memory row per sequence, never broadcast);
            where a batch size is unknown until the step runs (a `tf.function` over batches of
            any size), a TensorFlow assertion checks it then.

    Example:

    A decoder over an encoder's outputs, padding masked, with the alignment history:

    >>> import numpy as np, keras
    >>> from tf_memlayers import AttentionRNN, AttentionWrapper
    >>> rng = np.random.default_rng(0)
    >>> encoded = rng.normal(size=(2, 7, 12)).astype("float32")
    >>> encoded_mask = np.array([[True] * 7, [True] * 4 + [False] * 3])
    >>> targets = rng.normal(size=(2, 5, 3)).astype("float32")
    >>> cell = AttentionWrapper(keras.layers.GRUCell(16), return_attention_scores=True)
    >>> decoder = AttentionRNN(cell, return_sequences=True)
    >>> outputs, alignments = decoder(targets, memory=encoded, memory_mask=encoded_mask)
    >>> tuple(outputs.shape), tuple(alignments.shape)
    ((2, 5, 16), (2, 5, 7))
    >>> float(keras.ops.max(alignments[1, :, 4:]))  # nothing on the padding
    0.0
    """

    def __init__(self, cell, **kwargs):
        if not isinstance(cell, AttentionWrapper):
            raise TypeError(f"AttentionRNN: `cell` must be an AttentionWrapper, got {cell!r}.")
        super().__init__(cell, **kwargs)

    def build(self, sequences_shape, memory_shape=None, initial_state_shape=None):
        if not self.cell.built:
            step_shape = (sequences_shape[0], sequences_shape[-1])
            with check.called_as(type(self).__name__):  # its errors name `memory`, not the cell
                self.cell.build(step_shape, memory_shape)
        # Keras's RNN reads the cell's state sizes when made; monotonic attention's last one
        # (the alignments) is the memory's length, known once the cell is built.
        self.state_size = list(self.cell.state_size)
        # The inputs' width, which `attention_scores` checks (the cell's kernels take it).
        self._sequences_width = sequences_shape[-1]
        super().build(sequences_shape, initial_state_shape)

    def call(
        self,
        sequences,
        memory=None,
        memory_mask=None,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        if initial_state is not None:  # flat, as the wrapper's states (`AttentionWrapper.call`)
            initial_state = keras.tree.flatten(initial_state)
        owner = type(self).__name__
        cell = self.cell
        sequences = floating(sequences, cell.compute_dtype)
        mask = None if mask is None else ops.convert_to_tensor(mask)
        self.check_sequences(sequences, mask)  # before their shapes are read below
        if memory is None:
            raise ValueError(
                f"{owner}: no `memory` given: pass the vectors to attend over, [batch, length, "
                "memory_dim]."
            )
        memories = cell.per_mechanism(memory, "memory", owner)
        memories = [ops.cast(ops.convert_to_tensor(m), cell.compute_dtype) for m in memories]
        masks = cell.per_mechanism(memory_mask, "memory_mask", owner)
        masks = [None if m is None else ops.convert_to_tensor(m) for m in masks]
        cell.check_memories(memories, masks, sequences, "sequences", owner)
        for index, (memory, memory_mask) in enumerate(zip(memories, masks)):
            if memory_mask is None:
                continue
            masks[index] = ops.cast(memory_mask, "bool")
            # Padding is never read: zeroed before the keys, so that nothing there (NaN
            # included) reaches the outputs or the gradients.
            keep = ops.expand_dims(masks[index], -1)
            memories[index] = ops.where(keep, memory, ops.zeros_like(memory))
        if mask is not None:
            # The same for the sequences' padding: the masked steps' inputs are never used.
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)
            sequences = ops.where(keep, sequences, ops.zeros_like(sequences))
        widths = cell.noise_widths(training)
        draws = [
            keras.random.normal((*ops.shape(sequences)[:2], width), seed=scorer.seed_generator)
            for scorer, width in zip(cell.scorers(), widths)
            if width
        ]
        if draws:
            # Every step's noise drawn before the loop, as Keras draws dropout masks (a
            # random draw inside JAX's scan would leak its seed out of the loop), and read
            # by the step from the last columns of its input.
            draws = [ops.cast(draw, sequences.dtype) for draw in draws]
            sequences = ops.concatenate([sequences, *draws], -1)
        keys = [scorer.memory_keys(memory) for scorer, memory in zip(cell.scorers(), memories)]
        cell._bound = (memories, masks, keys, widths)
        try:
            results = super().call(
                sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
            )
        finally:
            cell._bound = None
        return self._split_alignments(results)

    def inner_loop(self, sequences, initial_state, mask, training=False):
        wrapper = self.cell
        if not wrapper.attends_after_the_loop():
            return super().inner_loop(sequences, initial_state, mask, training=training)
        # Nothing of the attention reaches the next step: the loop runs the wrapped cell
        # alone, and every step's attention is computed at once from the cell's outputs.
        memory, memory_mask, keys, _ = wrapper._bound
        marked = mask is not None
        alone = _CellAlone(wrapper, training, marked)
        extra = []
        if marked:
            # The cell's output at each row's last unmasked step, and whether it had one:
            # states, so that masked steps keep them.
            batch = ops.shape(sequences)[0]
            extra = [
                ops.zeros((batch, wrapper.cell_output_size), wrapper.compute_dtype),
                ops.zeros((batch, 1), wrapper.compute_dtype),
            ]
        object.__setattr__(self, "cell", alone)
        try:
            last, outputs, states = super().inner_loop(
                sequences, [*initial_state, *extra], mask, training=training
            )
        finally:
            object.__setattr__(self, "cell", wrapper)
        states = list(states)
        if not self.return_sequences:
            # Keras's loop keeps every step's output only with `return_sequences`.
            outputs = ops.expand_dims(last, 1)
        if marked:
            # The marker column: 1 where the loop's output is a step's, 0 where it has none
            # yet (before a row's first unmasked step) or zeroes it (`zero_output_for_mask`).
            real = outputs[..., -1:] > 0.5
            outputs = outputs[..., :-1]
            last_output, seen = states[-2], states[-1] > 0.5
            states = states[:-2]
        else:
            last_output = last
        memory, memory_mask, keys = (
            wrapper._one_or_list(each) for each in (memory, memory_mask, keys)
        )
        step_outputs, _ = wrapper.attend_steps(outputs, memory, keys, memory_mask)
        _, final = wrapper.attend_steps(ops.expand_dims(last_output, 1), memory, keys, memory_mask)
        final = final[:, 0]
        if marked:
            step_outputs = ops.where(real, step_outputs, ops.zeros_like(step_outputs))
            # A row without an unmasked step keeps the fed-back state it started with.
            final = ops.where(seen, final, states[-1])
        states[-1] = final
        return step_outputs[:, -1], step_outputs, states

    def _split_alignments(self, results):
        """With the cell's ``return_attention_scores``, the outputs split into ``(outputs,
        alignments)`` (with `mechanisms`, the alignments a list of one per mechanism), the
        states (with ``return_state``) after them."""
        if not self.cell.return_attention_scores:
            return results
        outputs, states = (results[0], list(results[1:])) if self.return_state else (results, [])
        lengths = self.cell.memory_lengths
        start = self.cell.output_size - sum(lengths)
        alignments = []
        for length in lengths:
            alignments.append(outputs[..., start : start + length])
            start += length
        width = self.cell.output_size - sum(lengths)
        return (outputs[..., :width], self.cell._one_or_list(alignments), *states)

    def attention_scores(self, sequences, memory, memory_mask=None, initial_state=None):
        """The cell's weights over the memory at every step, as an eager call in inference
        computes them from ``initial_state``: what the cell's ``return_attention_scores``
        would append to the outputs, from a layer built without it (to look at what a trained
        model attends to).

        A copy of the layer whose cell returns its weights runs the call with this layer's
        current weights (copied at each call, so call it eagerly, not inside a compiled
        function). The copy is kept outside the layer, which saves, loads and clones as it
        did, for later calls with a memory of the same length.

        Args:
            sequences: Tensor ``[batch, time, features]``, without padding, ``features`` the
                width the layer was built with.
            memory: Tensor ``[batch, length, memory_dim]`` of a known ``length``, the vectors
                attended over.
            memory_mask: Optional bool tensor ``[batch, length]``, false at padding.
                Default: `None`.
            initial_state: Optional list of the cell's initial states. Default: `None`
                (zeros; a stateful layer's carried states are not read).

        Returns:
            A tensor ``[batch, time, length]``: at each step, the weights over the memory (in
            the steps' order of the outputs, reversed with ``go_backwards``); with the cell's
            ``mechanisms``, a list of each mechanism's.

        Raises:
            ValueError: If ``sequences`` is not as wide as the layer's inputs, or the
                memory's length is not known; the message names the argument.

        Example:

        >>> import numpy as np, keras
        >>> from tf_memlayers import AttentionRNN, AttentionWrapper
        >>> decoder = AttentionRNN(AttentionWrapper(keras.layers.GRUCell(4)))
        >>> memory = np.ones((1, 6, 3), "float32")
        >>> _ = decoder(np.ones((1, 2, 5), "float32"), memory=memory)
        >>> scores = decoder.attention_scores(np.ones((1, 2, 5), "float32"), memory)
        >>> tuple(scores.shape), float(keras.ops.sum(scores[0, 0]))
        ((1, 2, 6), 1.0)
        """
        owner = f"{type(self).__name__}.attention_scores"
        sequences = ops.convert_to_tensor(sequences)
        memories = [
            ops.convert_to_tensor(each) for each in self.cell.per_mechanism(memory, "memory", owner)
        ]
        shapes = [tuple(each.shape) for each in memories]
        if not self.built:
            self.build(tuple(sequences.shape), self.cell._one_or_list(shapes))
        for index, shape in enumerate(shapes):
            if len(shape) != 3 or shape[1] is None:
                name = f"memory[{index}]" if self.cell.mechanisms else "memory"
                raise ValueError(
                    f"{owner}: `{name}` must be [batch, length, memory_dim] with a known length; "
                    f"got shape {shape}."
                )
        if sequences.shape[-1] != self._sequences_width:
            raise ValueError(
                f"{owner}: `sequences` must be [batch, time, {self._sequences_width}] (the width "
                f"the layer was built with); got shape {tuple(sequences.shape)}."
            )
        lengths = tuple(int(shape[1]) for shape in shapes)
        probes = _ATTENTION_PROBES.setdefault(self, {})
        if lengths not in probes:
            config = dict(self.cell.get_config(), return_attention_scores=True)
            probe = AttentionRNN(
                type(self.cell).from_config(config),
                return_sequences=True,
                go_backwards=self.go_backwards,
                dtype=self.dtype_policy,
            )
            memory_shapes = [
                (None, length, dim) for length, dim in zip(lengths, self.cell.memory_dims)
            ]
            probe.build((None, None, self._sequences_width), self.cell._one_or_list(memory_shapes))
            probes[lengths] = probe
        probe = probes[lengths]
        probe.set_weights(self.get_weights())
        _, scores = probe(
            sequences,
            memory=self.cell._one_or_list(memories),
            memory_mask=memory_mask,
            initial_state=initial_state,
        )
        return scores

    def compute_output_spec(
        self,
        sequences,
        memory=None,
        memory_mask=None,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        if memory is not None:
            owner = type(self).__name__
            memories = self.cell.per_mechanism(memory, "memory", owner)
            masks = self.cell.per_mechanism(memory_mask, "memory_mask", owner)
            self.cell.check_memories(memories, masks, sequences, "sequences", owner)
        # Keras's `compute_output_spec` gives `compute_output_shape`'s shapes.
        return super().compute_output_spec(
            sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
        )

    def compute_output_shape(self, sequences_shape, initial_state_shape=None, memory_shape=None):
        """Keras's RNN shapes; with the cell's ``return_attention_scores``, the output is
        followed by the weights over each memory (``[..., length]``), as the call returns
        them. ``memory_shape`` (that of `build`, which Keras's ``summary`` passes) is read
        from the cell."""
        shapes = super().compute_output_shape(sequences_shape, initial_state_shape)
        if not self.cell.return_attention_scores:
            return shapes
        output, states = (shapes[0], list(shapes[1:])) if self.return_state else (shapes, [])
        lengths, head = self.cell.memory_lengths, tuple(output[:-1])
        alignments = [head + (length,) for length in lengths]
        output = head + (self.cell._attended_width(),)
        return (output, self.cell._one_or_list(alignments), *states)
