"""The N-gram RNN output layer (Daniluk et al. 2017, §2.4, eq. 13).

The RNN output h_t of width W is cut into N-1 contiguous pieces, and h*_t is a projection of the
current piece 1, the previous output's piece 2, and so on (eq. 13, written out in
`NGramConcat`), so piece i comes from the output at time t-i+1; before the start of the stream
the missing pieces are zeros. Both forms carry the last N-2 outputs as a 2-D memory ``[batch,
(N-2)*W]`` (oldest first): `NGramConcat` on a whole sequence at once, `NGramConcatCell` as an
RNN cell.
"""

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_int,
    check_keras_object,
    check_last_dim,
    check_rank,
    check_sizes,
)
from tf_memlayers.layers.memory_cell_wrapper import MemoryCellWrapper
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer
from tf_memlayers.ops import windows
from tf_memlayers.ops.pieces import piece_sizes, split_pieces


class _NGram:
    """Weights and eq. (13), shared by the sequence and the cell form."""

    def _init_ngram(self, n, units, sizes, use_bias, kernel_initializer, bias_initializer):
        owner = type(self).__name__
        self.n = check_int("n", n, 2, owner)
        self.units = check_int("units", units, 1, owner)
        self.sizes = check_sizes("sizes", sizes, self.n - 1, owner, self._pieces_name())
        self.use_bias = check_bool("use_bias", use_bias, owner)
        self.kernel_initializer = check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
        self.bias_initializer = check_keras_object("bias_initializer", bias_initializer, owner)

    def _resolve_width(self, width):
        self.width = width
        self.piece_sizes = piece_sizes(
            width, self.n - 1, self.sizes, type(self).__name__, self._pieces_name()
        )

    def _pieces_name(self):
        return f"{'piece' if self.n == 2 else 'pieces'} (N-1 = {self.n - 1})"

    def _build_ngram(self):
        self.ngram_kernel = self.add_weight(
            name="ngram_kernel",
            shape=(self.width, self.units),
            initializer=self.kernel_initializer,
        )
        if self.use_bias:
            self.ngram_bias = self.add_weight(
                name="ngram_bias", shape=(self.units,), initializer=self.bias_initializer
            )

    @property
    def memory_size(self):
        """Width of the memory of the last N-2 outputs."""
        return (self.n - 2) * self.width

    def memory_size_for(self, width):
        """`memory_size` for inputs of width ``width`` (built or not).

        Args:
            width: Positive integer, the width W of the RNN output h_t.

        Returns:
            Integer, ``(N-2) * width``.
        """
        return (self.n - 2) * width

    def _ngram_output(self, current, previous):
        """Eq. (13). ``current`` ``[..., W]``; ``previous`` ``[..., N-2, W]``, oldest first."""
        pieces = [split_pieces(current, self.piece_sizes)[0]]
        start = self.piece_sizes[0]
        for i, size in enumerate(self.piece_sizes[1:], start=2):
            # Piece i is taken from the output at t-i+1, window position N-1-i.
            pieces.append(previous[..., self.n - 1 - i, start : start + size])
            start += size
        features = ops.concatenate(pieces, axis=-1)
        combined = ops.matmul(features, self.ngram_kernel)
        if self.use_bias:
            combined = combined + self.ngram_bias
        return ops.tanh(combined)

    def _ngram_config(self):
        return {
            "n": self.n,
            "units": self.units,
            "sizes": None if self.sizes is None else list(self.sizes),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }


