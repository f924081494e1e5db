"""Argument checks shared by every public class.

Each check raises a ``TypeError`` (wrong type) or ``ValueError`` (wrong value) whose message
names the argument, the value received and what is allowed.
"""

import collections.abc
import contextlib
import contextvars
import functools
import inspect
import math
import numbers
import os
import re
import warnings

import keras
import numpy as np

_CALLED = contextvars.ContextVar("called", default=None)


@contextlib.contextmanager
def called_as(owner):
    """Within it, errors name ``owner``, the class a user called, instead of the inner layers
    it makes and passes its arguments to (the outermost ``called_as`` wins)."""
    token = _CALLED.set(_CALLED.get() or owner)
    try:
        yield
    finally:
        _CALLED.reset(token)


# A message that names its owner: "SomeLayer: ..." or "some_function: ...".
_OWNED = re.compile(r"[A-Za-z_][\w.]*: ")
_NAMING = contextvars.ContextVar("naming", default=False)


def errors_named(owner):
    """Decorates a public function (``owner``, its name) so that a `ValueError` or `TypeError`
    raised in its call that names no owner of its own (the checks of its arguments, the
    messages it writes, Keras's) names ``owner``: the user learns which call refused. The
    outermost such function names the error, the one the user called, and none does inside
    a `called_as` block, whose class names its errors itself. The package's own callers of
    a decorated function that report its errors as theirs call ``function.__wrapped__``."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            outermost = not _NAMING.get() and _CALLED.get() is None
            token = _NAMING.set(True)
            try:
                return function(*args, **kwargs)
            except (TypeError, ValueError) as error:
                message = str(error.args[0]) if len(error.args) == 1 else ""
                named = _OWNED.match(message) or message.startswith(f"{owner}(")
                if outermost and message and str(error) == message and not named:
                    error.args = (f"{owner}: {message}",)
                raise
            finally:
                _NAMING.reset(token)

        return wrapper

    return decorate


def owner_of(owner):
    """The class an error names: the one a user called (`called_as`), else ``owner``."""
    return _CALLED.get() or owner


def _prefix(owner):
    owner = owner_of(owner)
    return f"{owner}: " if owner else ""


def renamed_arguments(owner, removed_in, **renames):
    """Decorates a function (or ``__init__``) to take each argument's released name, given as
    ``old_name="new_name"``, with a ``DeprecationWarning`` that names ``owner``, the new name
    and the release ``removed_in`` that drops the old one; both names given is a
    ``TypeError``."""

    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                given = signature.bind_partial(*args).arguments  # the new name by position too
                if new in kwargs or new in given:
                    value = kwargs[new] if new in kwargs else given[new]
                    raise TypeError(
                        f"{owner}: `{old}` is the deprecated name of `{new}`; got both "
                        f"({old}={kwargs[old]!r}, {new}={value!r}). Pass {new} only."
                    )
                warnings.warn(
                    f"{owner}: `{old}` is deprecated and will be removed in {removed_in}; pass "
                    f"the same value as `{new}`.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        # The signature the function declares, also for `inspect.getfullargspec`, which
        # Keras's layers read from their `__init__`.
        wrapper.__signature__ = signature
        return wrapper

    return decorate


def removed_arguments(owner, **hints):
    """Decorates a function to refuse each argument 0.2 took and 0.3 removed, given as
    ``name="what replaces it"``, with a ``TypeError`` that says so, where Python would only
    call the argument unexpected."""

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for name in kwargs:
                if name in hints:
                    raise TypeError(
                        f"{owner}: `{name}` was removed in 0.3: {hints[name]} (the changelog's "
                        "'Upgrading from 0.2')."
                    )
            return function(*args, **kwargs)

        wrapper.__signature__ = inspect.signature(function)
        return wrapper

    return decorate


def shape_of(x):
    """The shape of a tensor, array or nested list, as a tuple."""
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def check_int(name, value, minimum=None, owner=None):
    """Returns ``value`` as an int; rejects bools, non-integers and values below ``minimum``."""
    prefix = _prefix(owner)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{prefix}`{name}` must be an integer, got {value!r} of type {type(value).__name__}."
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{prefix}`{name}` must be >= {minimum}, got {value}.")
    return value


def check_one_batch_per_call(model, name, what, owner):
    """Refuses a ``model`` compiled with ``steps_per_execution`` > 1 for a callback argument
    ``name`` that does ``what`` at given batches: Keras then calls the callbacks once for that
    many batches."""
    steps = int(getattr(model, "steps_per_execution", 1) or 1)
    if steps > 1:
        raise ValueError(
            f"{_prefix(owner)}`{name}` {what}, which needs a callback call before every batch, "
            f"but the model was compiled with steps_per_execution={steps} (Keras then calls "
            f"callbacks once every {steps} batches); compile it with steps_per_execution=1."
        )


def check_number(name, value, low=None, high=None, low_open=False, high_open=True, owner=None):
    """Returns ``value`` as a float; rejects bools, non-numbers, NaN, infinities and values
    outside ``[low, high)`` (``(low, ...`` with ``low_open``, ``..., high]`` without
    ``high_open``; `None`: no bound on that side)."""
    prefix = _prefix(owner)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{prefix}`{name}` must be a number, got {value!r} of type {type(value).__name__}."
        )
    given, value = value, float(value)
    above = low is None or (value > low if low_open else value >= low)
    below = high is None or (value < high if high_open else value <= high)
    if not (math.isfinite(value) and above and below):
        if high is None:
            allowed = "" if low is None else f" {'>' if low_open else '>='} {low}"
        elif low is None:
            allowed = f" {'<' if high_open else '<='} {high}"
        else:
            allowed = f" in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ValueError(f"{prefix}`{name}` must be a finite number{allowed}, got {given!r}.")
    return value


def check_bool(name, value, owner=None):
    """Returns ``value`` as a bool; only Python and NumPy bools are accepted (not ``"no"``)."""
    if not isinstance(value, (bool, np.bool_)):
        prefix = _prefix(owner)
        raise TypeError(f"{prefix}`{name}` must be a bool, got {value!r}.")
    return bool(value)


def check_bool_or_auto(name, value, owner=None):
    """Returns ``value`` as a bool, or ``"auto"`` (Keras's ``jit_compile`` values)."""
    if isinstance(value, str) and value == "auto":
        return value
    if not isinstance(value, (bool, np.bool_)):
        prefix = _prefix(owner)
        raise TypeError(f'{prefix}`{name}` must be a bool or "auto", got {value!r}.')
    return bool(value)


def check_optional_int(name, value, minimum=None, owner=None):
    """Like `check_int`, but lets ``None`` through."""
    return None if value is None else check_int(name, value, minimum, owner)


def check_sizes(name, sizes, count, owner=None, what="pieces"):
    """Returns ``sizes`` as a tuple of ``count`` positive ints; ``None`` passes through."""
    if sizes is None:
        return None
    prefix = _prefix(owner)
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, collections.abc.Iterable):
        raise TypeError(
            f"{prefix}`{name}` must be a list of {count} positive "
            f"{'integer' if count == 1 else 'integers'}, got {sizes!r}."
        )
    sizes = tuple(sizes)
    if len(sizes) != count:
        raise ValueError(f"{prefix}`{name}` must list {count} {what}, got {len(sizes)}: {sizes}.")
    return tuple(check_int(name, size, 1, owner) for size in sizes)


