"""Every `Example:` in the docstrings of the layers, metrics, losses, regularizers, initializers,
callbacks, model builders and training utilities runs and prints what it shows, on every Keras
backend but for the TensorFlow-only modules; those the API reference shows (a public object's
and its methods') as a user pastes them, in a fresh namespace. (The examples' folders run their
own docstrings.)"""

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
# the callbacks but the state resets, the cache episodes and the cosines (the first four), the
# training utilities and the TFLite conversion of the SNLI model need TensorFlow.
CALLBACKS = ["reset_language_model_states", "state_reset_callback", "cache_episodes_callback"]
CALLBACKS += ["cosine_similarity_matrix", "window_attention_callback", "memory_retrieval_heatmap"]
CALLBACKS += ["pair_attention_heatmap", "pair_probe", "write_heatmap", "cache_attention_callback"]
CALLBACKS = [f"tf_memlayers.callbacks.{name}" for name in CALLBACKS]
MODULES = [f"tf_memlayers.{name}" for name in ("models", "metrics", "losses", "regularizers")]
MODULES = [*(m for name in MODULES for m in _modules(name)), "tf_memlayers.initializers"]
MODULES += [*CALLBACKS, *_modules("tf_memlayers.training")]
TENSORFLOW = {*CALLBACKS[4:], *_modules("tf_memlayers.training"), "tf_memlayers.models.snli"}
ONLY = tensorflow_only("its examples use TensorFlow")
# TensorFlow and JAX share the modules, the same operations on both (`split_rows`); torch: all.
NAMES = _modules("tf_memlayers.layers", walk=True) + MODULES
ROWS = split_rows([pytest.param(n, marks=[ONLY] if n in TENSORFLOW else []) for n in NAMES])


@pytest.mark.parametrize("module_name", ROWS)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    subpackage = importlib.import_module(".".join(module_name.split(".")[:2]))
    public = {*getattr(subpackage, "__all__", [n for n in dir(subpackage) if n[0] != "_"])}
    public |= {*importlib.import_module("tf_memlayers.compat").__all__}  # defined in layers
    for test in doctest.DocTestFinder().find(module):
        # What the API reference shows (a public object's, its methods'), pasted by a user,
        # must import what it uses; a module's own and its private helpers' see its names.
        if test.name[len(module_name) + 1 :].split(".")[0] in public:
            test.globs = {}
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    exported = [
        name
        for name in tf_memlayers.layers.__all__
        if getattr(tf_memlayers.layers, name).__module__ == module_name
    ]
    if exported or module_name in MODULES:
        assert result.attempted > 0, f"{module_name} ({exported}) has no runnable Example"
