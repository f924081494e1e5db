"""The Dual AM-GRU of Weissenborn (2016, §4): an AM-GRU that also reads a source's memory.

`DualAssociativeGRUCell` reads, at every step, the final memory of a source sequence (the
premise), carried as a pass-through state; its AM-GRU weights are those of the
`AssociativeGRUCell` it holds, which a `DualAssociativeEncoder` also reads the premise with
(conditional encoding with shared weights). `DualAssociativeGRU` runs the cell over a
sequence, in Keras's loop or in the fused `associative_gru_loop`.

The dual weights (original variables under ``AssociativeGRUCell/``, ``D = input_dim +
units``):

==========================  =====================================================  ==========
Keras weight                original variable                                      shape
==========================  =====================================================  ==========
``dual_key_kernel``         ``Keys/Dual/fully_connected/weights`` (``released``)   D × n
``dual_gate_kernel``        ``DualGates/fully_connected/weights``                  n × 2n
``dual_candidate_kernel``   ``DualCandidate/fully_connected/weights``              n × n
==========================  =====================================================  ==========
"""

import keras
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.initializers import for_one_weight
from tf_memlayers.layers.associative_memory.associative_gru import (
    AM_GRU_CELL_ARGUMENTS,
    AssociativeRecurrentLayer,
)
from tf_memlayers.layers.associative_memory.associative_gru_cell import (
    NUM_COPIES,
    AssociativeGRUCell,
    fed_back,
    write_key,
    zero_reset_rows,
)
from tf_memlayers.layers.memory_cell_wrapper import RecomputedWithItsLayer, step_output_spec
from tf_memlayers.ops import holographic
from tf_memlayers.ops.associative_gru_step import SourceMemory
from tf_memlayers.ops.holographic import PERMUTATION_SEED

DUAL_KEYS = ("paper", "released")

# The arguments of the AM-GRU cell inside a Dual cell that the Dual cell's config reports.
_SHARED_ARGUMENTS = tuple(name for name in AM_GRU_CELL_ARGUMENTS if name != "return_retrievals")


