"""The AM-GRU cell of Weissenborn (2016), as in the released code.

`AssociativeGRUCell` keeps its state in a holographic associative memory of ``num_copies``
permuted copies and feeds its previous output back as input (the original's
``SelfControllerWrapper``). Its step is `tf_memlayers.ops.associative_gru_step`.

Weights, one-to-one with the original variables (``D = input_dim + units``, rows in the
original's order: input ``x_t``, then previous output ``o_{t-1}``, then the retrieved ``h``):

==========================  =====================================================  ==========
Keras weight                original variable (under ``AssociativeGRUCell/``)       shape
==========================  =====================================================  ==========
``key_kernel``              ``Keys/fully_connected/weights``                       D × n
``gate_kernel``             ``Gates/fully_connected/weights``                      (D+n) × 2n
``gate_bias``               ``Gates/fully_connected/biases``                       2n
``candidate_kernel``        ``Candidate/fully_connected/weights``                  (D+n) × n
``candidate_bias``          ``Candidate/fully_connected/biases``                   n
==========================  =====================================================  ==========

The Dual AM-GRU's own weights are listed in
`tf_memlayers.layers.associative_memory.dual_associative_gru`.
`tf_memlayers.compat.load_original_weights` loads arrays saved under those names.
"""

import contextlib

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.memory_cell_wrapper import RecomputedWithItsLayer, step_output_spec
from tf_memlayers.layers.resets import check_reset, zero_where
from tf_memlayers.ops import holographic
from tf_memlayers.ops.associative_gru_step import associative_gru_step
from tf_memlayers.ops.holographic import PERMUTATION_SEED

# The number of memory copies of the paper (Weissenborn 2016, §5), every associative-memory
# layer's default.
NUM_COPIES = 8


def zero_reset_rows(owner, inputs, states, reset):
    """A step's ``states`` (as a list) set to zero in the rows that ``reset`` marks.

    Args:
        owner: String, the class name that error messages start with.
        inputs: Tensor ``[batch, features]``, the step's input (its batch size is what
            ``reset`` is checked against).
        states: List of the step's states, each ``[batch, ...]``.
        reset: Optional bool tensor ``[batch]`` (see `ResettableRNN`); `None`
            leaves the states as they are.

    Returns:
        List of the states, zero in the reset rows.
    """
    states = list(states)
    if reset is None:
        return states
    reset = check_reset(reset, tuple(inputs.shape)[:1], owner)
    return zero_where(reset, states)


@contextlib.contextmanager
def dropping_fed_back_output(cell, mask):
    """A context in which the steps of ``cell`` (an AM-GRU or Dual AM-GRU cell) read the
    fed-back output ``o_{t-1}`` times ``mask`` ``[batch, units]`` (the recurrent dropout of
    `AssociativeGRU` and `DualAssociativeGRU`, one mask for the whole sequence); the state
    they carry and emit is left as it is. ``mask=None`` changes nothing."""
    object.__setattr__(cell, "_fed_back_mask", mask)
    try:
        yield cell
    finally:
        object.__setattr__(cell, "_fed_back_mask", None)


def fed_back(cell, previous_output):
    """``o_{t-1}`` as a step of ``cell`` reads it (see ``dropping_fed_back_output``)."""
    mask = getattr(cell, "_fed_back_mask", None)
    if mask is None:
        return previous_output
    return previous_output * ops.cast(mask, previous_output.dtype)


