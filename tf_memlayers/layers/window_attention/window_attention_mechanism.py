"""The window attention of Daniluk et al. (2017, §2, eqs 1-12), shared by both forms.

`WindowAttentionMechanism` holds the weights, the memory layout ``[keys (L*d_k) | values
(L*d_v) | validity (L)]`` and the equations that `SlidingWindowAttention` (all steps at once)
and `SlidingWindowAttentionCell` (one step, inside `keras.layers.RNN`) share;
`window_softmax` is eq. 3 over the window with invalid positions masked. The cell form reads
its window from the memory (`_attend`); the sequence form reads the windows of the narrow
projected keys and, without building its windows, the stream of values already multiplied by
W^r (`_attend_stream`; ``W^r sum_i alpha_i y_i = sum_i alpha_i W^r y_i``).
"""

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_choice,
    check_int,
    check_keras_object,
    check_optional_int,
)
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.window_attention.key_value_predict_split import (
    MODES,
    check_mode_sizes,
    key_value_predict_sizes,
    split_key_value_predict,
    split_sizes,
)
from tf_memlayers.ops import windows
from tf_memlayers.ops.products import dot_last_axis

PADS = ("mask", "zeros")


def window_softmax(scores, valid=None):
    """Softmax over the last axis in at least float32 (eq. 3).

    Positions where ``valid`` is 0 take no probability mass; a row with no valid position gets
    all-zero weights, so r_t = 0 when there is nothing to attend. Empty ``scores`` (no steps
    or no sequences) give empty weights.

    Args:
        scores: Float tensor ``[..., L]``, the attention logits ``w^T M_t`` over the window.
        valid: Optional tensor of ``scores``'s shape, 1 (or `True`) at the window positions
            that hold an output and 0 before the start of the stream. Default: `None` (every
            position takes part, the plain softmax).

    Returns:
        The weights alpha, of the shape of ``scores``, in float32 when ``scores`` is float16
        or bfloat16 and in the dtype of ``scores`` otherwise.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> scores = np.zeros((1, 4), "float32")
    >>> keras.ops.convert_to_numpy(window_softmax(scores, np.array([[0, 0, 1, 1]]))).tolist()
    [[0.0, 0.0, 0.5, 0.5]]
    """
    scores = ops.convert_to_tensor(scores)
    if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
        scores = ops.cast(scores, "float32")
    if 0 in tuple(scores.shape):
        # Keras refuses to reduce an empty tensor; its reductions' `initial` would let one
        # through, but its torch backend puts that value on the CPU, beside a GPU's scores.
        return ops.zeros_like(scores)
    if valid is None:
        weights = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))
        return weights / ops.sum(weights, axis=-1, keepdims=True)
    valid = ops.cast(valid, scores.dtype) > 0.5
    lowest = ops.min(scores, axis=-1, keepdims=True)
    top = ops.max(ops.where(valid, scores, lowest), axis=-1, keepdims=True)
    weights = ops.where(valid, ops.exp(scores - top), ops.zeros_like(scores))
    total = ops.sum(weights, axis=-1, keepdims=True)
    return weights / ops.where(total > 0, total, ops.ones_like(total))