def check_path(name, value, owner=None):
    """Returns ``value``, a string or `os.PathLike`, as `os.fspath` gives it."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{_prefix(owner)}`{name}` must be a string or path, got {value!r}.")
    return os.fspath(value)


def check_choice(name, value, allowed, owner=None):
    """Returns ``value`` if it is one of ``allowed``."""
    prefix = _prefix(owner)
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{prefix}`{name}` must be one of {choices}; got {value!r}.")
    return value


def check_keras_object(name, value, owner=None):
    """``value`` as Keras's layers read an initializer or regularizer argument ``name``
    (``keras.initializers.get`` for a name ending in ``_initializer``,
    ``keras.regularizers.get`` for one ending in ``_regularizer``): a Keras object, its name or
    its config. A name or config Keras does not know is a `ValueError`, anything else it
    cannot read a `TypeError`, naming the argument."""
    kind = name.rsplit("_", 1)[-1]
    module = {"initializer": keras.initializers, "regularizer": keras.regularizers}[kind]
    try:
        return module.get(value)
    except (TypeError, ValueError):
        example = "glorot_uniform" if kind == "initializer" else "l2"
        error = ValueError if isinstance(value, (str, dict)) else TypeError
        raise error(
            f"{_prefix(owner)}`{name}` must be a Keras {kind}, its name (such as {example!r}) "
            f"or its config; got {value!r}."
        ) from None


def check_callbacks(callbacks, owner=None):
    """``callbacks`` as a list of `keras.callbacks.Callback` (`None`: none), as ``fit`` takes
    them."""
    callbacks = () if callbacks is None else callbacks
    if isinstance(callbacks, (str, keras.callbacks.Callback)) or not isinstance(
        callbacks, collections.abc.Iterable
    ):
        raise TypeError(
            f"{_prefix(owner)}`callbacks` must be a list of keras.callbacks.Callback or None, "
            f"got {callbacks!r}."
        )
    callbacks = list(callbacks)
    for index, callback in enumerate(callbacks):
        if not isinstance(callback, keras.callbacks.Callback):
            raise TypeError(
                f"{_prefix(owner)}`callbacks[{index}]` must be a keras.callbacks.Callback, got "
                f"{callback!r}."
            )
    return callbacks


def check_even(name, value, why, owner=None):
    """Returns ``value`` if it is an even integer >= 2; ``why`` explains the need."""
    value = check_int(name, value, 2, owner)
    if value % 2:
        prefix = _prefix(owner)
        raise ValueError(f"{prefix}`{name}` must be even ({why}); got {value}.")
    return value


def check_rank(name, shape, rank, owner=None):
    """Checks that a tensor shape has exactly ``rank`` dimensions."""
    prefix = _prefix(owner)
    shape = tuple(shape)
    if len(shape) != rank:
        raise ValueError(
            f"{prefix}`{name}` must have rank {rank}, got shape {shape} (rank {len(shape)})."
        )
    return shape


def check_last_dim(name, shape, owner=None):
    """Returns the static last dimension of ``shape``; it must be known."""
    prefix = _prefix(owner)
    last = shape[-1]
    if last is None:
        raise ValueError(
            f"{prefix}the last dimension of `{name}` must be known, got {tuple(shape)}."
        )
    return int(last)


def _known_dims_agree(shape, expected):
    return len(shape) == len(expected) and all(
        a is None or b is None or a == b for a, b in zip(shape, expected)
    )


def check_mask_shape(mask_shape, inputs_shape, owner=None, inputs_name="inputs"):
    """Checks that a time-step mask has shape ``[batch, time]``, the first two dimensions of
    the ``[batch, time, ...]`` inputs (dimensions that are not known yet are not compared)."""
    mask_shape, inputs_shape = tuple(mask_shape), tuple(inputs_shape)
    expected = inputs_shape[:2]
    if not _known_dims_agree(mask_shape, expected):
        prefix = _prefix(owner)
        raise ValueError(
            f"{prefix}`mask` must have shape (batch, time) = {expected}, the first two "
            f"dimensions of `{inputs_name}` of shape {inputs_shape}; got shape {mask_shape}."
        )
    return mask_shape


def check_same_batch(name, shape, other_name, other_shape, owner=None):
    """Checks that ``shape`` and ``other_shape`` have the same (known) batch size."""
    shape, other_shape = tuple(shape), tuple(other_shape)
    batch, other = shape[0] if shape else None, other_shape[0] if other_shape else None
    if batch is not None and other is not None and batch != other:
        prefix = _prefix(owner)
        raise ValueError(
            f"{prefix}`{name}` of shape {shape} has batch size {batch}, but `{other_name}` "
            f"of shape {other_shape} has batch size {other}; they must be equal."
        )
    return shape


def check_width(name, shape, width, what, owner=None):
    """Checks that the (known) last dimension of ``shape`` is ``width``; ``what`` says where
    that width comes from."""
    shape = tuple(shape)
    if shape and shape[-1] is not None and shape[-1] != width:
        prefix = _prefix(owner)
        raise ValueError(f"{prefix}`{name}` must have width {width} ({what}); got shape {shape}.")
    return shape


def check_states(name, states, sizes, inputs_name, inputs_shape, owner=None, described=None):
    """``states`` as a flat list (a nesting such as a stack of cells' is flattened): as many
    tensors as ``sizes``, each ``[batch, size]`` of its size and of the batch of
    ``inputs_shape`` (sizes not known yet are not compared). ``described``: a ``(name, what
    gives its width)`` pair per state, for the messages (`None`: "the cell's state size")."""
    flat = isinstance(states, (list, tuple)) and not any(
        isinstance(state, (list, tuple, dict)) for state in states
    )  # (on torch `keras.tree.flatten` takes about 12 µs a step, these checks 3 µs)
    states = list(states) if flat else keras.tree.flatten(states)
    if len(states) != len(sizes):
        listed = f"[batch, size] of the sizes {list(sizes)}"
        if described:
            listed = "[" + ", ".join(f"{n} (batch, {s})" for (n, _), s in zip(described, sizes))
            listed += "]"
        raise ValueError(
            f"{_prefix(owner)}`{name}` must be a list of {len(sizes)} tensors {listed}; got "
            f"{len(states)}."
        )
    for index, (state, size) in enumerate(zip(states, sizes)):
        item, what = f"{name}[{index}]", "the cell's state size"
        if described:
            what = "the {}: {}".format(*described[index])
        shape = check_rank(item, shape_of(state), 2, owner)
        check_width(item, shape, size, what, owner)
        check_same_batch(item, shape, inputs_name, inputs_shape, owner)
    return states


def check_step(inputs, states, sizes, width, owner=None, described=None):
    """Checks one step of a cell called on its own: ``inputs`` ``[batch, width]`` (the width
    it was built with; `None`: any) and its ``states`` (`check_states`)."""
    shape = check_rank("inputs", shape_of(inputs), 2, owner)
    if width is not None:
        check_width("inputs", shape, width, "the width the cell was built with", owner)
    return check_states("states", states, sizes, "inputs", shape, owner, described)


def check_time_steps(name, shape, owner=None):
    """Checks that a ``[batch, time, ...]`` shape has at least one time step (when known)."""
    shape = tuple(shape)
    if len(shape) > 1 and shape[1] == 0:
        prefix = _prefix(owner)
        raise ValueError(f"{prefix}`{name}` must have at least one time step; got shape {shape}.")
    return shape


def check_pair(name, value, owner=None, shapes=False):
    """``value``, a ``[premise, hypothesis]`` pair (with ``shapes``, of shapes: one tensor's
    shape is not a pair)."""
    is_list = isinstance(value, (list, tuple))
    one = shapes and is_list and not all(isinstance(shape, (list, tuple)) for shape in value)
    if one or not (is_list and len(value) == 2):
        given = f"one tensor of shape {tuple(value)}" if one else repr(value)
        given = f"one tensor of shape {tuple(value.shape)}" if hasattr(value, "shape") else given
        raise ValueError(
            f"{_prefix(owner)}`{name}` must be a list [premise, hypothesis] of two entries; "
            f"got {given}."
        )
    return value


def check_sentence_pair(input_shape, owner=None, same_width=True):
    """``(premise shape, hypothesis shape)`` of a sentence pair's ``input_shape``: two rank-3
    shapes of one batch (and, with ``same_width``, one width: a layer reads both)."""
    premise, hypothesis = check_pair("inputs", input_shape, owner, shapes=True)
    premise = check_rank("premise", premise, 3, owner)
    hypothesis = check_rank("hypothesis", hypothesis, 3, owner)
    if same_width and premise[-1] is not None:
        check_width("hypothesis", hypothesis, premise[-1], "the premise's", owner)
    check_same_batch("hypothesis", hypothesis, "premise", premise, owner)
    return premise, hypothesis


def later_calls_spec(shapes):
    """`keras.layers.InputSpec`s for a layer's later calls, from the ``shapes`` of the inputs
    it was built on: each input of its rank and (where known) its last dimension. Keras checks
    them at every call, naming the layer (a backend error deep inside it otherwise)."""
    return [
        keras.layers.InputSpec(ndim=len(shape), axes=None if shape[-1] is None else {-1: shape[-1]})
        for shape in shapes
    ]


def check_pair_masks(mask, inputs, owner=None):
    """``[premise mask, hypothesis mask]`` of a sentence pair's ``mask`` (`None`: none), each
    `None` or ``[batch, time]`` of its sentence in ``inputs``."""
    if mask is None:
        return [None, None]
    masks = list(check_pair("mask", mask, owner))
    for name, sentence, one in zip(("premise", "hypothesis"), inputs, masks):
        if one is not None:
            check_mask_shape(tuple(one.shape), tuple(sentence.shape), owner, inputs_name=name)
    return masks


def check_batch(name, tensor, inputs_name, inputs, owner):
    """Checks that ``tensor`` (a memory, its mask or a state) has the batch size of ``inputs``.

    Where both batch sizes are known (eagerly, in a symbolic call with a fixed batch, in every
    `jax.jit` trace: JAX's shapes are static), a `ValueError` names ``name``, both shapes and
    both sizes. Where one is not known when traced (a `tf.function` over batches of any size,
    as TensorFlow's `fit` traces its step), a TensorFlow assertion makes the same check when
    the step runs: an ``InvalidArgumentError`` naming ``name`` and both sizes. Under XLA
    TensorFlow compiles its assertions to nothing; there a memory of another batch size fails
    in XLA's compilation, or (a batch of one) is broadcast over the inputs' rows.

    Raises:
        ValueError: If both batch sizes are known and differ.
    """
    shape, inputs_shape = shape_of(tensor), shape_of(inputs)
    check_same_batch(name, shape, inputs_name, inputs_shape, owner)
    known = shape and inputs_shape and shape[0] is not None and inputs_shape[0] is not None
    symbolic = isinstance(tensor, keras.KerasTensor) or isinstance(inputs, keras.KerasTensor)
    if known or symbolic or keras.backend.backend() != "tensorflow":
        return
    import tensorflow as tf

    if not tf.executing_eagerly():
        tf.debugging.assert_equal(
            tf.shape(tensor)[0],
            tf.shape(inputs)[0],
            message=(
                f"{owner}: `{name}` must have the batch size of `{inputs_name}` (first: the "
                f"size of `{name}`, second: of `{inputs_name}`)"
            ),
        )
