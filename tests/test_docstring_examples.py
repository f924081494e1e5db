"""Every `Example:` in the docstrings of the layers, metrics, losses, regularizers, initializers,
callbacks, model builders and training utilities runs and prints what it shows, on every Keras
backend but for the TensorFlow-only modules. (The examples' folders run their own docstrings.)"""

import doctest
import importlib
import pkgutil

import pytest

import tf_memlayers.layers
from tests.support import split_rows, tensorflow_only


def _modules(package, walk=False):
    """The public modules of the package named ``package`` (not imported: it may need
    TensorFlow); with ``walk``, those of its subpackages too."""
    path = importlib.util.find_spec(package).submodule_search_locations
    modules = pkgutil.walk_packages if walk else pkgutil.iter_modules
    found = sorted(name for _, name, _ in modules(path, package + "."))
    return [name for name in found if not name.rsplit(".", 1)[1].startswith("_")]


# The modules besides the layers' (one folder per mechanism), each of which shows examples;
# the callbacks but the state resets and the cache episodes (the first three), the training
# utilities and the TFLite conversion of the SNLI model need TensorFlow.
CALLBACKS = ["reset_language_model_states", "state_reset_callback", "cache_episodes_callback"]
CALLBACKS += ["window_attention_callback", "memory_retrieval_heatmap", "pair_attention_heatmap"]
CALLBACKS += ["pair_probe", "write_heatmap"]
CALLBACKS = [f"tf_memlayers.callbacks.{name}" for name in CALLBACKS]
MODULES = [f"tf_memlayers.{name}" for name in ("models", "metrics", "losses", "regularizers")]
MODULES = [*(m for name in MODULES for m in _modules(name)), "tf_memlayers.initializers"]
MODULES += [*CALLBACKS, *_modules("tf_memlayers.training")]
TENSORFLOW = {*CALLBACKS[3:], *_modules("tf_memlayers.training"), "tf_memlayers.models.snli"}
ONLY = tensorflow_only("its examples use TensorFlow")
# TensorFlow and JAX share the modules, the same operations on both (`split_rows`); torch: all.
NAMES = _modules("tf_memlayers.layers", walk=True) + MODULES
ROWS = split_rows([pytest.param(n, marks=[ONLY] if n in TENSORFLOW else []) for n in NAMES])


@pytest.mark.parametrize("module_name", ROWS)
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
