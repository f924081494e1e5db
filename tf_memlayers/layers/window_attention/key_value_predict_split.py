"""Key / value / predict split of an RNN output (Daniluk et al. 2017, §2.1-2.2)."""

import keras

from tf_memlayers._validation import (
    check_choice,
    check_last_dim,
    check_rank,
    check_sizes,
    check_width,
)
from tf_memlayers.ops.pieces import piece_sizes, split_pieces

MODES = ("attention", "key_value", "key_value_predict")
_PIECES = {"attention": 1, "key_value": 2, "key_value_predict": 3}
_NAMES = {
    "attention": "piece (key)",
    "key_value": "pieces (key, value)",
    "key_value_predict": "pieces (key, value, predict)",
}


def split_sizes(mode, width, sizes=None, owner=None):
    """Piece sizes, key first, for splitting a width-``width`` output in ``mode``.

    Args:
        mode: String, one of `MODES` (checked by the layer that takes it): `"attention"` (1
            piece), `"key_value"` (2 pieces) or `"key_value_predict"` (3 pieces).
        width: Positive integer, the width of the output to split.
        sizes: Optional tuple of positive integers (checked by `check_mode_sizes` when the
            layer is made), explicit piece sizes (key first) that must sum to ``width``.
            Default: `None` (equal pieces, which must divide ``width``).
        owner: Optional string, the class name that error messages start with. Default:
            `None`.

    Returns:
        Tuple of integers, the size of each piece, key first.
    """
    return piece_sizes(width, _PIECES[mode], sizes, owner, _NAMES[mode])


def check_mode_sizes(mode, sizes, owner=None):
    """Checks explicit ``sizes`` (or `None`) against the number of pieces of ``mode``.

    Args:
        mode: String, one of `MODES`.
        sizes: Optional sequence of positive integers, one per piece of ``mode`` (1, 2 or
            3), or `None`.
        owner: Optional string, the class name that error messages start with. Default:
            `None`.

    Returns:
        ``sizes`` as a tuple of integers, or `None`.
    """
    return check_sizes("sizes", sizes, _PIECES[mode], owner, _NAMES[mode])


def key_value_predict_sizes(mode, piece_sizes):
    """``(key, value, predict)`` widths for the resolved ``piece_sizes`` of ``mode``.

    Args:
        mode: String, one of `MODES`.
        piece_sizes: Tuple of integers, the piece sizes of ``mode`` (from `split_sizes`).

    Returns:
        Tuple of three integers ``(key, value, predict)``; in `"attention"` mode all three
        are the single piece's size, in `"key_value"` mode the predict width is the value
        width (eq. 6).
    """
    if mode == "attention":
        return piece_sizes[0], piece_sizes[0], piece_sizes[0]
    if mode == "key_value":
        return piece_sizes[0], piece_sizes[1], piece_sizes[1]
    return tuple(piece_sizes)


def split_key_value_predict(x, mode, piece_sizes):
    """Splits ``x`` into ``(key, value, predict)`` (the same tensor may appear twice).

    Args:
        x: Tensor ``[..., width]`` with ``width = sum(piece_sizes)``.
        mode: String, one of `MODES`.
        piece_sizes: Tuple of integers, the piece sizes of ``mode`` (from `split_sizes`).

    Returns:
        Tuple ``(key, value, predict)`` of tensors ``[..., size]``: ``x`` three times in
        `"attention"` mode, ``(k, v, v)`` in `"key_value"` mode (eq. 6) and ``(k, v, p)``
        in `"key_value_predict"` mode (eq. 11).
    """
    pieces = split_pieces(x, piece_sizes)
    if mode == "attention":
        return pieces[0], pieces[0], pieces[0]
    if mode == "key_value":
        return pieces[0], pieces[1], pieces[1]
    return tuple(pieces)


@keras.saving.register_keras_serializable(package="tf_memlayers")
class KeyValuePredictSplit(keras.layers.Layer):
    """Splits the last axis of h_t into key, value and predict pieces.

    The output split of Daniluk et al. (2017, §2.1-2.2), in contiguous blocks, key first:

    * `"attention"`: key = value = predict = h_t;
    * `"key_value"`: h_t = [k_t ; v_t], predict = v_t (eq. 6);
    * `"key_value_predict"`: h_t = [k_t ; v_t ; p_t] (eq. 11).

    Args:
        mode: String, how the input is split: one of `"attention"`, `"key_value"`,
            `"key_value_predict"`. Default: `"attention"`.
        sizes: Optional tuple of positive integers, explicit piece sizes (1, 2 or 3 of them
            by ``mode``, key first) that sum to the input width. Default: `None` (equal
            pieces, which must divide the width). The paper's best models used widths such
            as 834 and 968, where unequal pieces are needed.
        **kwargs: Base layer keyword arguments, such as ``name`` and ``dtype``.

    Call arguments:
        inputs: A tensor ``[..., width]`` of rank >= 2; after the first call, of the same
            width.

    Returns:
        The tuple ``(key, value, predict)``, each of the input's shape but the last axis; the
        Keras mask, if any, is passed on to all three.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import KeyValuePredictSplit
    >>> key, value, predict = KeyValuePredictSplit("key_value_predict", sizes=(4, 3, 3))(
    ...     np.zeros((2, 5, 10), "float32"))
    >>> tuple(key.shape), tuple(value.shape), tuple(predict.shape)
    ((2, 5, 4), (2, 5, 3), (2, 5, 3))
    """

    def __init__(self, mode="attention", sizes=None, **kwargs):
        super().__init__(**kwargs)
        owner = type(self).__name__
        self.mode = check_choice("mode", mode, MODES, owner)
        self.sizes = check_mode_sizes(self.mode, sizes, owner)
        self.supports_masking = True
        self.piece_sizes = None

    def _sizes_for(self, input_shape):
        """``(key, value, predict)`` widths for ``input_shape``, checked."""
        owner = type(self).__name__
        input_shape = tuple(input_shape)
        if len(input_shape) < 2:
            check_rank("inputs", input_shape, 2, owner)
        if self.piece_sizes is not None:
            check_width(
                "inputs",
                input_shape,
                sum(self.piece_sizes),
                "the width the layer was built for",
                owner,
            )
        width = check_last_dim("inputs", input_shape, owner)
        return split_sizes(self.mode, width, self.sizes, owner)

    def build(self, input_shape):
        self.piece_sizes = self._sizes_for(input_shape)

    def call(self, inputs):
        self._sizes_for(inputs.shape)
        return split_key_value_predict(inputs, self.mode, self.piece_sizes)

    def compute_output_shape(self, input_shape):
        widths = key_value_predict_sizes(self.mode, self._sizes_for(input_shape))
        return tuple((*tuple(input_shape)[:-1], width) for width in widths)

    def compute_output_spec(self, inputs):
        dtype = inputs.dtype
        if keras.backend.is_float_dtype(dtype):
            dtype = self.compute_dtype  # float inputs are cast to the compute dtype
        return tuple(
            keras.KerasTensor(shape, dtype) for shape in self.compute_output_shape(inputs.shape)
        )

    def compute_mask(self, inputs, mask=None):
        return [mask, mask, mask]

    def get_config(self):
        config = super().get_config()
        config.update(
            {"mode": self.mode, "sizes": None if self.sizes is None else list(self.sizes)}
        )
        return config
