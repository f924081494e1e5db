"""The Dual AM-GRU of Weissenborn (2016, §4): an AM-GRU that also reads a source's memory.

`DualAssociativeGRUCell` reads, at every step, the final memory of a source sequence (the
premise), carried as a pass-through state, and shares every non-dual weight with a premise
`AssociativeGRUCell` (conditional encoding with shared weights). `DualAssociativeGRU` runs it
over a sequence, in Keras's loop or in the fused `associative_gru_loop`.

The cell's own weights (original variables under ``AssociativeGRUCell/``, ``D = input_dim +
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
from tf_memlayers.layers.associative_memory.am_gru import AM_GRU_CELL_ARGUMENTS, AssociativeRecurrentLayer
from tf_memlayers.layers.associative_memory.am_gru_cell import (
    AssociativeGRUCell,
    check_units_copies_seed,
    zero_reset_rows,
)
from tf_memlayers.layers.memory_cell_wrapper import step_output_spec
from tf_memlayers.ops import holographic
from tf_memlayers.ops.associative_gru_step import SourceMemory

DUAL_KEYS = ("paper", "released")

# The premise cell's arguments a Dual cell reports in its config.
_SHARED_ARGUMENTS = tuple(name for name in AM_GRU_CELL_ARGUMENTS if name != "return_retrievals")


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


def _premise_cell_from_config(config, owner):
    """Takes ``premise_cell`` out of a Dual config: returns ``(premise cell or None, the other
    arguments)``.

    A Dual config holds a shared premise cell as the cell object. Keras's `.keras` saving
    serializes that object with a ``shared_object_id`` (it also serializes it in the config of
    the `AssociativeGRU` that owns it), and its loader hands one cell to both layers. Any
    other config cannot say which layer of the rebuilt model owns the cell: a config taken by
    `get_config` holds the original cell (`keras.models.clone_model`, `Bidirectional`), one
    serialized outside a save (``model.to_json()``) holds no id. Rebuilding from either would
    give the Dual layer premise weights that no other layer shares, so it is an error.
    """
    config = dict(config)
    premise_cell = config.pop("premise_cell", None)
    if premise_cell is None:
        return None, config
    if not (isinstance(premise_cell, dict) and "shared_object_id" in premise_cell):
        raise ValueError(
            f"{owner} {config.get('name')!r}: its `premise_cell` is shared with another layer, "
            "and only a `.keras` file records which one: rebuilding the layer from this config "
            "would give it premise weights of its own. Save and load the model as `.keras` "
            "(the sharing is kept), clone it with `keras.models.clone_model(model, "
            "clone_function=tf_memlayers.layers.premise_sharing_clone_function())`, or make "
            "the layer again with `premise_cell=`."
        )
    premise_cell = keras.saving.deserialize_keras_object(premise_cell)
    # The biases are the premise cell's and travel in its own config.
    for name in _BIAS_DEFAULTS:
        config.pop(name, None)
    return premise_cell, config


def _cell_arguments(config):
    """A Dual cell config without ``premise_cell`` and the premise cell's bias arguments."""
    return {k: v for k, v in config.items() if k != "premise_cell" and k not in _BIAS_DEFAULTS}


