"""Attention over a sliding window of previous outputs (Daniluk et al. 2017, §2, eqs 1-12).

At step t the layer attends over the previous L keys, never the current one (eqs 7-9 and 12,
written out in `SlidingWindowAttention`); (k_t, v_t, p_t) is the `KeyValuePredictSplit` of the
RNN output h_t. Two forms compute the same thing: `SlidingWindowAttention` on a whole output
sequence at once (the fast training path) and `SlidingWindowAttentionCell`, which wraps any
Keras RNN cell for `keras.layers.RNN`. Both keep the window as a 2-D memory ``[keys (L*d_k) |
values (L*d_v) | validity (L)]`` (values are omitted in `"attention"` mode, where they equal the
keys), which is the cell's extra state and the parallel layer's carried memory, so the two forms
can hand memory to each other.
"""

import keras
from keras import ops

from tf_memlayers._validation import check_bool, check_last_dim, check_rank
from tf_memlayers.layers.memory_cell_wrapper import MemoryCellWrapper
from tf_memlayers.layers.window_attention.key_value_predict_split import split_sizes
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer
from tf_memlayers.layers.window_attention.window_attention_mechanism import WindowAttentionMechanism
from tf_memlayers.ops import windows
from tf_memlayers.ops.precision import softmax_dtype


