"""The layer registry: what the suites over every layer need to know about each public layer.

Each `keras.layers.Layer` subclass exported by ``tf_memlayers`` is declared once, in the test
module of its mechanism (its NumPy reference and mechanism tests, under ``tests/layers/``), by
a `Declaration` in the module-level tuple ``DECLARATIONS`` (a module may declare several layers,
e.g. a layer and its cell). A declaration gives

* ``make``: a small instance (keyword arguments are passed on, so a suite can set a flag or
  a ``dtype``);
* ``flags``: its boolean constructor arguments, each checked to refuse a non-bool;
* ``reference``: the module of its NumPy reference, where it has one;
* ``not_in``: the suites of `SUITES` that do not apply to it, each with the reason;
* its cases of the suites over every layer (Keras's layer checks, the user journeys, masked
  padding, exact output specs, and empty inputs where the layer takes them; for a cell, the
  cells those use).

The declaring module is the layer's test module: it runs on every Keras backend. The registry
finds the declaring modules itself (`declaring_files`: the test files under ``tests/`` with a
module-level ``DECLARATIONS =``) and reads their declarations when first asked
(`declarations`), so that the declaring modules can import this one. It imports each module as
pytest does, under the name pytest gives it, and reuses the module pytest imported: a test
module is never imported twice.

The suites draw their cases from here (`suite_cases`), and the suites over every layer of a
kind (the cells taking ``reset``, the layers with a carried memory, the layers taking ``sizes``)
take the layers by what they are (`declared_makers`); `tests/layers/test_layer_registry.py`
checks that every exported layer is declared and that each declaration has cases of its own
class in each suite of `SUITES`, unless it says why not. The test selection of the other backends
(`backend_neutral_files`) comes from here too. A new layer is one declaration, in its own test
module.
"""

import dataclasses
import functools
import importlib
import inspect
import os
import pathlib
import re
import sys
from typing import Callable

import keras

TESTS_DIR = pathlib.Path(__file__).resolve().parent

# The suites with one case per layer, by the name `not_in` uses.
SUITES = ("keras_checks", "journeys", "nan_padding", "output_spec", "flags")

# The tests of what every layer shares (the cell wrapper, the holographic ops, the backends'
# own checks) and the suites over every layer, which run on every backend with the mechanisms'
# own test modules.
SHARED_SUITES = (
    "layers/associative_memory/test_am_resets.py",
    "layers/test_layer_conformance.py",
    "layers/test_layer_journeys.py",
    "layers/test_layer_registry.py",
    "layers/test_memory_cell_wrapper.py",
    "layers/test_resets.py",
    "ops/test_holographic.py",
    "ops/test_products.py",
    "test_backends.py",
)

# The tests of what else the package runs without TensorFlow, on every backend: the import
# without TensorFlow, the model builders with the step model, the pair encoder with attention,
# the LSTMs' cuDNN rule, Keras's
# own tests of the Keras classes the package's classes stand in for (ResettableRNN,
# ResettableCell, PhiloxDropout, TiedEmbedding) with ours in their place, training on several
# devices, and the GPU run's rehearsal.
WITHOUT_TENSORFLOW = (
    "benchmarks/test_gpu_run.py",
    "layers/test_cudnn.py",
    "layers/test_keras_tests_with_ours.py",
    "models/test_builders_on_every_backend.py",
    "models/test_conditional_attention_encoder.py",
    "test_package_import.py",
    "models/test_data_parallel.py",
)

# The boolean arguments of the package's `keras.layers.RNN` subclasses.
RNN_LAYER_FLAGS = (
    "return_retrievals", "return_sequences", "return_state", "go_backwards", "stateful",
    "unroll", "zero_output_for_mask",
)  # fmt: skip
# Why a cell is not in the suites over every layer that take whole sequences.
CELL_SPEC = "a cell: its step spec is checked by test_cell_step_spec_is_exact"
RNN_MASKING = (
    "a cell: keras.layers.RNN handles its masked steps, and promises nothing about NaN there"
)


