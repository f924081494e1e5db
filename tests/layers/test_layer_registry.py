"""The layer registry (tests/layer_registry.py) is complete, and every suite over every layer
has a case of each declared layer, unless the declaration says why not."""

import inspect

import keras
import numpy as np
import pytest
import test_layer_conformance as conformance
import test_layer_journeys as journeys
from conftest import BACKEND, REPO_ROOT
from layer_registry import LAYERS, SUITES, applies, backend_neutral_files, layer_classes
from test_argument_checks import FLAGS

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


# The classes each suite has cases of.
def _keras_checks():
    for layer_cls, init_kwargs, _ in conformance.LAYER_TESTS.values():
        if BACKEND != "tensorflow" and init_kwargs.get("fused_loop"):
            continue
        yield layer_cls(**init_kwargs)


def _journeys():
    rng = np.random.default_rng(0)
    for param in journeys.NAMES:
        name = getattr(param, "values", (param,))[0]
        if BACKEND != "tensorflow" and "fused_loop" in name:
            continue
        keras.backend.clear_session(free_memory=False)
        yield journeys._model(name, False, rng)[0]


def _nan_padding():
    for name, make in conformance.NAN_PADDING.items():
        if BACKEND == "tensorflow" or "fused" not in name:
            yield make()


def _output_spec():
    for name, (make, _, _) in conformance.SPEC_CASES.items():
        if BACKEND == "tensorflow" or "fused" not in name:
            yield make("float32")


def _flags():
    for make, _ in FLAGS:
        yield make()


CASES = {
    "keras_checks": _keras_checks,
    "journeys": _journeys,
    "nan_padding": _nan_padding,
    "output_spec": _output_spec,
    "flags": _flags,
}


@pytest.mark.parametrize("suite", SUITES)
def test_registry_every_suite_has_a_case_of_every_declared_layer(suite):
    covered = set()
    for layer in CASES[suite]():
        covered |= layer_classes(layer)
    missing = sorted(
        declaration.cls.__name__
        for declaration in LAYERS
        if applies(declaration, suite) and declaration.cls not in covered
    )
    assert not missing, (
        f"no case in the {suite!r} suite for {missing}: add one, or say why not in the "
        "layer's declaration (`not_in`)"
    )
