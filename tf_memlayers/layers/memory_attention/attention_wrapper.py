"""`AttentionWrapper`: a recurrent cell that attends over a memory at every step (Bahdanau et
al. 2015; Luong et al. 2015), the memory given at call time; `AttentionRNN` runs it over a
sequence."""

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.memory_cell_wrapper import (
    call_cell,
    cell_output_size,
    flat_state_sizes,
    with_deserialized_cell,
)
from tf_memlayers.layers.resets import check_reset, zero_where
from tf_memlayers.ops.products import dot_last_axis

SCORES = ("additive", "dot", "general")
POSITIONS = ("after", "before")
MONOTONIC_MODES = ("parallel", "recursive", "hard")
PROBABILITY_FNS = ("softmax", "hardmax")
ATTENTION_LAYERS = ("luong", "context")


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def check_batch(name, tensor, inputs_name, inputs, owner):
    """Checks that ``tensor`` (a memory, its mask or a state) has the batch size of ``inputs``.

    Where both batch sizes are known (eagerly, in a symbolic call with a fixed batch, in every
    `jax.jit` trace: JAX's shapes are static), a `ValueError` names ``name``, both shapes and
    both sizes. Where one is not known when traced (a `tf.function` over batches of any size,
    as TensorFlow's `fit` traces its step), a TensorFlow assertion makes the same check when
    the step runs: an ``InvalidArgumentError`` naming ``name`` and both sizes. Under XLA
    TensorFlow compiles its assertions to nothing; there a memory of another batch size fails
    in XLA's compilation, or (a batch of one) is broadcast over the inputs' rows.

    Raises:
        ValueError: If both batch sizes are known and differ.
    """
    shape, inputs_shape = _shape(tensor), _shape(inputs)
    check.check_same_batch(name, shape, inputs_name, inputs_shape, owner)
    known = shape and inputs_shape and shape[0] is not None and inputs_shape[0] is not None
    symbolic = isinstance(tensor, keras.KerasTensor) or isinstance(inputs, keras.KerasTensor)
    if known or symbolic or keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf

    if not tf.executing_eagerly():
        tf.debugging.assert_equal(
            tf.shape(tensor)[0],
            tf.shape(inputs)[0],
            message=(
                f"{owner}: `{name}` must have the batch size of `{inputs_name}` (first: the "
                f"size of `{name}`, second: of `{inputs_name}`)"
            ),
        )


def masked_softmax(scores, mask):
    """Softmax over the last axis of ``scores`` ``[batch, length]`` where ``mask`` is true.

    Computed in float32 where the scores are 16-bit floats (which cannot hold the masking
    value, and lose the softmax's precision); a row with no true entry gets all-zero weights, so
    that its context is zero, not NaN.

    Args:
        scores: Tensor ``[batch, length]``.
        mask: Optional bool tensor ``[batch, length]``; `None`: every entry.

    Returns:
        Tensor ``[batch, length]``, float32 or float64.
    """
    if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
        scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = ops.cast(mask, "bool")
    masked = ops.where(mask, scores, ops.full_like(scores, -1e30))
    weights = ops.softmax(masked, axis=-1)
    return ops.where(mask, weights, ops.zeros_like(weights))


def masked_probabilities(scores, mask, probability_fn="softmax"):
    """The weights over the last axis of ``scores`` where ``mask`` is true, by
    ``probability_fn``: ``"softmax"`` (`masked_softmax`), ``"hardmax"`` (one-hot at the first
    largest unmasked score; no gradient) or a function of the scores to weights, which sees
    the masked scores at -1e30 and whose weights there are set to zero. A row with no true
    entry gets zero weights. Computed in float32 where the scores are 16-bit floats.

    Args:
        scores: Tensor ``[..., length]``.
        mask: Optional bool tensor of the shape of ``scores`` (or broadcast to it).
        probability_fn: ``"softmax"``, ``"hardmax"`` or a callable. Default: ``"softmax"``.

    Returns:
        Tensor of the shape of ``scores``, float32 or float64.
    """
    if probability_fn == "softmax":
        return masked_softmax(scores, mask)
    if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
        scores = ops.cast(scores, "float32")
    if mask is not None:
        mask = ops.logical_and(ops.cast(mask, "bool"), ops.ones_like(scores, "bool"))
        scores = ops.where(mask, scores, ops.full_like(scores, -1e30))
    if probability_fn == "hardmax":
        top = ops.logical_and(scores >= ops.max(scores, axis=-1, keepdims=True), scores > -1e30)
        top = ops.cast(top, scores.dtype)
        weights = ops.where(ops.cumsum(top, axis=-1) - top > 0.5, ops.zeros_like(top), top)
    else:
        weights = ops.cast(probability_fn(scores), scores.dtype)
    return weights if mask is None else ops.where(mask, weights, ops.zeros_like(weights))


def _exclusive_cumprod(x):
    """``[1, x_0, x_0 x_1, ...]`` along the last axis of ``x`` (entries in (0, 1]), summed in
    log space: the gradient of a plain cumulative product divides by ``x``."""
    tiny = float(np.finfo(keras.backend.standardize_dtype(x.dtype)).tiny)
    logs = ops.cumsum(ops.log(ops.clip(x, tiny, 1.0)), axis=-1)
    return ops.exp(ops.concatenate([ops.zeros_like(logs[..., :1]), logs[..., :-1]], -1))


