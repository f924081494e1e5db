"""The AM-GRU and Dual AM-GRU cells of Weissenborn (2016), as in the released code.

`AssociativeGRUCell` keeps its state in a holographic associative memory of ``num_copies``
permuted copies and feeds its previous output back as input (the original's
``SelfControllerWrapper``). `DualAssociativeGRUCell` also reads the final memory of a source
sequence (the premise), carried as a pass-through state, and shares every non-dual weight with
a premise `AssociativeGRUCell` (conditional encoding with shared weights).

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
``dual_key_kernel``         ``Keys/Dual/fully_connected/weights`` (``released``)   D × n
``dual_gate_kernel``        ``DualGates/fully_connected/weights``                  n × 2n
``dual_candidate_kernel``   ``DualCandidate/fully_connected/weights``              n × n
==========================  =====================================================  ==========

`tf_memlayers.compat.load_original_weights` loads arrays saved under those names.
"""

import contextlib

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.memory_cell_wrapper import step_output_spec
from tf_memlayers.ops import holographic
from tf_memlayers.ops.associative_gru_loop import batch_major_associative_gru_loop

DUAL_KEYS = ("paper", "released")


def _add(x, term):
    """``x + term``, or ``x`` when the optional ``term`` is None (no ``+ 0`` op per step)."""
    return x if term is None else x + term


