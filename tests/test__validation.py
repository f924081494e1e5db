"""The argument checks of `tf_memlayers._validation`: what each lets through, and the whole
message of what it refuses."""

import math
import re

import numpy as np
import pytest

from tf_memlayers import _validation as check


def _raises(message, error=ValueError):
    """``pytest.raises`` matching the whole message, taken literally."""
    return pytest.raises(error, match=f"^{re.escape(message)}$")


def test_check_int_returns_a_python_int_and_check_optional_int_lets_none_through():
    for value in (3, np.int64(3), np.int8(3)):
        result = check.check_int("n", value)
        assert result == 3 and type(result) is int
    assert check.check_int("n", 1, minimum=1) == 1
    assert check.check_int("n", -5) == -5  # no minimum: any integer
    with _raises("`units` must be >= 1, got 0."):
        check.check_int("units", 0, minimum=1)
    with _raises("Layer: `window` must be >= 2, got -3."):
        check.check_int("window", np.int64(-3), minimum=2, owner="Layer")
    assert check.check_optional_int("seed", None, minimum=0) is None
    assert check.check_optional_int("seed", np.int32(4), minimum=0) == 4
    with _raises("`seed` must be >= 0, got -1."):
        check.check_optional_int("seed", -1, minimum=0)
    with pytest.raises(TypeError, match="`seed` must be an integer, got 1.5"):
        check.check_optional_int("seed", 1.5)


@pytest.mark.parametrize(
    "check, kind, value",
    [(check.check_int, "an integer", v) for v in (True, np.True_, 2.0, "3", None, np.float32(1))]
    + [(check.check_number, "a number", v) for v in (True, "0.5", None, 1j, [0.5])],
)
def test_check_int_and_check_number_refuse_what_is_not_their_kind(check, kind, value):
    type_name = type(value).__name__
    with _raises(f"Owner: `n` must be {kind}, got {value!r} of type {type_name}.", TypeError):
        check("n", value, owner="Owner")


BOUNDS = [
    # low, high, low_open, high_open, the allowed values as the message says them
    (0.0, 1.0, False, True, " in [0.0, 1.0)"),
    (0.0, 1.0, True, False, " in (0.0, 1.0]"),
    (0.0, 1.0, True, True, " in (0.0, 1.0)"),
    (0.0, 1.0, False, False, " in [0.0, 1.0]"),
    (0, None, False, True, " >= 0"),
    (0, None, True, True, " > 0"),
    (None, 1, False, True, " < 1"),
    (None, 1, False, False, " <= 1"),
    (None, None, False, True, ""),
]


@pytest.mark.parametrize("low, high, low_open, high_open, allowed", BOUNDS)
def test_check_number_accepts_exactly_the_interval_of_its_bounds(
    low, high, low_open, high_open, allowed
):
    def inside(x):
        above = low is None or (x > low if low_open else x >= low)
        below = high is None or (x < high if high_open else x <= high)
        return math.isfinite(x) and above and below

    bounds = dict(low=low, high=high, low_open=low_open, high_open=high_open)
    # NaN and the infinities are refused within any bounds, and without any.
    values = (-1, 0, 1e-9, 0.5, 1 - 1e-9, 1, 2, np.float32(0.25), np.int64(1), np.float32("nan"))
    for value in (*values, math.nan, math.inf, -math.inf):
        if inside(float(value)):
            result = check.check_number("rate", value, **bounds)
            assert result == float(value) and type(result) is float
        else:
            with _raises(f"Owner: `rate` must be a finite number{allowed}, got {value!r}."):
                check.check_number("rate", value, owner="Owner", **bounds)


def test_check_bool_takes_bools_only_check_choice_lists_the_choices_and_check_even_evens():
    for value in (True, False, np.True_, np.False_):
        assert check.check_bool("flag", value) is bool(value)
    for value in (1, 0, "no", None, np.array([True])):
        with _raises(f"Owner: `flag` must be a bool, got {value!r}.", TypeError):
            check.check_bool("flag", value, owner="Owner")
    # check_choice lists the choices.
    assert check.check_choice("mode", "b", ("a", "b")) == "b"
    with _raises("Owner: `mode` must be one of 'a', 'b'; got 'c'."):
        check.check_choice("mode", "c", ("a", "b"), owner="Owner")
    with _raises("`mode` must be one of 'a', 'b'; got None."):
        check.check_choice("mode", None, ["a", "b"])
    # check_even takes even integers from two.
    assert check.check_even("units", 2, "real and imaginary halves") == 2
    assert check.check_even("units", np.int64(8), "real and imaginary halves") == 8
    with _raises("Cell: `units` must be even (real and imaginary halves); got 7."):
        check.check_even("units", 7, "real and imaginary halves", owner="Cell")
    for value in (0, -2):
        with _raises(f"`units` must be >= 2, got {value}."):
            check.check_even("units", value, "why")
    pytest.raises(TypeError, check.check_even, "units", 4.0, "why").match("`units` must be an int")


