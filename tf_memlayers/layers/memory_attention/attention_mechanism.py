"""`AttentionMechanism`: a query scores a memory, and the weights of the scores give a context
(Bahdanau et al. 2015; Luong et al. 2015; monotonic: Raffel et al. 2017); the scores, weights
and checks it shares with `AttentionWrapper`."""

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight

SCORES = ("additive", "dot", "general")
MONOTONIC_MODES = ("parallel", "recursive", "hard")
PROBABILITY_FNS = ("softmax", "hardmax")


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

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import monotonic_alignments
    >>> p = np.array([[0.5, 0.5, 0.5]])
    >>> start = np.array([[1.0, 0.0, 0.0]])
    >>> keras.ops.convert_to_numpy(monotonic_alignments(p, start, "recursive")).tolist()
    [[0.5, 0.25, 0.125]]
    >>> hard = monotonic_alignments(np.array([[0.2, 0.7, 0.9]]), start, "hard")
    >>> keras.ops.convert_to_numpy(hard).tolist()
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
    length = p_choose.shape[-1]
    if keras.backend.backend() == "tensorflow" and length is not None:
        # q_j = carried_j q_(j-1) + previous_j unrolled over the known length: TensorFlow's
        # scan is a loop without an iteration bound, whose gradient XLA cannot compile.
        previous = ops.reshape(previous, ops.shape(p_choose))  # a loop's state: no rank
        q, columns = ops.zeros_like(previous[:, 0]), []
        for j in range(length):
            q = carried[:, j] * q + previous[:, j]
            columns.append(q)
        return p_choose * ops.stack(columns, axis=-1)

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
        self.kernel_initializer = check.check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
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
            # An einsum, not a product with a vector: TensorFlow makes that a tensordot of
            # dynamic shapes, whose gradient XLA cannot compile inside the recurrent loop.
            # The vector in the products' dtype: Keras's float64 products on torch are float32.
            hidden = ops.tanh(hidden)
            scores = ops.einsum("blu,u->bl", hidden, ops.cast(vector, hidden.dtype))
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

    In `AttentionWrapper` (``mechanisms=[...]``) the mechanism is not called: the wrapper takes
    the memory's keys once per call (``memory_keys(memory)``) and, at every step,
    ``attend(query, memory, keys, memory_mask, previous, training, noise)``, which returns
    ``(context, weights)`` as a call does. A subclass changes the attention by overriding
    ``attend`` (and ``memory_keys`` if its keys differ); `AttentionRNN` then runs it step by
    step. Its weights go in ``build_scores(query, memory_dim)``, which ``build`` calls with the
    query's and the memory's widths and which makes the built-in ``score``'s weights: an
    override makes the subclass's instead (none unused). ``build`` checks the widths for
    ``score="dot"`` only; a subclass whose query and memory differ in width passes another
    ``score``. Register it (`keras.saving.register_keras_serializable`) so that a ``.keras``
    file rebuilds it.

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
        seed: Optional integer, the seed of the noise (``sigmoid_noise > 0`` only). Default:
            `None`.
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

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import AttentionMechanism
    >>> mechanism = AttentionMechanism(score="general")
    >>> rng = np.random.default_rng(0)
    >>> memory = rng.normal(size=(2, 7, 12)).astype("float32")
    >>> query = rng.normal(size=(2, 16)).astype("float32")
    >>> context, weights = mechanism(query, memory)
    >>> total = float(keras.ops.sum(weights[0]))
    >>> tuple(context.shape), tuple(weights.shape), round(total, 5)
    ((2, 12), (2, 7), 1.0)
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
        owner = check.owner_of(type(self).__name__)
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
        self._widths = {"query": query, "memory": memory_dim}  # what later calls must give
        self.built = True

    def call(self, query, memory, memory_mask=None, previous=None, training=None):
        owner = type(self).__name__
        query, memory = ops.convert_to_tensor(query), ops.convert_to_tensor(memory)
        for name, tensor, rank in (("query", query, 2), ("memory", memory, 3)):
            shape = check.check_rank(name, tuple(tensor.shape), rank, owner)
            if (width := getattr(self, "_widths", {}).get(name)) is not None:  # built by `build`
                check.check_width(name, shape, width, "the width it was built for", owner)
        check.check_batch("memory", memory, "query", query, owner)
        for name, rows in (("memory_mask", memory_mask), ("previous", previous)):
            if rows is None:
                continue
            shape, expected = tuple(ops.convert_to_tensor(rows).shape), tuple(memory.shape[:2])
            if len(shape) != 2 or shape[1] not in (None, expected[1]):
                raise ValueError(
                    f"{owner}: `{name}` must be [batch, length] = {expected}, its memory's; got "
                    f"shape {shape}."
                )
            check.check_batch(name, rows, "query", query, owner)
        memory = ops.cast(memory, self.compute_dtype)
        if memory_mask is not None:
            # Padding is never read, NaN included: zeroed before the keys.
            keep = ops.expand_dims(ops.cast(memory_mask, "bool"), -1)
            memory = ops.where(keep, memory, ops.zeros_like(memory))
        if self.monotonic_mode and previous is None:
            previous = self.initial_alignments(memory[..., 0])
        keys = self.memory_keys(memory)
        return self.attend(query, memory, keys, memory_mask, previous, training)

    def compute_output_shape(self, query_shape, memory_shape=None):
        """The shapes of the context ``[batch, memory_dim]`` and of the weights
        ``[batch, length]``."""
        if memory_shape is None or len(memory_shape) != 3 or len(query_shape) != 2:
            raise ValueError(
                f"{type(self).__name__}: the output shape needs the query's [batch, query_dim] "
                f"and the memory's [batch, length, memory_dim]; got {query_shape} and "
                f"{memory_shape}."
            )
        batch = query_shape[0] if query_shape[0] is not None else memory_shape[0]
        return (batch, memory_shape[2]), (batch, memory_shape[1])

    def compute_output_spec(self, *args, **kwargs):
        # Traced through `call`, as for a layer without `compute_output_shape`: the weights
        # are float32 under a 16-bit policy, where the context has the compute dtype (Keras's
        # spec from `compute_output_shape` gives every output the compute dtype).
        return keras.Operation.compute_output_spec(self, *args, **kwargs)

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