@keras.saving.register_keras_serializable(package="tf_memlayers")
class NGramConcat(_NGram, MemorySequenceLayer):
    r"""N-gram RNN output over a whole sequence, all steps at once (equation 13).

    Applied to the output sequence of any RNN layer (e.g. the fused `keras.layers.LSTM`),
    it computes h*_t for every step from the current output and the N-2 outputs before it.
    The RNN output h_t is cut into N-1 pieces :math:`[h^1_t ; \ldots ; h^{N-1}_t]` and

    .. math::

        h^*_t = \tanh\left(W^N [h^1_t ; h^2_{t-1} ; \ldots ; h^{N-1}_{t-N+2}]\right) \tag{13}

    (zeros before the start of the stream). The same weights and outputs as the cell form
    `NGramConcatCell`.

    Weights: `ngram_kernel` (:math:`W^N`, ``[width, units]``) and, with `use_bias`,
    `ngram_bias`.

    Args:
        n: Integer >= 2, the order N of the N-gram (the PTB example's ``--ngram``); N-1
            pieces are read from the last N-1 outputs.
        units: Positive integer, dimensionality of the output h*_t.
        sizes: Optional tuple of N-1 positive integers, explicit piece sizes (the piece of
            the current output first) that sum to the input width. Default: `None` (equal
            pieces, which must divide the width).
        use_bias: Boolean, (default `False`), whether to add a bias vector `ngram_bias`
            inside the tanh; the paper has none.
        kernel_initializer: Initializer for the `ngram_kernel` weights matrix W^N.
            Default: `"glorot_uniform"`.
        bias_initializer: Initializer for the bias vector `ngram_bias` (used with
            ``use_bias=True``). Default: `"zeros"`.
        return_memory: Boolean, (default `False`), whether to also return the last N-2
            outputs, ``[batch, (N-2)*width]``.
        stateful: Boolean, (default `False`), whether to carry the last N-2 outputs to the
            next call in a non-trainable variable (truncated BPTT; needs a fixed batch
            size); `reset_state()` clears it. A ``.keras`` file holds it (Keras saves no
            RNN's states: reset a model loaded in the middle of a stream); a layer of another
            batch size, or not stateful, loads the weights of such a file beside its own
            memory.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 3D tensor, with shape ``[batch, time, width]``: the RNN outputs.
        mask: Optional boolean tensor ``[batch, time]``; padded steps are skipped (never
            read, so non-finite padding is harmless, and never used as an earlier output)
            and their outputs are exactly zero. Default: `None`.
        initial_memory: Optional 2D tensor ``[batch, (N-2)*width]`` of earlier outputs
            (e.g. the memory returned by the previous call); no gradient flows into it.
            Default: `None` (the stored memory when stateful, else zeros).
        inputs_mask: Where the call has other tensors (``initial_memory``, ``reset``), Keras
            passes the mask of ``inputs`` (from ``Embedding(mask_zero=True)``, say) here
            rather than as ``mask``; used where ``mask`` is `None`. Default: `None`.
        training: Unused (accepted for API symmetry). Default: `None`.
        reset: Optional bool tensor ``[batch, time]``, true where a new document starts: from
            that step on, earlier outputs come only from the row's document (zeros before
            its start, as in a sequence of its own), and the returned memory holds only the
            last document. Resets at masked steps are ignored. Default: `None`.

    Inputs of another width than the layer was built for, a mask that is not
    ``[batch, time]``, and an ``initial_memory`` (or, with ``stateful=True``, a batch) of
    another size raise a `ValueError` naming the argument and the shapes.

    Returns:
        ``h*`` ``[batch, time, units]``, or ``(h*, memory)`` with ``return_memory=True``.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import NGramConcat
    >>> tuple(NGramConcat(n=4, units=8)(np.zeros((2, 5, 12), "float32")).shape)
    (2, 5, 8)
    """

    def __init__(
        self,
        n,
        units,
        sizes=None,
        use_bias=False,
        return_memory=False,
        stateful=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(stateful=stateful, **kwargs)
        self._init_ngram(n, units, sizes, use_bias, kernel_initializer, bias_initializer)
        self.return_memory = check_bool("return_memory", return_memory, type(self).__name__)

    def build_mechanism(self, width):
        self._resolve_width(width)
        self._build_ngram()

    def call(
        self, inputs, mask=None, initial_memory=None, training=None, reset=None, inputs_mask=None
    ):
        mask = inputs_mask if mask is None else mask
        self.check_call_inputs(inputs, mask, initial_memory, reset)
        inputs, mask = self.masked_inputs(inputs, mask)
        batch = ops.shape(inputs)[0]
        memory = self.incoming_memory(inputs, initial_memory)
        memory = ops.reshape(memory, (batch, self.n - 2, self.width))
        compaction = windows.Compaction(mask)
        compacted = compaction.compact(inputs)
        stream = ops.concatenate([memory, compacted], axis=1)
        previous = windows.offset_windows(stream, self.n - 2)
        last = compaction.last(stream, self.n - 2)
        documents = self.documents(reset, compaction, self.n - 2)
        if documents is not None:
            # Earlier outputs of another document are the zeros before a fresh stream.
            previous = documents.keep(documents.same, previous)
            last = documents.keep(documents.last_same, last)
        outputs = compaction.restore(self._ngram_output(compacted, previous))
        new_memory = self.keep_memory(ops.reshape(last, (batch, self.memory_size)))
        if self.return_memory:
            return outputs, new_memory
        return outputs

    def compute_output_shape(self, input_shape):
        batch, steps, _ = check_rank("inputs", input_shape, 3, type(self).__name__)
        width = check_last_dim("inputs", input_shape, type(self).__name__)
        piece_sizes(width, self.n - 1, self.sizes, type(self).__name__, self._pieces_name())
        outputs = (batch, steps, self.units)
        if self.return_memory:
            return outputs, (batch, self.memory_size_for(width))
        return outputs

    def compute_output_spec(
        self, inputs, mask=None, initial_memory=None, training=None, reset=None, inputs_mask=None
    ):
        mask = inputs_mask if mask is None else mask
        self.check_call_inputs(inputs, mask, initial_memory, reset)
        shapes = self.compute_output_shape(inputs.shape)
        if self.return_memory:
            return tuple(keras.KerasTensor(shape, self.compute_dtype) for shape in shapes)
        return keras.KerasTensor(shapes, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return [mask, None] if self.return_memory else mask

    def get_config(self):
        config = super().get_config()
        config.update(self._ngram_config())
        config["return_memory"] = self.return_memory
        return config


@keras.saving.register_keras_serializable(package="tf_memlayers")
class NGramConcatCell(_NGram, MemoryCellWrapper):
    """The N-gram RNN as a cell wrapping any Keras RNN cell (equation 13).

    At each step the wrapped ``cell`` produces h_t, and the cell outputs h*_t from h_t and
    the N-2 outputs of the wrapped cell before it. The state is the wrapped cell's states
    followed by the last N-2 outputs of the wrapped cell, ``[batch, (N-2)*width]``, zero at
    the start. Same weights and outputs as `NGramConcat`.

    Args:
        cell: A Keras RNN cell (e.g. `keras.layers.LSTMCell`) whose output h_t, of width
            ``width``, is split into the N-1 pieces.
        n: Integer >= 2, the order N of the N-gram (the PTB example's ``--ngram``); N-1
            pieces are read from the last N-1 outputs.
        units: Positive integer, dimensionality of the output h*_t.
        sizes: Optional tuple of N-1 positive integers, explicit piece sizes (the piece of
            the current output first) that sum to the input width. Default: `None` (equal
            pieces, which must divide the width).
        use_bias: Boolean, (default `False`), whether to add a bias vector `ngram_bias`
            inside the tanh; the paper has none.
        kernel_initializer: Initializer for the `ngram_kernel` weights matrix W^N.
            Default: `"glorot_uniform"`.
        bias_initializer: Initializer for the bias vector `ngram_bias` (used with
            ``use_bias=True``). Default: `"zeros"`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor, with shape ``[batch, features]``: the input of the wrapped
            cell at one step.
        states: List of tensors, the wrapped cell's states followed by the memory of
            earlier outputs ``[batch, (N-2)*width]``.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows where a new document
            starts at this step: their states (the wrapped cell's and the earlier outputs)
            are zeroed first, as at the start of a sequence. `ResettableRNN` passes it at
            every step. Default: `None`.

    Returns:
        Tuple ``(output, new_states)``: the output h*_t ``[batch, units]`` and the list of new
        states, the wrapped cell's followed by the memory of its last N-2 outputs with h_t
        appended (the oldest dropped), ``[batch, (N-2)*width]``.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import NGramConcatCell
    >>> rnn = keras.layers.RNN(NGramConcatCell(keras.layers.GRUCell(12), n=4, units=8))
    >>> tuple(rnn(np.zeros((2, 5, 3), "float32")).shape)
    (2, 8)
    """

    def __init__(
        self,
        cell,
        n,
        units,
        sizes=None,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(cell, **kwargs)
        self._init_ngram(n, units, sizes, use_bias, kernel_initializer, bias_initializer)
        self._resolve_width(self.cell_output_size)

    @property
    def output_size(self):
        return self.units

    def build(self, input_shape):
        super().build(input_shape)
        self._build_ngram()

    def call(self, inputs, states, training=None, reset=None):
        h, new_cell_states, memory, _ = self.run_cell(inputs, states, training, reset)
        previous = ops.reshape(memory, (ops.shape(h)[0], self.n - 2, self.width))
        output = self._ngram_output(h, previous)
        if self.n > 2:
            new_memory = ops.concatenate([memory[:, self.width :], h], axis=-1)
        else:
            new_memory = memory
        return output, [*new_cell_states, new_memory]

    def get_config(self):
        config = super().get_config()
        config.update(self._ngram_config())
        return config
