"""The layer registry (tests/layer_registry.py) is complete: every exported layer is declared,
in its own test module, and every declaration has cases of its own class in each suite over
every layer, unless it says why not. The declaring modules are the ones pytest collects."""

import inspect
import pathlib
import sys

import keras
import numpy as np
import pytest
import test_layer_journeys as journeys
from support import BACKEND, COLLECTED_MODULES, REPO_ROOT
from layer_registry import (
    SUITES,
    applies,
    backend_neutral_files,
    declarations,
    declared_makers,
    declaring_files,
    declaring_modules,
    find_declaring_files,
    layer_classes,
)

import tf_memlayers


def _exported_layers():
    return {
        getattr(tf_memlayers, name)
        for name in tf_memlayers.__all__
        if inspect.isclass(getattr(tf_memlayers, name))
        and issubclass(getattr(tf_memlayers, name), keras.layers.Layer)
    }


def test_registry_declares_every_exported_layer():
    declared = [declaration.cls for declaration in declarations()]
    assert len(declared) == len(set(declared)), "a layer is declared twice"
    missing = sorted(cls.__name__ for cls in _exported_layers() - set(declared))
    assert not missing, (
        f"exported but not declared: {missing}; declare each in the DECLARATIONS of its test "
        "module (tests/layer_registry.py)"
    )
    unexported = sorted(cls.__name__ for cls in set(declared) - _exported_layers())
    assert not unexported, f"declared but not exported by tf_memlayers: {unexported}"


def test_registry_names_test_modules_and_references_that_exist():
    assert declaring_files(), "no test module declares a layer"
    for declaration in declarations():
        if declaration.reference:
            assert (REPO_ROOT / "tests" / f"{declaration.reference}.py").is_file(), declaration
        assert set(declaration.not_in) <= set(SUITES), declaration
    for name in backend_neutral_files():
        assert (REPO_ROOT / "tests" / name).is_file(), name


def _same_file(module, path):
    file = getattr(module, "__file__", None)
    return file is not None and pathlib.Path(file).resolve() == path.resolve()


def test_registry_imports_each_declaring_module_once_as_the_module_pytest_collects():
    # pytest imports a test file under its basename; a second import under another name (or a
    # second module object under the same name) would run the module's code twice and make a
    # second set of declarations, apart from the tests that pytest runs.
    registered = [id(declaration) for declaration in declarations()]
    for relative, module in declaring_modules().items():
        path = (REPO_ROOT / "tests" / relative).resolve()
        assert _same_file(module, path), (relative, module)
        names = sorted(name for name, other in list(sys.modules.items()) if _same_file(other, path))
        assert names == [path.stem], f"{relative} is imported as {names}, not once as {path.stem}"
        assert sys.modules[path.stem] is module, relative
        if path in COLLECTED_MODULES:  # collected in this run
            assert COLLECTED_MODULES[path] is module, f"pytest collected another {relative}"
        # The registry holds the module's own declaration objects.
        assert all(id(declaration) in registered for declaration in module.DECLARATIONS)
    assert len(registered) == sum(len(m.DECLARATIONS) for m in declaring_modules().values())


def test_registry_refuses_declarations_outside_the_layers_test_modules(tmp_path):
    declares = "import layer_registry\n\nDECLARATIONS = ()\n"
    (tmp_path / "layers" / "mechanism").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "layers" / "mechanism" / "test_layer.py").write_text(declares)
    # Neither an indented assignment nor a mention declares.
    (tmp_path / "layers" / "test_other.py").write_text(
        "def f():\n    DECLARATIONS = ()\n# DECLARATIONS = ()\nX = 'DECLARATIONS = ()'\n"
    )
    assert find_declaring_files(tmp_path) == ("layers/mechanism/test_layer.py",)
    for misplaced in ("models/test_model.py", "layers/mechanism/reference.py", "test_top.py"):
        (tmp_path / misplaced).write_text(declares)
        with pytest.raises(ValueError, match=f"DECLARATIONS in {misplaced} .*test_\\*.py file"):
            find_declaring_files(tmp_path)
        (tmp_path / misplaced).unlink()


def test_registry_makes_small_instances_of_the_declared_class():
    for declaration in declarations():
        assert type(declaration.make()) is declaration.cls


def test_registry_sorts_the_layers_taking_reset_into_cells_and_sequence_layers():
    """The suites over every cell or sequence layer taking ``reset`` (tests/layers/
    test_resets.py) get each such layer once, as what it is."""
    cells = declared_makers(cell=True, call_argument="reset")
    sequences = declared_makers(cell=False, call_argument="reset")
    everything = declared_makers(call_argument="reset")
    assert cells and sequences and not set(cells) & set(sequences)
    assert set(cells) | set(sequences) == set(everything)
    for name, make in cells.items():
        assert not isinstance(make(), keras.layers.RNN) and make().state_size, name
    for name, make in sequences.items():
        assert not hasattr(make(), "state_size") or isinstance(make(), keras.layers.RNN), name


def _runs_here(name):
    """Whether the case ``name`` runs on this backend (the fused loop is TensorFlow only)."""
    return BACKEND == "tensorflow" or "fused" not in name


# What each suite's cases of one declaration build.
def _keras_checks(declaration):
    for name, (layer_cls, init_kwargs, _) in declaration.keras_checks.items():
        if _runs_here(name):
            yield layer_cls(**init_kwargs)


def _journeys(declaration):
    rng = np.random.default_rng(0)
    for name in declaration.journeys:
        if _runs_here(name):
            keras.backend.clear_session(free_memory=False)
            yield journeys._model(name, False, rng)[0]


def _nan_padding(declaration):
    return (make() for name, make in declaration.nan_padding.items() if _runs_here(name))


def _output_spec(declaration):
    return (
        make("float32") for name, (make, _, _) in declaration.output_spec.items()
        if _runs_here(name)
    )  # fmt: skip


def _flags(declaration):
    # Each declared flag is an argument the layer keeps in its config.
    config = declaration.make().get_config()
    for flag in declaration.flags:
        assert flag in config, f"{declaration.cls.__name__} has no argument {flag!r}"
        yield declaration.make(**{flag: True})


BUILT = {
    "keras_checks": _keras_checks,
    "journeys": _journeys,
    "nan_padding": _nan_padding,
    "output_spec": _output_spec,
    "flags": _flags,
}


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("declaration", declarations(), ids=lambda d: d.cls.__name__)
def test_registry_declaration_has_cases_of_its_own_layer_in_every_suite(declaration, suite):
    built = list(BUILT[suite](declaration))
    if not applies(declaration, suite):
        assert not built, f"{suite!r} is said not to apply, but cases are declared"
        return
    assert built, (
        f"no case of {declaration.cls.__name__} in the {suite!r} suite: add one to its "
        "declaration, or say why not (`not_in`)"
    )
    for layer in built:
        assert declaration.cls in layer_classes(layer), (suite, layer)