def monotonic_alignments(p_choose, previous, mode):
    r"""The monotonic attention's alignments over a memory (Raffel et al. 2017), from the
    choosing probabilities of this step and the alignments of the previous one.

    With :math:`p_j` the probability of stopping at memory position :math:`j` and
    :math:`\alpha'_j` the previous step's alignments, the expected alignments are

    .. math::

        \alpha_j = p_j \sum_{k \le j} \alpha'_k \prod_{l=k}^{j-1} (1 - p_l),

    computed ``"parallel"`` in closed form with cumulative products and sums,
    :math:`\alpha = p \cdot \mathrm{cumprod}_\mathrm{excl}(1 - p) \cdot
    \mathrm{cumsum}(\alpha' / \mathrm{cumprod}_\mathrm{excl}(1 - p))` (the product taken
    in log space and clipped at 1e-10 where it divides, as tensorflow-addons did: inexact
    where the product of :math:`1 - p_l` falls below 1e-10), or ``"recursive"`` by the
    recurrence :math:`q_j = (1 - p_{j-1}) q_{j-1} + \alpha'_j`, :math:`\alpha_j = p_j q_j`
    (exact, a scan over the memory). ``"hard"``: the step stops at the first position at or
    after the previous one (the first where :math:`\alpha'` is not zero) whose :math:`p_j`
    is above 0.5 (one-hot alignments; zeros where none is, and from then on; no gradient).

    Args:
        p_choose: Tensor ``[batch, length]`` of probabilities in [0, 1] (zero at padding).
        previous: Tensor ``[batch, length]``, the previous step's alignments (one-hot at
            position 0 before the first step).
        mode: ``"parallel"``, ``"recursive"`` or ``"hard"``.

    Returns:
        Tensor ``[batch, length]``, the alignments.

    Example:

    >>> import numpy as np
    >>> p = np.array([[0.5, 0.5, 0.5]])
    >>> start = np.array([[1.0, 0.0, 0.0]])
    >>> monotonic_alignments(p, start, "recursive").numpy().tolist()
    [[0.5, 0.25, 0.125]]
    >>> monotonic_alignments(np.array([[0.2, 0.7, 0.9]]), start, "hard").numpy().tolist()
    [[0.0, 1.0, 0.0]]
    """
    mode = check.check_choice("mode", mode, MONOTONIC_MODES, "monotonic_alignments")
    p_choose, previous = ops.convert_to_tensor(p_choose), ops.convert_to_tensor(previous)
    if mode == "hard":
        reached = ops.cumsum(previous, axis=-1) > 0
        chosen = ops.cast(ops.logical_and(p_choose > 0.5, reached), p_choose.dtype)
        earlier = ops.cumsum(chosen, axis=-1) - chosen  # chosen positions before each
        return ops.where(earlier > 0.5, ops.zeros_like(chosen), chosen)
    if mode == "parallel":
        kept = _exclusive_cumprod(1.0 - p_choose)
        return p_choose * kept * ops.cumsum(previous / ops.clip(kept, 1e-10, 1.0), axis=-1)
    carried = ops.concatenate([ops.ones_like(p_choose[:, :1]), 1.0 - p_choose[:, :-1]], -1)

    def step(q, inputs):
        q = inputs[0] * q + inputs[1]
        return q, q

    xs = (ops.transpose(carried), ops.transpose(previous))
    _, q = ops.scan(step, ops.zeros_like(previous[:, 0]), xs)
    return p_choose * ops.transpose(q)


