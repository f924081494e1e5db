"""`DualAssociativeEncoder`: Weissenborn's (2016, §4-5) conditional encoding of a sentence pair.

The premise is read by an AM-GRU, the hypothesis by a Dual AM-GRU that starts from the
premise's last output and reads the premise's final memory; both passes read one set of AM-GRU
weights. The encoder owns both passes: the Dual AM-GRU layer owns every weight, and the
premise pass runs the AM-GRU cell inside it, so that ``.keras`` files, `keras.models.clone_model`
and ``from_config`` keep one shared set of weights with nothing but the encoder's own config.
"""

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.associative_memory.associative_gru import (
    AssociativeGRU,
    AssociativeRecurrentLayer,
    loaded_fused_loop,
)
from tf_memlayers.layers.associative_memory.associative_gru_cell import NUM_COPIES
from tf_memlayers.layers.associative_memory.dual_associative_gru import DualAssociativeGRU
from tf_memlayers.layers.memory_cell_wrapper import RematerializedByPosition
from tf_memlayers.ops.holographic import PERMUTATION_SEED

_CONFIG_ARGUMENTS = tuple(
    name for name in DualAssociativeGRU.CELL_ARGUMENTS if name != "return_retrievals"
) + ("return_sequences", "unroll", "zero_output_for_mask", "fused_loop")
_CONFIG_ARGUMENTS += ("dropout", "recurrent_dropout", "dropout_seed")


class PremisePass(AssociativeGRU):
    """An `AssociativeGRU` over the AM-GRU cell of a `DualAssociativeGRU`: the premise pass of
    conditional encoding. Made by the layer that owns both passes, which rebuilds it from its
    own config; never saved or cloned on its own."""

    def __init__(self, cell, fused_loop="auto", **kwargs):
        AssociativeRecurrentLayer.__init__(self, cell, fused_loop=fused_loop, **kwargs)


def conditional_encoding_layers(units, fused_loop="auto", flags=None, **dual_arguments):
    """The premise and hypothesis layers of conditional encoding with shared weights.

    Args:
        units: The number of real units ``n``.
        fused_loop: Both layers' ``fused_loop``.
        flags: Optional dict of `keras.layers.RNN` flags for both layers (``return_state`` is
            always True: the hypothesis starts from the premise's final states).
        **dual_arguments: The other `DualAssociativeGRU` arguments (``num_copies``,
            ``dual_key``, ``seed``, the initializers and regularizers, the dropout's,
            ``dtype``, ``trainable``), checked there.

    Returns:
        ``(premise_layer, hypothesis_layer)``: a `PremisePass` over the AM-GRU cell of the
        `DualAssociativeGRU` ``hypothesis_layer``, which owns every weight. The premise pass
        drops with the same rates, its masks drawn from ``dropout_seed + 1`` (with a fixed
        seed the two passes' masks differ).
    """
    flags = {**(flags or {}), "return_state": True}
    hypothesis_layer = DualAssociativeGRU(units, fused_loop=fused_loop, **flags, **dual_arguments)
    seed = hypothesis_layer.dropout_seed
    premise_layer = PremisePass(
        hypothesis_layer.cell.premise_cell,
        fused_loop=fused_loop,
        dropout=hypothesis_layer.dropout,
        recurrent_dropout=hypothesis_layer.recurrent_dropout,
        dropout_seed=None if seed is None else seed + 1,
        dtype=dual_arguments.get("dtype"),
        trainable=dual_arguments.get("trainable", True),
        **flags,
    )
    return premise_layer, hypothesis_layer


def hypothesis_initial_state(premise_states):
    """The Dual AM-GRU's initial states after the premise: an empty memory, the premise's last
    output, and the premise's final memory to read."""
    memory, last_output = premise_states
    return [ops.zeros_like(memory), last_output, memory]


def step_retrievals(premise_cell, hypothesis_cell, premise, hypothesis, dtype, handover, read):
    """Steps ``premise_cell`` over ONE unpadded premise from zeros, then ``hypothesis_cell``
    over the hypothesis from ``handover(premise states)``.

    Returns:
        Dict with ``"premise_written"`` ``[Tp, units]`` (the delta written at each premise
        step) and ``"hypothesis_read"`` ``[Th, units]`` (the retrieval ``read`` of each
        hypothesis step: ``"source_read"``, from the premise memory, or ``"read"``), float64.
    """
    premise = ops.convert_to_tensor(premise, dtype=dtype)[None]
    hypothesis = ops.convert_to_tensor(hypothesis, dtype=dtype)[None]
    states = [ops.zeros((1, s), dtype=dtype) for s in premise_cell.state_size]
    written = []
    for t in range(premise.shape[1]):
        _, states, retrievals = premise_cell.call_with_retrievals(premise[:, t], states)
        written.append(retrievals["written"][0])
    states = handover(states)
    hypothesis_read = []
    for t in range(hypothesis.shape[1]):
        _, states, retrievals = hypothesis_cell.call_with_retrievals(hypothesis[:, t], states)
        hypothesis_read.append(retrievals[read][0])

    def as_array(rows):
        return np.stack([ops.convert_to_numpy(row) for row in rows]).astype(np.float64)

    return {"premise_written": as_array(written), "hypothesis_read": as_array(hypothesis_read)}


