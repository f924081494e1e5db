"""Every exported layer has its test class (tests/layer_test_case.py), where it belongs, with
the suites of what it is and cases of its own layer in every suite."""

import importlib
import inspect

import keras
import numpy as np
import pytest

import tf_memlayers
from tests.layer_test_case import (
    KIND_SUITES,
    SUITES,
    CarriedMemoryTests,
    CellTests,
    EmptyInputTests,
    LayerTestCase,
    ResetCellTests,
    ResetSequenceTests,
    SizesTests,
    is_cell,
    journey_model,
    layer_classes,
    takes,
)
from tests.selection import TESTS_DIR, backend_neutral_files, mirrored_test_module
from tests.support import BACKEND
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer


def exported_layers():
    """The `keras.layers.Layer` subclasses that ``tf_memlayers`` exports."""
    return sorted(
        (
            getattr(tf_memlayers, name)
            for name in tf_memlayers.__all__
            if inspect.isclass(getattr(tf_memlayers, name))
            and issubclass(getattr(tf_memlayers, name), keras.layers.Layer)
        ),
        key=lambda cls: cls.__name__,
    )


def test_module_of(layer_cls):
    """The test module of the module defining ``layer_cls``, as a path under ``tests/``."""
    package_path = layer_cls.__module__.removeprefix("tf_memlayers.").replace(".", "/") + ".py"
    return mirrored_test_module(package_path)


test_module_of.__test__ = False  # a helper, not a test


def test_classes_in(relative):
    """The `LayerTestCase` subclasses defined in the test module ``relative`` (a path under
    ``tests/``), imported by its dotted name as pytest imports it."""
    if not (TESTS_DIR / relative).is_file():
        return []
    module = importlib.import_module("tests." + relative.removesuffix(".py").replace("/", "."))
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, LayerTestCase)
        and value.__module__ == module.__name__
    ]


test_classes_in.__test__ = False


def missing_test_classes(layers):
    """``[(layer name, what is wrong)]`` for the ``layers`` without exactly one test class in
    their mirrored test module."""
    problems = []
    for layer_cls in layers:
        relative = test_module_of(layer_cls)
        found = [c for c in test_classes_in(relative) if c.layer_cls is layer_cls]
        if len(found) != 1:
            problems.append(
                (layer_cls.__name__, f"{len(found)} test classes in tests/{relative}, not 1")
            )
    return problems


def test_every_exported_layer_has_one_test_class_in_its_mirrored_test_module():
    problems = missing_test_classes(exported_layers())
    assert not problems, (
        f"{problems}: each exported layer has one LayerTestCase subclass (with its layer_cls) "
        "in the test module mirroring the module that defines it (tests/layer_test_case.py)"
    )


def test_the_completeness_check_names_a_layer_without_a_test_class():
    class Unlisted(keras.layers.Layer):
        pass

    Unlisted.__module__ = "tf_memlayers.layers.philox_dropout"
    assert missing_test_classes([Unlisted]) == [
        ("Unlisted", "0 test classes in tests/layers/test_philox_dropout.py, not 1")
    ]


def _test_classes():
    classes = [
        test_class
        for layer_cls in exported_layers()
        for test_class in test_classes_in(test_module_of(layer_cls))
        if test_class.layer_cls is layer_cls
    ]
    return {test_class.__name__: test_class for test_class in classes}


TEST_CLASSES = _test_classes()


def test_each_test_class_runs_on_every_backend():
    for test_class in TEST_CLASSES.values():
        relative = test_class.__module__.removeprefix("tests.").replace(".", "/") + ".py"
        assert relative in backend_neutral_files(), relative


def expected_kinds(test_class):
    """The kind suites (`KIND_SUITES`) that the layer of ``test_class`` must have."""
    layer_cls, made = test_class.layer_cls, test_class.make()
    cell = is_cell(made)
    kinds = set()
    if cell and "cells" not in test_class.not_in:
        kinds.add(CellTests)
    if takes(layer_cls.call, "reset"):
        kinds.add(ResetCellTests if cell else ResetSequenceTests)
    if issubclass(layer_cls, MemorySequenceLayer):
        kinds.add(CarriedMemoryTests)
    if takes(layer_cls.__init__, "sizes"):
        kinds.add(SizesTests)
    # A layer over sequences is called on empty ones, unless it says why not.
    if not cell and "empty" not in test_class.not_in:
        kinds.add(EmptyInputTests)
    return kinds


