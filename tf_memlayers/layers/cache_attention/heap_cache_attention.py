"""Attention over a cache of earlier training examples kept as a min-heap (Gaffney)."""

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_choice,
    check_int,
    check_keras_object,
    check_last_dim,
    check_rank,
    check_width,
)
from tf_memlayers.ops.heap import heap_write, topk_write
from tf_memlayers.ops.precision import floating, softmax_dtype

POLICIES = ("heap", "topk")
QUERIES = ("none", "additive", "dot")

_WRITES = {"heap": heap_write, "topk": topk_write}
# The compiled writes, by policy, backend and the shapes of the cache and its kernel: shared by
# the layers of the process, since each compiled program stays in XLA's cache while it runs.
_COMPILED_WRITES = {}


@keras.saving.register_keras_serializable(package="tf_memlayers")
class HeapCacheAttention(keras.layers.Layer):
    r"""Adds an attention read over a cache of earlier examples' states to each state.

    The cache attention of Gaffney, *Cache Attention for Recurrent Language Modeling* (§3.3).
    The cache ``C`` holds ``cache_size`` vectors of the input width ``H`` (a row of zeros is an
    empty slot). Read:

    .. math::

        \begin{aligned}
        a_i &= v_c^T \tanh(W_c^T C_i)
            && \text{(query="none": one read for every example)} \\
        a_{bi} &= v_c^T \tanh(W_c^T C_i + W_q^T h_b)
            && \text{(query="additive")} \\
        a_{bi} &= (W_q^T h_b) \cdot (W_q^T C_i) / \sqrt{A}
            && \text{(query="dot")} \\
        \alpha &= \operatorname{softmax}_i(a) \\
        \mathit{out}_b &= h_b + z \odot \sum_i \alpha_i C_i
        \end{aligned}

    Gradients reach ``W_c``, ``v_c``, ``z`` (and ``W_q``), never the cache. The ``"dot"`` read
    projects the example's state and the cached states with the same ``W_q``, so that a cached
    state equal to the example's own scores highest from the start: the read that can find one
    specific earlier example. Whatever the read, the heap's order score stays the paper's
    :math:`v_c^T \tanh(W_c^T C_i)`; with ``query="dot"`` the read does not use ``W_c, v_c``, so
    they keep their initial values (non-trainable weights) and the heap keeps the states that
    score highest under that fixed score.

    The cache is written only by `insert`, which a training step calls after the optimizer
    update with the examples' states (`tf_memlayers.models.HeapCacheModel` does this in
    `fit`); calling the layer never writes, in training or inference. Each candidate is scored
    with the current ``W_c, v_c`` (``-inf`` for an all-zero vector, and for a vector with a NaN
    or infinite entry, which therefore never enters the cache):

    * ``policy="heap"``: the reference implementation's procedure, candidate by candidate in
      batch order: a candidate scoring strictly above the root (slot 0) replaces it and sifts
      down the binary min-heap. The heap is never re-ordered as a whole, so as the weights
      change its order goes stale, as in the original. Every score is computed in the cache's
      dtype (the original scored the candidate in float32 and the cache in float64, so a state
      offered again could enter twice; here it ties with itself and does not).
    * ``policy="topk"``: after the write the cache holds the ``cache_size`` best vectors of the
      cache and the batch under the current weights, in ascending score order.

    Under a `tf.distribute` strategy each replica keeps its own copy of the cache; `insert`
    gathers the candidates of all replicas in replica order and every replica applies the same
    write, so the copies stay identical.

    Args:
        cache_size: Positive integer, the number ``K`` of cached vectors.
        attention_units: Positive integer, the attention width ``A`` (the number of columns
            of ``W_c`` and ``W_q``).
        policy: String, the write rule above: `"heap"` or `"topk"`. Default: `"heap"`.
        query: String, how the read scores the slots: `"none"` (the paper's
            query-independent read), `"additive"` (the score also depends on the example's
            own state through ``W_q``) or `"dot"` (scaled dot product of the example's and
            each cached state, both projected by ``W_q``). Default: `"none"`.
        mask_empty: Boolean, (default `True`), whether empty slots take no attention weight.
            If `False` they take part in the softmax with the logit of a zero vector, as in
            the reference implementation.
        kernel_initializer: Initializer for the ``cache_kernel`` weights matrix ``W_c``
            (``[H, A]``). Default: `"glorot_uniform"` (as in the reference implementation).
        score_initializer: Initializer for the ``cache_score`` vector ``v_c`` (``[A]``).
            Default: `"glorot_uniform"`.
        gate_initializer: Initializer for the ``cache_gate`` vector ``z`` (``[H]``).
            Default: `"glorot_uniform"`.
        query_initializer: Initializer for the ``query_kernel`` weights matrix ``W_q``
            (``[H, A]``; created only when ``query`` is not `"none"`). Default:
            `"glorot_uniform"`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor, with shape ``[batch, H]``: the examples' states.
        training: Unused (the read is the same in training and inference). Default: `None`.
        return_attention_scores: Boolean, (default `False`), whether to also return the
            attention weights ``alpha`` (``[K]`` with ``query="none"``, ``[batch, K]`` with
            ``query="additive"`` or `"dot"`).

    Returns:
        ``out`` of shape ``[batch, H]``, or the tuple ``(out, alpha)`` when
        ``return_attention_scores=True``.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import HeapCacheAttention
    >>> layer = HeapCacheAttention(cache_size=4, attention_units=3)
    >>> states = np.random.default_rng(0).normal(size=(2, 5)).astype("float32")
    >>> tuple(layer(states).shape)
    (2, 5)
    >>> keras.ops.convert_to_numpy(layer.insert(states)).tolist()
    [True, True]
    >>> int(layer.fill_count())
    2
    """

    def __init__(
        self,
        cache_size,
        attention_units,
        policy="heap",
        query="none",
        mask_empty=True,
        kernel_initializer="glorot_uniform",
        score_initializer="glorot_uniform",
        gate_initializer="glorot_uniform",
        query_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = "HeapCacheAttention"
        self.cache_size = check_int("cache_size", cache_size, 1, owner)
        self.attention_units = check_int("attention_units", attention_units, 1, owner)
        self.policy = check_choice("policy", policy, POLICIES, owner)
        self.query = check_choice("query", query, QUERIES, owner)
        self.mask_empty = check_bool("mask_empty", mask_empty, owner)
        self.kernel_initializer = check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
        self.score_initializer = check_keras_object("score_initializer", score_initializer, owner)
        self.gate_initializer = check_keras_object("gate_initializer", gate_initializer, owner)
        self.query_initializer = check_keras_object("query_initializer", query_initializer, owner)

    def build(self, input_shape):
        check_rank("inputs", input_shape, 2, owner="HeapCacheAttention")
        width = check_last_dim("inputs", input_shape, owner="HeapCacheAttention")
        # Each replica updates its own copy (aggregation "none"), with identical writes.
        self.cache = self.add_weight(
            name="cache",
            shape=(self.cache_size, width),
            initializer="zeros",
            trainable=False,
            autocast=False,
            aggregation="none",
        )
        # The dot read does not use the order score's weights, so nothing would train them.
        order_trainable = self.query != "dot"
        self.cache_kernel = self.add_weight(
            name="cache_kernel",
            shape=(width, self.attention_units),
            initializer=self.kernel_initializer,
            trainable=order_trainable,
        )
        self.cache_score = self.add_weight(
            name="cache_score",
            shape=(self.attention_units,),
            initializer=self.score_initializer,
            trainable=order_trainable,
        )
        self.cache_gate = self.add_weight(
            name="cache_gate", shape=(width,), initializer=self.gate_initializer
        )
        if self.query != "none":
            self.query_kernel = self.add_weight(
                name="query_kernel",
                shape=(width, self.attention_units),
                initializer=self.query_initializer,
            )

    def _require_built(self, what):
        if not self.built:
            raise ValueError(
                f"HeapCacheAttention: call the layer (or build it) before `{what}`, so that the "
                "cache width is known."
            )

    @property
    def width(self):
        """The width ``H`` of the cached vectors (known once built)."""
        self._require_built("width")
        return int(self.cache.shape[-1])

    def _read_weights(self, cache, states, dtype):
        """Attention weights over the slots: ``[K]`` or ``[batch, K]``."""
        if self.query == "dot":
            logits = self._dot_logits(cache, states, dtype)
        else:
            logits = self._additive_logits(cache, states, dtype)
        if not self.mask_empty:
            return ops.softmax(logits, axis=-1)
        filled = ops.any(ops.not_equal(cache, 0), axis=-1)
        logits = ops.where(filled, logits, ops.full_like(logits, -1e9))
        # An empty cache reads zeros rather than a uniform mix of empty slots.
        return ops.softmax(logits, axis=-1) * ops.cast(filled, dtype)

    def _additive_logits(self, cache, states, dtype):
        keys = ops.matmul(cache, ops.cast(self.cache_kernel, dtype))  # [K, A]
        if self.query == "additive":
            queries = ops.matmul(ops.cast(states, dtype), ops.cast(self.query_kernel, dtype))
            keys = keys[None, :, :] + queries[:, None, :]  # [B, K, A]
        return ops.matmul(ops.tanh(keys), ops.cast(self.cache_score, dtype)[:, None])[..., 0]

    def _dot_logits(self, cache, states, dtype):
        projection = ops.cast(self.query_kernel, dtype)
        queries = ops.matmul(ops.cast(states, dtype), projection)  # [B, A]
        keys = ops.matmul(cache, projection)  # [K, A]
        # A Python float scales in the logits' dtype; a tensor made of it would be float32.
        return ops.matmul(queries, ops.transpose(keys)) * (1.0 / self.attention_units**0.5)

    def _check_inputs(self, shape):
        """Inputs are ``[batch, H]`` with the cache width ``H`` once built."""
        shape = check_rank("inputs", shape, 2, owner="HeapCacheAttention")
        if self.built:
            check_width("inputs", shape, self.width, "the cache width", owner="HeapCacheAttention")

    def call(self, inputs, training=None, return_attention_scores=False):
        del training
        inputs = floating(inputs, self.compute_dtype)
        self._check_inputs(inputs.shape)
        dtype = softmax_dtype(self.compute_dtype)
        cache = ops.stop_gradient(ops.cast(self.cache, dtype))
        weights = self._read_weights(cache, inputs, dtype)
        read = ops.matmul(weights, cache)  # [H] or [B, H]
        outputs = inputs + ops.cast(self.cache_gate, inputs.dtype) * ops.cast(read, inputs.dtype)
        if return_attention_scores:
            return outputs, weights
        return outputs

    def attention_weights(self, states=None):
        """The read's attention weights over the slots, computed now.

        Args:
            states: Optional 2D tensor ``[batch, H]`` of the examples' states; required with
                ``query="additive"`` or `"dot"`, ignored with `"none"`. Default: `None`.

        Returns:
            A tensor of shape ``[K]`` (``query="none"``) or ``[batch, K]``.
        """
        self._require_built("attention_weights")
        if self.query != "none" and states is None:
            raise ValueError(f"HeapCacheAttention: `states` is required with query={self.query!r}.")
        dtype = softmax_dtype(self.compute_dtype)
        return self._read_weights(ops.cast(self.cache, dtype), states, dtype)

    def fill_count(self):
        """Number of occupied (non-zero) slots.

        Returns:
            A scalar int32 tensor.
        """
        self._require_built("fill_count")
        return ops.sum(ops.cast(ops.any(ops.not_equal(self.cache, 0), axis=-1), "int32"))

    def reset_cache(self):
        """Empties the cache."""
        self._require_built("reset_cache")
        self.cache.assign(ops.zeros(self.cache.shape, self.cache.dtype))

    def insert(self, candidates):
        """Offers ``candidates`` (``[batch, H]``) to the cache with the current weights.

        Every vector is scored once with the current weights, the ``policy`` rule decides from
        the scores, and the cache is rewritten once. On TensorFlow the
        write is compiled with XLA and works eagerly, in `tf.function` and inside a model
        compiled with ``jit_compile=True``; inside a replica context of a multi-replica strategy
        the candidates of all replicas are gathered in replica order first, so that every
        replica writes the same cache. On another backend the same `keras.ops` code runs as is.
        Called eagerly, the write is compiled once per shape and dtype of the cache, its
        kernel and the batch (as XLA and ``jax.jit`` compile per shape), for all the layers of
        the process: a new shape waits for one compilation. Inside a step of your own compiled
        with ``jax.jit``, call it in a `keras.StatelessScope` that maps the cache to the value
        the step carries, and read the written cache back from the scope (docs/heap_cache.rst).

        A candidate with a NaN or infinite entry (a diverged step's state) is skipped: it
        scores ``-inf``, like an empty slot, never enters the cache under either policy and
        reports False, and the other candidates are written as if it had not been offered. It
        is skipped rather than refused with an error because the write runs compiled (XLA,
        `jax.jit`), where a runtime assertion cannot stop the step; the read never sees it.

        Args:
            candidates: A 2D tensor or array ``[batch, H]``, the states offered to the cache
                (typically the batch's states after the optimizer update), written by the
                ``policy`` rule.

        Returns:
            ``[batch]`` bool tensor (``[replicas * batch]`` when gathered): which candidates
            entered the cache. With ``policy="heap"`` that is at their turn: a candidate can
            enter and be evicted by a later one of the same batch; with ``policy="topk"``,
            which candidates the cache holds after the write. An empty batch leaves the cache
            as it is.

        Example:

        >>> import keras
        >>> import numpy as np
        >>> from tf_memlayers import HeapCacheAttention
        >>> layer = HeapCacheAttention(cache_size=4, attention_units=3, policy="topk")
        >>> states = np.random.default_rng(0).normal(size=(3, 5)).astype("float32")
        >>> states[1, 2] = np.nan
        >>> layer.build(states.shape)
        >>> keras.ops.convert_to_numpy(layer.insert(states)).tolist()  # the NaN state is skipped
        [True, False, True]
        >>> bool(np.isfinite(layer.cache.numpy()).all())
        True
        """
        self._require_built("insert")
        candidates = ops.convert_to_tensor(candidates)
        self._check_candidates(candidates.shape)
        candidates = ops.cast(candidates, self.cache.dtype)
        variables = [self.cache.value, self.cache_kernel.value, self.cache_score.value]
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            # Their values, not the variables: the write (a `tf.function` shared by the
            # layers) would capture the first caller's distributed variables and read them.
            variables = [tf.convert_to_tensor(v) for v in variables]
            context = tf.distribute.get_replica_context()
            if context is not None and context.num_replicas_in_sync > 1:
                candidates = context.all_gather(candidates, axis=0)
        cache, kernel, score = variables
        dtype = cache.dtype
        cache, entered = self._write()(
            cache, candidates, ops.cast(kernel, dtype), ops.cast(score, dtype)
        )
        self.cache.assign(cache)
        return entered

    def _write(self):
        """The ``policy`` write, compiled (with XLA on TensorFlow, one loop of scalar steps;
        with `jax.jit` on JAX) once per shape of the cache and its kernel and shared by the
        layers of that shape; as is on other backends."""
        backend = keras.backend.backend()
        key = (self.policy, backend, tuple(self.cache.shape), tuple(self.cache_kernel.shape))
        if key not in _COMPILED_WRITES:
            write = _WRITES[self.policy]
            if backend == "tensorflow":
                import tensorflow as tf

                # Without AutoGraph: the write's loops are Keras's `while_loop`/`fori_loop`.
                write = tf.function(write, jit_compile=True, reduce_retracing=True, autograph=False)
            elif backend == "jax":
                import jax

                write = jax.jit(write)
            _COMPILED_WRITES[key] = write
        return _COMPILED_WRITES[key]

    def _check_candidates(self, shape):
        check_rank("candidates", shape, 2, owner="HeapCacheAttention")
        if shape[-1] is not None and shape[-1] != self.width:
            raise ValueError(
                f"HeapCacheAttention: `candidates` must have width {self.width} (the cache "
                f"width), got shape {tuple(shape)}."
            )

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_output_spec(self, inputs, training=None, return_attention_scores=False):
        self._check_inputs(inputs.shape)
        outputs = keras.KerasTensor(tuple(inputs.shape), self.compute_dtype)
        if not return_attention_scores:
            return outputs
        slots = (self.cache_size,) if self.query == "none" else (inputs.shape[0], self.cache_size)
        return outputs, keras.KerasTensor(slots, softmax_dtype(self.compute_dtype))

    def get_config(self):
        config = super().get_config()
        serialize = keras.initializers.serialize
        config.update(
            cache_size=self.cache_size,
            attention_units=self.attention_units,
            policy=self.policy,
            query=self.query,
            mask_empty=self.mask_empty,
            kernel_initializer=serialize(self.kernel_initializer),
            score_initializer=serialize(self.score_initializer),
            gate_initializer=serialize(self.gate_initializer),
            query_initializer=serialize(self.query_initializer),
        )
        return config