@keras.saving.register_keras_serializable(package="tf_memlayers")
class DualAssociativeEncoder(RematerializedByPosition, keras.layers.Layer):
    r"""Conditional encoding of a sentence pair with the AM-GRU and the Dual AM-GRU.

    Reads the premise with an AM-GRU from an empty memory, then the hypothesis with a Dual
    AM-GRU that starts from an empty memory and the premise's last output and, at every step,
    also reads the premise's final memory :math:`S^x` (Weissenborn 2016, §4):

    .. math::

        h2_t = \frac{1}{C} \sum_{c=1}^{C} \overline{K_{c,t}} \circledast S^x_c, \qquad
        r_t, z_t = \sigma(\ldots + h2_t W_{dg}), \qquad
        \tilde{o}_t = \tanh(\ldots + h2_t W_{dc}),

    the dots being the AM-GRU's own terms. Both passes read one set of AM-GRU weights (the
    paper's conditional encoding with shared parameters); the Dual AM-GRU adds ``W_dg`` and
    ``W_dc`` (and, with ``dual_key="released"``, ``dual_key_kernel``). The layer owns both
    passes and every weight, so a ``.keras`` file, `keras.models.clone_model` and
    ``from_config(get_config())`` give an encoder that shares them in the same way.

    Args:
        units: Positive even integer, the number of real units ``n`` of both passes.
        num_copies: Positive integer, the number of memory copies. Defaults to 8 (the
            paper's).
        dual_key: ``"paper"`` or ``"released"``, how the hypothesis pass keys its reads of
            the premise memory (see `DualAssociativeGRUCell`). Defaults to ``"paper"``.
        seed: Integer, the seed of the copies' permutations. Defaults to 123.
        kernel_initializer: Initializer of every kernel. Defaults to ``"glorot_uniform"``.
        gate_bias_initializer: Initializer of the gate bias. Defaults to ``"ones"``.
        candidate_bias_initializer: Initializer of the candidate bias. Defaults to
            ``"zeros"``.
        kernel_regularizer: Optional regularizer of every kernel. Defaults to None.
        bias_regularizer: Optional regularizer of the biases. Defaults to None.
        return_sequences: Boolean, return every step's output of each sentence (else the
            last). Defaults to False.
        return_state: Boolean, also return the final states of both passes. Defaults to
            False.
        unroll: Boolean, unroll both time loops (the sentence lengths must be known when the
            layer is built). Defaults to False.
        zero_output_for_mask: Boolean, with ``return_sequences``, output zeros (not the
            previous output) at masked steps. Defaults to False.
        fused_loop: `"auto"`, True or False, both passes' time loop (see `AssociativeGRU`):
            the fused loop where it runs the call (`"auto"`),
            always (True), or never (False). Defaults to `"auto"`.
        dropout: Float in [0, 1), both passes' dropout rate on their inputs in training (see
            `AssociativeGRU`). Defaults to 0.
        recurrent_dropout: Float in [0, 1), both passes' dropout rate on the fed-back output
            in training (a training call with it runs Keras's loop). Defaults to 0.
        dropout_seed: Optional non-negative integer: the hypothesis pass draws its dropout
            masks from it, the premise pass from ``dropout_seed + 1``. Defaults to None.
        **kwargs: Base layer arguments (``name``, ``dtype``, ``trainable``).

    Call arguments:
        inputs: List or tuple ``[premise, hypothesis]`` of 3D tensors ``[batch, Tp, dim]`` and
            ``[batch, Th, dim]`` (the same ``dim``).
        mask: Optional list ``[premise mask, hypothesis mask]`` of boolean tensors ``[batch,
            Tp]`` and ``[batch, Th]`` (either may be None), as a masking embedding sets it.
            Masked steps neither read nor write. Default: `None`.
        training: Python boolean, passed to both passes (whether their dropout applies).
            Default: `None`.

    Returns:
        The tuple ``(premise output, hypothesis output)``: each the last output ``[batch,
        units]`` of its pass, or with ``return_sequences=True`` every step's ``[batch, T,
        units]``. With ``return_state=True`` four more: the premise's final memory ``[batch,
        units * num_copies]`` and last output ``[batch, units]``, then the hypothesis's.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import DualAssociativeEncoder
    >>> rng = np.random.default_rng(0)
    >>> premise = rng.normal(size=(2, 7, 16)).astype("float32")
    >>> hypothesis = rng.normal(size=(2, 5, 16)).astype("float32")
    >>> encoder = DualAssociativeEncoder(32, num_copies=4)
    >>> p, h = encoder([premise, hypothesis])
    >>> tuple(p.shape), tuple(h.shape)
    ((2, 32), (2, 32))
    >>> len(encoder.weights)  # 5 AM-GRU weights, read by both passes, and 2 dual kernels
    7
    """

    def __init__(
        self,
        units,
        num_copies=NUM_COPIES,
        dual_key="paper",
        seed=PERMUTATION_SEED,
        kernel_initializer="glorot_uniform",
        gate_bias_initializer="ones",
        candidate_bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        return_sequences=False,
        return_state=False,
        unroll=False,
        zero_output_for_mask=False,
        fused_loop="auto",
        dropout=0.0,
        recurrent_dropout=0.0,
        dropout_seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # Every argument but `return_state` is the passes' (checked by `DualAssociativeGRU`
        # and its cell, naming this layer); the passes always return their states.
        with check.called_as(type(self).__name__):
            self.premise_layer, self.hypothesis_layer = conditional_encoding_layers(
                units,
                fused_loop=fused_loop,
                flags=dict(
                    return_sequences=return_sequences,
                    unroll=unroll,
                    zero_output_for_mask=zero_output_for_mask,
                ),
                num_copies=num_copies,
                dual_key=dual_key,
                seed=seed,
                kernel_initializer=kernel_initializer,
                gate_bias_initializer=gate_bias_initializer,
                candidate_bias_initializer=candidate_bias_initializer,
                kernel_regularizer=kernel_regularizer,
                bias_regularizer=bias_regularizer,
                dropout=dropout,
                recurrent_dropout=recurrent_dropout,
                dropout_seed=dropout_seed,
                dtype=self.dtype_policy,
                trainable=self.trainable,
            )
        self.return_state = check.check_bool("return_state", return_state, type(self).__name__)
        self.supports_masking = True

    @property
    def units(self):
        return self.hypothesis_layer.cell.units

    @property
    def num_copies(self):
        return self.hypothesis_layer.cell.num_copies

    @property
    def return_sequences(self):
        return self.hypothesis_layer.return_sequences

    @property
    def fused_loop(self):
        return self.hypothesis_layer.fused_loop

    def build(self, input_shape):
        # Checked here, so that errors name this layer and the sentence, not a pass inside.
        shapes = check.check_sentence_pair(input_shape, "DualAssociativeEncoder")
        self.input_spec = check.later_calls_spec(shapes)
        premise_shape, hypothesis_shape = shapes
        self.premise_layer.build(premise_shape)
        self.hypothesis_layer.build(hypothesis_shape)

    def call(self, inputs, mask=None, training=None):
        owner = type(self).__name__
        premise, hypothesis = check.check_pair("inputs", inputs, owner)
        premise_mask, hypothesis_mask = check.check_pair_masks(mask, inputs, owner)
        premise_output, *premise_states = self.premise_layer(
            premise, mask=premise_mask, training=training
        )
        hypothesis_output, *hypothesis_states = self.hypothesis_layer(
            hypothesis,
            initial_state=hypothesis_initial_state(premise_states),
            mask=hypothesis_mask,
            training=training,
        )
        if self.return_state:
            return (premise_output, hypothesis_output, *premise_states, *hypothesis_states[:2])
        return premise_output, hypothesis_output

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        masks = list(check.check_pair("mask", mask, type(self).__name__))
        masks = masks if self.return_sequences else [None, None]
        return masks + [None] * 4 * self.return_state

    def compute_output_shape(self, input_shape):
        premise_shape, hypothesis_shape = check.check_pair(
            "inputs", input_shape, type(self).__name__, shapes=True
        )
        batch, n = premise_shape[0], self.units
        if self.return_sequences:
            shapes = ((batch, premise_shape[1], n), (batch, hypothesis_shape[1], n))
        else:
            shapes = ((batch, n), (batch, n))
        if self.return_state:
            memory = (batch, n * self.num_copies)
            shapes += (memory, (batch, n), memory, (batch, n))
        return shapes

    def memory_retrievals(self, premise, hypothesis):
        """Steps both passes over ONE unpadded pair and returns what was written and read.

        Args:
            premise: Tensor or array ``[Tp, dim]``, the (embedded) premise.
            hypothesis: Tensor or array ``[Th, dim]``, the (embedded) hypothesis.

        Returns:
            Dict with ``"premise_written"`` ``[Tp, units]`` (the delta written to the memory
            at each premise step) and ``"hypothesis_read"`` ``[Th, units]`` (what each
            hypothesis step read from the premise's memory), float64 arrays; what
            `tf_memlayers.callbacks.MemoryRetrievalHeatmap` draws.
        """
        if not self.built:
            dim = np.shape(premise)[-1]
            self.build([(None, None, dim), (None, None, dim)])
        # Stepped outside `__call__`, so nothing autocasts the variables: under a mixed
        # precision policy the probe runs in the variables' dtype.
        return step_retrievals(
            self.premise_layer.cell,
            self.hypothesis_layer.cell,
            premise,
            hypothesis,
            self.variable_dtype,
            hypothesis_initial_state,
            "source_read",
        )

    @classmethod
    def from_config(cls, config):
        fused_loop = loaded_fused_loop(config.get("fused_loop", "auto"), cls.__name__)
        return super().from_config({**config, "fused_loop": fused_loop})

    def get_config(self):
        config = super().get_config()
        passes = self.hypothesis_layer.get_config()
        config.update({name: passes[name] for name in _CONFIG_ARGUMENTS})
        config["return_state"] = self.return_state
        return config
