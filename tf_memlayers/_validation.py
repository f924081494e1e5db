"""Argument checks shared by every public class.

Each check raises a ``TypeError`` (wrong type) or ``ValueError`` (wrong value) whose message
names the argument, the value received and what is allowed.
"""

import collections.abc
import numbers

import numpy as np


def check_int(name, value, minimum=None, owner=None):
    """Returns ``value`` as an int; rejects bools, non-integers and values below ``minimum``."""
    prefix = f"{owner}: " if owner else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{prefix}`{name}` must be an integer, got {value!r} "
            f"of type {type(value).__name__}."
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{prefix}`{name}` must be >= {minimum}, got {value}.")
    return value


def check_bool(name, value, owner=None):
    """Returns ``value`` as a bool; only Python and NumPy bools are accepted (not ``"no"``)."""
    if not isinstance(value, (bool, np.bool_)):
        prefix = f"{owner}: " if owner else ""
        raise TypeError(f"{prefix}`{name}` must be a bool, got {value!r}.")
    return bool(value)


def check_optional_int(name, value, minimum=None, owner=None):
    """Like `check_int`, but lets ``None`` through."""
    return None if value is None else check_int(name, value, minimum, owner)


def check_sizes(name, sizes, count, owner=None, what="pieces"):
    """Returns ``sizes`` as a tuple of ``count`` positive ints; ``None`` passes through."""
    if sizes is None:
        return None
    prefix = f"{owner}: " if owner else ""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, collections.abc.Iterable):
        raise TypeError(
            f"{prefix}`{name}` must be a list of {count} positive integers, got {sizes!r}."
        )
    sizes = tuple(sizes)
    if len(sizes) != count:
        raise ValueError(f"{prefix}`{name}` must list {count} {what}, got {len(sizes)}: {sizes}.")
    return tuple(check_int(name, size, 1, owner) for size in sizes)


def check_choice(name, value, allowed, owner=None):
    """Returns ``value`` if it is one of ``allowed``."""
    prefix = f"{owner}: " if owner else ""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{prefix}`{name}` must be one of {choices}; got {value!r}.")
    return value


def check_even(name, value, why, owner=None):
    """Returns ``value`` if it is an even integer >= 2; ``why`` explains the need."""
    value = check_int(name, value, 2, owner)
    if value % 2:
        prefix = f"{owner}: " if owner else ""
        raise ValueError(f"{prefix}`{name}` must be even ({why}); got {value}.")
    return value


def check_rank(name, shape, rank, owner=None):
    """Checks that a tensor shape has exactly ``rank`` dimensions."""
    prefix = f"{owner}: " if owner else ""
    shape = tuple(shape)
    if len(shape) != rank:
        raise ValueError(
            f"{prefix}`{name}` must have rank {rank}, got shape {shape} (rank {len(shape)})."
        )
    return shape


def check_last_dim(name, shape, owner=None):
    """Returns the static last dimension of ``shape``; it must be known."""
    prefix = f"{owner}: " if owner else ""
    last = shape[-1]
    if last is None:
        raise ValueError(f"{prefix}the last dimension of `{name}` must be known, got {tuple(shape)}.")
    return int(last)