@pytest.mark.parametrize("name", sorted(TEST_CLASSES))
def test_test_class_has_the_suites_of_what_its_layer_is(name):
    test_class = TEST_CLASSES[name]
    assert type(test_class.make()) is test_class.layer_cls
    mixins = {kind for kind in KIND_SUITES if issubclass(test_class, kind)}
    assert mixins == expected_kinds(test_class), (
        f"{name}: has {sorted(k.__name__ for k in mixins)}, its layer is of "
        f"{sorted(k.__name__ for k in expected_kinds(test_class))}"
    )
    assert set(test_class.not_in) <= {*SUITES, "cells", "empty"}, test_class.not_in
    if test_class.reference:
        assert (TESTS_DIR / f"{test_class.reference}.py").is_file(), test_class.reference
    for kind, suite in KIND_SUITES.items():
        if issubclass(test_class, kind):
            assert test_class().cases(suite), f"{name} has {kind.__name__} but no {suite!r} case"


def _runs_here(name):
    """Whether the case ``name`` runs on this backend (the fused loop is TensorFlow only)."""
    return BACKEND == "tensorflow" or "fused" not in name


# What each suite's cases of one test class build.
def _keras_checks(test_class):
    for name, (layer_cls, init_kwargs, _) in test_class.keras_checks.items():
        if _runs_here(name):
            yield layer_cls(**init_kwargs)


def _journeys(test_class):
    rng = np.random.default_rng(0)
    for name, (role, build) in test_class.journeys.items():
        if _runs_here(name):
            keras.backend.clear_session(free_memory=False)
            yield journey_model(role, build, False, rng)[0]


def _nan_padding(test_class):
    return (make() for name, make in test_class.nan_padding.items() if _runs_here(name))


def _output_spec(test_class):
    return (
        make("float32") for name, (make, _, _) in test_class.output_spec.items() if _runs_here(name)
    )


def _flags(test_class):
    return (test_class.make(**{flag: True}) for flag in test_class.flags)


BUILT = {
    "keras_checks": _keras_checks,
    "journeys": _journeys,
    "nan_padding": _nan_padding,
    "output_spec": _output_spec,
    "flags": _flags,
}


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("name", sorted(TEST_CLASSES))
def test_test_class_has_cases_of_its_own_layer_in_every_suite(name, suite):
    test_class = TEST_CLASSES[name]
    built = list(BUILT[suite](test_class))
    if suite in test_class.not_in:
        assert not built, f"{suite!r} is said not to apply, but cases are given"
        return
    assert built, (
        f"no case of {test_class.layer_cls.__name__} in the {suite!r} suite: add one to "
        f"{name}, or say why not (`not_in`)"
    )
    for layer in built:
        assert test_class.layer_cls in layer_classes(layer), (suite, layer)


def test_a_suite_that_does_not_apply_is_skipped_with_its_reason(pytester):
    pytester.makepyfile(
        test_toy="""
        import keras
        from tests.layer_test_case import LayerTestCase


        class ToyTest(LayerTestCase):
            layer_cls = keras.layers.Dense
            make = staticmethod(lambda **kw: keras.layers.Dense(2, **kw))
            not_in = {"flags": "has no boolean arguments", "journeys": "a toy"}
            keras_checks = {
                "dense": (
                    keras.layers.Dense,
                    {"units": 2},
                    dict(input_shape=(2, 3), expected_output_shape=(2, 2),
                         expected_num_trainable_weights=2),
                ),
            }
        """
    )
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "-o",
        "python_classes=*Test",
        "-k",
        "flags or keras_layer_checks",
        "-rs",
        "test_toy.py",
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*Dense is not in 'flags': has no boolean arguments*"])