def premise_sharing_clone_function(clone_function=None):
    """A ``clone_function`` for `keras.models.clone_model` that keeps premise cells shared.

    `keras.models.clone_model` rebuilds each layer from its own config, which cannot say which
    layer of the clone owns the premise cell a `DualAssociativeGRU` (or a `keras.layers.RNN`
    over a `DualAssociativeGRUCell`) shares: cloning such a model without this function is a
    `ValueError`. With it, the clone of the Dual layer shares the cell of the clone of the
    premise layer, as the original shares the original's. Make a new function for each clone.

    Args:
        clone_function: Optional function ``layer -> new layer`` for every other layer
            (including the one that owns the premise cell). Defaults to
            ``layer.__class__.from_config(layer.get_config())``, `clone_model`'s default.

    Returns:
        A function ``layer -> new layer`` to pass as ``clone_function``.

    Example:

    >>> import keras
    >>> from tf_memlayers.layers import AssociativeGRU, DualAssociativeGRU
    >>> premise, hypothesis = keras.Input((5, 4)), keras.Input((3, 4))
    >>> premise_layer = AssociativeGRU(8, num_copies=2, return_state=True)
    >>> _, source, last = premise_layer(premise)
    >>> dual = DualAssociativeGRU(8, num_copies=2, premise_cell=premise_layer.cell)
    >>> output = dual(hypothesis, initial_state=[source * 0, last, source])
    >>> model = keras.Model([premise, hypothesis], output)
    >>> clone = keras.models.clone_model(
    ...     model, clone_function=premise_sharing_clone_function())
    >>> len(clone.weights)  # the premise cell's 5 weights, shared, and the 2 dual kernels
    7
    """
    if clone_function is None:
        clone_function = lambda layer: layer.__class__.from_config(layer.get_config())  # noqa: E731
    clones = {}  # id of an original premise cell -> its clone

    def clone(layer):
        dual_cell = getattr(layer, "cell", None)
        if not (isinstance(dual_cell, DualAssociativeGRUCell) and dual_cell.premise_cell_is_shared):
            new = clone_function(layer)
        else:
            premise = dual_cell.premise_cell
            if id(premise) not in clones:
                raise ValueError(
                    f"premise_sharing_clone_function: layer {layer.name!r} shares the premise "
                    f"cell {premise.name!r} of a layer that was not cloned before it; clone a "
                    "model that contains the premise layer and calls it first."
                )
            config = layer.get_config()
            if isinstance(layer, DualAssociativeGRU):
                new = type(layer)(premise_cell=clones[id(premise)], **_cell_arguments(config))
            else:  # a `keras.layers.RNN` over a `DualAssociativeGRUCell`
                cell_config = _cell_arguments(dual_cell.get_config())
                new_cell = type(dual_cell)(premise_cell=clones[id(premise)], **cell_config)
                config.pop("cell")
                new = type(layer)(new_cell, **config)
        cell = getattr(layer, "cell", None)
        if isinstance(cell, AssociativeGRUCell):
            clones[id(cell)] = new.cell
        return new

    return clone


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeGRUCell(keras.layers.Layer):
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
            ``num_copies`` and ``seed`` must match). A `.keras` file keeps the sharing when
            the premise cell is the cell of an `AssociativeGRU` in the same model (a
            `keras.layers.RNN` over it does not record the sharing, and loading fails); to
            clone a model that shares it, pass `premise_sharing_clone_function()` to
            `keras.models.clone_model`. Rebuilding from a config taken outside a save
            (``from_config(get_config())``, ``model_from_json``) is a `ValueError`: it cannot
            name the layer owning the cell.
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
        reset: Optional bool tensor ``[batch]``, true in the rows that start a new document
            at this step: their memory and previous output are set to zero before the step.
            The source memory is kept: it is what the row reads, not a recurrent state
            (the cell returns it unchanged), so a reset row continues as a sequence started
            from ``initial_state=[0, 0, source memory]`` would (see
            `tf_memlayers.layers.resets`). Default: `None` (no row).

    Returns:
        Tuple ``(output, new_states)``: the output ``o_t`` ``[batch, units]`` (with
        ``return_retrievals=True``, ``[o_t, delta, h, h2]`` ``[batch, 4 * units]``) and the
        list of new states ``[memory [batch, units * C], o_t [batch, units], source memory
        [batch, units * C]]``, the source memory unchanged.

    Example:

    >>> import numpy as np, keras
    >>> premise = AssociativeGRUCell(8, num_copies=2)
    >>> premise_layer = keras.layers.RNN(premise, return_state=True)
    >>> _, source, last = premise_layer(np.ones((2, 5, 4), "float32"))
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
        units, num_copies, seed = check_units_copies_seed(owner, units, num_copies, seed)
        # Whether the premise cell is another layer's (then it is saved in this config).
        self.premise_cell_is_shared = premise_cell is not None
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
        if self.premise_cell_is_shared:
            # Read by `AssociativeGRU.get_config`, so that a `.keras` file keeps the sharing.
            premise_cell.shared_as_premise = True
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
        """One step; returns ``(output, new_states, {"written", "read", "source_read"})``.

        ``reset`` (optional bool ``[batch]``) zeroes the memory and previous output of its
        rows before the step, and keeps their source memory (see `call`).
        """
        source = states[2]
        memory, previous_output = zero_reset_rows(
            type(self).__name__, inputs, states[:2], reset
        )
        self._check_source(source)
        controller = ops.concatenate([inputs, previous_output], axis=1)
        key, source_memory = self._source_memory(controller, source)
        step = self.premise_cell.controller_step(controller, memory, key=key, source=source_memory)
        retrievals = {
            "written": step.delta,
            "read": step.retrieved,
            "source_read": step.source_read,
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
        if self.premise_cell_is_shared:
            config["premise_cell"] = self.premise_cell  # see `_premise_cell_from_config`
        return config

    @classmethod
    def from_config(cls, config):
        premise_cell, config = _premise_cell_from_config(config, cls.__name__)
        return cls(premise_cell=premise_cell, **config)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeGRU(AssociativeRecurrentLayer):
    """Dual AM-GRU layer: `keras.layers.RNN` over a `DualAssociativeGRUCell`, with a fused
    loop.

    Reads a sequence (the hypothesis) with an AM-GRU that, at every step, also reads the final
    memory of a source sequence (the premise), given as the third initial state. Outputs,
    states and masking are those of ``keras.layers.RNN(DualAssociativeGRUCell(...))``. With
    the fused loop the time loop is one `tf_memlayers.ops.associative_gru_loop` op
    (XLA-compiled forward, hand-written backward; ``dual_key="paper"`` only), the path the
    layer picks inside its `inner_loop`, the way `keras.layers.GRU` picks cuDNN: by default
    (``fused_loop="auto"``) wherever it supports the call, else Keras's loop.

    Pass ``premise_cell`` to share every non-dual weight with the layer that reads the
    premise (``premise_layer.cell`` of an `AssociativeGRU`), as the paper's conditional
    encoding does; by default the layer makes its own. A model that shares it saves to and
    loads from ``.keras`` with the sharing kept; `keras.models.clone_model` keeps it with
    ``clone_function=premise_sharing_clone_function()`` (without, it is a `ValueError`: Keras
    rebuilds each layer from its own config, which cannot name the layer owning the cell).

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
        premise_cell: Optional `AssociativeGRUCell` whose weights are shared, the cell of an
            `AssociativeGRU` reading the premise. A `.keras` file keeps the sharing;
            `keras.models.clone_model` keeps it with
            ``clone_function=premise_sharing_clone_function()``; rebuilding the layer from a
            config taken outside a save is a `ValueError`, never a silent copy. Defaults to
            None.
        kernel_initializer: Initializer of the dual kernels (and of the premise kernels the
            layer makes). Defaults to ``"glorot_uniform"``.
        gate_bias_initializer: Initializer of the gate bias of the premise cell the layer
            makes. Defaults to ``"ones"``.
        candidate_bias_initializer: Initializer of its candidate bias. Defaults to
            ``"zeros"``.
        kernel_regularizer: Optional regularizer of every kernel. Defaults to None.
        bias_regularizer: Optional regularizer of the premise cell's biases. Defaults to None.
        return_sequences: Boolean, return every step's output (else the last). Defaults to
            False.
        return_state: Boolean, also return the final states ``[memory, last output, source
            memory]``. Defaults to False.
        go_backwards: Boolean, process the sequence in reverse. Defaults to False.
        stateful: Boolean, carry the final states to the next batch. Defaults to False.
        unroll: Boolean, unroll the time loop (needs a known length). Defaults to False.
        zero_output_for_mask: Boolean, output zeros (not the previous output) at masked
            steps. Defaults to False.
        fused_loop: `"auto"`, True or False: run the time loop as `associative_gru_loop`
            where it can (`"auto"`), always (True: a `ValueError` on another backend than
            TensorFlow, with ``dual_key="released"``, ``return_retrievals`` or ``unroll``),
            or never (False: Keras's loop). Same results up to float rounding. Defaults to
            `"auto"`.
        **kwargs: Base layer arguments (``name``, ``dtype``, ``trainable``).

    Call arguments:
        sequences: ``[batch, time, input_dim]``, at least one time step.
        initial_state: ``[memory [batch, units * num_copies], previous output [batch,
            units], source memory [batch, units * num_copies]]``: for conditional encoding,
            an empty memory, the premise's last output and the premise's final memory.
            Zeros by default (then the source is empty and contributes nothing).
        mask: optional boolean ``[batch, time]``; masked steps neither read nor write.
        training: unused (present for the layer protocol).
        reset: optional boolean ``[batch, time]``, true where a new document starts: before
            that step the row's memory and previous output are set to zero; its source
            memory, which the cell reads and never changes, is kept. From there the row
            computes what the layer computes on that document alone with ``initial_state=[0,
            0, source memory]`` (other rows and steps are untouched; a reset at a masked step
            is ignored; see `tf_memlayers.layers.resets`). The fused loop has no resets:
            with ``fused_loop="auto"`` a call with ``reset`` runs Keras's loop, with
            ``fused_loop=True`` it is a `ValueError`, and so is ``go_backwards=True``.

    Returns:
        The last output ``[batch, units]``, or with ``return_sequences=True`` the output of
        every step ``[batch, time, units]`` (``4 * units`` wide with
        ``return_retrievals=True``); with ``return_state=True``, the tuple ``(output, memory
        [batch, units * num_copies], last output [batch, units], source memory [batch,
        units * num_copies])`` of the output and the final states.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.layers import AssociativeGRU
    >>> premise_layer = AssociativeGRU(8, num_copies=2, return_state=True)
    >>> _, source, last = premise_layer(np.ones((2, 5, 4), "float32"))
    >>> layer = DualAssociativeGRU(8, num_copies=2, premise_cell=premise_layer.cell)
    >>> output = layer(np.ones((2, 3, 4), "float32"), initial_state=[source * 0, last, source])
    >>> output.shape
    TensorShape([2, 8])

    The same as a functional model, saved, loaded and cloned with the premise cell shared:

    >>> import os, tempfile, keras
    >>> from tf_memlayers.layers import premise_sharing_clone_function
    >>> premise, hypothesis = keras.Input((5, 4)), keras.Input((3, 4))
    >>> premise_layer = AssociativeGRU(8, num_copies=2, return_state=True, name="premise")
    >>> _, source, last = premise_layer(premise)
    >>> layer = DualAssociativeGRU(
    ...     8, num_copies=2, premise_cell=premise_layer.cell, name="hypothesis")
    >>> output = layer(hypothesis, initial_state=[source * 0, last, source])
    >>> model = keras.Model([premise, hypothesis], output)
    >>> path = os.path.join(tempfile.mkdtemp(), "dual.keras")
    >>> model.save(path)
    >>> loaded = keras.models.load_model(path)
    >>> loaded.get_layer("hypothesis").cell.premise_cell is loaded.get_layer("premise").cell
    True
    >>> clone = keras.models.clone_model(
    ...     model, clone_function=premise_sharing_clone_function())
    >>> clone.get_layer("hypothesis").cell.premise_cell is clone.get_layer("premise").cell
    True
    >>> len(model.weights), len(loaded.weights), len(clone.weights)
    (7, 7, 7)
    """

    STATES = (
        ("memory", "units * num_copies"),
        ("previous output", "units"),
        ("source memory", "units * num_copies"),
    )
    CELL_ARGUMENTS = AM_GRU_CELL_ARGUMENTS + ("dual_key",)

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
        fused_loop="auto",
        **kwargs,
    ):
        cell = DualAssociativeGRUCell(
            units,
            num_copies=num_copies,
            dual_key=dual_key,
            seed=seed,
            return_retrievals=return_retrievals,
            premise_cell=premise_cell,
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
    def fused_loop_unsupported(cell, flags):
        if cell.dual_key != "paper":
            return (
                f"runs the Dual AM-GRU with dual_key='paper' only; got dual_key={cell.dual_key!r}."
            )
        return AssociativeRecurrentLayer.fused_loop_unsupported(cell, flags)

    @property
    def cell_permutations(self):
        return self.cell.premise_cell.permutations

    def get_config(self):
        config = super().get_config()
        if self.cell.premise_cell_is_shared:
            config["premise_cell"] = self.cell.premise_cell  # see `_premise_cell_from_config`
        return config

    @classmethod
    def from_config(cls, config):
        premise_cell, config = _premise_cell_from_config(config, cls.__name__)
        return cls(premise_cell=premise_cell, **config)

    def fused_inner_loop(self, sequences, initial_state, mask):
        premise = self.cell.premise_cell
        input_kernel, input_bias, *kernels = premise.projection_kernels()
        projected = ops.matmul(sequences, input_kernel) + input_bias
        source = initial_state[2]
        last, outputs, states = self.run_fused_loop(
            projected,
            initial_state,
            mask,
            kernels,
            source=source,
            dual_gate_kernel=self.cell.dual_gate_kernel,
            dual_candidate_kernel=self.cell.dual_candidate_kernel,
        )
        return last, outputs, states + [source]