def write_key(step):
    """The write key of a step (`StepResult`), ``[batch, n]`` in ``[re | im]`` layout: copy 0
    of its copies, which no permutation moves."""
    re, im = step.copies
    return ops.concatenate([re[:, 0], im[:, 0]], axis=1)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AssociativeGRUCell(RecomputedWithItsLayer, keras.layers.Layer):
    r"""AM-GRU cell: a GRU whose state lives in a redundant holographic memory.

    One step, with ``x = [x_t ; o_{t-1}]`` (the previous output is fed back) and the memory
    ``S`` holding ``C`` permuted copies ``S_c`` of an ``n``-unit complex vector:

    .. math::

        \begin{aligned}
        k &= \operatorname{bound}(x\,W_{key})
            && \text{eqs. 8-10, no bias} \\
        h &= \frac{1}{C} \sum_{c=1}^{C} \overline{K_c} \circledast S_c
            && \text{$K_c$: copy $c$ of $k$ permuted; eq. 5} \\
        [r \mid u] &= \sigma([x, h]\,W_g + b_g)
            && \text{$b_g$ initialised to 1} \\
        c &= \tanh([x, r \odot h]\,W_c + b_c) \\
        \delta &= u \odot (c - h), \quad o_t = h + \delta
            && \text{$u$ weighs the candidate (not the state)} \\
        S_c &\leftarrow S_c + K_c \circledast \delta
            && \text{eq. 12}
        \end{aligned}

    Note the gate convention: :math:`o_t = (1 - u) \odot h + u \odot c`, the reverse of
    `keras.layers.GRUCell`. The permutations are the original code's (drawn from ``seed`` as
    it draws them).

    Args:
        units: Even positive integer, the number of real units ``n`` (``n/2`` complex
            entries); dimensionality of the output space.
        num_copies: Positive integer, the number ``C`` of redundant permuted memory copies.
            Default: `8`.
        seed: Integer, the seed of the permutations; cells that read each other's memory
            need the same. Default: `123`.
        return_retrievals: Boolean, (default `False`), whether the output is
            ``[o_t, delta, h]`` (``3 * units``): the output, what was written to the memory
            and what was read from it at this step.
        kernel_initializer: Initializer for every kernel (``key_kernel``, ``gate_kernel``,
            ``candidate_kernel``). Default: `"glorot_uniform"`.
        gate_bias_initializer: Initializer for the ``gate_bias`` vector ``b_g``.
            Default: `"ones"` (as in the original).
        candidate_bias_initializer: Initializer for the ``candidate_bias`` vector ``b_c``.
            Default: `"zeros"` (as in the original).
        kernel_regularizer: Regularizer function applied to every kernel. Default: `None`.
        bias_regularizer: Regularizer function applied to both biases. Default: `None`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A 2D tensor, with shape ``[batch, input_dim]``.
        states: List of two tensors ``[memory [batch, units * num_copies], previous output
            [batch, units]]``; zeros are the empty memory.
        training: Unused: the cell applies no dropout (`AssociativeGRU` takes ``dropout``
            and ``recurrent_dropout``, one mask per sequence, as `keras.layers.GRU`).
            Default: `None`.
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new document
            at this step: their memory and previous output are set to zero before the step,
            so they compute what the first step of a sequence computes.
            `keras.layers.RNN` does not pass it; run the cell with `ResettableRNN` to reset
            rows inside a sequence.
            Default: `None` (no row).

    Returns:
        Tuple ``(output, new_states)``: the output ``o_t`` ``[batch, units]`` (with
        ``return_retrievals=True``, ``[o_t, delta, h]`` ``[batch, 3 * units]``) and the list
        of new states ``[memory [batch, units * num_copies], o_t [batch, units]]``.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import AssociativeGRUCell
    >>> cell = AssociativeGRUCell(8, num_copies=3)
    >>> layer = keras.layers.RNN(cell, return_state=True)
    >>> output, memory, last = layer(np.ones((2, 5, 4), "float32"))
    >>> tuple(output.shape), tuple(memory.shape)
    ((2, 8), (2, 24))
    """

    #: A ``(name, what gives its width)`` pair per state, for the messages of a bad state (a
    #: call's, or an RNN's ``initial_state``).
    state_descriptions = (("memory", "units * num_copies"), ("previous output", "units"))

    def __init__(
        self,
        units,
        num_copies=NUM_COPIES,
        seed=PERMUTATION_SEED,
        return_retrievals=False,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        self.units = check.check_even(
            "units", units, "a complex vector needs real and imaginary halves", owner
        )
        self.num_copies = check.check_int("num_copies", num_copies, 1, owner)
        self.seed = check.check_int("seed", seed, None, owner)
        self.return_retrievals = check.check_bool("return_retrievals", return_retrievals, owner)
        self.kernel_initializer = check.check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
        self.gate_bias_initializer = check.check_keras_object(
            "gate_bias_initializer", gate_bias_initializer, owner
        )
        self.candidate_bias_initializer = check.check_keras_object(
            "candidate_bias_initializer", candidate_bias_initializer, owner
        )
        self.kernel_regularizer = check.check_keras_object(
            "kernel_regularizer", kernel_regularizer, owner
        )
        self.bias_regularizer = check.check_keras_object(
            "bias_regularizer", bias_regularizer, owner
        )
        drawn = holographic.make_permutations(self.units // 2, self.num_copies, self.seed)
        self._permutations = tuple(map(tuple, drawn))
        self._permutation_matrix = holographic.permutation_constant(self._permutations)
        object.__setattr__(self, "_step_kernels", None)  # see `_stepping_on_projections`
        self.state_size = [self.units * self.num_copies, self.units]
        self.output_size = self.units * (3 if self.return_retrievals else 1)

    @property
    def permutations(self):
        """The copies' permutations: ``num_copies`` tuples of ``units / 2`` indices, copy 0 the
        identity, drawn from ``seed`` (another ``seed`` gives others). Read-only: every path
        of the cell and its layer's fused loops permutes by them."""
        return self._permutations

    def build(self, input_shape):
        input_dim = check.check_last_dim("inputs", input_shape, type(self).__name__)
        controller_dim = input_dim + self.units
        self.input_dim = input_dim
        n = self.units
        self.key_kernel = self._kernel("key_kernel", (controller_dim, n))
        self.gate_kernel = self._kernel("gate_kernel", (controller_dim + n, 2 * n))
        self.gate_bias = self.add_weight(
            name="gate_bias",
            shape=(2 * n,),
            initializer=self.gate_bias_initializer,
            regularizer=self.bias_regularizer,
        )
        self.candidate_kernel = self._kernel("candidate_kernel", (controller_dim + n, n))
        self.candidate_bias = self.add_weight(
            name="candidate_bias",
            shape=(n,),
            initializer=self.candidate_bias_initializer,
            regularizer=self.bias_regularizer,
        )

    def _kernel(self, name, shape):
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=for_one_weight(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )

    # -- the step ---------------------------------------------------------------------------
    # The cell uses every kernel whole: the gate and candidate matmuls take the concatenated
    # activations ``[x, h]`` and ``[x, r*h]``, so no weight is sliced or concatenated per step
    # (that would copy it, and pad its gradient, at every step of the loop).

    def _key_copies(self, key_re, key_im):
        """Key halves → the bounded permuted copies ``K_c`` (eqs. 4, 9-10).

        Args:
            key_re: Tensor ``[batch, m]``, the real half of the key (``m = units / 2``).
            key_im: Tensor ``[batch, m]``, the imaginary half of the key.

        Returns:
            Tuple ``(re, im)`` of tensors, each ``[batch, C, m]``.
        """
        key = holographic.uncomplexify(key_re, key_im)
        return holographic.bounded_copies(key, self._permutation_matrix, self.num_copies)

    def _run_step(self, key, memory, gate_preactivation, candidate_preactivation, source=None):
        """`associative_gru_step` with this cell's permutations on a flat memory.

        Args:
            key: Tensor ``[batch, n]``, the raw key ``x W_key`` (``[re | im]`` layout).
            memory: Tensor ``[batch, n * C]``, the memory in the state layout.
            gate_preactivation: Callable mapping the retrieved ``h`` ``[batch, n]`` to the
                gate pre-activations ``[batch, 2n]``.
            candidate_preactivation: Callable mapping ``r * h`` ``[batch, n]`` to the
                candidate pre-activation ``[batch, n]``.
            source: Optional `tf_memlayers.ops.associative_gru_step.SourceMemory`, the
                Dual AM-GRU's read of a source memory. Default: `None`.

        Returns:
            The step's `StepResult`, with the new memory as ``[batch, n * C]``.
        """
        step = associative_gru_step(
            key,
            holographic.split_memory(memory, self.num_copies),
            gate_preactivation,
            candidate_preactivation,
            self._permutation_matrix,
            self.num_copies,
            source=source,
        )
        return step._replace(memory=holographic.join_memory(*step.memory))

    def _controller_step(self, controller, memory, key=None, source=None):
        """`_run_step` from the controller ``x = [x_t ; o_{t-1}]`` and the whole kernels.

        Args:
            controller: Tensor ``[batch, input_dim + n]``, the controller ``x``.
            memory: Tensor ``[batch, n * C]``, the memory.
            key: Optional tensor ``[batch, n]``, the raw key. Default: `None` (``x W_key``).
            source: Optional `SourceMemory` (Dual AM-GRU). Default: `None`.

        Returns:
            The step's `StepResult` (see `_run_step`).
        """
        if key is None:
            key = ops.matmul(controller, self.key_kernel)

        def gate_preactivation(retrieved):
            inputs = ops.concatenate([controller, retrieved], axis=1)
            return ops.matmul(inputs, self.gate_kernel) + self.gate_bias

        def candidate_preactivation(reset_retrieved):
            inputs = ops.concatenate([controller, reset_retrieved], axis=1)
            return ops.matmul(inputs, self.candidate_kernel) + self.candidate_bias

        return self._run_step(key, memory, gate_preactivation, candidate_preactivation, source)

    def call_with_retrievals(self, inputs, states, training=None, reset=None):
        """One step that also returns what was written to and read from the memory.

        Args:
            inputs: Tensor ``[batch, input_dim]``.
            states: List ``[memory [batch, n * C], previous output [batch, n]]``.
            training: Unused. Default: `None`.
            reset: Optional bool tensor ``[batch]``: the rows whose states are zeroed
                before the step (see `call`). Default: `None`.

        Returns:
            Tuple ``(output, new_states, {"written": delta, "read": h, "key": k})``, ``k``
            the write key ``bound(x W_key)`` ``[batch, n]`` in ``[re |
            im]`` layout (unpermuted, as copy 0 uses it).
        """
        owner = type(self).__name__
        check.check_step(
            inputs, states, self.state_size, self.input_dim, owner, self.state_descriptions
        )
        states = zero_reset_rows(owner, inputs, states, reset)
        memory, previous_output = states[0], states[1]
        controller = ops.concatenate([inputs, fed_back(self, previous_output)], axis=1)
        step = self._controller_step(controller, memory)
        retrievals = {"written": step.delta, "read": step.retrieved, "key": write_key(step)}
        return step.output, [step.memory, step.output], retrievals

    def call(self, inputs, states, training=None, reset=None):
        if self._step_kernels is not None:  # inside `_stepping_on_projections`
            return self._projected_call(inputs, states, self._step_kernels, reset=reset)
        output, new_states, retrievals = self.call_with_retrievals(
            inputs, states, training, reset=reset
        )
        if self.return_retrievals:
            pieces = [output, retrievals["written"], retrievals["read"]]
            return ops.concatenate(pieces, axis=1), new_states
        return output, new_states

    @contextlib.contextmanager
    def _stepping_on_projections(self, kernels):
        """A context in which `call` steps on precomputed input projections.

        Within this context `call` takes ``inputs = x_t W_x + b`` (the input projections of
        `_projection_kernels`) and runs `_projected_call`; this is how `AssociativeGRU` runs
        the cell in the loop of `keras.layers.RNN`.

        Args:
            kernels: Tuple ``(recurrent_kernel, gate_h_kernel, candidate_h_kernel)``, the
                last three of `_projection_kernels`.

        Yields:
            The cell.
        """
        object.__setattr__(self, "_step_kernels", tuple(kernels))
        try:
            yield self
        finally:
            object.__setattr__(self, "_step_kernels", None)

    def compute_output_spec(self, inputs, states, training=None, reset=None):
        zero_reset_rows(type(self).__name__, inputs, [], reset)  # checks ``reset``
        return step_output_spec(self, inputs)

    # -- the step on precomputed input projections (used by `AssociativeGRU`) -------------

    def _projection_kernels(self):
        """Splits the kernels by input rows (once per sequence, outside the time loop).

        Returns ``(input_kernel [input_dim, 4n], input_bias [4n], recurrent_kernel [n, 4n],
        gate_h_kernel [n, 2n], candidate_h_kernel [n, n])``: columns ``[key | gates |
        candidate]``; the input rows ``x_t`` take the biases (the key has none), the fed-back
        output rows ``o_{t-1}`` are the recurrent kernel, the retrieved ``h`` rows stay apart.
        """
        d, n = self.input_dim, self.units
        key, gate, candidate = (
            ops.convert_to_tensor(w)
            for w in (self.key_kernel, self.gate_kernel, self.candidate_kernel)
        )
        input_kernel = ops.concatenate([key[:d], gate[:d], candidate[:d]], axis=1)
        input_bias = ops.concatenate(
            [ops.zeros((n,), dtype=input_kernel.dtype), self.gate_bias, self.candidate_bias],
            axis=0,
        )
        recurrent_kernel = ops.concatenate([key[d:], gate[d : d + n], candidate[d : d + n]], axis=1)
        return input_kernel, input_bias, recurrent_kernel, gate[d + n :], candidate[d + n :]

    def _projected_call(self, projected, states, kernels, reset=None):
        """One step from precomputed input projections; equal to `call` up to rounding.

        Args:
            projected: Tensor ``[batch, 4n]``, ``x_t W_x + b`` (from `_projection_kernels`).
            states: List ``[memory [batch, n * C], previous output [batch, n]]``.
            kernels: Tuple ``(recurrent_kernel, gate_h_kernel, candidate_h_kernel)``.
            reset: Optional bool tensor ``[batch]``: the rows whose states are zeroed
                before the step (see `call`). Default: `None`.

        Returns:
            Tuple ``(output, new_states)``, as `call`.
        """
        recurrent_kernel, gate_h_kernel, candidate_h_kernel = kernels
        states = zero_reset_rows(type(self).__name__, projected, states, reset)
        memory, previous_output = states[0], states[1]
        n = self.units
        pre = projected + ops.matmul(fed_back(self, previous_output), recurrent_kernel)
        # Slices, not `ops.split` at indices: on torch that converts the indices to a tensor
        # and back at every step (ten times a slice's time, and a break in torch.compile's graph).
        key, gate_pre, candidate_pre = pre[:, :n], pre[:, n : 3 * n], pre[:, 3 * n :]
        step = self._run_step(
            key,
            memory,
            lambda retrieved: gate_pre + ops.matmul(retrieved, gate_h_kernel),
            lambda reset_h: candidate_pre + ops.matmul(reset_h, candidate_h_kernel),
        )
        new_states = [step.memory, step.output]
        if self.return_retrievals:
            return ops.concatenate([step.output, step.delta, step.retrieved], axis=1), new_states
        return step.output, new_states

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "num_copies": self.num_copies,
                "seed": self.seed,
                "return_retrievals": self.return_retrievals,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "gate_bias_initializer": keras.initializers.serialize(self.gate_bias_initializer),
                "candidate_bias_initializer": keras.initializers.serialize(
                    self.candidate_bias_initializer
                ),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
                "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
            }
        )
        return config
