"""The layer registry (tests/layer_registry.py) is complete: every exported layer is declared,
and every declaration has cases of its own class in each suite over every layer, unless it
says why not."""

import inspect

import keras
import numpy as np
import pytest
import test_layer_journeys as journeys
from conftest import BACKEND, REPO_ROOT
from layer_registry import LAYERS, SUITES, applies, backend_neutral_files, layer_classes

import tf_memlayers


def _exported_layers():
    return {
        getattr(tf_memlayers, name)
        for name in tf_memlayers.__all__
        if inspect.isclass(getattr(tf_memlayers, name))
        and issubclass(getattr(tf_memlayers, name), keras.layers.Layer)
    }


def test_registry_declares_every_exported_layer():
    declared = [declaration.cls for declaration in LAYERS]
    assert len(declared) == len(set(declared)), "a layer is declared twice"
    missing = sorted(cls.__name__ for cls in _exported_layers() - set(declared))
    assert not missing, f"exported but not declared in tests/layer_registry.py: {missing}"
    unexported = sorted(cls.__name__ for cls in set(declared) - _exported_layers())
    assert not unexported, f"declared but not exported by tf_memlayers: {unexported}"


def test_registry_names_test_modules_and_references_that_exist():
    for declaration in LAYERS:
        assert (REPO_ROOT / "tests" / declaration.tests).is_file(), declaration
        if declaration.reference:
            assert (REPO_ROOT / "tests" / f"{declaration.reference}.py").is_file(), declaration
        assert set(declaration.not_in) <= set(SUITES), declaration
    for name in backend_neutral_files():
        assert (REPO_ROOT / "tests" / name).is_file(), name


def test_registry_makes_small_instances_of_the_declared_class():
    for declaration in LAYERS:
        assert type(declaration.make()) is declaration.cls


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
@pytest.mark.parametrize("declaration", LAYERS, ids=lambda d: d.cls.__name__)
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