class ScoredAttention:
    """The scores, weights and context of `AttentionWrapper` and `AttentionMechanism` (a base
    class of both): their arguments' checks, weights, keys and `attend`."""

    def init_scores(
        self,
        score,
        attention_units,
        normalize,
        scale,
        kernel_initializer,
        monotonic_mode,
        sigmoid_noise,
        score_bias_init,
        seed,
        probability_fn,
    ):
        """Checks and keeps the scores' arguments (``attention_units`` may stay `None`)."""
        owner = type(self).__name__
        self.score = check.check_choice("score", score, SCORES, owner)
        self.normalize = check.check_bool("normalize", normalize, owner)
        self.scale = check.check_bool("scale", scale, owner)
        if self.normalize and self.score != "additive":
            raise ValueError(
                f"{owner}: `normalize=True` weight-normalises the additive score; got "
                f"score={self.score!r} (use `scale=True` for a learned scale)."
            )
        if self.scale and self.score == "additive":
            raise ValueError(
                f"{owner}: `scale=True` scales the dot or general score; got score='additive' "
                "(use `normalize=True`)."
            )
        self.attention_units = check.check_optional_int(
            "attention_units", attention_units, 1, owner
        )
        # A width the layer would never use is refused, as `normalize` and `scale` are.
        if attention_units is not None and self.score != "additive":
            raise ValueError(
                f"{owner}: `attention_units` is the width of the additive score's hidden "
                f"layer; got attention_units={attention_units!r} with score={self.score!r}."
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.monotonic_mode = (
            None
            if monotonic_mode is None
            else check.check_choice("monotonic_mode", monotonic_mode, MONOTONIC_MODES, owner)
        )
        self.sigmoid_noise = float(
            check.check_number("sigmoid_noise", sigmoid_noise, 0, None, owner=owner)
        )
        self.score_bias_init = float(
            check.check_number("score_bias_init", score_bias_init, owner=owner)
        )
        self.seed = check.check_optional_int("seed", seed, None, owner)
        unused = [
            f"{name}={value!r}"
            for name, value, default in (
                ("sigmoid_noise", sigmoid_noise, 0),
                ("score_bias_init", score_bias_init, 0),
            )
            if value != default and self.monotonic_mode is None
        ]
        if unused:
            raise ValueError(
                f"{owner}: {', '.join(unused)} shapes the monotonic attention's probabilities; "
                "give a `monotonic_mode` ('parallel', 'recursive' or 'hard') too."
            )
        if seed is not None and self.sigmoid_noise == 0:
            raise ValueError(
                f"{owner}: `seed` seeds the noise of `sigmoid_noise`; got seed={seed!r} with "
                "sigmoid_noise=0."
            )
        if self.sigmoid_noise > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        if isinstance(probability_fn, str):
            check.check_choice("probability_fn", probability_fn, PROBABILITY_FNS, owner)
        elif not callable(probability_fn):
            raise TypeError(
                f"{owner}: `probability_fn` must be 'softmax', 'hardmax' or a function of the "
                f"scores to weights, got {probability_fn!r}."
            )
        if probability_fn != "softmax" and self.monotonic_mode:
            raise ValueError(
                f"{owner}: monotonic attention's weights are its alignments (sigmoids of the "
                f"scores), not a `probability_fn` of them; got probability_fn={probability_fn!r} "
                f"with monotonic_mode={self.monotonic_mode!r}."
            )
        self.probability_fn = probability_fn

    def build_scores(self, query, memory_dim):
        """The scores' weights, for queries ``query`` wide over a memory ``memory_dim`` wide."""

        # A clone per kernel: one stateless initializer would start them all alike.
        def init():
            return for_one_weight(self.kernel_initializer)

        if self.score == "additive":
            units = self.attention_units
            self.query_kernel = self.add_weight(
                name="query_kernel", shape=(query, units), initializer=init()
            )
            self.memory_kernel = self.add_weight(
                name="memory_kernel", shape=(memory_dim, units), initializer=init()
            )
            self.score_vector = self.add_weight(
                name="score_vector", shape=(units,), initializer=init()
            )
            if self.normalize:
                self.score_norm = self.add_weight(
                    name="score_norm",
                    shape=(),
                    initializer=keras.initializers.Constant((1.0 / units) ** 0.5),
                )
                self.score_bias = self.add_weight(
                    name="score_bias", shape=(units,), initializer="zeros"
                )
        elif self.score == "general":
            self.memory_kernel = self.add_weight(
                name="memory_kernel", shape=(memory_dim, query), initializer=init()
            )
        if self.scale:
            self.score_scale = self.add_weight(name="score_scale", shape=(), initializer="ones")
        if self.monotonic_mode:
            self.sigmoid_bias = self.add_weight(
                name="sigmoid_bias",
                shape=(),
                initializer=keras.initializers.Constant(self.score_bias_init),
            )

    def scores_config(self):
        """The scores' arguments, for `get_config` (the optional ones where used)."""
        config = {
            "score": self.score,
            "attention_units": self.attention_units if self.score == "additive" else None,
            "normalize": self.normalize,
            "scale": self.scale,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
        if self.probability_fn != "softmax":
            config["probability_fn"] = (
                self.probability_fn
                if isinstance(self.probability_fn, str)
                else keras.saving.serialize_keras_object(self.probability_fn)
            )
        if self.monotonic_mode:
            # Written only when used: configs saved before these arguments load unchanged.
            config.update(
                monotonic_mode=self.monotonic_mode,
                sigmoid_noise=self.sigmoid_noise,
                score_bias_init=self.score_bias_init,
                seed=self.seed,
            )
        return config

    def memory_keys(self, memory):
        """The memory's keys, computed once per sequence: ``memory W_m`` (additive),
        ``memory W_a`` (general) or the memory itself (dot)."""
        if self.score == "dot":
            return memory
        # Called by `AttentionRNN` outside the cell's own call: cast as the call would.
        return ops.matmul(memory, ops.cast(self.memory_kernel, memory.dtype))

    def attend(
        self, query, memory, keys, memory_mask=None, previous=None, training=None, noise=None
    ):
        """The context ``[batch, memory_dim]`` and the weights ``[batch, length]`` (at least
        float32) of ``query`` ``[batch, query_dim]`` over ``memory`` with its precomputed
        ``keys``; with ``monotonic_mode``, from the ``previous`` alignments (``noise``: the
        standard normal noise of training, drawn here where `None`)."""
        if self.score == "additive":
            hidden = keys + ops.expand_dims(ops.matmul(query, self.query_kernel), 1)
            vector = self.score_vector
            if self.normalize:
                hidden = hidden + self.score_bias
                vector = self.score_norm * vector / ops.sqrt(ops.sum(ops.square(vector)))
            scores = ops.matmul(ops.tanh(hidden), vector)
        else:
            # Batched matrix products ([b, L, d] x [b, d, 1]), not a broadcast product and
            # a sum: one kernel each, forward and backward, at every step of the loop.
            scores = ops.squeeze(ops.matmul(keys, ops.expand_dims(query, -1)), -1)
            if self.scale:
                scores = self.score_scale * scores
        if self.monotonic_mode:
            weights = self.monotonic_weights(scores, memory_mask, previous, training, noise)
        else:
            weights = masked_probabilities(scores, memory_mask, self.probability_fn)
        context = ops.squeeze(
            ops.matmul(ops.expand_dims(ops.cast(weights, memory.dtype), 1), memory), 1
        )
        return context, weights

    def monotonic_weights(self, scores, memory_mask, previous, training, noise=None):
        r"""The monotonic alignments ``[batch, length]`` (at least float32) of ``scores`` after
        the ``previous`` ones: the probabilities :math:`\sigma(e + r + \epsilon)`, zero at
        padding, through `monotonic_alignments`."""
        if keras.backend.standardize_dtype(scores.dtype) in ("float16", "bfloat16"):
            scores = ops.cast(scores, "float32")
        scores = scores + ops.cast(self.sigmoid_bias, scores.dtype)
        if training and self.sigmoid_noise > 0:
            if noise is None:
                noise = keras.random.normal(ops.shape(scores), seed=self.seed_generator)
            scores = scores + self.sigmoid_noise * ops.cast(noise, scores.dtype)
        if self.monotonic_mode == "hard":
            probabilities = ops.cast(scores > 0, scores.dtype)  # sigma(e) > 1/2
        else:
            probabilities = ops.sigmoid(scores)
        if memory_mask is not None:
            mask = ops.cast(memory_mask, "bool")
            probabilities = ops.where(mask, probabilities, ops.zeros_like(probabilities))
        previous = ops.cast(previous, scores.dtype)
        return monotonic_alignments(probabilities, previous, self.monotonic_mode)

    def initial_alignments(self, like):
        """The one-hot at the memory's first position, of the shape and dtype of ``like``
        (``[batch, length]``): the alignments before the first step, which a zero alignment
        state stands for."""
        return ops.cast(ops.cumsum(ops.ones_like(like), axis=-1) == 1, like.dtype)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionMechanism(ScoredAttention, keras.layers.Layer):
    r"""An attention mechanism on its own: a query scores a memory, and the weights of the
    scores give a context, as one step of `AttentionWrapper` attends (its scores, probability
    functions and monotonic attention, with the same arguments and weights):

    .. math::

        e_j = \mathrm{score}(q, m_j), \qquad \alpha = \mathrm{probability\_fn}(e), \qquad
        c = \sum_j \alpha_j m_j,

    ``"additive"`` :math:`v^\top \tanh(W_q q + W_m m_j)` (Bahdanau et al. 2015; with
    ``normalize``, :math:`g\, v / \lVert v \rVert` and a bias in the tanh), ``"dot"``
    :math:`q^\top m_j` and ``"general"`` :math:`q^\top W_a m_j` (Luong et al. 2015; times a
    learned :math:`g` with ``scale``); with ``monotonic_mode``, :math:`\alpha` are Raffel et
    al.'s (2017) alignments after the ``previous`` ones (`monotonic_alignments`).

    For attention outside a recurrent cell: over an encoder's outputs from a decoder state of
    your own, in a loop of your own, or as tensorflow-addons' mechanisms were called.

    Args:
        score: ``"additive"``, ``"dot"`` or ``"general"``. Default: ``"additive"``.
        attention_units: Positive integer, the width of the additive score's hidden layer.
            Default: `None` (the query's width).
        normalize: Boolean, weight-normalise the additive score. Default: `False`.
        scale: Boolean, multiply the dot or general score by a learned scalar. Default:
            `False`.
        probability_fn: ``"softmax"``, ``"hardmax"`` or a function of the scores, as
            `AttentionWrapper`'s. Default: ``"softmax"``.
        monotonic_mode: `None`, ``"parallel"``, ``"recursive"`` or ``"hard"``, as
            `AttentionWrapper`'s. Default: `None`.
        sigmoid_noise: Non-negative float, the monotonic scores' noise in training. Default:
            ``0.0``.
        score_bias_init: Float, the initial bias of the monotonic scores. Default: ``0.0``.
        seed: Optional integer, the seed of the noise. Default: `None`.
        kernel_initializer: Initializer of the kernels. Default: ``"glorot_uniform"``.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        query: Tensor ``[batch, query_dim]`` (``query_dim`` the memory's width for ``"dot"``).
        memory: Tensor ``[batch, length, memory_dim]``.
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding (never
            attended to; a row without a true entry gets a zero context). Default: `None`.
        previous: Monotonic attention's previous alignments ``[batch, length]``. Default:
            `None` (one-hot at the memory's first vector: the first step).
        training: Python boolean; the monotonic scores get their noise when true. Default:
            `None`.

    Returns:
        ``(context, weights)``: ``[batch, memory_dim]`` and ``[batch, length]`` (the weights
        in float32 at least).

    Raises:
        ValueError: If ``memory``, ``memory_mask`` or ``previous`` has another batch size than
            ``query``, or the memory is not 3D.

    Example:

    >>> import numpy as np
    >>> mechanism = AttentionMechanism(score="general")
    >>> rng = np.random.default_rng(0)
    >>> memory = rng.normal(size=(2, 7, 12)).astype("float32")
    >>> query = rng.normal(size=(2, 16)).astype("float32")
    >>> context, weights = mechanism(query, memory)
    >>> context.shape, weights.shape, round(float(weights[0].numpy().sum()), 5)
    (TensorShape([2, 12]), TensorShape([2, 7]), 1.0)
    """

    def __init__(
        self,
        score="additive",
        attention_units=None,
        normalize=False,
        scale=False,
        probability_fn="softmax",
        monotonic_mode=None,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        seed=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.init_scores(
            score,
            attention_units,
            normalize,
            scale,
            kernel_initializer,
            monotonic_mode,
            sigmoid_noise,
            score_bias_init,
            seed,
            probability_fn,
        )

    def build(self, query_shape, memory_shape=None):
        owner = type(self).__name__
        if memory_shape is None or len(memory_shape) != 3 or memory_shape[-1] is None:
            raise ValueError(
                f"{owner}: `memory` must be a 3D tensor [batch, length, memory_dim] with a known "
                f"memory_dim; got shape {memory_shape}."
            )
        query, memory_dim = int(query_shape[-1]), int(memory_shape[-1])
        if self.score == "dot" and query != memory_dim:
            raise ValueError(
                f"{owner}: score='dot' needs the query ({query} wide) as wide as the memory "
                f"({memory_dim}); use score='general' or 'additive'."
            )
        if self.score == "additive" and self.attention_units is None:
            self.attention_units = query
        self.build_scores(query, memory_dim)
        self.built = True

    def call(self, query, memory, memory_mask=None, previous=None, training=None):
        owner = type(self).__name__
        check_batch("memory", memory, "query", query, owner)
        if memory_mask is not None:
            check_batch("memory_mask", memory_mask, "query", query, owner)
        if previous is not None:
            check_batch("previous", previous, "query", query, owner)
        memory = ops.cast(memory, self.compute_dtype)
        if memory_mask is not None:
            # Padding is never read, NaN included: zeroed before the keys.
            keep = ops.expand_dims(ops.cast(memory_mask, "bool"), -1)
            memory = ops.where(keep, memory, ops.zeros_like(memory))
        if self.monotonic_mode and previous is None:
            previous = self.initial_alignments(memory[..., 0])
        keys = self.memory_keys(memory)
        return self.attend(query, memory, keys, memory_mask, previous, training)

    def get_config(self):
        return {**super().get_config(), **self.scores_config()}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("probability_fn"), dict):
            config["probability_fn"] = keras.saving.deserialize_keras_object(
                config["probability_fn"]
            )
        return cls(**config)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AttentionWrapper(ScoredAttention, keras.layers.Layer):
    r"""A Keras RNN cell that attends over a memory at every step.

    At step :math:`t` a query :math:`q_t` scores every memory vector :math:`m_j`, the softmax
    of the scores over the unmasked vectors weighs them into a context :math:`c_t`:

    .. math::

        e_{tj} = \mathrm{score}(q_t, m_j), \qquad
        \alpha_{tj} = \frac{\exp e_{tj}}{\sum_{k} \exp e_{tk}}, \qquad
        c_t = \sum_j \alpha_{tj} m_j,

    with the scores

    * ``"additive"`` (Bahdanau et al. 2015): :math:`v^\top \tanh(W_q q_t + W_m m_j)`; with
      ``normalize=True``, :math:`v` is weight-normalised, :math:`g\, v / \lVert v \rVert`, and
      a bias :math:`b` is added inside the tanh;
    * ``"dot"`` (Luong et al. 2015): :math:`q_t^\top m_j` (the query as wide as the memory);
    * ``"general"`` (Luong et al. 2015): :math:`q_t^\top W_a m_j`;

    the last two times a learned scalar :math:`g` with ``scale=True``.

    ``probability_fn`` may replace the softmax: ``"hardmax"`` (one-hot at the first largest
    score) or a function of the scores of your own.

    With ``monotonic_mode`` the attention is monotonic (Raffel et al. 2017, "Online and
    Linear-Time Attention by Enforcing Monotonic Alignments"): it moves through the memory
    from left to right, never back. The score plus a learned scalar :math:`r` (initially
    ``score_bias_init``) and, in training, Gaussian noise of deviation ``sigmoid_noise`` gives
    the probability of stopping at each vector, :math:`p_{tj} = \sigma(e_{tj} + r +
    \epsilon)`, zero at padding, and the alignments follow from those of the previous step
    :math:`\alpha_{t-1}` (`monotonic_alignments`): their expectation,

    .. math::

        \alpha_{tj} = p_{tj} \sum_{k \le j} \alpha_{t-1,k} \prod_{l=k}^{j-1} (1 - p_{tl}),

    in closed form (``"parallel"``, as in training in the paper) or by its recurrence
    (``"recursive"``), or the hard alignment of decoding (``"hard"``: one-hot at the first
    vector at or after the previous step's whose :math:`p_{tj} > 1/2`; zeros, attending to
    nothing, where there is none). Before the first step :math:`\alpha_0` is one-hot at the
    memory's first vector. ``score="additive"`` is Bahdanau-style monotonic attention,
    ``"general"`` (or ``"dot"``) Luong-style.

    ``position="after"`` (Luong): the wrapped cell runs first, on the step's input joined
    with the previous attention vector (input feeding; ``input_feeding=False``: on the input
    alone), and its output :math:`h_t` is the query; the attention vector is
    :math:`a_t = \tanh(W_c [c_t; h_t])` (``attention_layer="luong"``), the context itself
    (``"context"``) or your layer of :math:`[c_t; h_t]`.
    ``position="before"`` (Bahdanau's RNNsearch): the query is the cell's previous output
    :math:`h_{t-1}`, and the cell runs on the step's input joined with :math:`c_t`. The step
    outputs :math:`a_t` (``output_attention=True``; with ``position="before"``,
    :math:`a_t = \tanh(W_c [c_t; h_t])` too) or the cell's :math:`h_t`.

    The memory is a call argument, never constructor state: a layer of this package or your
    own loop passes it at every step. `AttentionRNN` is the sequence layer over this cell,
    taking the memory once per call.

    Args:
        cell: A Keras RNN cell (`keras.layers.LSTMCell`, `keras.layers.GRUCell`,
            `tf_memlayers.AssociativeGRUCell`, ...).
        score: ``"additive"``, ``"dot"`` or ``"general"``. Default: ``"additive"``.
        attention_units: Positive integer, the width of the additive score's hidden layer
            (``score="additive"`` only). Default: `None` (the cell's output width).
        normalize: Boolean, weight-normalise the additive score (``score="additive"`` only).
            Default: `False`.
        scale: Boolean, multiply the dot or general score by a learned scalar. Default:
            `False`.
        position: ``"after"`` or ``"before"`` the cell, as above. Default: ``"after"``.
        attention_size: Positive integer, the width of the attention vector :math:`a_t`
            (not with ``position="before"`` and ``output_attention=False``, which compute
            none). Default: `None` (the cell's output width).
        output_attention: Boolean, output :math:`a_t` (else the cell's output). Default:
            `True`.
        input_feeding: Boolean, join the previous attention vector to the cell's input
            (``position="after"`` only: before the cell, the context is the cell's input by
            definition). Default: `True`.
        return_attention_scores: Boolean, append the step's weights :math:`\alpha_t` over the
            memory to its output (the memory's length must be known when the cell is built);
            `AttentionRNN` returns them apart, as the alignment history. Default: `False`.
        kernel_initializer: Initializer of the attention's kernels. Default:
            ``"glorot_uniform"``.
        attention_layer: ``"luong"`` (:math:`\tanh(W_c [c_t; h_t])`, ``attention_size``
            wide), ``"context"`` (no layer: :math:`a_t = c_t`, as wide as the memory) or a
            Keras layer of :math:`[c_t; h_t]` (``[batch, memory_dim + cell output]``; the
            attention is its output, saved and loaded with the wrapper). Default: ``"luong"``.
        probability_fn: ``"softmax"``, ``"hardmax"`` (:math:`\alpha_t` one-hot at the first
            largest unmasked score; no gradient reaches the scores) or a function of the
            scores ``[..., length]`` to weights over the last axis (a Keras function: it sees
            the masked scores at -1e30, and its weights there are set to zero); register it
            with `keras.saving.register_keras_serializable` so that the layer saves and loads.
            Default: ``"softmax"``.
        monotonic_mode: `None` (the softmax), or ``"parallel"``, ``"recursive"`` or
            ``"hard"``: monotonic attention, as above. The memory's length must be known when
            the cell is built (the previous alignments are a state). Default: `None`.
        sigmoid_noise: Non-negative float, the deviation of the Gaussian noise added to the
            monotonic scores in training (``training=True``) only; it pushes the
            probabilities towards 0 and 1, so that training's expected alignments approach
            the hard ones of decoding. Default: ``0.0``.
        score_bias_init: Float, the initial value of the monotonic scores' learned bias
            :math:`r` (negative for long memories, so that the attention does not stop at
            once). Default: ``0.0``.
        seed: Optional integer, the seed of the noise (``sigmoid_noise > 0`` only). Default:
            `None`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: Tensor ``[batch, features]``, the step's input.
        states: List, the wrapped cell's states followed by the fed-back vector (the
            previous attention vector with ``position="after"``, the cell's previous output
            with ``"before"``); with ``monotonic_mode``, then the previous alignments minus
            the initial one-hot, so that zero states (as Keras, resets and ``reset_state``
            make them) start at the memory's first vector.
        memory: Tensor ``[batch, length, memory_dim]``, the vectors attended over.
        memory_mask: Optional bool tensor ``[batch, length]``, false at padding. A row with
            no true entry attends to nothing: its context is zero. Default: `None`.
        training: Python boolean, passed to the wrapped cell; with ``sigmoid_noise``, the
            monotonic scores get their noise when true. Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new sequence
            at this step: their states are zeroed first. Default: `None`.

    Returns:
        ``(output, new_states)``: the step's output (``[batch, attention_size]``, or the
        cell's output; followed by the weights over the memory with ``return_attention_scores``)
        and the new states.

    Raises:
        ValueError: If ``memory``, ``memory_mask`` or a state has another batch size than
            ``inputs`` (on TensorFlow, where a batch size is unknown until the step runs, an
            assertion checks it then).

    Example:

    A decoder step by step, as a hand-written loop runs it:

    >>> import numpy as np, keras
    >>> cell = AttentionWrapper(keras.layers.LSTMCell(16), score="general")
    >>> memory = np.random.default_rng(0).normal(size=(2, 7, 12)).astype("float32")
    >>> states = [np.zeros((2, size), "float32") for size in cell.state_size]
    >>> output, states = cell(np.ones((2, 5), "float32"), states, memory=memory)
    >>> output.shape, [s.shape[-1] for s in states]
    (TensorShape([2, 16]), [16, 16, 16])
    """

    def __init__(
        self,
        cell,
        score="additive",
        attention_units=None,
        normalize=False,
        scale=False,
        position="after",
        attention_size=None,
        output_attention=True,
        input_feeding=True,
        return_attention_scores=False,
        kernel_initializer="glorot_uniform",
        monotonic_mode=None,
        sigmoid_noise=0.0,
        score_bias_init=0.0,
        seed=None,
        probability_fn="softmax",
        attention_layer="luong",
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(
                f"{owner}: `cell` must be a Keras RNN cell with a `state_size`, got {cell!r}."
            )
        self.cell = cell
        self.position = check.check_choice("position", position, POSITIONS, owner)
        self.output_attention = check.check_bool("output_attention", output_attention, owner)
        self.return_attention_scores = check.check_bool(
            "return_attention_scores", return_attention_scores, owner
        )
        self.input_feeding = check.check_bool("input_feeding", input_feeding, owner)
        if not self.input_feeding and self.position == "before":
            raise ValueError(
                f"{owner}: `input_feeding=False` leaves the attention vector out of the cell's "
                "input with position='after'; with position='before' the context is the cell's "
                "input (RNNsearch)."
            )
        if isinstance(attention_layer, str):
            check.check_choice("attention_layer", attention_layer, ATTENTION_LAYERS, owner)
        elif not isinstance(attention_layer, keras.layers.Layer):
            raise TypeError(
                f"{owner}: `attention_layer` must be 'luong', 'context' or a Keras layer, got "
                f"{attention_layer!r}."
            )
        self.attention_layer = attention_layer
        self._attention_layer_width = None
        self.cell_state_sizes = flat_state_sizes(cell.state_size)
        self.cell_output_size = cell_output_size(cell)
        self.init_scores(
            score,
            attention_units,
            normalize,
            scale,
            kernel_initializer,
            monotonic_mode,
            sigmoid_noise,
            score_bias_init,
            seed,
            probability_fn,
        )
        self.attention_units = self.attention_units or self.cell_output_size
        self.attention_size = (
            check.check_optional_int("attention_size", attention_size, 1, owner)
            or self.cell_output_size
        )
        if attention_size is not None and not (
            isinstance(attention_layer, str) and attention_layer == "luong"
        ):
            raise ValueError(
                f"{owner}: `attention_size` is the width of Luong's attention layer; got "
                f"attention_size={attention_size!r} with attention_layer={attention_layer!r}, "
                "whose width is the memory's ('context') or the layer's output's."
            )
        if attention_size is not None and not self.uses_attention_kernel:
            where = " and position='before'" if self.position == "before" else ""
            raise ValueError(
                f"{owner}: `attention_size` is the width of the attention vector, which the "
                f"step never computes with output_attention=False{where}; got "
                f"attention_size={attention_size!r}."
            )
        self.memory_dim = None
        self.memory_length = None
        self._bound = None

    @property
    def attention_width(self):
        """The width of the attention vector: ``attention_size`` (Luong's layer), the memory's
        (the context) or the output's of your layer (once built)."""
        if isinstance(self.attention_layer, keras.layers.Layer):
            return self._attention_layer_width
        return self.attention_size if self.attention_layer == "luong" else self.memory_dim

    @property
    def feedback_size(self):
        """The width of the fed-back state (the cell's state after its own)."""
        return self.attention_width if self.position == "after" else self.cell_output_size

    @property
    def query_size(self):
        """The width of the query the scores read (the cell's output)."""
        return self.cell_output_size

    def fed_input_size(self):
        """The width joined to the step's input before the cell (once the memory's width is
        known): the previous attention vector (``"after"``, input feeding) or the context
        (``"before"``)."""
        if self.position == "before":
            return self.memory_dim
        return self.feedback_size if self.input_feeding else 0

    @property
    def uses_attention_kernel(self):
        """Whether the step computes the attention vector with Luong's layer
        (``attention_kernel``)."""
        luong = isinstance(self.attention_layer, str) and self.attention_layer == "luong"
        return luong and (self.output_attention or self.position == "after")

    @property
    def feeds_back(self):
        """Whether a step's attention reaches the next step: the context joins the cell's
        input (``position="before"``), the previous attention vector does (input feeding),
        or the monotonic attention starts from the previous alignments. Where none does,
        `AttentionRNN` runs the wrapped cell's loop alone and attends for all steps at once
        after it (`attend_steps`)."""
        return self.position == "before" or self.input_feeding or bool(self.monotonic_mode)

    @property
    def state_size(self):
        # The previous alignments of monotonic attention: as long as the memory (built).
        alignments = [self.memory_length] if self.monotonic_mode else []
        return [*self.cell_state_sizes, self.feedback_size, *alignments]

    @property
    def output_size(self):
        size = self.attention_width if self.output_attention else self.cell_output_size
        # With the alignments, each step's output is [output, weights over the memory].
        return size + self.memory_length if self.return_attention_scores else size

    def build(self, inputs_shape, memory_shape=None):
        owner = type(self).__name__
        if memory_shape is None or len(memory_shape) != 3 or memory_shape[-1] is None:
            raise ValueError(
                f"{owner}: `memory` must be a 3D tensor [batch, length, memory_dim] with a known "
                f"memory_dim; got shape {memory_shape}."
            )
        self.memory_dim = int(memory_shape[-1])
        if self.return_attention_scores or self.monotonic_mode:
            if memory_shape[1] is None:
                why = (
                    "monotonic_mode: the previous alignments over it are a state"
                    if self.monotonic_mode
                    else "return_attention_scores=True: each step outputs its weights over it"
                )
                raise ValueError(
                    f"{owner}: the memory's length must be known when the layer is built "
                    f"({why}); got memory shape {tuple(memory_shape)}. Pad the memory to a "
                    "fixed length."
                )
            self.memory_length = int(memory_shape[1])
        query = self.query_size
        if self.score == "dot" and query != self.memory_dim:
            raise ValueError(
                f"{owner}: score='dot' needs the query (the cell's output, {query} wide) as wide "
                f"as the memory ({self.memory_dim}); use score='general' or 'additive'."
            )
        if isinstance(self.attention_layer, keras.layers.Layer):
            joined = (None, self.memory_dim + self.cell_output_size)
            if not self.attention_layer.built:
                self.attention_layer.build(joined)
            self._attention_layer_width = int(self.attention_layer.compute_output_shape(joined)[-1])
        if not self.cell.built:
            self.cell.build((inputs_shape[0], int(inputs_shape[-1]) + self.fed_input_size()))

        self.build_scores(query, self.memory_dim)
        if self.uses_attention_kernel:
            self.attention_kernel = self.add_weight(
                name="attention_kernel",
                shape=(self.memory_dim + self.cell_output_size, self.attention_size),
                initializer=for_one_weight(self.kernel_initializer),
            )
        self.built = True

    def attention_vector(self, context, output):
        r"""The attention vector of the ``context`` and the cell's ``output``: Luong's
        :math:`\tanh(W_c [c_t; h_t])`, the context, or your layer of :math:`[c_t; h_t]`."""
        if isinstance(self.attention_layer, keras.layers.Layer):
            return self.attention_layer(ops.concatenate([context, output], -1))
        if self.attention_layer == "context":
            return context
        return ops.tanh(ops.matmul(ops.concatenate([context, output], -1), self.attention_kernel))

    def attend_steps(self, outputs, memory, keys, memory_mask=None):
        """The attention of every step at once, for a cell whose attention does not feed
        back (`feeds_back` is false): the cell's outputs ``[batch, time, cell output]`` are
        the queries.

        The same equations as `step`, as batched products over all steps; called by
        `AttentionRNN` outside the cell's own call, so the weights are cast to the compute
        dtype here, as a call would cast them.

        Args:
            outputs: Tensor ``[batch, time, cell output width]``, the wrapped cell's outputs
                :math:`h_t`.
            memory: Tensor ``[batch, length, memory_dim]``, padding zeroed.
            keys: The memory's keys (``memory`` times the score's memory kernel; for
                ``"dot"``, the memory itself).
            memory_mask: Optional bool tensor ``[batch, length]``. Default: `None`.

        Returns:
            ``(step outputs, attention vectors)``: the outputs the loop would give
            (``[batch, time, output_size]``, the weights over the memory appended with
            ``return_attention_scores``) and :math:`a_t` ``[batch, time, attention_size]``, the
            fed-back state of each step.
        """
        dtype = outputs.dtype

        def weight(variable):
            return ops.cast(variable, dtype)

        if self.score == "additive":
            query = ops.matmul(outputs, weight(self.query_kernel))  # [b, t, units]
            hidden = ops.expand_dims(keys, 1) + ops.expand_dims(query, 2)  # [b, t, L, units]
            vector = weight(self.score_vector)
            if self.normalize:
                hidden = hidden + weight(self.score_bias)
                vector = weight(self.score_norm) * vector / ops.sqrt(ops.sum(ops.square(vector)))
            scores = dot_last_axis(ops.tanh(hidden), vector)
        else:
            scores = ops.matmul(outputs, ops.transpose(keys, (0, 2, 1)))  # [b, t, L]
            if self.scale:
                scores = weight(self.score_scale) * scores
        mask = None if memory_mask is None else ops.expand_dims(memory_mask, 1)
        weights = masked_probabilities(scores, mask, self.probability_fn)
        context = ops.matmul(ops.cast(weights, memory.dtype), memory)  # [b, t, memory_dim]
        if self.uses_attention_kernel:
            attention = ops.tanh(
                ops.matmul(ops.concatenate([context, outputs], -1), weight(self.attention_kernel))
            )
        else:  # the context, or your layer (which casts its own weights)
            attention = self.attention_vector(context, outputs)
        step_outputs = attention if self.output_attention else outputs
        if self.return_attention_scores:
            step_outputs = ops.concatenate([step_outputs, ops.cast(weights, dtype)], -1)
        return step_outputs, attention

    def call(
        self, inputs, states, memory=None, memory_mask=None, training=None, reset=None, keys=None
    ):
        owner = type(self).__name__
        monotonic = {}
        if memory is None and self._bound is not None:
            # Inside `AttentionRNN`'s loop: the memory of the running call, keys precomputed.
            memory, memory_mask, keys, noise_in_inputs = self._bound
            if noise_in_inputs:  # the step's noise, drawn by `AttentionRNN` before its loop
                monotonic["noise"] = inputs[:, -self.memory_length :]
                inputs = inputs[:, : -self.memory_length]
        if memory is None:
            raise ValueError(
                f"{owner}: no `memory` given: pass the vectors to attend over, [batch, length, "
                "memory_dim], at every call."
            )
        states = list(states)
        if self._bound is None:
            # (Inside `AttentionRNN`'s loop the layer has checked its call once.)
            check_batch("memory", memory, "inputs", inputs, owner)
            if memory_mask is not None:
                check_batch("memory_mask", memory_mask, "inputs", inputs, owner)
            for index, state in enumerate(states):
                check_batch(f"states[{index}]", state, "inputs", inputs, owner)
        # Keras casts a call's first input to the compute dtype, not its keyword arguments.
        memory = ops.cast(memory, self.compute_dtype)
        if reset is not None:
            reset = check_reset(reset, tuple(inputs.shape)[:1], owner)
            states = zero_where(reset, states)
        if keys is None:
            if memory_mask is not None:
                mask = ops.expand_dims(ops.cast(memory_mask, "bool"), -1)
                memory = ops.where(mask, memory, ops.zeros_like(memory))
            keys = self.memory_keys(memory)
        count = len(self.cell_state_sizes)
        if self.monotonic_mode:
            offset = states[count + 1]
            monotonic["previous"] = offset + self.initial_alignments(offset)
        step_output, weights, new_cell_states, feedback = self.step(
            inputs, states[:count], states[count], memory, keys, memory_mask, training, **monotonic
        )
        new_states = [*new_cell_states, feedback]
        if self.monotonic_mode:
            alignments = ops.cast(weights, offset.dtype)
            new_states.append(alignments - self.initial_alignments(alignments))
        if self.return_attention_scores:
            step_output = ops.concatenate([step_output, ops.cast(weights, step_output.dtype)], -1)
        return step_output, new_states

    def step(self, inputs, cell_states, fed, memory, keys, memory_mask, training, **monotonic):
        """One step after the resets: ``(output, weights over the memory, the cell's new
        states, the new fed-back vector)``; ``monotonic``: the ``previous`` alignments of
        monotonic attention, and its ``noise`` where drawn already."""
        if self.position == "after":
            cell_inputs = ops.concatenate([inputs, fed], -1) if self.input_feeding else inputs
            output, new_cell_states = call_cell(self.cell, cell_inputs, cell_states, training)
            context, weights = self.attend(
                output, memory, keys, memory_mask, training=training, **monotonic
            )
            attention = self.attention_vector(context, output)
            feedback = attention
        else:
            context, weights = self.attend(
                fed, memory, keys, memory_mask, training=training, **monotonic
            )
            output, new_cell_states = call_cell(
                self.cell, ops.concatenate([inputs, context], -1), cell_states, training
            )
            attention = self.attention_vector(context, output) if self.output_attention else None
            feedback = output
        step_output = attention if self.output_attention else output
        return step_output, weights, new_cell_states, feedback

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                **self.scores_config(),
                "position": self.position,
                "attention_size": self.attention_size if self.uses_attention_kernel else None,
                "output_attention": self.output_attention,
                "return_attention_scores": self.return_attention_scores,
                "input_feeding": self.input_feeding,
            }
        )
        if isinstance(self.attention_layer, keras.layers.Layer):
            config["attention_layer"] = keras.saving.serialize_keras_object(self.attention_layer)
        elif self.attention_layer != "luong":
            config["attention_layer"] = self.attention_layer
        return config

    @classmethod
    def from_config(cls, config):
        config = with_deserialized_cell(config)
        for name in ("probability_fn", "attention_layer"):
            if isinstance(config.get(name), dict):
                config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)
