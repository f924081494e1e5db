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
    """The public modules of ``package``; with ``walk``, those of its subpackages too."""
    modules = pkgutil.walk_packages if walk else pkgutil.iter_modules
    found = sorted(name for _, name, _ in modules(package.__path__, package.__name__ + "."))
    return [name for name in found if not name.rsplit(".", 1)[1].startswith("_")]


# The layers live in one folder per mechanism.
LAYER_MODULES = _modules(tf_memlayers.layers, walk=True)
# The modules besides the layers', each of which shows examples.
MODULES = [
    *_modules(tf_memlayers.models),
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
    *_modules(tf_memlayers.training),
]


@pytest.mark.parametrize("module_name", LAYER_MODULES + MODULES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    exported = [
        name
        for name in tf_memlayers.layers.__all__
        if getattr(tf_memlayers.layers, name).__module__ == module_name
    ]
    if exported or module_name in MODULES:
        assert result.attempted > 0, f"{module_name} ({exported}) has no runnable Example"
