"""Every `Example:` in the docstrings of the layers, metrics, losses, initializers, callbacks and
model builders runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import tf_memlayers.callbacks
import tf_memlayers.layers
import tf_memlayers.losses
import tf_memlayers.metrics
import tf_memlayers.models


def _modules(package, walk=False):
    """The modules of ``package``; with ``walk``, those of its subpackages too."""
    modules = pkgutil.walk_packages if walk else pkgutil.iter_modules
    return sorted(name for _, name, _ in modules(package.__path__, package.__name__ + "."))


# The layers live in one folder per mechanism.
MODULES = _modules(tf_memlayers.layers, walk=True)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    exported = [
        name
        for name in tf_memlayers.layers.__all__
        if getattr(tf_memlayers.layers, name).__module__ == module_name
    ]
    if exported:
        assert result.attempted > 0, f"{exported} have no runnable Example in their docstrings"


@pytest.mark.parametrize("module_name", _modules(tf_memlayers.models))
def test_model_builder_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


SUPPORT_MODULES = [
    *_modules(tf_memlayers.metrics),
    *_modules(tf_memlayers.losses),
    "tf_memlayers.initializers",
    "tf_memlayers.callbacks.hparams",
    "tf_memlayers.callbacks.learning_rate",
    "tf_memlayers.callbacks.state_reset",
    "tf_memlayers.callbacks.window_attention",
    "tf_memlayers.data.lm_batches",
]


@pytest.mark.parametrize("module_name", SUPPORT_MODULES)
def test_support_module_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
