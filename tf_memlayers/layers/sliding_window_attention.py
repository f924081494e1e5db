"""Attention over a sliding window of previous outputs (Daniluk et al. 2017, §2, eqs 1-12).

At step t the layer attends over the previous L keys (never the current one)::

    M_t     = tanh(W^Y [k_{t-L} .. k_{t-1}] + (W^h k_t) 1^T)
    alpha_t = softmax(w^T M_t)
    r_t     = [v_{t-L} .. v_{t-1}] alpha_t^T
    h*_t    = tanh(W^r r_t + W^x p_t)

where (k_t, v_t, p_t) is the `KeyValuePredictSplit` of the RNN output h_t. Two forms compute the
same thing: `SlidingWindowAttention` on a whole output sequence at once (the fast training path)
and `SlidingWindowAttentionCell`, which wraps any Keras RNN cell for `keras.layers.RNN`.
Both keep the window as a 2-D memory ``[keys (L*d_k) | values (L*d_v) | validity (L)]``
(values are omitted in `"attention"` mode, where they equal the keys), which is the cell's extra
state and the parallel layer's carried memory, so the two forms can hand memory to each other.
"""

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_choice,
    check_int,
    check_last_dim,
    check_optional_int,
    check_rank,
)
from tf_memlayers.layers.attention_pooling import softmax_dtype
from tf_memlayers.layers.key_value_predict_split import (
    MODES,
    check_mode_sizes,
    key_value_predict_sizes,
    split_key_value_predict,
    split_sizes,
)
from tf_memlayers.layers.memory_cell_wrapper import MemoryCellWrapper
from tf_memlayers.layers.memory_sequence_layer import MemorySequenceLayer
from tf_memlayers.ops import windows

PADS = ("mask", "zeros")


def window_softmax(scores, valid=None):
    """Softmax over the last axis in at least float32 (eq. 3).

    Positions where ``valid`` is 0 take no probability mass; a row with no valid position gets
    all-zero weights, so r_t = 0 when there is nothing to attend. Empty ``scores`` (no steps
    or no sequences) give empty weights.
    """
    if scores.dtype in ("float16", "bfloat16"):
        scores = ops.cast(scores, "float32")
    # The `initial` values leave every row's max / min unchanged and let empty tensors
    # through (Keras refuses to reduce an empty tensor without one).
    if valid is None:
        shifted = scores - ops.max(scores, axis=-1, keepdims=True, initial=-float("inf"))
        weights = ops.exp(shifted)
        return weights / ops.sum(weights, axis=-1, keepdims=True)
    valid = ops.cast(valid, scores.dtype) > 0.5
    lowest = ops.min(scores, axis=-1, keepdims=True, initial=float("inf"))
    top = ops.max(ops.where(valid, scores, lowest), axis=-1, keepdims=True, initial=-float("inf"))
    weights = ops.where(valid, ops.exp(scores - top), ops.zeros_like(scores))
    total = ops.sum(weights, axis=-1, keepdims=True)
    return weights / ops.where(total > 0, total, ops.ones_like(total))


