"""An embedding whose transpose is also the output layer (weight tying, Press & Wolf 2017)."""

import threading

import keras
import numpy as np
from keras import ops

from tf_memlayers._validation import (
    check_bool,
    check_choice,
    check_int,
    check_keras_object,
    check_width,
)

FLOATS = ("float16", "bfloat16", "float32", "float64")

# The `TiedEmbedding` calls running in each thread: ``(layer, reverse)``, innermost last.
_RUNNING = threading.local()


@keras.saving.register_keras_serializable(package="tf_memlayers")
class TiedEmbedding(keras.layers.Embedding):
    """A `keras.layers.Embedding` that can also map vectors back to vocabulary logits.

    Called on integer ids it embeds them, exactly as `keras.layers.Embedding`. Called with
    ``reverse=True`` on vectors of width ``output_dim`` it returns vocabulary logits
    ``x E^T + b``, with the same matrix ``E`` and a separate output bias ``b`` (Press & Wolf
    2017, "Using the Output Embedding to Improve Language Models").

    Keras's own tests of `keras.layers.Embedding` (``embedding_test.py`` of
    ``keras/src/layers/core/``) pass with it in its place, as the package's tests check on each
    backend, except those that count its weights (``b`` is one more), that quantize it (it is
    not quantized: the ``reverse=True`` logits read the float ``E``) or that expect Keras's own
    errors for bad sizes (checked as every argument of the package is).

    Args:
        input_dim: Positive integer, the size of the vocabulary (the number of rows of
            ``E``, and the width of the logits).
        output_dim: Positive integer, the dimension of the embedding vectors.
        embeddings_initializer: Initializer for the ``embeddings`` matrix ``E``
            (``[input_dim, output_dim]``). Default: `"uniform"`.
        output_bias_initializer: Initializer for the ``output_bias`` vector ``b``
            (``[input_dim]``). Default: `"zeros"`.
        weights: Optional initial value of the embedding matrix ``E`` (or a list holding
            it), as in `keras.layers.Embedding`; ``b`` starts from its initializer.
            Default: `None`.
        reverse_dtype: Optional float dtype in which the ``reverse=True`` logits are
            computed and returned, e.g. `"float32"` under a mixed-precision policy, whose
            float16 logits would feed the softmax (keras-hub's ``ReversibleEmbedding`` has
            the same argument). Default: `None` (the layer's compute dtype).
        **kwargs: Other `keras.layers.Embedding` arguments (``mask_zero``,
            ``embeddings_regularizer``, ``lora_rank``, ``name``, ``dtype``, ...). A quantized
            ``dtype`` (``"int8_from_float32"``, ...) is refused: the layer is not quantized.

    Call arguments:
        inputs: Integer ids of any shape (``reverse=False``), or vectors
            ``[..., output_dim]`` (``reverse=True``).
        reverse: Boolean, (default `False`), whether to return the logits
            ``[..., input_dim]`` of the vectors instead of embedding ids.

    Returns:
        The embeddings ``[..., output_dim]`` of the ids, or with ``reverse=True`` the
        logits ``x E^T + b`` of shape ``[..., input_dim]``.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import TiedEmbedding
    >>> embedding = TiedEmbedding(10, 4)
    >>> vectors = embedding(np.array([[1, 2, 3]]))
    >>> tuple(embedding(vectors, reverse=True).shape)
    (1, 3, 10)
    """

    def __init__(
        self,
        input_dim,
        output_dim,
        embeddings_initializer="uniform",
        output_bias_initializer="zeros",
        weights=None,
        reverse_dtype=None,
        **kwargs,
    ):
        input_dim = check_int("input_dim", input_dim, 1, "TiedEmbedding")
        if reverse_dtype is not None:
            try:  # "float32", np.float32, ... as one name
                reverse_dtype = keras.backend.standardize_dtype(reverse_dtype)
            except (TypeError, ValueError):
                pass  # refused below, by the name it was given
            reverse_dtype = check_choice("reverse_dtype", reverse_dtype, FLOATS, "TiedEmbedding")
        self.reverse_dtype = reverse_dtype
        output_dim = check_int("output_dim", output_dim, 1, "TiedEmbedding")
        super().__init__(
            input_dim, output_dim, embeddings_initializer=embeddings_initializer, **kwargs
        )
        if self.quantization_mode is not None:
            raise ValueError(
                "TiedEmbedding: `dtype` cannot be a quantized dtype policy (its reverse=True "
                f"logits need the float embedding matrix), got {self.dtype_policy.name!r}."
            )
        self.output_bias_initializer = check_keras_object(
            "output_bias_initializer", output_bias_initializer, "TiedEmbedding"
        )
        if weights is not None:
            # Set here, not by `keras.layers.Embedding`, which builds the layer before the
            # output bias's initializer exists. As there: the matrix, or a list holding it.
            self.build()
            if not (isinstance(weights, list) and len(weights) == 1):
                weights = [weights]
            self.set_weights([*weights, ops.convert_to_numpy(self.output_bias)])

    def build(self, input_shape=None):
        if self.built:
            return
        # Keras's build ends by adding the LoRA weights (``lora_rank``), after which the layer
        # takes no more weights: they are added once the output bias exists.
        rank, self.lora_rank = self.lora_rank, None
        super().build(input_shape)
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.input_dim,), initializer=self.output_bias_initializer
        )
        if rank:
            self.enable_lora(rank, self.lora_alpha)

    @property
    def variable_serialization_spec(self):
        # Saved after the embedding's own variables, in every mode, as in ``.keras`` files
        # written before this layer subclassed `keras.layers.Embedding`.
        return {
            mode: [*names, "output_bias"]
            for mode, names in super().variable_serialization_spec.items()
        }

    def _check_reverse(self, reverse, shape):
        """``reverse`` as a bool; with it, vectors ``shape`` must have width ``output_dim``."""
        reverse = check_bool("reverse", reverse, "TiedEmbedding")
        if reverse:
            check_width(
                "inputs",
                shape,
                self.output_dim,
                "the embedding's output_dim, for reverse=True",
                "TiedEmbedding",
            )
        return reverse

    def call(self, inputs, reverse=False):
        if not self._check_reverse(reverse, inputs.shape):
            return super().call(inputs)
        # Keras's Embedding does not cast its inputs (ids); vectors are cast here, so that
        # float32 vectors give the policy's logits as float16 ones do.
        dtype = self._reverse_dtype()
        inputs = ops.cast(inputs, dtype)
        kernel = ops.transpose(ops.cast(self.embeddings, dtype))
        return ops.matmul(inputs, kernel) + ops.cast(self.output_bias, dtype)

    def _reverse_dtype(self):
        return self.reverse_dtype or self.compute_dtype

    def __call__(self, inputs, *args, **kwargs):
        # Keras asks `compute_mask` for the output's mask with the inputs alone; whether they
        # are ids (float ids too, which Keras's Embedding masks) or vectors is the call's
        # ``reverse``, kept for that question while the call lasts (per thread).
        reverse = kwargs.get("reverse", False)
        calls = _RUNNING.__dict__.setdefault("calls", [])
        calls.append((self, isinstance(reverse, (bool, np.bool_)) and bool(reverse)))
        try:
            return super().__call__(inputs, *args, **kwargs)
        finally:
            calls.pop()

    def compute_mask(self, inputs, mask=None):
        running = getattr(_RUNNING, "calls", ())
        if any(layer is self and reverse for layer, reverse in running[-1:]):
            return mask  # the logits of vectors keep the vectors' mask
        return super().compute_mask(inputs, mask)  # ids: mask_zero decides

    def compute_output_shape(self, input_shape, reverse=False):
        if self._check_reverse(reverse, input_shape):
            return (*input_shape[:-1], self.input_dim)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse)
        dtype = self._reverse_dtype() if reverse else self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)

    def get_config(self):
        config = super().get_config()
        config["reverse_dtype"] = self.reverse_dtype
        config["output_bias_initializer"] = keras.initializers.serialize(
            self.output_bias_initializer
        )
        return config