def test_check_sizes_returns_a_tuple_of_positive_ints_and_names_what_is_wrong():
    assert check.check_sizes("sizes", None, 3) is None
    for sizes in ([4, 2, 1], (4, 2, 1), np.array([4, 2, 1]), (s for s in (4, 2, 1))):
        result = check.check_sizes("sizes", sizes, 3)
        assert result == (4, 2, 1) and all(type(s) is int for s in result)
    # What is wrong, named.
    with _raises("Owner: `sizes` must be a list of 2 positive integers, got 'ab'.", TypeError):
        check.check_sizes("sizes", "ab", 2, owner="Owner")
    with _raises("`sizes` must be a list of 1 positive integer, got 5.", TypeError):
        check.check_sizes("sizes", 5, 1)
    with _raises("`heads` must list 2 heads, got 3: (1, 2, 3)."):
        check.check_sizes("heads", [1, 2, 3], 2, what="heads")
    with _raises("`sizes` must list 2 pieces, got 1: (4,)."):
        check.check_sizes("sizes", [4], 2)
    with _raises("`sizes` must be >= 1, got 0."):
        check.check_sizes("sizes", [3, 0], 2)
    with pytest.raises(TypeError, match="`sizes` must be an integer, got 1.5"):
        check.check_sizes("sizes", [3, 1.5], 2)


def test_check_rank_counts_the_dimensions_and_check_last_dim_reads_the_last():
    assert check.check_rank("inputs", [2, None, 4], 3) == (2, None, 4)
    with _raises("Layer: `inputs` must have rank 3, got shape (2, 4) (rank 2)."):
        check.check_rank("inputs", (2, 4), 3, owner="Layer")
    with _raises("`inputs` must have rank 2, got shape () (rank 0)."):
        check.check_rank("inputs", (), 2)
    # The last dimension must be known.
    result = check.check_last_dim("inputs", (None, None, np.int64(5)))
    assert result == 5 and type(result) is int
    with _raises("Layer: the last dimension of `inputs` must be known, got (2, 3, None)."):
        check.check_last_dim("inputs", [2, 3, None], owner="Layer")


@pytest.mark.parametrize(
    "mask_shape, inputs_shape, agree",
    [
        ((2, 5), (2, 5, 3), True),
        ((None, 5), (2, 5, 3), True),  # a dimension not known yet is not compared
        ((2, None), (None, 5, 3), True),
        ((2, 5), (2, 5), True),
        ((2, 4), (2, 5, 3), False),
        ((3, 5), (2, 5, 3), False),
        ((2, 5, 1), (2, 5, 3), False),  # a mask has no feature dimension
        ((2,), (2, 5, 3), False),
    ],
)
def test_check_mask_shape_compares_the_first_two_dimensions(mask_shape, inputs_shape, agree):
    if agree:
        assert check.check_mask_shape(mask_shape, inputs_shape) == tuple(mask_shape)
    else:
        with _raises(
            f"Layer: `mask` must have shape (batch, time) = {inputs_shape[:2]}, the first two "
            f"dimensions of `sequence` of shape {inputs_shape}; got shape {mask_shape}."
        ):
            check.check_mask_shape(mask_shape, inputs_shape, owner="Layer", inputs_name="sequence")


def test_check_same_batch_width_and_time_steps_compare_known_dimensions():
    assert check.check_same_batch("a", [2, 3], "b", (2, 7)) == (2, 3)
    for shape, other in (((None, 3), (4, 1)), ((4, 3), (None,)), ((), (4,)), ((4,), ())):
        assert check.check_same_batch("a", shape, "b", other) == shape
    with _raises(
        "Owner: `memory` of shape (2, 3) has batch size 2, but `inputs` "
        "of shape (3, 5, 3) has batch size 3; they must be equal."
    ):
        check.check_same_batch("memory", (2, 3), "inputs", (3, 5, 3), owner="Owner")
    # The width of a known last dimension.
    for shape in ([2, 4], (2, None), ()):
        assert check.check_width("inputs", shape, 4, "the cache width") == tuple(shape)
    with _raises("Owner: `inputs` must have width 4 (the cache width); got shape (2, 5)."):
        check.check_width("inputs", (2, 5), 4, "the cache width", owner="Owner")
    # An empty time dimension.
    for shape in ((2, 1, 3), (2, None, 3), (5,), ()):
        assert check.check_time_steps("inputs", shape) == tuple(shape)
    with _raises("Owner: `inputs` must have at least one time step; got shape (2, 0)."):
        check.check_time_steps("inputs", [2, 0], owner="Owner")


def test_renamed_arguments_take_the_old_name_with_a_warning_and_refuse_both():
    function = check.renamed_arguments("f", "0.4", old="new")(lambda new=1, other=2: (new, other))
    assert function(new=3) == (3, 2) and function(5) == (5, 2)
    with pytest.warns(DeprecationWarning, match="^f: `old` is deprecated and will be") as caught:
        assert function(old=4, other=0) == (4, 0)
    assert caught[0].filename == __file__  # the caller's line
    for call in (lambda: function(old=4, new=3), lambda: function(3, old=4)):  # by name, position
        pytest.raises(TypeError, call).match(r"^f: `old` is the deprecated name of `new`; got both")
