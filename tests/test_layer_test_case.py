"""Every exported layer has its test class (tests/layer_test_case.py) in the test module that
mirrors its own module, and the class calls each suite that applies to its layer."""

import ast
import importlib
import inspect
import textwrap

import keras
import pytest

import tf_memlayers
from tests.layer_test_case import LayerTestCase, flags_of, takes
from tests.selection import TESTS_DIR, backend_neutral_files, mirrored_test_module
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer

SEQUENCES = "takes a sentence pair [premise, hypothesis], not one sequence"
REFUSES_EMPTY = "refuses sequences without time steps, naming `sequences` (test_layer_conformance)"
# The suites that do not apply to a layer although its kind has them, with why.
DOES_NOT_APPLY = {
    "run_nan_padding_test": {
        "KeyValuePredictSplit": "splits each step's features on its own: a NaN stays in its step",
        "FrozenBatchNormalization": "normalizes every step, masked or not, as Keras's layer",
        "PhiloxDropout": "passes every step through, masked or not, as keras.layers.Dropout",
        "ResettableRNN": "keras.layers.RNN's masking, which promises nothing about NaN",
        "TiedEmbedding": "reads integer ids, which cannot be NaN",
        "HeapCacheAttention": "maps single vectors, with no padded steps",
        "DualAssociativeEncoder": f"{SEQUENCES}: its own test pads both sentences with NaN",
        "ConditionalAttentionEncoder": f"{SEQUENCES}: test_premise_padding_is_never_read",
        "ConditionalEncoder": f"{SEQUENCES}: its layers' tests check NaN at padded steps",
        "AttentionMechanism": "maps one query: test_a_mechanism_on_its_own_... pads with NaN",
    },
    "run_empty_input_test": {
        **dict.fromkeys(["AssociativeGRU", "DualAssociativeGRU"], REFUSES_EMPTY),
        **dict.fromkeys(["ResettableRNN", "AttentionRNN"], REFUSES_EMPTY),
        **dict.fromkeys(["DualAssociativeEncoder", "ConditionalAttentionEncoder"], SEQUENCES),
        "ConditionalEncoder": SEQUENCES,
        "HeapCacheAttention": "maps single vectors, with no sequence",
        "TiedEmbedding": "keras.layers.Embedding's lookup of integer ids",
        "AttentionMechanism": "maps one query over a memory, with no sequence",
    },
}


def exported_layers():
    """The `keras.layers.Layer` subclasses that ``tf_memlayers`` exports."""
    found = [getattr(tf_memlayers, name) for name in tf_memlayers.__all__]
    layers = [c for c in found if inspect.isclass(c) and issubclass(c, keras.layers.Layer)]
    return sorted(layers, key=lambda cls: cls.__name__)


def layer_test_classes(layer_cls):
    """The `LayerTestCase` subclasses for ``layer_cls`` in the test module mirroring its own."""
    package_path = layer_cls.__module__.removeprefix("tf_memlayers.").replace(".", "/") + ".py"
    relative = mirrored_test_module(package_path)
    if not (TESTS_DIR / relative).is_file():
        return relative, []
    module = importlib.import_module("tests." + relative.removesuffix(".py").replace("/", "."))
    found = [value for value in vars(module).values() if inspect.isclass(value)]
    found = [c for c in found if issubclass(c, LayerTestCase) and c.__module__ == module.__name__]
    return relative, [c for c in found if c.layer_cls is layer_cls]


def required_suites(layer_cls):
    """The suites (`LayerTestCase` methods) that apply to ``layer_cls``."""
    cell = takes(layer_cls.call, "states")
    suites = {"run_layer_test", "run_journey_test", "run_config_test"}
    suites |= {"run_cell_tests"} if cell else {"run_output_spec_test", "run_empty_input_test"}
    if not cell:
        suites.add("run_nan_padding_test")
    if flags_of(layer_cls):
        suites.add("run_flags_test")
    if takes(layer_cls.call, "reset"):
        suites.add("run_reset_tests")
    if issubclass(layer_cls, MemorySequenceLayer):
        suites.add("run_carried_memory_tests")
    if takes(layer_cls.__init__, "sizes"):
        suites.add("run_sizes_test")
    return {s for s in suites if layer_cls.__name__ not in DOES_NOT_APPLY.get(s, {})}


def called_suites(test_class):
    """The ``self.run_*`` methods that the test methods of ``test_class`` call."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(test_class)))
    called = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    methods = [f for f in called if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)]
    return {m.attr for m in methods if m.value.id == "self" and m.attr.startswith("run_")}


def problems_of(layer_cls):
    """What is wrong with the test class of ``layer_cls``, or `None`."""
    relative, classes = layer_test_classes(layer_cls)
    if len(classes) != 1:
        name = layer_cls.__name__
        return f"{len(classes)} test classes with layer_cls = {name} in tests/{relative}"
    missing = required_suites(layer_cls) - called_suites(classes[0])
    if missing:
        return f"{classes[0].__name__} calls no {sorted(missing)}"
    if relative not in backend_neutral_files():
        return f"tests/{relative} does not run on every backend (tests/selection.py)"
    return None


@pytest.mark.parametrize("layer_cls", exported_layers(), ids=lambda cls: cls.__name__)
def test_each_exported_layer_has_a_test_class_calling_the_suites_that_apply(layer_cls):
    problem = problems_of(layer_cls)
    assert problem is None, (
        f"{problem}: each exported layer has one LayerTestCase subclass setting layer_cls, in "
        "the test module mirroring its module, that calls each suite that applies to it "
        "(tests/layer_test_case.py; the exceptions, with why, are DOES_NOT_APPLY)"
    )


def test_the_check_names_a_layer_without_a_test_class_and_a_suite_not_called():
    class Unlisted(keras.layers.Layer):
        pass

    Unlisted.__module__ = "tf_memlayers.layers.philox_dropout"
    assert problems_of(Unlisted) == (
        "0 test classes with layer_cls = Unlisted in tests/layers/test_philox_dropout.py"
    )

    class Toy(LayerTestCase):
        def test_layer(self):
            self.run_layer_test(keras.layers.Dense, {"units": 2})

    assert called_suites(Toy) == {"run_layer_test"}
    assert {"run_journey_test", "run_reset_tests"} <= required_suites(tf_memlayers.NGramConcat)
    names = {cls.__name__ for cls in exported_layers()}
    for suite, exceptions in DOES_NOT_APPLY.items():
        assert hasattr(LayerTestCase, suite) and exceptions.keys() <= names, suite