class _WindowAttention:
    """Weights and equations shared by the sequence and the cell form."""

    def _init_attention(
        self,
        window,
        mode,
        sizes,
        attention_units,
        units,
        pad,
        use_bias,
        kernel_initializer,
        bias_initializer,
    ):
        owner = type(self).__name__
        self.window = check_int("window", window, 1, owner)
        self.mode = check_choice("mode", mode, MODES, owner)
        self.sizes = check_mode_sizes(self.mode, sizes, owner)
        self.attention_units = check_optional_int("attention_units", attention_units, 1, owner)
        self.units = check_optional_int("units", units, 1, owner)
        self.pad = check_choice("pad", pad, PADS, owner)
        self.use_bias = check_bool("use_bias", use_bias, owner)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def _attention_config(self):
        return {
            "window": self.window,
            "mode": self.mode,
            "sizes": None if self.sizes is None else list(self.sizes),
            "attention_units": self.attention_units,
            "units": self.units,
            "pad": self.pad,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }

    def _build_attention(self, width):
        owner = type(self).__name__
        self.piece_sizes = split_sizes(self.mode, width, self.sizes, owner)
        key_size, value_size, predict_size = self._key_value_predict_sizes()
        self.output_units = self.units or value_size
        attention = self.attention_units or key_size

        def kernel(name, shape):
            return self.add_weight(name=name, shape=shape, initializer=self.kernel_initializer)

        self.memory_kernel = kernel("memory_kernel", (key_size, attention))
        self.query_kernel = kernel("query_kernel", (key_size, attention))
        self.score_vector = kernel("score_vector", (attention,))
        self.context_kernel = kernel("context_kernel", (value_size, self.output_units))
        self.predict_kernel = kernel("predict_kernel", (predict_size, self.output_units))
        if self.use_bias:
            self.memory_bias = self.add_weight(
                name="memory_bias", shape=(attention,), initializer=self.bias_initializer
            )
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.output_units,), initializer=self.bias_initializer
            )

    def _key_value_predict_sizes(self):
        return key_value_predict_sizes(self.mode, self.piece_sizes)

    def _split(self, outputs):
        return split_key_value_predict(outputs, self.mode, self.piece_sizes)

    @property
    def memory_size(self):
        """Width of the flat memory ``[keys | values | validity]``."""
        key_size, value_size, _ = self._key_value_predict_sizes()
        stored = key_size if self.mode == "attention" else key_size + value_size
        return self.window * (stored + 1)

    def _sizes_for(self, width):
        """``(output units, memory_size)`` for inputs of width ``width`` (built or not)."""
        pieces = split_sizes(self.mode, width, self.sizes, type(self).__name__)
        key_size, value_size, _ = key_value_predict_sizes(self.mode, pieces)
        stored = key_size if self.mode == "attention" else key_size + value_size
        return self.units or value_size, self.window * (stored + 1)

    def _unpack_memory(self, memory):
        """Flat memory ``[B, M]`` -> keys ``[B, L, dk]``, values ``[B, L, dv]``, valid ``[B, L]``."""
        key_size, value_size, _ = self._key_value_predict_sizes()
        L = self.window
        keys = ops.reshape(memory[:, : L * key_size], (-1, L, key_size))
        if self.mode == "attention":
            values = keys
            offset = L * key_size
        else:
            offset = L * (key_size + value_size)
            values = ops.reshape(memory[:, L * key_size : offset], (-1, L, value_size))
        return keys, values, memory[:, offset:]

    def _pack_memory(self, keys, values, valid):
        """Inverse of `_unpack_memory`. The widths are static, so the memory keeps its static
        shape ``[batch, memory_size]`` when the batch size is unknown (a `keras.layers.RNN`
        loop needs its states to keep their shapes)."""
        key_size, value_size, _ = self._key_value_predict_sizes()
        L = self.window
        parts = [ops.reshape(keys, (-1, L * key_size))]
        if self.mode != "attention":
            parts.append(ops.reshape(values, (-1, L * value_size)))
        parts.append(ops.reshape(ops.cast(valid, keys.dtype), (-1, L)))
        return ops.concatenate(parts, axis=-1)

    def _attend(self, window_keys, query, window_values, window_valid):
        """Eqs (2)-(4): ``window_keys`` ``[..., L, a]`` already projected by W^Y, ``query``
        ``[..., a]`` projected by W^h. Returns ``(r [..., dv], alpha [..., L])``."""
        pre_activation = window_keys + ops.expand_dims(query, -2)
        if self.use_bias:
            pre_activation = pre_activation + self.memory_bias
        scores = ops.einsum("...la,a->...l", ops.tanh(pre_activation), self.score_vector)
        valid = None if self.pad == "zeros" else window_valid
        alpha = window_softmax(scores, valid)  # float32 under a mixed precision policy
        weights = ops.cast(alpha, window_values.dtype)
        context = ops.einsum("...l,...ld->...d", weights, window_values)
        return context, alpha

    def _combine(self, context, predict):
        """Eq. (5): h*_t = tanh(W^r r_t + W^x p_t)."""
        combined = ops.matmul(context, self.context_kernel) + ops.matmul(
            predict, self.predict_kernel
        )
        if self.use_bias:
            combined = combined + self.output_bias
        return ops.tanh(combined)


_COMMON_ARGS = """
        window: L, the number of previous outputs attended over (>= 1).
        mode: how the input is split (`KeyValuePredictSplit`): `"attention"` (key = value =
            predict = h_t), `"key_value"` (h_t = [k; v], predict = v) or `"key_value_predict"`
            (h_t = [k; v; p]).
        sizes: explicit piece sizes, key first, summing to the input width; default equal.
        attention_units: width of the attention hidden layer M_t (default: key size).
        units: output width of h*_t (default: value size).
        pad: `"mask"` (default): window positions before the start of the stream take no
            probability mass, and r_t = 0 when there is nothing to attend. `"zeros"`: missing
            positions are zero vectors that take part in the softmax (the literal reading).
        use_bias: adds a bias inside M_t (`memory_bias`) and inside h*_t (`output_bias`);
            the paper has none.
        kernel_initializer, bias_initializer: initialisers of the kernels / biases.
"""


