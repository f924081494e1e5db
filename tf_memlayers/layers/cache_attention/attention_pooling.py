"""Self-attentive pooling of a sequence into one vector (Gaffney, §3.2)."""

import warnings

import keras
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_int,
    check_keras_object,
    check_last_dim,
    check_mask_shape,
    check_rank,
    check_width,
    renamed_arguments,
)
from tf_memlayers.ops.precision import floating, softmax_dtype


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionPooling(keras.layers.Layer):
    r"""Pools ``[batch, time, features]`` to ``[batch, features]`` with additive self-attention.

    The self-attentive pooling of Gaffney, *Cache Attention for Recurrent Language Modeling*,
    §3.2, with no query term and no bias:

    .. math::

        \begin{aligned}
        a_t &= v^T \tanh(W^T h_t) \\
        \alpha &= \operatorname{softmax}_t(a) \\
        r &= \sum_t \alpha_t h_t
        \end{aligned}

    Masked time steps are never read and get no weight (non-finite padding is harmless); a
    sequence with every step masked, or without steps, pools to zeros. Inputs of another
    width than the layer was built for, and a mask that is not ``[batch, time]``, raise a
    `ValueError` naming the argument and the shapes.

    Args:
        attention_units: Positive integer, the attention width ``A`` (the number of columns of
            ``W``), as in the other attention layers.
        kernel_initializer: Initializer for the ``kernel`` weights matrix ``W``
            (``[features, attention_units]``). Default: `"glorot_uniform"`.
        score_initializer: Initializer for the ``score`` vector ``v`` (``[attention_units]``).
            Default: `"glorot_uniform"`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``. ``units``,
            the name of ``attention_units`` in 0.2, is taken with a `DeprecationWarning`.

    Call arguments:
        inputs: A 3D tensor, with shape ``[batch, time, features]``.
        mask: Optional boolean tensor of shape ``[batch, time]`` (propagated by Keras, e.g.
            from a `keras.layers.Embedding` with ``mask_zero=True``). Default: `None`
            (every step read).
        return_attention_scores: Boolean, (default `False`), whether to also return the
            attention weights ``alpha`` (``[batch, time]``; float32 under a mixed precision
            policy).

    Returns:
        The pooled tensor ``r`` of shape ``[batch, features]``, or the tuple
        ``(r, alpha)`` when ``return_attention_scores=True``.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import AttentionPooling
    >>> pool = AttentionPooling(attention_units=8)
    >>> tuple(pool(np.ones((2, 5, 4), "float32")).shape)
    (2, 4)
    """

    @renamed_arguments("AttentionPooling", "0.4", units="attention_units")
    def __init__(
        self,
        attention_units,
        kernel_initializer="glorot_uniform",
        score_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.attention_units = check_int(
            "attention_units", attention_units, 1, owner="AttentionPooling"
        )
        self.kernel_initializer = check_keras_object(
            "kernel_initializer", kernel_initializer, "AttentionPooling"
        )
        self.score_initializer = check_keras_object(
            "score_initializer", score_initializer, "AttentionPooling"
        )
        self.supports_masking = True
        self.features = None

    def build(self, input_shape):
        check_rank("inputs", input_shape, 3, owner="AttentionPooling")
        features = check_last_dim("inputs", input_shape, owner="AttentionPooling")
        self.features = features
        self.kernel = self.add_weight(
            name="kernel",
            shape=(features, self.attention_units),
            initializer=self.kernel_initializer,
        )
        self.score = self.add_weight(
            name="score", shape=(self.attention_units,), initializer=self.score_initializer
        )

    def _check_call_inputs(self, inputs, mask):
        shape = check_rank("inputs", inputs.shape, 3, owner="AttentionPooling")
        if self.features is not None:
            check_width(
                "inputs",
                shape,
                self.features,
                "the width the layer was built for",
                owner="AttentionPooling",
            )
        if mask is not None:
            check_mask_shape(mask.shape, shape, owner="AttentionPooling")

    def call(self, inputs, mask=None, return_attention_scores=False):
        return_attention_scores = check_bool(
            "return_attention_scores", return_attention_scores, "AttentionPooling"
        )
        if mask is not None:
            mask = ops.convert_to_tensor(mask)
        inputs = floating(inputs, self.compute_dtype)
        self._check_call_inputs(inputs, mask)
        dtype = softmax_dtype(self.compute_dtype)
        if mask is not None:
            # A masked step is never read: its weight is zero, and its (possibly non-finite)
            # value must not reach the pooled vector or the gradients.
            mask = ops.cast(mask, "bool")
            inputs = ops.where(ops.expand_dims(mask, -1), inputs, ops.zeros_like(inputs))
        logits = ops.squeeze(
            ops.matmul(ops.tanh(ops.matmul(inputs, self.kernel)), self.score[:, None]), -1
        )
        logits = ops.cast(logits, dtype)
        if mask is not None:
            logits = ops.where(mask, logits, ops.full_like(logits, -1e9))
        weights = ops.softmax(logits, axis=-1)
        if mask is not None:
            weights = weights * ops.cast(mask, dtype)  # all-masked rows pool to zeros
        pooled = ops.einsum("bt,btf->bf", ops.cast(weights, inputs.dtype), inputs)
        if return_attention_scores:
            return pooled, weights
        return pooled

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        check_rank("inputs", input_shape, 3, owner="AttentionPooling")
        return (input_shape[0], input_shape[-1])

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False):
        return_attention_scores = check_bool(
            "return_attention_scores", return_attention_scores, "AttentionPooling"
        )
        self._check_call_inputs(inputs, mask)
        pooled = keras.KerasTensor(self.compute_output_shape(inputs.shape), self.compute_dtype)
        if not return_attention_scores:
            return pooled
        weights = keras.KerasTensor(tuple(inputs.shape[:2]), softmax_dtype(self.compute_dtype))
        return pooled, weights

    def __getattr__(self, name):
        # 0.2's name of `attention_units`. Not a property: Keras's saving reads every attribute
        # `dir` lists, which would warn whoever saves the layer.
        if name == "units":
            warnings.warn(
                "AttentionPooling: `units` is deprecated and will be removed in 0.4; read "
                "`attention_units`.",
                DeprecationWarning,
                stacklevel=2,
            )
            return self.attention_units
        parent = getattr(super(), "__getattr__", None)  # torch's Module has one
        if parent is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return parent(name)

    def get_config(self):
        config = super().get_config()
        config.update(
            attention_units=self.attention_units,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            score_initializer=keras.initializers.serialize(self.score_initializer),
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "units" in config:  # saved by 0.1 and 0.2, which named the attention width `units`
            config["attention_units"] = config.pop("units")
        return cls(**config)