@dataclasses.dataclass(frozen=True)
class Declaration:
    cls: type
    make: Callable[..., keras.layers.Layer]
    flags: tuple = ()
    reference: str | None = None
    not_in: dict = dataclasses.field(default_factory=dict)
    # The cases of the suites over every layer, by name (pytest ids). A name with "fused" in
    # it runs the fused AM-GRU loop, which is TensorFlow only.
    #: cells: ``name -> factory(dtype=None)`` of a cell (cells only);
    cells: dict = dataclasses.field(default_factory=dict)
    #: keras_checks: ``name -> (layer_cls, init_kwargs, run_layer_test arguments)``;
    keras_checks: dict = dataclasses.field(default_factory=dict)
    #: journeys: ``name -> (role, builder)``: ``"step"`` (embedded tokens -> features per
    #: step), ``"pooled"`` (-> one vector), ``"pair"`` ((embedded premise, embedded
    #: hypothesis) -> one vector) or ``"token"`` ((tokens, masked, vocabulary) -> logits);
    journeys: dict = dataclasses.field(default_factory=dict)
    #: nan_padding: ``name -> factory()`` of a layer promising zero (or unread) padded steps;
    nan_padding: dict = dataclasses.field(default_factory=dict)
    #: output_spec: ``name -> (factory(dtype), input shape, call keyword arguments)``;
    output_spec: dict = dataclasses.field(default_factory=dict)
    #: empty: ``name -> factory()`` of a layer called on empty sequences and batches.
    empty: dict = dataclasses.field(default_factory=dict)
    #: ``batch -> dict``: what every call needs besides its input (a memory to attend over),
    #: for a batch of ``batch`` rows; the suites that call the small instance pass it.
    call_kwargs: Callable[[int], dict] | None = None


# The width of the call inputs of the cases (``[2, 3, INPUT_DIM]`` sequences, unless a case
# says otherwise).
INPUT_DIM = 4


def user_rnn(cell, **kwargs):
    """``keras.layers.RNN`` over one of the package's cells, as a user of the backend writes it:
    on JAX with ``zero_output_for_mask=True``, since Keras's JAX loop emits the cell's first
    state at a masked step (support.KERAS_MASKED_OUTPUT; docs/backends.rst, "Backends")."""
    return keras.layers.RNN(
        cell, zero_output_for_mask=keras.backend.backend() != "tensorflow", **kwargs
    )


def read_premise_memory(premise_layer, hypothesis_layer, premise, hypothesis):
    """A ``"pair"`` journey over two recurrent layers: ``premise_layer`` (returning its states
    ``[memory, last output]``) reads the premise, then ``hypothesis_layer`` reads the
    hypothesis from an empty memory and the premise's last output, reading the premise's
    final memory (the Dual AM-GRU's three states); returns the hypothesis output."""
    _, memory, last = premise_layer(premise)
    return hypothesis_layer(
        hypothesis, initial_state=[keras.ops.zeros_like(memory), last, memory]
    )


def rnn_over(cell_name, **rnn_kwargs):
    """A `layer_cls` for `run_layer_test`: `keras.layers.RNN` over a fresh cell of the
    ``cells`` case ``cell_name``, made under the same dtype policy as the RNN."""

    def make(**kwargs):
        cell = suite_cases("cells")[cell_name](dtype=kwargs.get("dtype"))
        return keras.layers.RNN(cell, **rnn_kwargs, **kwargs)

    return make


def rnn_case(cell_name, output_width, trainable_weights, seed_generators):
    """A `keras_checks` case: ``keras.layers.RNN(return_sequences=True)`` over the ``cells``
    case ``cell_name`` on ``[2, 3, INPUT_DIM]`` inputs, with its expected output width and
    numbers of trainable weights and seed generators."""
    return (
        rnn_over(cell_name, return_sequences=True),
        {},
        dict(
            input_shape=(2, 3, INPUT_DIM),
            expected_output_shape=(2, 3, output_width),
            expected_num_trainable_weights=trainable_weights,
            expected_num_seed_generators=seed_generators,
            supports_masking=True,
        ),
    )


# A module-level assignment of ``DECLARATIONS`` (annotated or not), at the start of a line.
_DECLARES = re.compile(r"^DECLARATIONS\s*(?::[^=\n]*)?=", re.MULTILINE)
# Where declarations belong: the layers' test modules (the folder under ``tests/``).
DECLARING_FOLDER = "layers"


def find_declaring_files(tests_dir):
    """The Python files under ``tests_dir`` that assign ``DECLARATIONS`` at module level, as
    sorted paths relative to it.

    Raises:
        ValueError: if one of them is not a test module (``test_*.py``) under
            ``tests_dir/layers/``, the layers' tests: pytest collects the declaring module as
            the layer's tests, and runs it on every backend.
    """
    tests_dir = pathlib.Path(tests_dir)
    found, misplaced = [], []
    for path in sorted(tests_dir.rglob("*.py")):
        if not _DECLARES.search(path.read_text(encoding="utf-8")):
            continue
        relative = path.relative_to(tests_dir).as_posix()
        if path.name.startswith("test_") and relative.startswith(f"{DECLARING_FOLDER}/"):
            found.append(relative)
        else:
            misplaced.append(relative)
    if misplaced:
        raise ValueError(
            f"DECLARATIONS in {', '.join(misplaced)} (under {tests_dir}): a layer is declared "
            f"in its own test module, a test_*.py file under {DECLARING_FOLDER}/, which pytest "
            "collects as the layer's tests and runs on every backend"
        )
    return tuple(found)


@functools.cache
def declaring_files():
    """The declaring test modules of this repository, as paths under ``tests/``."""
    return find_declaring_files(TESTS_DIR)