class WindowAttentionMechanism:
    """Weights and equations of the window attention, shared by the sequence and cell forms.

    A mixin: `SlidingWindowAttention` (with `MemorySequenceLayer`) and
    `SlidingWindowAttentionCell` (with `MemoryCellWrapper`) inherit from it and pass their
    constructor arguments (``window``, ``mode``, ``sizes``, ``attention_units``, ``units``,
    ``pad``, ``use_bias``, ``kernel_initializer``, ``bias_initializer``; documented on those
    classes) to its initialisation. It defines the weights W^Y, W^h, w, W^r, W^x (and the
    optional biases), eqs (2)-(5), and the flat memory ``[keys | values | validity]``. Its
    public methods `scores` and `build_scores` are the score a subclass may replace.
    """

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
        self.kernel_initializer = check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
        self.bias_initializer = check_keras_object("bias_initializer", bias_initializer, owner)

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
            return self.add_weight(
                name=name, shape=shape, initializer=for_one_weight(self.kernel_initializer)
            )

        self.memory_kernel = kernel("memory_kernel", (key_size, attention))
        self.query_kernel = kernel("query_kernel", (key_size, attention))
        self.build_scores(attention)
        self.context_kernel = kernel("context_kernel", (value_size, self.output_units))
        self.predict_kernel = kernel("predict_kernel", (predict_size, self.output_units))
        if self.use_bias:
            self.memory_bias = self.add_weight(
                name="memory_bias", shape=(attention,), initializer=self.bias_initializer
            )
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.output_units,), initializer=self.bias_initializer
            )

    def build_scores(self, attention_units):
        """Creates the weights of the score (`scores`): eq. (2)'s vector ``w``
        (`score_vector`).

        With ``use_bias`` the layer adds the bias ``b`` inside the tanh (`memory_bias`) after
        its other weights. A subclass that scores otherwise creates its own weights here,
        or none.

        Args:
            attention_units: Integer ``a``, the width of the projected keys and query.
        """
        self.score_vector = self.add_weight(
            name="score_vector",
            shape=(attention_units,),
            initializer=for_one_weight(self.kernel_initializer),
        )

    def scores(self, window_keys, query):
        r"""Eq. (2): the logit :math:`w^T \tanh(W^Y y_i + W^h h_t + b)` of each window position.

        Eq. (3)'s softmax over the valid positions follows. Both forms, their step models and
        their streams of documents score through this method: a subclass that overrides it
        (with `build_scores` for its weights) changes the attention everywhere.

        Args:
            window_keys: Tensor ``[..., L, a]``, the window's keys projected by ``W^Y``
                (`memory_kernel`), oldest position first.
            query: Tensor ``[..., a]``, the current key projected by ``W^h`` (`query_kernel`).

        Returns:
            Tensor ``[..., L]``, the logits.
        """
        pre_activation = window_keys + ops.expand_dims(query, -2)
        if self.use_bias:
            pre_activation = pre_activation + self.memory_bias
        return dot_last_axis(ops.tanh(pre_activation), self.score_vector)

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
        """Flat memory ``[B, M]`` -> keys ``[B, L, dk]``, values ``[B, L, dv]``, valid
        ``[B, L]``."""
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

    def _window_alpha(self, window_keys, query, window_valid):
        """Eqs (2)-(3): `scores`, then their softmax over the valid positions. Returns alpha
        ``[..., L]`` (float32 under a mixed precision policy)."""
        scores = self.scores(window_keys, query)
        return window_softmax(scores, None if self.pad == "zeros" else window_valid)

    def _attend(self, window_keys, query, window_values, window_valid):
        """Eqs (2)-(4) for one window per row. Returns ``(r [..., dv], alpha [..., L])``."""
        alpha = self._window_alpha(window_keys, query, window_valid)
        weights = ops.cast(alpha, window_values.dtype)
        context = ops.einsum("...l,...ld->...d", weights, window_values)
        return context, alpha

    def _attend_stream(
        self, key_stream, query, carried_values, step_values, valid_stream, documents=None
    ):
        """Eqs (2)-(4) for all steps at once, the parallel form of `_attend`.

        ``key_stream`` ``[B, L + T, a]`` (memory then steps) already projected by W^Y,
        ``query`` ``[B, T, a]`` projected by W^h, the value stream in its two parts (the
        memory's ``carried_values`` ``[B, L, dv]`` and ``step_values`` ``[B, T, dv]``, so
        the wide stream is never joined), ``valid_stream`` ``[B, L + T]``; step r attends
        stream positions r .. r + L - 1.
        The scores read the windows of the narrow projected keys ``[B, T, L, a]``, so the
        query, bias and score vector each enter the graph once (the sum of the gradients of L
        separate uses of one tensor depended, in its last bits, on the order in which
        TensorFlow's executor ran them). The context is `windows.window_weighted_sum` over
        the value stream: no ``[B, T, L, dv]`` window of values is built; values already
        multiplied by W^r (`_project_values`) give W^r r_t. With
        ``documents`` (a `windows.Documents`), a window position of another document than
        its step is what a fresh stream has there: a zero key and value, and invalid.
        Returns ``(r [B, T, width of the values], alpha [B, T, L])``.
        """
        L = self.window
        window_keys = windows.offset_windows(key_stream, L)
        valid = None if self.pad == "zeros" else windows.offset_windows(valid_stream, L)
        if documents is not None:
            window_keys = documents.keep(documents.same, window_keys)
            if valid is not None:
                valid = documents.keep(documents.same, valid)
        alpha = self._window_alpha(window_keys, query, valid)
        weights = ops.cast(alpha, step_values.dtype)
        if documents is not None:
            # A zero value adds nothing: drop the other documents' values from the sum.
            weights = documents.keep(documents.same, weights)
        return windows.window_weighted_sum(weights, carried_values, step_values), alpha

    def _project_values(self, values):
        """Whether the sequence form multiplies the values by W^r before the weighted sum.

        Eq. (5)'s ``W^r r_t`` equals ``sum_i alpha_ti (W^r y_i)``, so the product can run once
        over the values, beside eq. (2)'s projection of the same stream, instead of
        over the contexts. It is chosen when it does not widen the weighted sum (the output is
        at most as wide as the values).
        """
        return self.output_units <= values.shape[-1]

    def _combine(self, projected_context, predict):
        """Eq. (5): h*_t = tanh(W^r r_t + W^x p_t), from ``projected_context`` = W^r r_t."""
        combined = projected_context + ops.matmul(predict, self.predict_kernel)
        if self.use_bias:
            combined = combined + self.output_bias
        return ops.tanh(combined)
