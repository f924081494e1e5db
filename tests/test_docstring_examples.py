"""Every `Example:` in the docstrings of the layers, metrics, losses, regularizers, initializers,
callbacks, model builders and training utilities runs and prints what it shows. (The examples'
folders run their own docstrings, in their tests.)"""

import doctest
import importlib
import pkgutil

import pytest

import tf_memlayers.callbacks
import tf_memlayers.layers
import tf_memlayers.losses
import tf_memlayers.metrics
import tf_memlayers.models
import tf_memlayers.regularizers
import tf_memlayers.training


def _modules(package, walk=False):
    """The modules of ``package``; with ``walk``, those of its subpackages too."""
    modules = pkgutil.walk_packages if walk else pkgutil.iter_modules
    return sorted(name for _, name, _ in modules(package.__path__, package.__name__ + "."))


def _run_examples(module_name):
    """Runs the docstring examples of ``module_name``; returns doctest's result."""
    module = importlib.import_module(module_name)
    return doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)


# The layers live in one folder per mechanism.
MODULES = _modules(tf_memlayers.layers, walk=True)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    result = _run_examples(module_name)
    assert result.failed == 0
    exported = [
        name
        for name in tf_memlayers.layers.__all__
        if getattr(tf_memlayers.layers, name).__module__ == module_name
    ]
    if exported:
        assert result.attempted > 0, f"{exported} have no runnable Example in their docstrings"


# The public modules of the builders.
BUILDER_MODULES = [
    m for m in _modules(tf_memlayers.models) if not m.rsplit(".", 1)[1].startswith("_")
]


@pytest.mark.parametrize("module_name", BUILDER_MODULES)
def test_model_builder_examples_run(module_name):
    result = _run_examples(module_name)
    assert result.attempted > 0 and result.failed == 0


SUPPORT_MODULES = [
    *_modules(tf_memlayers.metrics),
    *_modules(tf_memlayers.losses),
    *_modules(tf_memlayers.regularizers),
    "tf_memlayers.initializers",
    "tf_memlayers.callbacks.reset_language_model_states",
    "tf_memlayers.callbacks.state_reset_callback",
    "tf_memlayers.callbacks.window_attention_callback",
    "tf_memlayers.callbacks.memory_retrieval_heatmap",
    "tf_memlayers.callbacks.pair_attention_heatmap",
    "tf_memlayers.callbacks.pair_probe",
    *[m for m in _modules(tf_memlayers.training) if not m.rsplit(".", 1)[1].startswith("_")],
]


@pytest.mark.parametrize("module_name", SUPPORT_MODULES)
def test_support_module_examples_run(module_name):
    result = _run_examples(module_name)
    assert result.attempted > 0 and result.failed == 0