def _refuse_premise_cell(owner, kwargs):
    """A `TypeError` for ``premise_cell=``: the Dual cell owns its AM-GRU weights, and
    `DualAssociativeEncoder` shares them with the premise pass."""
    if "premise_cell" in kwargs:
        raise TypeError(
            f"{owner}: `premise_cell` is not an argument: the Dual AM-GRU owns every weight it "
            "reads. To encode a premise with an AM-GRU and a hypothesis with a Dual AM-GRU "
            "that shares its weights (conditional encoding), use "
            "tf_memlayers.layers.DualAssociativeEncoder, which owns both passes."
        )


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeGRUCell(RecomputedWithItsLayer, keras.layers.Layer):
    r"""Dual AM-GRU cell: an AM-GRU that also reads a source sequence's final memory.

    The source memory ``S^x`` (e.g. the premise's final AM-GRU memory) is a pass-through
    state: it is set through ``initial_state=`` and returned unchanged. At each step the cell
    retrieves ``h2`` from it and adds ``h2 W_dg`` to the gate and ``h2 W_dc`` to the candidate
    pre-activations (no biases); everything else is the `AssociativeGRUCell` step, with the
    cell's own memory starting empty.

    Keys (``dual_key``):

    * ``"paper"``: the AM-GRU key :math:`k = \operatorname{bound}(x\,W_{key})`; the source is
      read with the same conjugated key,
      :math:`h2 = \frac{1}{C} \sum_{c=1}^{C} \overline{K_c} \circledast S^x_c` (the paper's
      "same key").
    * ``"released"``: the released code's layout. With ``a = x W_key`` and ``b = x W_dual``
      (``dual_key_kernel``), the write key is ``bound(a[:, :n/2] + i b[:, :n/2])`` and the
      source is read with ``bound(a[:, n/2:] + i b[:, n/2:])``, not conjugated.

    The cell owns every weight it reads: the AM-GRU weights in ``premise_cell``, an
    `AssociativeGRUCell` (its sublayer, with that cell's weight names, shapes and row order),
    and the dual kernels. To read the premise with that same AM-GRU cell, as the paper's
    conditional encoding does, use `DualAssociativeEncoder`, which runs both passes.

    Args:
        units: number of real units ``n`` (even).
        num_copies: number of memory copies; must equal the source memory's.
        dual_key: ``"paper"`` or ``"released"`` (see above).
        seed: seed of the permutations; must equal the source cell's.
        return_retrievals: if True the output is ``[o_t, delta, h, h2]`` (``4 * units``).
        kernel_initializer, kernel_regularizer: for every kernel: the dual kernels ``W_dg,
            W_dc`` (and ``dual_key_kernel``) and the AM-GRU cell's.
        gate_bias_initializer, candidate_bias_initializer, bias_regularizer: for the AM-GRU
            cell's biases.

    Call arguments:
        inputs: ``[batch, input_dim]``.
        states: ``[memory [batch, units * C], previous output [batch, units],
            source memory [batch, units * C]]``.
        training: Unused: the cell applies no dropout (`DualAssociativeGRU` takes
            ``dropout`` and ``recurrent_dropout``, one mask per sequence).
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new document
            at this step: their memory and previous output are set to zero before the step.
            The source memory is kept: it is what the row reads, not a recurrent state
            (the cell returns it unchanged), so a reset row continues as a sequence started
            from ``initial_state=[0, 0, source memory]`` would (see `ResettableRNN`).
            Default: `None` (no row).

    Returns:
        Tuple ``(output, new_states)``: the output ``o_t`` ``[batch, units]`` (with
        ``return_retrievals=True``, ``[o_t, delta, h, h2]`` ``[batch, 4 * units]``) and the
        list of new states ``[memory [batch, units * C], o_t [batch, units], source memory
        [batch, units * C]]``, the source memory unchanged.

    Example:

    >>> import numpy as np, keras
    >>> from tf_memlayers import DualAssociativeGRUCell
    >>> source = np.random.default_rng(0).normal(size=(2, 16)).astype("float32")
    >>> last = np.zeros((2, 8), "float32")
    >>> layer = keras.layers.RNN(DualAssociativeGRUCell(8, num_copies=2), return_state=True)
    >>> hypothesis = np.ones((2, 3, 4), "float32")
    >>> output, *_ = layer(hypothesis, initial_state=[source * 0, last, source])
    >>> tuple(output.shape)
    (2, 8)
    """

    state_descriptions = (
        *AssociativeGRUCell.state_descriptions,
        ("source memory", "units * num_copies"),
    )

    def __init__(
        self,
        units,
        num_copies=NUM_COPIES,
        dual_key="paper",
        seed=PERMUTATION_SEED,
        return_retrievals=False,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        **kwargs,
    ):
        owner = check.owner_of(type(self).__name__)
        _refuse_premise_cell(owner, kwargs)
        super().__init__(**kwargs)
        self.dual_key = check.check_choice("dual_key", dual_key, DUAL_KEYS, owner)
        self.return_retrievals = check.check_bool("return_retrievals", return_retrievals, owner)
        # The AM-GRU cell checks the arguments they share, naming this cell.
        with check.called_as(owner):
            self.premise_cell = AssociativeGRUCell(
                units,
                num_copies=num_copies,
                seed=seed,
                kernel_initializer=kernel_initializer,
                gate_bias_initializer=gate_bias_initializer,
                candidate_bias_initializer=candidate_bias_initializer,
                kernel_regularizer=kernel_regularizer,
                bias_regularizer=bias_regularizer,
                dtype=kwargs.get("dtype"),
                trainable=self.trainable,
                name="premise_cell",
            )
        units, num_copies = self.premise_cell.units, self.premise_cell.num_copies
        self.units, self.num_copies, self.seed = units, num_copies, self.premise_cell.seed
        self.kernel_initializer = check.check_keras_object(
            "kernel_initializer", kernel_initializer, owner
        )
        self.kernel_regularizer = check.check_keras_object(
            "kernel_regularizer", kernel_regularizer, owner
        )
        self.state_size = [units * num_copies, units, units * num_copies]
        self.output_size = units * (4 if self.return_retrievals else 1)

    @property
    def permutations(self):
        """The copies' permutations (those of the premise cell)."""
        return self.premise_cell.permutations

    def build(self, input_shape):
        input_dim = check.check_last_dim("inputs", input_shape, type(self).__name__)
        if not self.premise_cell.built:
            self.premise_cell.build(input_shape)
        elif self.premise_cell.input_dim != input_dim:
            # Built by the premise pass of a `DualAssociativeEncoder`, before this cell.
            raise ValueError(
                f"DualAssociativeGRUCell: inputs have {input_dim} features but its AM-GRU "
                f"cell was built for {self.premise_cell.input_dim} (the premise's features)."
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
            initializer=for_one_weight(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )

    def _source_memory(self, controller, source):
        """The write key and the `SourceMemory` the step reads (see ``dual_key``)."""
        cell = self.premise_cell
        key = ops.matmul(controller, cell.key_kernel)
        parts = holographic.split_memory(source, self.num_copies)
        kernels = (self.dual_gate_kernel, self.dual_candidate_kernel)
        if self.dual_key == "paper":
            return key, SourceMemory(parts, *kernels)
        dual = ops.matmul(controller, self.dual_key_kernel)
        # Released layout: real parts from x W_key, imaginary parts from x W_dual; the first
        # halves form the write key, the second halves the source read key (not conjugated).
        key_first, key_second = holographic.complexify(key)
        dual_first, dual_second = holographic.complexify(dual)
        write_key = holographic.uncomplexify(key_first, dual_first)
        read_key = holographic.uncomplexify(key_second, dual_second)
        return write_key, SourceMemory(parts, *kernels, key=read_key, conjugate=False)

    def call_with_retrievals(self, inputs, states, training=None, reset=None):
        """One step; returns ``(output, new_states, {"written", "read", "source_read",
        "key"})`` (``"key"``: the write key, as `AssociativeGRUCell.call_with_retrievals`).

        ``reset`` (optional bool ``[batch]``) zeroes the memory and previous output of its
        rows before the step, and keeps their source memory (see `call`).
        """
        owner = type(self).__name__
        width = self.premise_cell.input_dim
        check.check_step(inputs, states, self.state_size, width, owner, self.state_descriptions)
        source = states[2]
        memory, previous_output = zero_reset_rows(owner, inputs, states[:2], reset)
        controller = ops.concatenate([inputs, fed_back(self, previous_output)], axis=1)
        key, source_memory = self._source_memory(controller, source)
        step = self.premise_cell._controller_step(controller, memory, key=key, source=source_memory)
        retrievals = {
            "written": step.delta,
            "read": step.retrieved,
            "source_read": step.source_read,
            "key": write_key(step),
        }
        return step.output, [step.memory, step.output, source], retrievals

    def call(self, inputs, states, training=None, reset=None):
        output, new_states, retrievals = self.call_with_retrievals(
            inputs, states, training, reset=reset
        )
        if self.return_retrievals:
            pieces = [output, retrievals["written"], retrievals["read"], retrievals["source_read"]]
            return ops.concatenate(pieces, axis=1), new_states
        return output, new_states

    def compute_output_spec(self, inputs, states, training=None, reset=None):
        zero_reset_rows(type(self).__name__, inputs, [], reset)  # checks ``reset``
        return step_output_spec(self, inputs)

    def get_config(self):
        config = super().get_config()
        premise = self.premise_cell.get_config()
        config.update({name: premise[name] for name in _SHARED_ARGUMENTS})
        config["kernel_initializer"] = keras.initializers.serialize(self.kernel_initializer)
        config["kernel_regularizer"] = keras.regularizers.serialize(self.kernel_regularizer)
        config.update({"dual_key": self.dual_key, "return_retrievals": self.return_retrievals})
        return config


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeGRU(AssociativeRecurrentLayer):
    """Dual AM-GRU layer: `keras.layers.RNN` over a `DualAssociativeGRUCell`, with a fused
    loop.

    Reads a sequence (the hypothesis) with an AM-GRU that, at every step, also reads the final
    memory of a source sequence (the premise), given as the third initial state. Outputs,
    states and masking are those of ``keras.layers.RNN(DualAssociativeGRUCell(...))``. With
    the fused loop the time loop is one op on TensorFlow (XLA-compiled forward, hand-written
    backward) and two Pallas kernels on JAX (`AssociativeGRU`'s, reading the source too),
    ``dual_key="paper"`` only, the path the layer picks inside its `inner_loop`, the way
    `keras.layers.GRU` picks cuDNN: by default (``fused_loop="auto"``) wherever it supports
    the call and pays, else Keras's loop.

    The layer owns every weight it reads (the AM-GRU cell ``cell.premise_cell`` and the dual
    kernels). For the paper's conditional encoding, where the premise is read by an AM-GRU
    with these same AM-GRU weights, use `DualAssociativeEncoder`: it owns both passes.

    Args:
        units: Positive even integer, the number of real units ``n``.
        num_copies: Positive integer, the number of memory copies; must equal the source
            memory's. Defaults to 8.
        dual_key: ``"paper"`` or ``"released"``, the key layout (see
            `DualAssociativeGRUCell`). Defaults to ``"paper"``.
        seed: Integer, the seed of the permutations; must equal the source cell's. Defaults
            to 123.
        return_retrievals: Boolean, whether each step's output is ``[o_t, delta, h, h2]``
            (``4 * units``). Defaults to False.
        kernel_initializer: Initializer of every kernel (the dual kernels and the AM-GRU
            cell's). Defaults to ``"glorot_uniform"``.
        gate_bias_initializer: Initializer of the AM-GRU cell's gate bias. Defaults to
            ``"ones"``.
        candidate_bias_initializer: Initializer of its candidate bias. Defaults to
            ``"zeros"``.
        kernel_regularizer: Optional regularizer of every kernel. Defaults to None.
        bias_regularizer: Optional regularizer of the AM-GRU cell's biases. Defaults to None.
        return_sequences: Boolean, return every step's output (else the last). Defaults to
            False.
        return_state: Boolean, also return the final states ``[memory, last output, source
            memory]``. Defaults to False.
        go_backwards: Boolean, process the sequence in reverse. Defaults to False.
        stateful: Boolean, carry the final states to the next batch. Defaults to False.
        unroll: Boolean, unroll the time loop (needs a known length). Defaults to False.
        zero_output_for_mask: Boolean, output zeros (not the previous output) at masked
            steps. Defaults to False.
        fused_loop: `"auto"`, True or False: run the time loop as one fused op where it
            can and pays (as `AssociativeGRU`'s: TensorFlow's op), always (on JAX the Pallas
            kernels) (True: a `ValueError` on another backend than TensorFlow
            and JAX, and with ``dual_key="released"``, ``return_retrievals``, ``unroll``
            or ``recurrent_dropout``), or never (False: Keras's loop). Same results up to
            float rounding. Defaults to `"auto"`.
        dropout: Float in [0, 1), the dropout rate on the inputs in training, one mask per
            sequence (see `AssociativeGRU`; the source memory is not dropped). Defaults to 0.
        recurrent_dropout: Float in [0, 1), the dropout rate on the fed-back output where a
            training step reads it, one mask per sequence (a training call with it runs
            Keras's loop). Defaults to 0.
        dropout_seed: Optional non-negative integer, the seed of the dropout masks. Defaults
            to None.
        **kwargs: Base layer arguments (``name``, ``dtype``, ``trainable``).

    Call arguments:
        sequences: ``[batch, time, input_dim]``, at least one time step.
        initial_state: ``[memory [batch, units * num_copies], previous output [batch,
            units], source memory [batch, units * num_copies]]``: for conditional encoding,
            an empty memory, the premise's last output and the premise's final memory.
            Zeros by default (then the source is empty and contributes nothing).
        mask: optional boolean ``[batch, time]``; masked steps neither read nor write.
        sequences_mask: Where the call has other tensors (``initial_state``, ``reset``), Keras
            passes the mask of ``sequences`` (from ``Embedding(mask_zero=True)``, say) here
            rather than as ``mask``; used where ``mask`` is `None`. Default: `None`.
        training: Boolean, whether ``dropout`` and ``recurrent_dropout`` apply.
        reset: optional boolean ``[batch, time]``, true where a new document starts: before
            that step the row's memory and previous output are set to zero; its source
            memory, which the cell reads and never changes, is kept. From there the row
            computes what the layer computes on that document alone with ``initial_state=[0,
            0, source memory]`` (other rows and steps are untouched; a reset at a masked step
            is ignored; see `ResettableRNN`). TensorFlow's fused loop has no resets:
            there, with ``fused_loop="auto"`` a call with ``reset`` runs Keras's loop, with
            ``fused_loop=True`` it is a `ValueError`; the Pallas kernels (JAX) run it.
            ``reset`` with ``go_backwards=True`` is a `ValueError`.

    Returns:
        The last output ``[batch, units]``, or with ``return_sequences=True`` the output of
        every step ``[batch, time, units]`` (``4 * units`` wide with
        ``return_retrievals=True``); with ``return_state=True``, the tuple ``(output, memory
        [batch, units * num_copies], last output [batch, units], source memory [batch,
        units * num_copies])`` of the output and the final states.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import AssociativeGRU
    >>> from tf_memlayers import DualAssociativeGRU
    >>> premise_layer = AssociativeGRU(8, num_copies=2, return_state=True)
    >>> _, source, last = premise_layer(np.ones((2, 5, 4), "float32"))
    >>> layer = DualAssociativeGRU(8, num_copies=2)
    >>> output = layer(np.ones((2, 3, 4), "float32"), initial_state=[source * 0, last, source])
    >>> tuple(output.shape)
    (2, 8)
    """

    CELL_ARGUMENTS = AM_GRU_CELL_ARGUMENTS + ("dual_key",)

    def __init__(
        self,
        units,
        num_copies=NUM_COPIES,
        dual_key="paper",
        seed=PERMUTATION_SEED,
        return_retrievals=False,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        fused_loop="auto",
        **kwargs,
    ):
        with check.called_as(type(self).__name__):  # errors name this layer, not its cell
            _refuse_premise_cell(check.owner_of(type(self).__name__), kwargs)
            cell = DualAssociativeGRUCell(
                units,
                num_copies=num_copies,
                dual_key=dual_key,
                seed=seed,
                return_retrievals=return_retrievals,
                kernel_initializer=kernel_initializer,
                gate_bias_initializer=gate_bias_initializer,
                candidate_bias_initializer=candidate_bias_initializer,
                kernel_regularizer=kernel_regularizer,
                bias_regularizer=bias_regularizer,
                name="dual_associative_gru_cell",
                **self.cell_keywords(kwargs),
            )
            super().__init__(cell, fused_loop=fused_loop, **kwargs)

    @staticmethod
    def fused_loop_unsupported(cell, unroll):
        if cell.dual_key != "paper":
            return (
                f"runs the Dual AM-GRU with dual_key='paper' only; got dual_key={cell.dual_key!r}."
            )
        return AssociativeRecurrentLayer.fused_loop_unsupported(cell, unroll)

    @property
    def cell_permutations(self):
        return self.cell.premise_cell.permutations

    def fused_inner_loop(self, sequences, initial_state, mask, training=False):
        premise = self.cell.premise_cell
        input_kernel, input_bias, *kernels = premise._projection_kernels()
        projected = ops.matmul(sequences, input_kernel) + input_bias
        source = initial_state[2]
        last, outputs, states = self.run_fused_loop(
            projected,
            initial_state,
            mask,
            kernels,
            training,
            source=source,
            dual_gate_kernel=self.cell.dual_gate_kernel,
            dual_candidate_kernel=self.cell.dual_candidate_kernel,
        )
        return last, outputs, states + [source]
