"""The argument checks of the examples' own functions (readers, pipelines, recipes): each
raises a ``TypeError`` (wrong type) or ``ValueError`` (wrong value) whose message names the
argument, the value received and what is allowed, as the package's layers do."""

import numbers

import numpy as np


def check_int(name, value, minimum=None):
    """Returns ``value`` as an int; rejects bools, non-integers and values below ``minimum``.

    >>> check_int("batch_size", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: `batch_size` must be >= 1, got 0.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"`{name}` must be an integer, got {value!r} of type {type(value).__name__}."
        )
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {int(value)}.")
    return int(value)


def check_optional_int(name, value, minimum=None):
    """Like `check_int`, but lets ``None`` through."""
    return None if value is None else check_int(name, value, minimum)


def check_bool(name, value):
    """Returns ``value`` as a bool; only Python and NumPy bools are accepted (not ``"no"``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be a bool, got {value!r}.")
    return bool(value)


def check_choice(name, value, allowed):
    """Returns ``value`` if it is one of ``allowed``.

    >>> check_choice("split", "dev", ("train", "validation"))
    Traceback (most recent call last):
    ...
    ValueError: `split` must be one of 'train', 'validation'; got 'dev'.
    """
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"`{name}` must be one of {choices}; got {value!r}.")
    return value
