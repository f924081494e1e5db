"""`piece_sizes` and `split_pieces`: equal or explicit pieces of a last axis, and the message
that refuses a width they do not fit."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.support import as_numpy
from tf_memlayers.ops.pieces import piece_sizes, split_pieces


@pytest.mark.parametrize("width, count", [(12, 1), (12, 3), (12, 4), (7, 7)])
def test_equal_pieces_divide_the_width_and_explicit_sizes_are_the_sizes(width, count):
    assert piece_sizes(width, count) == (width // count,) * count
    assert piece_sizes(width, 3, (width - 5, 3, 2)) == (width - 5, 3, 2)


def test_symbolic_pieces_keep_their_widths_and_a_width_they_do_not_fit_is_refused_naming_the_fix():
    pieces = split_pieces(keras.Input((None, 9)), piece_sizes(9, 3, (2, 3, 4)))
    assert [tuple(p.shape) for p in pieces] == [(None, None, 2), (None, None, 3), (None, None, 4)]
    info = pytest.raises(ValueError, piece_sizes, 10, 3, owner="Splitter", what="parts")
    assert str(info.value) == (
        "Splitter: the input width 10 does not divide into 3 equal parts; pass explicit "
        "`sizes=` (3 positive integers summing to 10)."
    )
    message = r"^Splitter: `sizes` \(4, 4\) sum to 8, but the input width is 9; they must add up"
    with pytest.raises(ValueError, match=message + r" to the width\.$"):
        piece_sizes(9, 2, (4, 4), owner="Splitter")
    # Without an owner the message starts with what is wrong.
    pytest.raises(ValueError, piece_sizes, 9, 2, (5, 5)).match(r"^`sizes` \(5, 5\) sum to 10")


@pytest.mark.parametrize("sizes", [(12,), (4, 8), (5, 4, 3), (1, 1, 10)])
def test_split_pieces_are_contiguous_and_in_order(sizes):
    x = np.random.default_rng(len(sizes)).normal(size=(2, 3, sum(sizes)))
    pieces = split_pieces(ops.convert_to_tensor(x), sizes)
    pieces, bounds = [as_numpy(p) for p in pieces], np.cumsum([0, *sizes])
    assert [p.shape for p in pieces] == [(2, 3, size) for size in sizes]
    for piece, start, stop in zip(pieces, bounds[:-1], bounds[1:]):
        np.testing.assert_array_equal(piece, x[..., start:stop])
    np.testing.assert_array_equal(np.concatenate(pieces, axis=-1), x)
