"""The AM-GRU layer: `keras.layers.RNN` over an `AssociativeGRUCell`, with a fused loop.

`AssociativeRecurrentLayer` holds what the AM-GRU and the Dual AM-GRU layers share: the
checks of the call arguments, masked inputs kept out of the computation, per-row resets
(`tf_memlayers.layers.resettable_rnn.ResettableRNN`), the choice of the time loop (Keras's,
or the fused one: ``tf_memlayers.ops.associative_gru_loop`` on TensorFlow, the Pallas kernels of
``tf_memlayers.ops.associative_gru_pallas`` on JAX; the way `keras.layers.GRU` chooses cuDNN in
its `inner_loop`) and a flat config.
"""

import warnings

import keras
import numpy as np
from keras import ops

from tf_memlayers import _validation as check
from tf_memlayers.layers.associative_memory.associative_gru_cell import (
    NUM_COPIES,
    AssociativeGRUCell,
    dropping_fed_back_output,
)
from tf_memlayers.layers.resettable_rnn import ResettableRNN
from tf_memlayers.ops.holographic import PERMUTATION_SEED


def check_fused_loop(value, owner):
    """``value`` as `"auto"`, True or False; anything else is a `TypeError` naming it."""
    if isinstance(value, str) and value == "auto":
        return "auto"
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{owner}: `fused_loop` must be a bool or 'auto', got {value!r}.")


def loaded_fused_loop(fused_loop, owner):
    """The ``fused_loop`` a saved config's value loads as: a file saved with `True` on
    TensorFlow loads on a backend without a fused loop (torch) as `"auto"`, Keras's loop over
    the same weights, with a warning, since whoever loads a file cannot change its options."""
    backend = keras.backend.backend()
    if fused_loop is True and backend not in ("tensorflow", "jax"):
        warnings.warn(
            f"{owner}: saved with fused_loop=True, which has no fused loop on the {backend!r} "
            "backend; loaded with fused_loop='auto' (Keras's loop, the same weights and "
            "outputs), which saving it again keeps.",
            stacklevel=2,
        )
        return "auto"
    return fused_loop


def fused_loop_pays():
    """Whether ``fused_loop="auto"`` takes the fused loop (where it runs the layer): on
    TensorFlow. On JAX the Pallas kernels are taken when asked (``fused_loop=True``): the
    default stays Keras's loop until the GPU run has compiled, checked and timed them on a
    GPU (off a GPU they run in Pallas's interpret mode, slower than Keras's loop)."""
    return keras.backend.backend() == "tensorflow"


def fused_loop_resets():
    """Whether this backend's fused loop runs calls with ``reset``: the Pallas kernels (JAX)
    do, TensorFlow's fused op does not."""
    return keras.backend.backend() == "jax"