@keras.saving.register_keras_serializable(package="tf_memlayers")
class SlidingWindowAttention(WindowAttentionMechanism, MemorySequenceLayer):
    r"""Sliding-window attention over a whole output sequence, all steps at once.

    At step t the layer attends over the previous L keys (never the current one):

    .. math::

        \begin{aligned}
        M_t &= \tanh\left(W^Y [k_{t-L} \cdots k_{t-1}] + (W^h k_t)\,\mathbf{1}^T\right)
            && \text{(7)} \\
        \alpha_t &= \operatorname{softmax}(w^T M_t) && \text{(8)} \\
        r_t &= [v_{t-L} \cdots v_{t-1}]\,\alpha_t^T && \text{(9)} \\
        h^*_t &= \tanh(W^r r_t + W^x p_t) && \text{(12)}
        \end{aligned}

    where (k_t, v_t, p_t) is the `KeyValuePredictSplit` of the RNN output h_t.

    The parallel form of Daniluk et al. (2017) eqs (1)-(12): applied to the output sequence of
    any RNN layer (e.g. the fused `keras.layers.LSTM`), it computes every step in O(T·L) time
    and O(T·(width + L·attention_units)) memory (the windows of the values are never built).
    The window never feeds back into the RNN, so this equals the cell form
    `SlidingWindowAttentionCell` (a test proves it) while running much faster (see the speed
    tables on the documentation's results page).

    Weights: `memory_kernel` (:math:`W^Y`), `query_kernel` (:math:`W^h`), `score_vector`
    (:math:`w`), `context_kernel` (:math:`W^r`), `predict_kernel` (:math:`W^x`), and with
    `use_bias` `memory_bias`, `output_bias`.

    Another score: the logits :math:`w^T M_t` come from one method, ``scores(window_keys,
    query)`` (the window's keys projected by :math:`W^Y`, ``[..., L, a]``, and the query
    projected by :math:`W^h`, ``[..., a]``, to logits ``[..., L]``), whose weights
    ``build_scores(attention_units)`` creates. A subclass that overrides them (a scaled dot
    product, say, with no weight) changes the attention of this layer, of
    `SlidingWindowAttentionCell` given the same methods, and of their step models; registered
    (`keras.saving.register_keras_serializable`), it saves and loads. The window attention
    page shows one.

    Args:
        window: Positive integer, the window length L: the number of previous outputs
            attended over.
        mode: String, how the input is split (`KeyValuePredictSplit`): `"attention"` (key =
            value = predict = h_t), `"key_value"` (h_t = [k; v], predict = v) or
            `"key_value_predict"` (h_t = [k; v; p]). Default: `"attention"`.
        sizes: Optional tuple of positive integers, explicit piece sizes (1, 2 or 3 of them
            by ``mode``, key first) that sum to the input width. Default: `None` (equal
            pieces, which must divide the width).
        attention_units: Optional positive integer, the width of the attention hidden layer
            M_t (the columns of W^Y and W^h). Default: `None` (the key size).
        units: Optional positive integer, dimensionality of the output h*_t. Default: `None`
            (the value size).
        pad: String, the treatment of window positions before the start of the stream:
            `"mask"` (they take no probability mass, and r_t = 0 when there is nothing to
            attend) or `"zeros"` (they are zero vectors that take part in the softmax, the
            literal reading). Default: `"mask"`.
        use_bias: Boolean, (default `False`), whether to add a bias vector inside M_t
            (`memory_bias`) and inside h*_t (`output_bias`); the paper has none.
        kernel_initializer: Initializer for the kernels W^Y, W^h, w, W^r and W^x
            (`memory_kernel`, `query_kernel`, `score_vector`, `context_kernel`,
            `predict_kernel`). Default: `"glorot_uniform"`.
        bias_initializer: Initializer for the bias vectors `memory_bias` and `output_bias`
            (used with ``use_bias=True``). Default: `"zeros"`.
        return_attention_scores: Boolean, (default `False`), whether to also return the
            window weights alpha, ``[batch, time, window]`` (oldest position first; float32
            under a mixed precision policy, like the softmax that makes them).
        return_memory: Boolean, (default `False`), whether to also return the memory after
            the sequence, ``[batch, memory_size]``.
        stateful: Boolean, (default `False`), whether to keep the memory in a non-trainable
            variable and carry it to the next call (truncated BPTT over consecutive segments
            of the same streams; needs a fixed batch size). `reset_state()` clears it, e.g.
            at document boundaries. A ``.keras`` file holds it (Keras saves no RNN's states:
            reset a model loaded in the middle of a stream); a layer of another batch size,
            or not stateful, loads the weights of such a file beside its own memory.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 3D tensor, with shape ``[batch, time, width]``: the RNN outputs.
        mask: Optional boolean tensor ``[batch, time]``; padded steps are never read
            (non-finite padding is harmless), never written to the memory, never attended,
            and their outputs (and attention scores) are exactly zero. Default: `None`.
        initial_memory: Optional 2D tensor ``[batch, memory_size]``, the memory carried from
            an earlier segment (e.g. the returned memory of the previous call); no gradient
            flows into it. Default: `None` (the stored memory when stateful, else zeros).
        inputs_mask: Where the call has other tensors (``initial_memory``, ``reset``), Keras
            passes the mask of ``inputs`` (from ``Embedding(mask_zero=True)``, say) here
            rather than as ``mask``; used where ``mask`` is `None`. Default: `None`.
        training: Unused (accepted for API symmetry). Default: `None`.
        reset: Optional bool tensor ``[batch, time]``, true where a new document starts: from
            that step on, the row attends only over its document, exactly as if the document
            were a sequence of its own started from zero memory (the carried memory is
            forgotten too); the returned memory holds only the last document. Resets at
            masked steps are ignored. Default: `None`.

    Inputs of another width than the layer was built for, a mask that is not
    ``[batch, time]``, and an ``initial_memory`` (or, with ``stateful=True``, a batch) of
    another size raise a `ValueError` naming the argument and the shapes. Sequences without
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
    >>> tuple(model(np.zeros((2, 7), "int32")).shape)
    (2, 7, 100)
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
        """The memory width for inputs of width ``width`` (built or not).

        Args:
            width: Positive integer, the width of the RNN outputs the layer reads.

        Returns:
            Integer, ``window * (d_k + 1)`` in `"attention"` mode, else
            ``window * (d_k + d_v + 1)``.
        """
        return self._sizes_for(width)[1]

    def call(
        self, inputs, mask=None, initial_memory=None, training=None, reset=None, inputs_mask=None
    ):
        mask = inputs_mask if mask is None else mask
        self.check_call_inputs(inputs, mask, initial_memory, reset)
        inputs, mask = self.masked_inputs(inputs, mask)
        memory_keys, memory_values, memory_valid = self._unpack_memory(
            self.incoming_memory(inputs, initial_memory)
        )
        compaction = windows.Compaction(mask)
        documents = self.documents(reset, compaction, self.window)
        key, value, predict = self._split(compaction.compact(inputs))
        real = ops.ones(ops.shape(inputs)[:2], memory_valid.dtype)

        def stream(carried, steps):
            return ops.concatenate([carried, steps], axis=1)

        # A call that starts from the zero memory needs no product of it: zeros map to zeros.
        fresh = self.starts_from_zeros(initial_memory)

        def project(carried, kernel):
            if fresh:
                shape = (ops.shape(carried)[0], carried.shape[1], kernel.shape[-1])
                return ops.zeros(shape, carried.dtype)
            return ops.matmul(carried, kernel)

        def projected_stream(carried, steps, kernel):
            # Each part is projected before they are joined: no copy of the wide stream.
            return stream(project(carried, kernel), ops.matmul(steps, kernel))

        valid_stream = stream(memory_valid, real)
        project_values = self._project_values(value)
        values = (memory_values, value)
        if project_values:
            values = (
                project(memory_values, self.context_kernel),
                ops.matmul(value, self.context_kernel),
            )
        context, alpha = self._attend_stream(
            projected_stream(memory_keys, key, self.memory_kernel),
            ops.matmul(key, self.query_kernel),
            *values,
            valid_stream,
            documents,
        )
        if not project_values:
            context = ops.matmul(context, self.context_kernel)
        outputs = compaction.restore(self._combine(context, predict))
        alpha = compaction.restore(alpha)

        new_memory = None
        if self.return_memory or self.stateful:
            last = [
                compaction.last(items, self.window)
                for items in (stream(memory_keys, key), stream(memory_values, value), valid_stream)
            ]
            if documents is not None:
                last = [documents.keep(documents.last_same, items) for items in last]
            new_memory = self.keep_memory(self._pack_memory(*last))
        results = [outputs]
        if self.return_attention_scores:
            results.append(alpha)
        if self.return_memory:
            results.append(new_memory)
        return results[0] if len(results) == 1 else tuple(results)

    def compute_output_shape(self, input_shape):
        batch, steps, _ = check_rank("inputs", input_shape, 3, type(self).__name__)
        width = check_last_dim("inputs", input_shape, type(self).__name__)
        units, memory_size = self._sizes_for(width)
        shapes = [(batch, steps, units)]
        if self.return_attention_scores:
            shapes.append((batch, steps, self.window))
        if self.return_memory:
            shapes.append((batch, memory_size))
        return shapes[0] if len(shapes) == 1 else tuple(shapes)

    def compute_output_spec(
        self, inputs, mask=None, initial_memory=None, training=None, reset=None, inputs_mask=None
    ):
        mask = inputs_mask if mask is None else mask
        self.check_call_inputs(inputs, mask, initial_memory, reset)
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
class SlidingWindowAttentionCell(WindowAttentionMechanism, MemoryCellWrapper):
    """Sliding-window attention as an RNN cell wrapping any Keras RNN cell.

    At each step the wrapped ``cell`` produces h_t; the cell splits it into (k_t, v_t, p_t),
    attends over the last L keys/values kept in its state (Daniluk et al. 2017, eqs 1-12),
    outputs h*_t and appends k_t, v_t to the window. The state is the wrapped cell's states
    followed by one 2-D memory ``[keys | values | validity]`` whose zero initial value means
    "nothing attended yet", so `stateful=True`, `reset_state()`, `return_state`,
    `go_backwards`, `keras.layers.Bidirectional` and step-by-step generation work as with
    any cell. At a masked step `keras.layers.RNN` copies the state forward: the step is never
    written to the window. (On JAX, give that loop ``zero_output_for_mask=True`` with a mask,
    or use `ResettableRNN`: the backends page says why.)

    The same weights as `SlidingWindowAttention`, which computes the same outputs in parallel,
    and the same score: a subclass of either that overrides ``scores`` and ``build_scores``
    scores the window its own way (the window attention page shows one).

    Args:
        cell: A Keras RNN cell (e.g. `keras.layers.LSTMCell`) whose output is h_t.
        window: Positive integer, the window length L: the number of previous outputs
            attended over.
        mode: String, how the input is split (`KeyValuePredictSplit`): `"attention"` (key =
            value = predict = h_t), `"key_value"` (h_t = [k; v], predict = v) or
            `"key_value_predict"` (h_t = [k; v; p]). Default: `"attention"`.
        sizes: Optional tuple of positive integers, explicit piece sizes (1, 2 or 3 of them
            by ``mode``, key first) that sum to the input width. Default: `None` (equal
            pieces, which must divide the width).
        attention_units: Optional positive integer, the width of the attention hidden layer
            M_t (the columns of W^Y and W^h). Default: `None` (the key size).
        units: Optional positive integer, dimensionality of the output h*_t. Default: `None`
            (the value size).
        pad: String, the treatment of window positions before the start of the stream:
            `"mask"` (they take no probability mass, and r_t = 0 when there is nothing to
            attend) or `"zeros"` (they are zero vectors that take part in the softmax, the
            literal reading). Default: `"mask"`.
        use_bias: Boolean, (default `False`), whether to add a bias vector inside M_t
            (`memory_bias`) and inside h*_t (`output_bias`); the paper has none.
        kernel_initializer: Initializer for the kernels W^Y, W^h, w, W^r and W^x
            (`memory_kernel`, `query_kernel`, `score_vector`, `context_kernel`,
            `predict_kernel`). Default: `"glorot_uniform"`.
        bias_initializer: Initializer for the bias vectors `memory_bias` and `output_bias`
            (used with ``use_bias=True``). Default: `"zeros"`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor, with shape ``[batch, features]``: the input of the wrapped
            cell at one step.
        states: List of tensors, the wrapped cell's states followed by the window memory
            ``[batch, memory_size]``.
        training: Python boolean, passed to the wrapped cell. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows where a new document
            starts at this step: their states (the wrapped cell's and the window) are zeroed
            first, as at the start of a sequence. `ResettableRNN` passes it at every step.
            Default: `None`.
        cache: Optional list of tensors, the loop cache (`loop_cache`): the window's keys
            already projected by W^Y. With it the step projects only its new key and
            returns ``(output, new_states, new_cache)``. `ResettableRNN` passes it; a list
            of another form is a `ValueError`. Default: `None` (the step projects the
            window's keys itself).

    Returns:
        Tuple ``(output, new_states)``: the output h*_t ``[batch, units]`` and the list of new
        states, the wrapped cell's followed by the window memory with k_t and v_t appended
        (the oldest position dropped). With ``cache``, ``(output, new_states, new_cache)``,
        where ``new_cache`` is the window's keys after the step projected by W^Y (what
        `loop_cache` returns for ``new_states``).

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import SlidingWindowAttentionCell
    >>> cell = SlidingWindowAttentionCell(keras.layers.LSTMCell(32), window=5)
    >>> rnn = keras.layers.RNN(cell, return_sequences=True)
    >>> tuple(rnn(np.zeros((2, 7, 8), "float32")).shape)
    (2, 7, 32)
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

    def loop_cache(self, states):
        """The window's keys projected by W^Y, ``[batch, window * attention width]``.

        Eq. (7) needs W^Y k_i for the L keys of the window at every step. Carried through a
        loop (`ResettableRNN`), each step projects only its new key instead of all L.

        Args:
            states: List of tensors, the wrapped cell's states followed by the memory.

        Returns:
            A list with one tensor ``[batch, window * attention width]``.
        """
        keys, _, _ = self._unpack_memory(states[-1])
        # One 2-D product over every window position: a 3-D one is TensorFlow's tensordot,
        # whose gradient XLA cannot compile inside a loop traced for a free batch size.
        projected = ops.matmul(ops.reshape(keys, (-1, keys.shape[-1])), self.memory_kernel)
        return [ops.reshape(projected, (-1, self.window * self.memory_kernel.shape[-1]))]

    def call(self, inputs, states, training=None, reset=None, cache=None):
        cached = cache is not None
        if cached:
            cache = self._checked_cache(cache)
        h, new_cell_states, memory, (projected,) = self.run_cell(
            inputs, states, training, reset, cache
        )

        key, value, predict = self._split(h)
        memory_keys, memory_values, memory_valid = self._unpack_memory(memory)
        window_keys = ops.reshape(projected, (-1, self.window, self.memory_kernel.shape[-1]))
        context, _ = self._attend(
            window_keys, ops.matmul(key, self.query_kernel), memory_values, memory_valid
        )
        output = self._combine(ops.matmul(context, self.context_kernel), predict)
        new_memory = self._pack_memory(
            ops.concatenate([memory_keys[:, 1:], key[:, None]], axis=1),
            ops.concatenate([memory_values[:, 1:], value[:, None]], axis=1),
            ops.concatenate([memory_valid[:, 1:], ops.ones_like(memory_valid[:, :1])], axis=1),
        )
        new_states = [*new_cell_states, new_memory]
        if not cached:
            return output, new_states
        new_key = ops.matmul(key, self.memory_kernel)[:, None]
        new_projected = ops.concatenate([window_keys[:, 1:], new_key], axis=1)
        return output, new_states, [ops.reshape(new_projected, (-1, projected.shape[-1]))]

    def _checked_cache(self, cache):
        """``cache`` as a list, if it is what `loop_cache` returns: one tensor ``[batch,
        window * attention width]``; else a `ValueError` naming what was given."""
        width = self.window * self.memory_kernel.shape[-1]
        cache = list(cache) if isinstance(cache, (list, tuple)) else [cache]
        shapes = [tuple(getattr(item, "shape", ())) for item in cache]
        if len(cache) != 1 or len(shapes[0]) != 2 or shapes[0][-1] not in (None, width):
            raise ValueError(
                f"{type(self).__name__}: `cache` must be what `loop_cache` returns, a list of "
                f"one tensor [batch, {width}] (window {self.window} × attention width "
                f"{self.memory_kernel.shape[-1]}), got shapes {shapes}."
            )
        return cache

    def get_config(self):
        config = super().get_config()
        config.update(self._attention_config())
        return config