def _num_copies_and_units(owner, units, num_copies, seed):
    units = check.check_even("units", units, "a complex vector needs real and imaginary halves", owner)
    num_copies = check.check_int("num_copies", num_copies, 1, owner)
    seed = check.check_int("seed", seed, None, owner)
    return units, num_copies, seed


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AssociativeGRUCell(keras.layers.Layer):
    """AM-GRU cell: a GRU whose state lives in a redundant holographic memory.

    One step, with ``x = [x_t ; o_{t-1}]`` (the previous output is fed back) and the memory
    ``S`` holding ``C`` permuted copies ``S_c`` of an ``n``-unit complex vector:

    ```
    k     = bound(x W_key)                        # eqs. 8-10, no bias
    h     = mean_c conj(K_c) (*) S_c              # K_c: copy c of k permuted; eq. 5
    [r|u] = sigmoid([x, h] W_g + b_g)             # b_g initialised to 1
    c     = tanh([x, r*h] W_c + b_c)
    delta = u * (c - h);  o_t = h + delta         # u weighs the candidate (not the state)
    S_c  += K_c (*) delta                         # eq. 12
    ```

    Note the gate convention: ``o_t = (1 - u) * h + u * c``, the reverse of
    `keras.layers.GRUCell`. The permutations are the original code's (`make_permutations`).

    Args:
        units: number of real units ``n`` (even: ``n/2`` complex entries).
        num_copies: number of redundant permuted memory copies ``C >= 1``.
        seed: seed of the permutations; cells that read each other's memory need the same.
        return_retrievals: if True the output is ``[o_t, delta, h]`` (``3 * units``): what was
            written to the memory and what was read from it at this step.
        kernel_initializer: initializer of every kernel.
        gate_bias_initializer: initializer of the gate bias (the original: ones).
        candidate_bias_initializer: initializer of the candidate bias (the original: zeros).
        kernel_regularizer: optional regularizer of every kernel.
        bias_regularizer: optional regularizer of the biases.

    Call arguments:
        inputs: ``[batch, input_dim]``.
        states: ``[memory [batch, units * num_copies], previous output [batch, units]]``;
            zeros are the empty memory.
        training: unused (present for the cell protocol).

    Example:

    >>> import numpy as np, keras
    >>> cell = AssociativeGRUCell(8, num_copies=3)
    >>> layer = keras.layers.RNN(cell, return_state=True)
    >>> output, memory, last = layer(np.ones((2, 5, 4), "float32"))
    >>> output.shape, memory.shape
    (TensorShape([2, 8]), TensorShape([2, 24]))
    """

    def __init__(
        self,
        units,
        num_copies=8,
        seed=123,
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
        self.units, self.num_copies, self.seed = _num_copies_and_units(
            owner, units, num_copies, seed
        )
        self.return_retrievals = check.check_bool("return_retrievals", return_retrievals, owner)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.gate_bias_initializer = keras.initializers.get(gate_bias_initializer)
        self.candidate_bias_initializer = keras.initializers.get(candidate_bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.permutations = holographic.make_permutations(units // 2, self.num_copies, self.seed)
        self._permutation_matrix = holographic.permutation_matrix(self.permutations)
        object.__setattr__(self, "_step_kernels", None)  # see `stepping_on_projections`
        self.state_size = [self.units * self.num_copies, self.units]
        self.output_size = self.units * (3 if self.return_retrievals else 1)

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
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )

    # -- pieces of the step, shared with DualAssociativeGRUCell ---------------------------
    # Every kernel is used whole: the gate and candidate matmuls take the concatenated
    # activations ``[x, h]`` and ``[x, r*h]``, so no weight is sliced or concatenated per step
    # (that would copy it, and pad its gradient, at every step of the loop).

    def key_copies(self, key_re, key_im):
        """Key halves ``[batch, m]`` → bounded permuted copies ``K_c``, each ``[batch, C, m]``
        (eqs. 4, 9-10)."""
        return self.bounded_copies(holographic.uncomplexify(key_re, key_im))

    def bounded_copies(self, key):
        """`key_copies` of a key ``[batch, n]`` in ``[re | im]`` layout."""
        return holographic.bounded_copies(key, self._permutation_matrix, self.num_copies)

    def gated_update(self, controller, retrieved, dual_gate=None, dual_candidate=None):
        """Gates, candidate and the delta from ``x = controller`` and ``h = retrieved``, plus
        the Dual cell's optional pre-activation terms; returns ``(delta, output)``."""
        gate_inputs = ops.concatenate([controller, retrieved], axis=1)
        gates = ops.matmul(gate_inputs, self.gate_kernel) + self.gate_bias
        reset, update = ops.split(ops.sigmoid(_add(gates, dual_gate)), 2, axis=1)
        candidate_inputs = ops.concatenate([controller, reset * retrieved], axis=1)
        candidate = ops.matmul(candidate_inputs, self.candidate_kernel) + self.candidate_bias
        candidate = ops.tanh(_add(candidate, dual_candidate))
        delta = update * (candidate - retrieved)
        return delta, retrieved + delta

    # -- the step ---------------------------------------------------------------------------

    def call_with_retrievals(self, inputs, states, training=None):
        """One step; returns ``(output, new_states, {"written": delta, "read": h})``."""
        memory, previous_output = states[0], states[1]
        controller = ops.concatenate([inputs, previous_output], axis=1)
        key = ops.matmul(controller, self.key_kernel)
        copies_re, copies_im = self.bounded_copies(key)
        memory_re, memory_im = holographic.split_memory(memory, self.num_copies)
        retrieved = holographic.uncomplexify(
            *holographic.read_memory_parts(copies_re, copies_im, memory_re, memory_im)
        )
        delta, output = self.gated_update(controller, retrieved)
        new_memory = holographic.write_memory(copies_re, copies_im, memory_re, memory_im, delta)
        return output, [new_memory, output], {"written": delta, "read": retrieved}

    def call(self, inputs, states, training=None):
        if self._step_kernels is not None:  # inside `stepping_on_projections`
            return self.projected_call(inputs, states, self._step_kernels)
        output, new_states, retrievals = self.call_with_retrievals(inputs, states, training)
        if self.return_retrievals:
            return ops.concatenate([output, retrievals["written"], retrievals["read"]], axis=1), new_states
        return output, new_states

    @contextlib.contextmanager
    def stepping_on_projections(self, kernels):
        """Within this context `call` takes ``inputs = x_t W_x + b`` (the input projections
        of `projection_kernels`) and runs `projected_call` with ``kernels`` =
        ``(recurrent_kernel, gate_h_kernel, candidate_h_kernel)``; this is how
        `AssociativeGRU` runs the cell in the loop of `keras.layers.RNN`."""
        object.__setattr__(self, "_step_kernels", tuple(kernels))
        try:
            yield self
        finally:
            object.__setattr__(self, "_step_kernels", None)

    def compute_output_spec(self, inputs, states, training=None):
        return step_output_spec(self, inputs)

    # -- the step on precomputed input projections (used by `AssociativeGRU`) -------------

    def projection_kernels(self):
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
        recurrent_kernel = ops.concatenate(
            [key[d:], gate[d : d + n], candidate[d : d + n]], axis=1
        )
        return input_kernel, input_bias, recurrent_kernel, gate[d + n :], candidate[d + n :]

    def projected_call(self, projected, states, kernels):
        """One step from ``projected = x_t W_x + b`` ``[batch, 4n]`` (`projection_kernels`);
        equal to `call` on ``x_t`` up to rounding. ``kernels`` = ``(recurrent_kernel,
        gate_h_kernel, candidate_h_kernel)``."""
        recurrent_kernel, gate_h_kernel, candidate_h_kernel = kernels
        memory, previous_output = states[0], states[1]
        n = self.units
        pre = projected + ops.matmul(previous_output, recurrent_kernel)
        key, gate_pre, candidate_pre = ops.split(pre, [n, 3 * n], axis=1)
        copies_re, copies_im = self.bounded_copies(key)
        memory_re, memory_im = holographic.split_memory(memory, self.num_copies)
        retrieved = holographic.uncomplexify(
            *holographic.read_memory_parts(copies_re, copies_im, memory_re, memory_im)
        )
        gates = ops.sigmoid(gate_pre + ops.matmul(retrieved, gate_h_kernel))
        reset, update = ops.split(gates, 2, axis=1)
        candidate = ops.tanh(candidate_pre + ops.matmul(reset * retrieved, candidate_h_kernel))
        delta = update * (candidate - retrieved)
        output = retrieved + delta
        new_memory = holographic.write_memory(copies_re, copies_im, memory_re, memory_im, delta)
        if self.return_retrievals:
            return ops.concatenate([output, delta, retrieved], axis=1), [new_memory, output]
        return output, [new_memory, output]

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


_CELL_ARGUMENTS = (
    "units",
    "num_copies",
    "seed",
    "return_retrievals",
    "kernel_initializer",
    "gate_bias_initializer",
    "candidate_bias_initializer",
    "kernel_regularizer",
    "bias_regularizer",
)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class AssociativeGRU(keras.layers.RNN):
    """AM-GRU layer: `keras.layers.RNN` over an `AssociativeGRUCell`, with the input
    projections of all time steps computed before the loop.

    The ``x_t`` rows of the key, gate and candidate kernels (and the biases) are applied to the
    whole sequence in one matmul; each step then multiplies only the fed-back output
    ``o_{t-1}`` and the retrieved ``h``. Outputs, states, masking (a masked step copies the
    previous output and states forward), ``go_backwards``, ``stateful`` and ``unroll`` are
    those of ``keras.layers.RNN(AssociativeGRUCell(...))``, equal up to float rounding. The
    weights live in ``layer.cell`` with the cell's names, shapes and row order, so
    `tf_memlayers.compat.load_original_weights` takes ``layer.cell``.

    Speed (training step, batch 50, T=30, n=100, 8 copies, 2 CPU cores): with whole-model
    XLA (``jit_compile=True``) about 1.5x faster than the cell form, because the loop no longer
    re-reads (and XLA no longer stores per step) the weight matrices; without XLA about the
    same as the cell form. ``fused_loop=True`` runs the loop as one op with a hand-written
    backward pass (`tf_memlayers.ops.associative_gru_loop`), both loops compiled with XLA even
    when the model is not, and on CPU the batch split into one independent loop per core
    that TensorFlow runs concurrently; see ``benchmarks/associative_memory.py`` for its
    speed. Each new (batch, time) shape then compiles once (a second or two on CPU), so it
    suits fixed-size padded batches.

    Args:
        units, num_copies, seed, return_retrievals, kernel_initializer,
        gate_bias_initializer, candidate_bias_initializer, kernel_regularizer,
        bias_regularizer: as in `AssociativeGRUCell`.
        return_sequences: return every step's output (else the last).
        return_state: also return the final states ``[memory, last output]``.
        go_backwards: process the sequence in reverse.
        stateful: carry the final states to the next batch.
        unroll: unroll the time loop (needs a known length).
        zero_output_for_mask: output zeros (not the previous output) at masked steps.
        fused_loop: run the time loop as `associative_gru_loop` (XLA-compiled forward and
            hand-written backward; not with ``return_retrievals`` or ``unroll``). Same results
            up to float rounding.

    Call arguments:
        sequences: ``[batch, time, input_dim]``, at least one time step.
        initial_state: optional ``[memory [batch, units * num_copies], previous output
            [batch, units]]``; zeros by default (the empty memory).
        mask: optional boolean ``[batch, time]``; masked steps neither read nor write, and
            their inputs are never used (non-finite padding is harmless).
        training: unused (present for the layer protocol).

    A sequence without time steps, a mask whose shape is not ``[batch, time]``, or an
    initial state of another width or batch size is a `ValueError` naming the argument and
    the shapes.

    Example:

    >>> import numpy as np
    >>> layer = AssociativeGRU(8, num_copies=3, return_state=True)
    >>> output, memory, last = layer(np.ones((2, 5, 4), "float32"))
    >>> output.shape, memory.shape
    (TensorShape([2, 8]), TensorShape([2, 24]))
    """

    def __init__(
        self,
        units,
        num_copies=8,
        seed=123,
        return_retrievals=False,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        unroll=False,
        zero_output_for_mask=False,
        fused_loop=False,
        **kwargs,
    ):
        flags = dict(
            return_retrievals=return_retrievals,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            unroll=unroll,
            zero_output_for_mask=zero_output_for_mask,
            fused_loop=fused_loop,
        )
        flags = {name: check.check_bool(name, f, "AssociativeGRU") for name, f in flags.items()}
        return_retrievals, fused_loop = flags.pop("return_retrievals"), flags.pop("fused_loop")
        unroll = flags["unroll"]
        if fused_loop and (return_retrievals or unroll):
            raise ValueError(
                "AssociativeGRU: `fused_loop=True` cannot be combined with "
                f"return_retrievals={return_retrievals!r} or unroll={unroll!r}; the fused loop "
                "emits only the outputs and always loops."
            )
        cell = AssociativeGRUCell(
            units,
            num_copies=num_copies,
            seed=seed,
            return_retrievals=return_retrievals,
            kernel_initializer=kernel_initializer,
            gate_bias_initializer=gate_bias_initializer,
            candidate_bias_initializer=candidate_bias_initializer,
            kernel_regularizer=kernel_regularizer,
            bias_regularizer=bias_regularizer,
            dtype=kwargs.get("dtype"),
            trainable=kwargs.get("trainable", True),
            name="associative_gru_cell",
        )
        super().__init__(cell, **flags, **kwargs)
        self.fused_loop = fused_loop
        self.input_spec = keras.layers.InputSpec(ndim=3)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        sequences = ops.convert_to_tensor(sequences)
        if mask is not None:
            mask = ops.convert_to_tensor(mask)
        self._check_call_arguments(sequences, initial_state, mask)
        if mask is not None:
            # A masked step's output and states are discarded; zeroing its inputs keeps
            # non-finite padding out of the kept outputs and of the gradients.
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)
            sequences = ops.where(keep, sequences, ops.zeros_like(sequences))
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def _check_call_arguments(self, sequences, initial_state, mask):
        """Checks the shapes of the call arguments up front, naming the argument."""
        owner = type(self).__name__
        shape = tuple(sequences.shape)
        check.check_rank("sequences", shape, 3, owner)
        check.check_time_steps("sequences", shape, owner)
        if mask is not None:
            check.check_mask_shape(mask.shape, shape, owner, inputs_name="sequences")
        if initial_state is None:
            return
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [
            initial_state
        ]
        sizes = self.cell.state_size
        if len(states) != len(sizes):
            raise ValueError(
                f"{owner}: `initial_state` must be a list of {len(sizes)} tensors [memory "
                f"(batch, {sizes[0]}), previous output (batch, {sizes[1]})]; got "
                f"{len(states)}."
            )
        for index, (state, size, what) in enumerate(
            zip(states, sizes, ("units * num_copies", "units"))
        ):
            name = f"initial_state[{index}]"
            state_shape = tuple(state.shape) if hasattr(state, "shape") else np.shape(state)
            check.check_rank(name, state_shape, 2, owner)
            check.check_width(name, state_shape, size, what, owner)
            check.check_same_batch(name, state_shape, "sequences", shape, owner)

    def compute_output_spec(self, sequences, initial_state=None, mask=None, training=False):
        self._check_call_arguments(sequences, initial_state, mask)
        return super().compute_output_spec(
            sequences, initial_state=initial_state, mask=mask, training=training
        )

    def inner_loop(self, sequences, initial_state, mask, training=False):
        cell = self.cell
        input_kernel, input_bias, *kernels = cell.projection_kernels()
        # Computed here, outside the loop: the step captures loop-invariant tensors instead
        # of reading (and, under XLA, storing per step for the gradient) the variables.
        projected = ops.matmul(sequences, input_kernel) + input_bias
        if not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        if self.fused_loop:
            return self._fused_loop(projected, initial_state, mask, kernels)
        # keras.layers.RNN's own loop, with the cell stepping on the projections.
        with cell.stepping_on_projections(kernels):
            return super().inner_loop(projected, list(initial_state), mask, training=training)

    def _fused_loop(self, projected, initial_state, mask, kernels):
        """`inner_loop` through `associative_gru_loop`."""
        outputs, memory, output = batch_major_associative_gru_loop(
            projected,
            initial_state[0],
            initial_state[1],
            kernels,
            self.cell.permutations,
            mask=mask,
            go_backwards=self.go_backwards,
            zero_output_for_mask=self.zero_output_for_mask,
        )
        return outputs[:, -1], outputs, [memory, output]

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        config.update({name: cell_config[name] for name in _CELL_ARGUMENTS})
        config["fused_loop"] = self.fused_loop
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


_SHARED_ARGUMENTS = (
    "units",
    "num_copies",
    "seed",
    "kernel_initializer",
    "gate_bias_initializer",
    "candidate_bias_initializer",
    "kernel_regularizer",
    "bias_regularizer",
)


_BIAS_DEFAULTS = {
    "gate_bias_initializer": "ones",
    "candidate_bias_initializer": "zeros",
    "bias_regularizer": None,
}


def _check_bias_arguments_left_to_premise(owner, **arguments):
    passed = {k: v for k, v in arguments.items() if v != _BIAS_DEFAULTS[k]}
    if passed:
        raise ValueError(
            f"{owner}: with `premise_cell` the biases are that cell's; got "
            + ", ".join(f"{k}={v!r}" for k, v in passed.items())
            + ". Set them on the premise cell instead."
        )


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeGRUCell(keras.layers.Layer):
    """Dual AM-GRU cell: an AM-GRU that also reads a source sequence's final memory.

    The source memory ``S^x`` (e.g. the premise's final AM-GRU memory) is a pass-through
    state: it is set through ``initial_state=`` and returned unchanged. At each step the cell
    retrieves ``h2`` from it and adds ``h2 W_dg`` to the gate and ``h2 W_dc`` to the candidate
    pre-activations (no biases); everything else is the `AssociativeGRUCell` step, with the
    cell's own memory starting empty.

    Keys (``dual_key``):

    * ``"paper"``: the AM-GRU key ``k = bound(x W_key)``; the source is read with the same
      conjugated key, ``h2 = mean_c conj(K_c) (*) S^x_c`` (the paper's "same key").
    * ``"released"``: the released code's layout. With ``a = x W_key`` and ``b = x W_dual``
      (``dual_key_kernel``), the write key is ``bound(a[:, :n/2] + i b[:, :n/2])`` and the
      source is read with ``bound(a[:, n/2:] + i b[:, n/2:])``, not conjugated.

    All non-dual weights live in ``premise_cell``, an `AssociativeGRUCell`: pass the premise's
    cell to share them (conditional encoding with shared weights, as in the original); by
    default the cell makes its own.

    Args:
        units: number of real units ``n`` (even).
        num_copies: number of memory copies; must equal the source memory's.
        dual_key: ``"paper"`` or ``"released"`` (see above).
        seed: seed of the permutations; must equal the source cell's.
        return_retrievals: if True the output is ``[o_t, delta, h, h2]`` (``4 * units``).
        premise_cell: optional `AssociativeGRUCell` whose weights are shared (its ``units``,
            ``num_copies`` and ``seed`` must match). Not serialized: a model that shares
            weights recreates the sharing when it is rebuilt (see
            `tf_memlayers.models.snli.ConditionalEncoder`).
        kernel_initializer, kernel_regularizer: for the dual kernels ``W_dg, W_dc`` and, when
            the cell makes its own premise cell, for its kernels.
        gate_bias_initializer, candidate_bias_initializer, bias_regularizer: for the premise
            cell the cell makes; with ``premise_cell`` given they are that cell's, and passing
            other values than the defaults is an error.

    Call arguments:
        inputs: ``[batch, input_dim]``.
        states: ``[memory [batch, units * C], previous output [batch, units],
            source memory [batch, units * C]]``.
        training: unused.

    Example:

    >>> import numpy as np, keras
    >>> premise = AssociativeGRUCell(8, num_copies=2)
    >>> _, source, last = keras.layers.RNN(premise, return_state=True)(np.ones((2, 5, 4), "float32"))
    >>> dual = DualAssociativeGRUCell(8, num_copies=2, premise_cell=premise)
    >>> layer = keras.layers.RNN(dual, return_state=True)
    >>> hypothesis = np.ones((2, 3, 4), "float32")
    >>> output, *_ = layer(hypothesis, initial_state=[source * 0, last, source])
    >>> output.shape
    TensorShape([2, 8])
    """

    def __init__(
        self,
        units,
        num_copies=8,
        dual_key="paper",
        seed=123,
        return_retrievals=False,
        premise_cell=None,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        owner = type(self).__name__
        units, num_copies, seed = _num_copies_and_units(owner, units, num_copies, seed)
        self.dual_key = check.check_choice("dual_key", dual_key, DUAL_KEYS, owner)
        self.return_retrievals = check.check_bool("return_retrievals", return_retrievals, owner)
        if premise_cell is None:
            premise_cell = AssociativeGRUCell(
                units,
                num_copies=num_copies,
                seed=seed,
                kernel_initializer=kernel_initializer,
                gate_bias_initializer=gate_bias_initializer,
                candidate_bias_initializer=candidate_bias_initializer,
                kernel_regularizer=kernel_regularizer,
                bias_regularizer=bias_regularizer,
                dtype=kwargs.get("dtype"),
                name="premise_cell",
            )
        else:
            _check_bias_arguments_left_to_premise(
                owner,
                gate_bias_initializer=gate_bias_initializer,
                candidate_bias_initializer=candidate_bias_initializer,
                bias_regularizer=bias_regularizer,
            )
        self._check_premise_cell(premise_cell, units, num_copies, seed)
        self.premise_cell = premise_cell
        self.units, self.num_copies, self.seed = units, num_copies, seed
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.state_size = [units * num_copies, units, units * num_copies]
        self.output_size = units * (4 if self.return_retrievals else 1)

    @property
    def permutations(self):
        """The copies' permutations (those of the premise cell)."""
        return self.premise_cell.permutations

    @staticmethod
    def _check_premise_cell(cell, units, num_copies, seed):
        if not isinstance(cell, AssociativeGRUCell):
            raise TypeError(
                "DualAssociativeGRUCell: `premise_cell` must be an AssociativeGRUCell, got "
                f"{type(cell).__name__}."
            )
        for name, mine in (("units", units), ("num_copies", num_copies), ("seed", seed)):
            if getattr(cell, name) != mine:
                raise ValueError(
                    f"DualAssociativeGRUCell: `premise_cell.{name}` is {getattr(cell, name)} but "
                    f"`{name}` is {mine}; they must be equal to read the premise memory."
                )

    def build(self, input_shape):
        input_dim = check.check_last_dim("inputs", input_shape, type(self).__name__)
        if not self.premise_cell.built:
            self.premise_cell.build(input_shape)
        elif self.premise_cell.input_dim != input_dim:
            raise ValueError(
                f"DualAssociativeGRUCell: inputs have {input_dim} features but the shared "
                f"premise cell was built for {self.premise_cell.input_dim}."
            )
        n = self.units
        if self.dual_key == "released":
            self.dual_key_kernel = self._kernel("dual_key_kernel", (input_dim + n, n))
        self.dual_gate_kernel = self._kernel("dual_gate_kernel", (n, 2 * n))
        self.dual_candidate_kernel = self._kernel("dual_candidate_kernel", (n, n))

    def _kernel(self, name, shape):
        return self.add_weight(
            name=name,
            shape=shape,
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
        )

    def _check_source(self, source):
        width = source.shape[-1]
        if width is not None and width != self.units * self.num_copies:
            raise ValueError(
                "DualAssociativeGRUCell: the source memory (third state) must have width "
                f"units * num_copies = {self.units * self.num_copies}; got {width}."
            )

    def _keys(self, controller):
        """Returns the write-key copies and the source read-key copies (and whether to
        conjugate the latter)."""
        cell = self.premise_cell
        key = ops.matmul(controller, cell.key_kernel)
        if self.dual_key == "paper":
            copies = cell.bounded_copies(key)
            return copies, copies, True
        dual = ops.matmul(controller, self.dual_key_kernel)
        # Released layout: real parts from x W_key, imaginary parts from x W_dual; the first
        # halves form the write key, the second halves the source read key.
        key_first, key_second = holographic.complexify(key)
        dual_first, dual_second = holographic.complexify(dual)
        both_re, both_im = cell.bounded_copies(
            ops.concatenate(
                [
                    holographic.uncomplexify(key_first, dual_first),
                    holographic.uncomplexify(key_second, dual_second),
                ],
                axis=0,
            )
        )
        write_re, read_re = ops.split(both_re, 2, axis=0)
        write_im, read_im = ops.split(both_im, 2, axis=0)
        return (write_re, write_im), (read_re, read_im), False

    def call_with_retrievals(self, inputs, states, training=None):
        """One step; returns ``(output, new_states, {"written", "read", "source_read"})``."""
        memory, previous_output, source = states[0], states[1], states[2]
        self._check_source(source)
        cell = self.premise_cell
        controller = ops.concatenate([inputs, previous_output], axis=1)
        write_key, read_key, conjugate = self._keys(controller)
        memory_re, memory_im = holographic.split_memory(memory, self.num_copies)
        retrieved = holographic.uncomplexify(
            *holographic.read_memory_parts(*write_key, memory_re, memory_im)
        )
        source_re, source_im = holographic.split_memory(source, self.num_copies)
        source_read = holographic.uncomplexify(
            *holographic.read_memory_parts(*read_key, source_re, source_im, conjugate_key=conjugate)
        )
        delta, output = cell.gated_update(
            controller,
            retrieved,
            dual_gate=ops.matmul(source_read, self.dual_gate_kernel),
            dual_candidate=ops.matmul(source_read, self.dual_candidate_kernel),
        )
        new_memory = holographic.write_memory(*write_key, memory_re, memory_im, delta)
        retrievals = {"written": delta, "read": retrieved, "source_read": source_read}
        return output, [new_memory, output, source], retrievals

    def call(self, inputs, states, training=None):
        output, new_states, retrievals = self.call_with_retrievals(inputs, states, training)
        if self.return_retrievals:
            pieces = [output, retrievals["written"], retrievals["read"], retrievals["source_read"]]
            return ops.concatenate(pieces, axis=1), new_states
        return output, new_states

    def compute_output_spec(self, inputs, states, training=None):
        return step_output_spec(self, inputs)

    def get_config(self):
        config = super().get_config()
        premise = self.premise_cell.get_config()
        config.update({name: premise[name] for name in _SHARED_ARGUMENTS})
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        config["kernel_regularizer"] = keras.regularizers.serialize(self.kernel_regularizer)
        config.update({"dual_key": self.dual_key, "return_retrievals": self.return_retrievals})
        return config