class AssociativeRecurrentLayer(ResettableRNN):
    """Base of `AssociativeGRU` and `DualAssociativeGRU` (not used on its own).

    A `ResettableRNN`: on TensorFlow a call with ``reset`` runs Keras's loop with a reset per
    step (see `ResettableRNN`), since TensorFlow's fused loop has no resets
    (``fused_loop="auto"`` falls back to Keras's loop for that call, ``fused_loop=True``
    refuses it); on JAX the fused loop, the Pallas kernels, runs it.

    ``dropout`` and ``recurrent_dropout`` are `keras.layers.GRU`'s: in training, one mask per
    sequence, drawn from ``dropout_seed``, multiplies the inputs ``x_t`` at every step (before
    either loop), another the fed-back output ``o_{t-1}`` where the step reads it (the state
    carried and emitted is left as it is). The fused loops apply no recurrent dropout: a
    training call with it runs Keras's loop (``fused_loop="auto"``), and ``fused_loop=True``
    refuses a positive ``recurrent_dropout``, as `keras.layers.GRU` takes cuDNN only without it.

    Subclasses set ``CELL_ARGUMENTS``, the cell's config keys that become the layer's, and
    implement `fused_inner_loop`.
    """

    CELL_ARGUMENTS = ()

    def __init__(
        self,
        cell,
        fused_loop="auto",
        dropout=0.0,
        recurrent_dropout=0.0,
        dropout_seed=None,
        **kwargs,
    ):
        owner = check.owner_of(type(self).__name__)
        fused_loop = check_fused_loop(fused_loop, owner)
        self.dropout = check.check_number("dropout", dropout, 0.0, 1.0, owner=owner)
        self.recurrent_dropout = check.check_number(
            "recurrent_dropout", recurrent_dropout, 0.0, 1.0, owner=owner
        )
        self.dropout_seed = check.check_optional_int("dropout_seed", dropout_seed, 0, owner)
        super().__init__(cell, **kwargs)  # which checks the RNN flags
        unsupported = self.fused_loop_unsupported(cell, self.unroll)
        if fused_loop is True and self.recurrent_dropout and not unsupported:
            unsupported = (
                f"cannot apply recurrent_dropout={self.recurrent_dropout}: the fused loop reads "
                "the fed-back output as it is. Use fused_loop='auto' (Keras's loop for a "
                "training call, the fused loop for the others) or False."
            )
        if fused_loop is True and unsupported:
            raise ValueError(f"{owner}: `fused_loop=True` {unsupported}")
        if self.dropout or self.recurrent_dropout:
            self.seed_generator = keras.random.SeedGenerator(self.dropout_seed)
        self.fused_loop = fused_loop
        # "auto": the fused loop wherever it runs this layer's options and pays
        # (`fused_loop_pays`: TensorFlow), else Keras's loop, as keras.layers.GRU chooses cuDNN with
        # use_cudnn="auto".
        self.uses_fused_loop = fused_loop is True or (
            fused_loop == "auto" and not unsupported and fused_loop_pays()
        )

    @staticmethod
    def fused_loop_unsupported(cell, unroll):
        """Why the fused loop cannot run a layer of ``cell`` that ``unroll``s its loop or not
        (the end of a sentence that starts "`fused_loop=True` "), or `None` if it can."""
        backend = keras.backend.backend()
        if backend not in ("tensorflow", "jax"):
            return (
                "needs the TensorFlow backend (the fused loop "
                "tf_memlayers.ops.associative_gru_loop, a TensorFlow op) or JAX (the Pallas "
                "kernels of tf_memlayers.ops.associative_gru_pallas); the Keras backend "
                f"is {backend!r}. Use fused_loop='auto' (the default) or False: the same layer "
                "and weights, run by Keras's loop on every backend."
            )
        if cell.return_retrievals:
            return (
                "cannot be combined with return_retrievals=True: the fused loop emits only "
                "the outputs. Use fused_loop='auto' or False for the retrievals."
            )
        if unroll:
            return (
                "cannot be combined with unroll=True: the fused loop always loops. Use "
                "fused_loop='auto' or False to unroll."
            )
        return None

    @staticmethod
    def cell_keywords(kwargs):
        """The keyword arguments of ``kwargs`` that the layer's cell takes too."""
        return {"dtype": kwargs.get("dtype"), "trainable": kwargs.get("trainable", True)}

    def call(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        sequences = ops.convert_to_tensor(sequences)
        if mask is not None:
            mask = ops.convert_to_tensor(mask)
        self._check_fused_reset(reset)
        return super().call(
            sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
        )

    def _check_fused_reset(self, reset):
        """Refuses ``reset`` with ``fused_loop=True`` where the fused loop has no resets (the
        call's other arguments: `ResettableRNN.check_sequences` and `checked_reset`)."""
        if reset is not None and self.fused_loop is True and not fused_loop_resets():
            raise ValueError(
                f"{type(self).__name__}: `reset` cannot be used with fused_loop=True: the fused "
                "loop (tf_memlayers.ops.associative_gru_loop) has no resets. Use "
                "fused_loop='auto' (the default; a call with `reset` then runs Keras's loop) "
                "or fused_loop=False."
            )

    def compute_output_spec(
        self,
        sequences,
        initial_state=None,
        mask=None,
        training=False,
        reset=None,
        sequences_mask=None,
    ):
        mask = sequences_mask if mask is None else mask
        self._check_fused_reset(reset)
        return super().compute_output_spec(
            sequences, initial_state=initial_state, mask=mask, training=training, reset=reset
        )

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if mask is not None:
            # A masked step's output and states are discarded; zeroing its inputs keeps
            # non-finite padding out of the kept outputs and of the gradients.
            keep = ops.expand_dims(ops.cast(mask, "bool"), -1)
            sequences = ops.where(keep, sequences, ops.zeros_like(sequences))
        if not isinstance(initial_state, (list, tuple)):
            initial_state = [initial_state]
        # The rates read first: a call without dropout never reads `training` (which under
        # `keras.RematScope` on JAX is traced).
        if self.dropout and training:  # one mask for every step, as keras.layers.GRU's
            step_mask = self._dropout_mask(sequences[:, 0], self.dropout)
            sequences = sequences * ops.expand_dims(step_mask, 1)
        recurrent_mask = None
        if self.recurrent_dropout and training:
            recurrent_mask = self._dropout_mask(initial_state[1], self.recurrent_dropout)
        # TensorFlow's fused loop has no resets: a call with `reset` runs Keras's loop there
        # (`call` has refused it with fused_loop=True); the Pallas kernels have them.
        fused = self._call_reset is None or fused_loop_resets()
        if self.uses_fused_loop and fused and recurrent_mask is None:
            return self.fused_inner_loop(sequences, list(initial_state), mask, training)
        with dropping_fed_back_output(self.cell, recurrent_mask):
            return self.keras_inner_loop(sequences, list(initial_state), mask, training)

    def _dropout_mask(self, like, rate):
        """A dropout mask of ``like``'s shape and dtype: 0 or ``1 / (1 - rate)``."""
        ones = ops.ones_like(like)
        return keras.random.dropout(ones, rate, seed=self.seed_generator)

    def keras_inner_loop(self, sequences, initial_state, mask, training):
        """`ResettableRNN`'s loop over the cell: Keras's own, with ``reset`` if the call has
        one, or `scan_loop` with a mask on a backend other than TensorFlow."""
        return super().inner_loop(sequences, initial_state, mask, training=training)

    def fused_inner_loop(self, sequences, initial_state, mask, training=False):
        """The fused loop (`run_fused_loop`); returns ``(last output, outputs, final
        states)``."""
        raise NotImplementedError

    def run_fused_loop(self, projected, initial_state, mask, kernels, training=False, **options):
        """`batch_major_associative_gru_loop` (TensorFlow) or `associative_gru_pallas` (JAX)
        with this layer's direction, mask rule and resets; returns ``(last output, outputs,
        [memory, output])``.

        On TensorFlow on a CPU the loop splits the batch into shards that run concurrently,
        except in inference with a fixed batch size (a model built for export, an eager
        call): there the batch runs as one loop traced for its own shapes, all static, as
        TFLite's built-in operators need to convert it.
        """
        if keras.backend.backend() == "jax":
            # The Pallas kernels (compiled on a GPU, interpreted elsewhere).
            from tf_memlayers.ops.associative_gru_pallas import associative_gru_pallas

            dual = [options.pop(k, None) for k in ("dual_gate_kernel", "dual_candidate_kernel")]
            outputs, memory, output = associative_gru_pallas(
                projected,
                initial_state[0],
                initial_state[1],
                kernels,
                self.cell_permutations,
                mask=mask,
                reset=self._call_reset,
                go_backwards=self.go_backwards,
                zero_output_for_mask=self.zero_output_for_mask,
                dual_kernels=None if dual[0] is None else [ops.convert_to_tensor(k) for k in dual],
                **options,
            )
            return outputs[:, -1], outputs, [memory, output]
        # A TensorFlow op: imported here, since the layer itself needs no TensorFlow.
        from tf_memlayers.ops.associative_gru_loop import batch_major_associative_gru_loop

        if not training and projected.shape[0] is not None:
            options.update(num_shards=1, exact_shapes=True)

        outputs, memory, output = batch_major_associative_gru_loop(
            projected,
            initial_state[0],
            initial_state[1],
            kernels,
            self.cell_permutations,
            mask=mask,
            go_backwards=self.go_backwards,
            zero_output_for_mask=self.zero_output_for_mask,
            **options,
        )
        return outputs[:, -1], outputs, [memory, output]

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        config.update({name: cell_config[name] for name in self.CELL_ARGUMENTS})
        config["fused_loop"] = self.fused_loop
        config.update(
            dropout=self.dropout,
            recurrent_dropout=self.recurrent_dropout,
            dropout_seed=self.dropout_seed,
        )
        return config

    @classmethod
    def from_config(cls, config):
        fused_loop = loaded_fused_loop(config.get("fused_loop", "auto"), cls.__name__)
        return cls(**{**config, "fused_loop": fused_loop})


AM_GRU_CELL_ARGUMENTS = (
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
class AssociativeGRU(AssociativeRecurrentLayer):
    """AM-GRU layer: `keras.layers.RNN` over an `AssociativeGRUCell`, with the input
    projections of all time steps computed before the loop.

    The ``x_t`` rows of the key, gate and candidate kernels (and the biases) are applied to the
    whole sequence in one matmul; each step then multiplies only the fed-back output
    ``o_{t-1}`` and the retrieved ``h``. Outputs, states, masking (a masked step copies the
    previous output and states forward), ``go_backwards``, ``stateful`` and ``unroll`` are
    those of ``keras.layers.RNN(AssociativeGRUCell(...))``, equal up to float rounding. The
    weights live in ``layer.cell`` with the cell's names, shapes and row order, so
    `tf_memlayers.compat.load_original_weights` takes ``layer.cell``.

    With the fused loop the time loop is one op with a hand-written backward pass. On
    TensorFlow both loops are compiled with XLA even when the model is not, and on CPU the
    batch is split into one independent loop per core. On JAX the forward loop is one Pallas
    kernel and the backward loop another, each running all the time steps inside, a program
    per block of 16 batch rows; they take masks and resets. Each new (batch, time) shape
    compiles once, so the fused loop suits fixed-size padded batches. By default
    (``fused_loop="auto"``) the layer runs the fused loop wherever it supports the call and
    pays: on TensorFlow, without ``return_retrievals`` or ``unroll``; on JAX the kernels run
    when asked (``fused_loop=True``: compiled on a GPU for at most 256 units, in Pallas's
    interpret mode elsewhere); Keras's loop otherwise, so a model saved on TensorFlow loads
    and runs on JAX and torch. The speed table on the documentation's results page compares
    both loops with `keras.layers.GRU`.

    Args:
        units: Positive even integer, the number of real units ``n`` (``n/2`` complex
            entries).
        num_copies: Positive integer, the number of permuted memory copies. Defaults to 8.
        seed: Integer, the seed of the copies' permutations. Defaults to 123.
        return_retrievals: Boolean, whether each step's output is ``[o_t, delta, h]``
            (``3 * units``). Defaults to False.
        kernel_initializer: Initializer of every kernel. Defaults to ``"glorot_uniform"``.
        gate_bias_initializer: Initializer of the gate bias. Defaults to ``"ones"`` (the
            original's).
        candidate_bias_initializer: Initializer of the candidate bias. Defaults to
            ``"zeros"``.
        kernel_regularizer: Optional regularizer of every kernel. Defaults to None.
        bias_regularizer: Optional regularizer of the biases. Defaults to None.
        return_sequences: Boolean, return every step's output (else the last). Defaults to
            False.
        return_state: Boolean, also return the final states ``[memory, last output]``.
            Defaults to False.
        go_backwards: Boolean, process the sequence in reverse. Defaults to False.
        stateful: Boolean, carry the final states to the next batch. Defaults to False.
        unroll: Boolean, unroll the time loop (needs a known length). Defaults to False.
        zero_output_for_mask: Boolean, output zeros (not the previous output) at masked
            steps. Defaults to False.
        fused_loop: `"auto"`, True or False: run the time loop fused where it can and pays
            (`"auto"`: TensorFlow's op), always
            (True: TensorFlow's op, or on JAX the Pallas kernels, compiled on a GPU and in
            Pallas's interpret mode elsewhere; a `ValueError` on another backend, or with
            ``return_retrievals``, ``unroll`` or ``recurrent_dropout``), or never (False:
            Keras's loop). Same results up to float rounding. Defaults to `"auto"`.
        dropout: Float in [0, 1), the dropout rate on the inputs ``x_t`` in training: one
            mask per sequence, the same at every step, as `keras.layers.GRU`'s. Defaults
            to 0.
        recurrent_dropout: Float in [0, 1), the dropout rate on the fed-back output
            ``o_{t-1}`` where a training step reads it (the state carried and returned is
            not dropped): one mask per sequence. The fused loops do not apply it: a training
            call then runs Keras's loop. Defaults to 0.
        dropout_seed: Optional non-negative integer, the seed of the dropout masks (``seed``
            is the permutations'). Defaults to None.
        **kwargs: Base layer arguments (``name``, ``dtype``, ``trainable``).

    Call arguments:
        sequences: ``[batch, time, input_dim]``, at least one time step.
        initial_state: optional ``[memory [batch, units * num_copies], previous output
            [batch, units]]``; zeros by default (the empty memory).
        mask: optional boolean ``[batch, time]``; masked steps neither read nor write, and
            their inputs are never used (non-finite padding is harmless).
        sequences_mask: Where the call has other tensors (``initial_state``, ``reset``), Keras
            passes the mask of ``sequences`` (from ``Embedding(mask_zero=True)``, say) here
            rather than as ``mask``; used where ``mask`` is `None`. Default: `None`.
        training: Boolean, whether ``dropout`` and ``recurrent_dropout`` apply.
        reset: optional boolean ``[batch, time]``, true where a new document starts: before
            that step the row's memory and previous output are set to zero, so each document
            packed into a row gives the outputs and final states of the same layer run on it
            alone, from zeros (``initial_state`` and stateful states are forgotten at the
            reset; other rows and steps are untouched; a reset at a masked step is ignored;
            no gradient flows back through a reset; see `ResettableRNN`). TensorFlow's
            fused loop has no resets: there, with ``fused_loop="auto"`` a call with
            ``reset`` runs Keras's loop, with ``fused_loop=True`` it is a `ValueError`; the
            Pallas kernels (JAX) run it. ``reset`` with ``go_backwards=True`` is a
            `ValueError`.

    A sequence without time steps, a mask or reset whose shape is not ``[batch, time]``, a
    reset that is not boolean, or an initial state of another width or batch size is a
    `ValueError` naming the argument and the shapes.

    Returns:
        The last output ``[batch, units]``, or with ``return_sequences=True`` the output of
        every step ``[batch, time, units]`` (``3 * units`` wide with
        ``return_retrievals=True``); with ``return_state=True``, the tuple ``(output, memory
        [batch, units * num_copies], last output [batch, units])`` of the output and the final
        states.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from tf_memlayers import AssociativeGRU
    >>> layer = AssociativeGRU(8, num_copies=3, return_state=True)
    >>> output, memory, last = layer(np.ones((2, 5, 4), "float32"))
    >>> tuple(output.shape), tuple(memory.shape)
    ((2, 8), (2, 24))

    Two documents packed into row 0, the second starting at step 2, give what the second
    gives on its own:

    >>> x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    >>> reset = np.zeros((2, 5), bool)
    >>> reset[0, 2] = True
    >>> layer = AssociativeGRU(8, num_copies=3, return_sequences=True)
    >>> packed = layer(x, reset=reset)
    >>> alone = layer(x[:1, 2:])
    >>> bool(keras.ops.all(keras.ops.isclose(packed[0, 2:], alone[0], atol=1e-5)))
    True
    """

    CELL_ARGUMENTS = AM_GRU_CELL_ARGUMENTS

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
        fused_loop="auto",
        **kwargs,
    ):
        with check.called_as(type(self).__name__):  # errors name this layer, not its cell
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
                name="associative_gru_cell",
                **self.cell_keywords(kwargs),
            )
            super().__init__(cell, fused_loop=fused_loop, **kwargs)

    @property
    def cell_permutations(self):
        return self.cell.permutations

    def _projections(self, sequences):
        """The input projections of every step, and the step's remaining kernels."""
        input_kernel, input_bias, *kernels = self.cell._projection_kernels()
        # Computed here, outside the loop: the step captures loop-invariant tensors instead
        # of reading (and, under XLA, storing per step for the gradient) the variables.
        return ops.matmul(sequences, input_kernel) + input_bias, kernels

    def keras_inner_loop(self, sequences, initial_state, mask, training):
        projected, kernels = self._projections(sequences)
        with self.cell._stepping_on_projections(kernels):
            return super().keras_inner_loop(projected, initial_state, mask, training)

    def fused_inner_loop(self, sequences, initial_state, mask, training=False):
        projected, kernels = self._projections(sequences)
        return self.run_fused_loop(projected, initial_state, mask, kernels, training)