def _import_test_module(path):
    """The module of the test file ``path``, imported as pytest imports it.

    pytest's default ("prepend") import mode puts the file's folder first on `sys.path` and
    imports the file under its basename (``tests/`` has no ``__init__.py``). Imported here in
    the same way and under the same name, the module is the one pytest collects, whichever of
    the two imports it first.
    """
    name = path.stem
    if name not in sys.modules and sys.path[0] != str(path.parent):
        sys.path.insert(0, str(path.parent))
    module = importlib.import_module(name)
    file = getattr(module, "__file__", None)
    if file is None or not os.path.samefile(file, path):
        raise ImportError(
            f"the module {name!r} is {file}, not the declaring test module {path}: pytest "
            "imports test files by their basename, which must be unique under tests/"
        )
    declared = getattr(module, "DECLARATIONS", None)
    if declared is None:
        raise ImportError(
            f"{path} has no DECLARATIONS yet: it is being imported while the registry is read. "
            "A declaring module must not read the registry (declarations(), suite_cases()) "
            "before its DECLARATIONS is assigned"
        )
    if not isinstance(declared, tuple) or not all(
        isinstance(declaration, Declaration) for declaration in declared
    ):
        raise TypeError(f"DECLARATIONS in {path} must be a tuple of Declaration, got {declared!r}")
    return module


@functools.cache
def declaring_modules():
    """The declaring test modules, by path under ``tests/``."""
    return {relative: _import_test_module(TESTS_DIR / relative) for relative in declaring_files()}


@functools.cache
def declarations():
    """Every declared layer, in the order of `declaring_files` and of each ``DECLARATIONS``."""
    return tuple(
        declaration
        for module in declaring_modules().values()
        for declaration in module.DECLARATIONS
    )


def applies(declaration, suite):
    """Whether ``suite`` (one of `SUITES`) must have a case of ``declaration``'s layer."""
    assert suite in SUITES, suite
    return suite not in declaration.not_in


def suite_cases(suite):
    """Every declared layer's cases of ``suite`` (a field of `Declaration` holding cases), in
    one dict by name."""
    merged = {}
    for declaration in declarations():
        cases = getattr(declaration, suite)
        clash = set(cases) & set(merged)
        assert not clash, f"case names used twice in {suite!r}: {sorted(clash)}"
        merged.update(cases)
    return merged


def backend_neutral_files():
    """The test files that run on every backend (paths under ``tests/``): the suites over
    every layer, the shared parts, the tests of what runs without TensorFlow, and each
    declaring module (found without importing it)."""
    neutral = frozenset(SHARED_SUITES) | frozenset(WITHOUT_TENSORFLOW)
    return neutral | frozenset(declaring_files())


def _is_cell(layer):
    return hasattr(layer, "state_size") and not isinstance(layer, keras.layers.RNN)


def _takes(method, name):
    return name in inspect.signature(method).parameters


@functools.cache
def _small_instances():
    return {declaration.cls.__name__: declaration.make() for declaration in declarations()}


def extra_call_arguments(class_name, batch):
    """What every call of the declared layer ``class_name`` needs besides its input, for a
    batch of ``batch`` rows (its declaration's ``call_kwargs``; none for most layers)."""
    for declaration in declarations():
        if declaration.cls.__name__ == class_name and declaration.call_kwargs:
            return declaration.call_kwargs(batch)
    return {}


def declared_makers(*, cell=None, call_argument=None, init_argument=None, base=None):
    """``{class name: make}`` of the declared layers of one kind, for the tests that run on
    every such layer (a new layer of that kind joins them by its declaration alone).

    Args:
        cell: `True` for cells only (layers with a ``state_size``, called one step at a time),
            `False` for layers on whole sequences only; `None` for both.
        call_argument: Optional name of an argument the layer's ``call`` must take (such as
            ``"reset"``).
        init_argument: Optional name of an argument the layer's constructor must take (such
            as ``"sizes"``).
        base: Optional class the layer's class must subclass.
    """
    made = _small_instances()
    return {
        declaration.cls.__name__: declaration.make
        for declaration in declarations()
        if (cell is None or _is_cell(made[declaration.cls.__name__]) == cell)
        and (call_argument is None or _takes(declaration.cls.call, call_argument))
        and (init_argument is None or _takes(declaration.cls.__init__, init_argument))
        and (base is None or issubclass(declaration.cls, base))
    }


def layer_classes(layer):
    """The package's layer classes in ``layer``: itself, the cell of an RNN, the layers of a
    model (recursively)."""
    declared = {declaration.cls for declaration in declarations()}
    found = set()
    stack = [layer]
    while stack:
        item = stack.pop()
        found.add(type(item))
        if isinstance(item, keras.layers.RNN):
            stack.append(item.cell)
        if isinstance(item, keras.Model):
            stack.extend(item.layers)
    return found & declared