@keras.saving.register_keras_serializable(package="tf_memlayers")
class SlidingWindowAttention(_WindowAttention, MemorySequenceLayer):
    __doc__ = f"""Sliding-window attention over a whole output sequence, all steps at once.

    The parallel form of Daniluk et al. (2017) eqs (1)-(12): applied to the output sequence of
    any RNN layer (e.g. the fused `keras.layers.LSTM`), it computes every step in O(T·L) time
    and memory. The window never feeds back into the RNN, so this equals the cell form
    `SlidingWindowAttentionCell` (a test proves it) while running much faster.

    Weights: `memory_kernel` (W^Y), `query_kernel` (W^h), `score_vector` (w),
    `context_kernel` (W^r), `predict_kernel` (W^x), and with `use_bias` `memory_bias`,
    `output_bias`.

    Args:{_COMMON_ARGS}        return_attention_scores: also return the window weights alpha,
            ``[batch, time, window]`` (oldest position first; float32 under a mixed
            precision policy, like the softmax that makes them).
        return_memory: also return the memory after the sequence, ``[batch, memory_size]``.
        stateful: keep the memory in a non-trainable variable and carry it to the next call
            (truncated BPTT over consecutive segments of the same streams; needs a fixed batch
            size). `reset_state()` clears it, e.g. at document boundaries.

    Call arguments:
        inputs: ``[batch, time, width]`` RNN outputs.
        mask: optional bool ``[batch, time]``; padded steps are never read (non-finite
            padding is harmless), never written to the memory, never attended, and their
            outputs (and attention scores) are exactly zero.
        initial_memory: optional ``[batch, memory_size]`` memory carried from an earlier
            segment (e.g. the returned memory of the previous call); no gradient flows into it.
        training: unused (accepted for API symmetry).

    Inputs of another width than the layer was built for, a mask that is not
    ``[batch, time]``, and an ``initial_memory`` (or, with ``stateful=True``, a batch) of
    another size are `ValueError`s naming the argument and the shapes. Sequences without
    steps, and empty batches, give empty outputs.

    Returns:
        ``h*`` ``[batch, time, units]``, followed by the attention scores and/or the memory
        when requested.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import SlidingWindowAttention
    >>> inputs = keras.Input((None,), dtype="int32")
    >>> h = keras.layers.Embedding(100, 16)(inputs)
    >>> h = keras.layers.LSTM(32, return_sequences=True)(h)
    >>> h_star = SlidingWindowAttention(window=5, mode="key_value")(h)
    >>> logits = keras.layers.Dense(100)(h_star)
    >>> model = keras.Model(inputs, logits)
    >>> model(np.zeros((2, 7), "int32")).shape
    TensorShape([2, 7, 100])
    """

    def __init__(
        self,
        window,
        mode="attention",
        sizes=None,
        attention_units=None,
        units=None,
        pad="mask",
        use_bias=False,
        return_attention_scores=False,
        return_memory=False,
        stateful=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(stateful=stateful, **kwargs)
        self._init_attention(
            window,
            mode,
            sizes,
            attention_units,
            units,
            pad,
            use_bias,
            kernel_initializer,
            bias_initializer,
        )
        owner = type(self).__name__
        self.return_attention_scores = check_bool(
            "return_attention_scores", return_attention_scores, owner
        )
        self.return_memory = check_bool("return_memory", return_memory, owner)

    def build_mechanism(self, width):
        self._build_attention(width)

    def memory_size_for(self, width):
        return self._sizes_for(width)[1]

    def call(self, inputs, mask=None, initial_memory=None, training=None):
        self.check_call_inputs(inputs, mask, initial_memory)
        inputs, mask = self.masked_inputs(inputs, mask)
        memory_keys, memory_values, memory_valid = self._unpack_memory(
            self.incoming_memory(inputs, initial_memory)
        )
        compaction = windows.Compaction(mask)
        key, value, predict = self._split(compaction.compact(inputs))
        real = ops.ones(ops.shape(inputs)[:2], memory_valid.dtype)
        key_stream = ops.concatenate([memory_keys, key], axis=1)
        value_stream = ops.concatenate([memory_values, value], axis=1)
        valid_stream = ops.concatenate([memory_valid, real], axis=1)
        context, alpha = self._attend(
            windows.offset_windows(ops.matmul(key_stream, self.memory_kernel), self.window),
            ops.matmul(key, self.query_kernel),
            windows.offset_windows(value_stream, self.window),
            windows.offset_windows(valid_stream, self.window),
        )
        outputs = compaction.restore(self._combine(context, predict))
        alpha = compaction.restore(alpha)

        new_memory = None
        if self.return_memory or self.stateful:
            new_memory = self.keep_memory(
                self._pack_memory(
                    compaction.last(key_stream, self.window),
                    compaction.last(value_stream, self.window),
                    compaction.last(valid_stream, self.window),
                )
            )
        results = [outputs]
        if self.return_attention_scores:
            results.append(alpha)
        if self.return_memory:
            results.append(new_memory)
        return results[0] if len(results) == 1 else tuple(results)

    def compute_output_shape(self, input_shape):
        batch, steps, _ = check_rank("inputs", input_shape, 3, type(self).__name__)
        units, memory_size = self._sizes_for(check_last_dim("inputs", input_shape))
        shapes = [(batch, steps, units)]
        if self.return_attention_scores:
            shapes.append((batch, steps, self.window))
        if self.return_memory:
            shapes.append((batch, memory_size))
        return shapes[0] if len(shapes) == 1 else tuple(shapes)

    def compute_output_spec(self, inputs, mask=None, initial_memory=None, training=None):
        self.check_call_inputs(inputs, mask, initial_memory)
        shapes = self.compute_output_shape(inputs.shape)
        if not (self.return_attention_scores or self.return_memory):
            return keras.KerasTensor(shapes, self.compute_dtype)
        dtypes = [self.compute_dtype]
        if self.return_attention_scores:
            dtypes.append(softmax_dtype(self.compute_dtype))
        if self.return_memory:
            dtypes.append(self.compute_dtype)
        return tuple(keras.KerasTensor(shape, dtype) for shape, dtype in zip(shapes, dtypes))

    def compute_mask(self, inputs, mask=None):
        if not (self.return_attention_scores or self.return_memory):
            return mask
        masks = [mask]
        if self.return_attention_scores:
            masks.append(mask)
        if self.return_memory:
            masks.append(None)
        return masks

    def get_config(self):
        config = super().get_config()
        config.update(self._attention_config())
        config.update(
            {
                "return_attention_scores": self.return_attention_scores,
                "return_memory": self.return_memory,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="tf_memlayers")
class SlidingWindowAttentionCell(_WindowAttention, MemoryCellWrapper):
    __doc__ = f"""Sliding-window attention as an RNN cell wrapping any Keras RNN cell.

    At each step the wrapped ``cell`` produces h_t; the cell splits it into (k_t, v_t, p_t),
    attends over the last L keys/values kept in its state (Daniluk et al. 2017, eqs 1-12),
    outputs h*_t and appends k_t, v_t to the window. The state is the wrapped cell's states
    followed by one 2-D memory ``[keys | values | validity]`` whose zero initial value means
    "nothing attended yet", so `stateful=True`, `reset_state()`, `return_state`,
    `go_backwards`, `Bidirectional` and step-by-step generation work as with any cell. At a
    masked step `keras.layers.RNN` copies the state forward: the step is never written to the
    window.

    The same weights as `SlidingWindowAttention`, which computes the same outputs in parallel.

    Args:
        cell: a Keras RNN cell (e.g. `keras.layers.LSTMCell`) whose output is h_t.{_COMMON_ARGS}
    Call arguments:
        inputs: ``[batch, features]`` input of the wrapped cell at one step.
        states: the wrapped cell's states followed by the window memory.
        training: passed to the wrapped cell.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import SlidingWindowAttentionCell
    >>> cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(32), window=5)
    >>> rnn = keras.layers.RNN(cell, return_sequences=True)
    >>> rnn(np.zeros((2, 7, 8), "float32")).shape
    TensorShape([2, 7, 32])
    """

    def __init__(
        self,
        cell,
        window,
        mode="attention",
        sizes=None,
        attention_units=None,
        units=None,
        pad="mask",
        use_bias=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(cell, **kwargs)
        self._init_attention(
            window,
            mode,
            sizes,
            attention_units,
            units,
            pad,
            use_bias,
            kernel_initializer,
            bias_initializer,
        )
        self.piece_sizes = split_sizes(
            self.mode, self.cell_output_size, self.sizes, type(self).__name__
        )
        self.output_units = self.units or self._key_value_predict_sizes()[1]

    @property
    def output_size(self):
        return self.output_units

    def build(self, input_shape):
        super().build(input_shape)
        self._build_attention(self.cell_output_size)

    def call(self, inputs, states, training=None):
        h, new_cell_states, memory = self.run_cell(inputs, states, training)

        key, value, predict = self._split(h)
        memory_keys, memory_values, memory_valid = self._unpack_memory(memory)
        context, _ = self._attend(
            ops.matmul(memory_keys, self.memory_kernel),
            ops.matmul(key, self.query_kernel),
            memory_values,
            memory_valid,
        )
        output = self._combine(context, predict)
        new_memory = self._pack_memory(
            ops.concatenate([memory_keys[:, 1:], key[:, None]], axis=1),
            ops.concatenate([memory_values[:, 1:], value[:, None]], axis=1),
            ops.concatenate([memory_valid[:, 1:], ops.ones_like(memory_valid[:, :1])], axis=1),
        )
        return output, [*new_cell_states, new_memory]

    def get_config(self):
        config = super().get_config()
        config.update(self._attention_config())
        return config
