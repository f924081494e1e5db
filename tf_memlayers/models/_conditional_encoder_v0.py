"""The SNLI encoder as tf-memlayers 0.1 and 0.2 saved it, so that their ``.keras`` files load.

Those versions saved `tf_memlayers.models.ConditionalEncoder` as one layer-1 kind name and its
sizes; `tf_memlayers.models.ConditionalEncoder.from_config` hands such a config to this
module's `ConditionalEncoder` (registered as ``ConditionalEncoderV0``), which rebuilds the same
layers under the same attribute and class names, so the saved weights find their variables.
New models compose `tf_memlayers.models.ConditionalEncoder` from layer instances.
"""

import keras

from tf_memlayers._validation import check_bool, check_choice, check_int
from tf_memlayers.layers.associative_memory.am_gru import AssociativeGRU, check_fused_loop
from tf_memlayers.layers.associative_memory.dual_associative_encoder import (
    conditional_encoding_layers,
    hypothesis_initial_state,
    step_retrievals,
)

KINDS = ("gru", "am_gru", "dual_am_gru")


# Named as the class it stands in for: the saved weights' paths hold the class name.
@keras.saving.register_keras_serializable(package="tf_memlayers", name="ConditionalEncoderV0")
class ConditionalEncoder(keras.layers.Layer):
    """The 0.1/0.2 encoder: a kind name picks layer 1 (see the module docstring).

    Layer 1 (a `keras.layers.GRU` cell in `keras.layers.RNN`, or an `AssociativeGRU`) reads
    the premise from a zero state and then the hypothesis from the premise's final state, with
    the same weights. For ``kind="dual_am_gru"`` layer 1 is the conditional encoding of
    `tf_memlayers.layers.DualAssociativeEncoder`: the hypothesis layer is a
    `DualAssociativeGRU` that starts with an empty memory and the premise's last output, reads
    the premise's final memory, and shares every non-dual weight with the premise pass (the
    encoder owns both). Layer 2 is a `keras.layers.GRU` run over both layer-1 output
    sequences, the hypothesis pass starting from the premise's final state.

    Args:
        kind: String, layer 1: `"gru"`, `"am_gru"` or `"dual_am_gru"`. Default:
            `"dual_am_gru"`.
        units: Positive integer, the size of layer 1 (even for the associative kinds).
            Default: `100`.
        top_units: Optional positive integer, the size of the layer-2 GRU. Default: `None`
            (``units``).
        num_copies: Positive integer, the number of memory copies of the associative kinds.
            Default: `8`.
        dual_key: String, the key mode of the Dual AM-GRU: `"paper"` or `"released"`.
            Default: `"paper"`.
        seed: Integer, the seed of the memory permutations (and of the default kernel
            initializer). Default: `123`.
        kernel_initializer: Initializer for every kernel (seed it with a
            `keras.random.SeedGenerator`: an integer seed gives every kernel the same
            values). Default: `None` (uniform ±0.05, as in the paper, drawn from a generator
            seeded by ``seed``).
        fused_loop: `"auto"`, True or False, layer 1's ``fused_loop`` option
            (`AssociativeGRU`, `DualAssociativeGRU`): same results, faster training (XLA
            compiles once per batch shape). True is refused with ``kind="gru"``, which has
            no AM-GRU loop, and with ``unroll=True``. Default: `"auto"`.
        unroll: Boolean, unroll every time loop (layer 1 and layer 2) into one block of
            operations per step: the sentence lengths must then be fixed (known when the
            encoder is built). With ``fused_loop="auto"`` layer 1 then runs Keras's loop,
            unrolled. For fixed-length exports without loop ops (TFLite's built-in operators,
            see `build_fixed_length_snli_model`). Default: `False`.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: List ``[premise, hypothesis]`` of 3D tensors ``[batch, Tp, dim]`` and
            ``[batch, Th, dim]``.
        mask: Optional list ``[premise mask, hypothesis mask]`` of boolean tensors
            ``[batch, Tp]`` and ``[batch, Th]`` (set by a masking embedding). Default:
            `None`.
        training: Python boolean, passed to the recurrent layers. Default: `None`.

    Returns:
        ``[p, h]``: the final layer-2 states of the premise and the hypothesis.
    """

    def __init__(
        self,
        kind="dual_am_gru",
        units=100,
        top_units=None,
        num_copies=8,
        dual_key="paper",
        seed=123,
        kernel_initializer=None,
        fused_loop="auto",
        unroll=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.kind = check_choice("kind", kind, KINDS, "ConditionalEncoder")
        self.unroll = check_bool("unroll", unroll, "ConditionalEncoder")
        if self.kind == "gru":  # else the AM-GRU layers own fused_loop and check it
            self.fused_loop = check_fused_loop(fused_loop, "ConditionalEncoder")
            if self.fused_loop is True:
                raise ValueError(
                    "ConditionalEncoder: `fused_loop=True` runs the AM-GRU loop; kind='gru' has "
                    "none (use kind='am_gru' or 'dual_am_gru')."
                )
        self.units = check_int("units", units, 1, "ConditionalEncoder")
        self.top_units = check_int(
            "top_units", self.units if top_units is None else top_units, 1, "ConditionalEncoder"
        )
        # Checked by the layers that take them (`AssociativeGRU`, `DualAssociativeGRU`).
        self.num_copies = num_copies
        self.dual_key = dual_key
        self.seed = check_int("seed", seed, None, "ConditionalEncoder")
        if kernel_initializer is None:
            # Each draw advances the generator: no two kernels start alike.
            kernel_initializer = keras.initializers.RandomUniform(
                -0.05, 0.05, seed=keras.random.SeedGenerator(self.seed)
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        init = self.kernel_initializer
        layer_options = dict(return_sequences=True, return_state=True, unroll=self.unroll)
        if self.kind == "gru":
            self.premise_cell = keras.layers.GRUCell(
                self.units, kernel_initializer=init, recurrent_initializer=init
            )
            self.premise_layer = keras.layers.RNN(self.premise_cell, **layer_options)
            self.hypothesis_layer = self.premise_layer
        else:
            associative_arguments = dict(
                num_copies=self.num_copies, seed=self.seed, kernel_initializer=init
            )
            if self.kind == "am_gru":
                self.premise_layer = AssociativeGRU(
                    self.units, fused_loop=fused_loop, **associative_arguments, **layer_options
                )
                hypothesis_layer = self.premise_layer
            else:
                self.premise_layer, hypothesis_layer = conditional_encoding_layers(
                    self.units,
                    fused_loop=fused_loop,
                    flags=layer_options,
                    dual_key=self.dual_key,
                    **associative_arguments,
                )
            self.premise_cell = self.premise_layer.cell
            self.hypothesis_layer = hypothesis_layer
            self.fused_loop = self.premise_layer.fused_loop
        self.hypothesis_cell = self.hypothesis_layer.cell
        self.top_layer = keras.layers.GRU(
            self.top_units,
            kernel_initializer=init,
            recurrent_initializer=init,
            unroll=self.unroll,
        )
        self.supports_masking = True

    def build(self, input_shape):
        premise_shape, hypothesis_shape = input_shape
        self.premise_layer.build(premise_shape)
        if self.hypothesis_layer is not self.premise_layer:
            self.hypothesis_layer.build(hypothesis_shape)
        self.top_layer.build(tuple(premise_shape[:2]) + (self.units,))

    def _hypothesis_initial_state(self, premise_states):
        if self.kind == "dual_am_gru":
            return hypothesis_initial_state(premise_states)
        return list(premise_states)

    def call(self, inputs, mask=None, training=None):
        premise, hypothesis = inputs
        premise_mask, hypothesis_mask = mask if mask is not None else (None, None)
        premise_seq, *premise_states = self.premise_layer(
            premise, mask=premise_mask, training=training
        )
        hypothesis_seq, *_ = self.hypothesis_layer(
            hypothesis,
            initial_state=self._hypothesis_initial_state(premise_states),
            mask=hypothesis_mask,
            training=training,
        )
        p = self.top_layer(premise_seq, mask=premise_mask, training=training)
        h = self.top_layer(hypothesis_seq, initial_state=p, mask=hypothesis_mask, training=training)
        return [p, h]

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        batch = input_shape[0][0]
        return [(batch, self.top_units), (batch, self.top_units)]

    def memory_retrievals(self, premise, hypothesis):
        """Steps layer 1 over ONE unpadded pair and returns what was written and read.

        Args:
            premise: Tensor or array ``[Tp, dim]``, the embedded premise.
            hypothesis: Tensor or array ``[Th, dim]``, the embedded hypothesis.

        Returns:
            Dict with ``"premise_written"`` ``[Tp, units]`` (the delta written at each premise
            step) and ``"hypothesis_read"`` ``[Th, units]`` (for the Dual AM-GRU what was read
            from the premise memory, for the AM-GRU what was read from the memory it continues).
            Empty for ``kind="gru"``.
        """
        if self.kind == "gru":
            return {}
        # Stepped outside `__call__`, so nothing autocasts the variables: under a mixed
        # precision policy the probe runs in the variables' dtype.
        return step_retrievals(
            self.premise_cell,
            self.hypothesis_cell,
            premise,
            hypothesis,
            self.variable_dtype,
            self._hypothesis_initial_state,
            "source_read" if self.kind == "dual_am_gru" else "read",
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kind": self.kind,
                "units": self.units,
                "top_units": self.top_units,
                "num_copies": self.num_copies,
                "dual_key": self.dual_key,
                "seed": self.seed,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "fused_loop": self.fused_loop,
                "unroll": self.unroll,
            }
        )
        return config
