"""`import tf_memlayers` is light and registers every serializable class of the package."""

import ast
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "tf_memlayers"


# The modules that exist for TensorFlow only (the callbacks', not their package): they import
# it through `tf_memlayers._tensorflow.require_tensorflow`, whose error names them.
TENSORFLOW_ONLY = (
    "tf_memlayers.callbacks.",
    "tf_memlayers.training",
    "tf_memlayers.ops.associative_gru_loop",
    "tf_memlayers.ops.associative_gru_passes",
)

# Imports the package and reports what it loaded and registered; with ``refuse`` (top-level
# module names: on Keras's JAX backend TensorFlow, on its torch backend TensorFlow and JAX),
# every import of those fails as on a machine without them, and the script then imports each
# module of the package and reports what happened.
_SCRIPT = """
import importlib, json, pathlib, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in refuse:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Refuse())
find_spec = importlib.util.find_spec  # (Keras asks it whether a framework is installed)
importlib.util.find_spec = lambda name, *a: None if name in refuse else find_spec(name, *a)
import keras, tf_memlayers
report = {
    "loaded": sorted(m for m in sys.modules if m.startswith("tf_memlayers.")),
    "examples": sorted(m for m in sys.modules if m.split(".")[0] == "examples"),
    "missing": [n for n in names if not keras.saving.get_registered_object("tf_memlayers>" + n)],
    "top": sorted(m for m in sys.modules if m.split(".")[0] in refuse),
    "modules": {},
}
root = pathlib.Path(tf_memlayers.__file__).parent
for path in sorted(root.rglob("*.py")) if refuse else ():
    parts = path.relative_to(root.parent).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    try:
        importlib.import_module(name)
        report["modules"][name] = "ok"
    except ModuleNotFoundError as error:
        report["modules"][name] = str(error)
try:  # the TensorBoard callbacks' names, without TensorFlow
    exec("from tf_memlayers.callbacks import *", star := {})
    report["star"] = sorted(name for name in star if not name.startswith("__"))
    tf_memlayers.callbacks.WindowAttentionCallback if refuse else None
except ModuleNotFoundError as error:
    report["modules"]["tf_memlayers.callbacks.WindowAttentionCallback"] = str(error)
report["after"] = sorted(m for m in sys.modules if m.split(".")[0] in refuse)
print(json.dumps(report))
"""


# Each backend the environment has, and what its pass refuses: any import of another backend's
# framework (a module-level ``import tensorflow`` or ``import jax`` on a layer's path fails).
REFUSED = {"tensorflow": (), "jax": ("tensorflow",), "torch": ("tensorflow", "jax")}
BACKENDS = [b for b in REFUSED if importlib.util.find_spec(b)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_import_registers_every_class_and_the_layers_import_alone(backend):
    """``import tf_memlayers`` registers every serializable class and loads neither callbacks,
    training nor examples. On JAX without TensorFlow, and on torch without TensorFlow and
    JAX, every module of the layers, models, ops, losses and metrics imports, and the
    TensorFlow-only modules refuse with an error naming what needs it."""
    # The classes decorated with register_keras_serializable in the package.
    names = [
        node.name
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and any("register_keras_serializable" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert {"TiedEmbedding", "Perplexity", "SequenceCrossentropy", "ConditionalEncoder"} <= {*names}
    refuse, env = REFUSED[backend], {**os.environ, "KERAS_BACKEND": backend}
    script = f"refuse, names = {refuse!r}, {names!r}\n{_SCRIPT}"
    run = dict(capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, env=env)
    result = subprocess.run([sys.executable, "-c", script], **run)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["missing"] == [] and report["examples"] == []
    loaded = set(report["loaded"])
    assert {"tf_memlayers.layers", "tf_memlayers.metrics", "tf_memlayers.losses"} <= loaded
    # Neither callbacks nor training.
    assert not [m for m in loaded if m.startswith(TENSORFLOW_ONLY[:2])], sorted(loaded)
    if not refuse:
        return
    assert report["top"] == [] and report["after"] == [], report
    modules = report["modules"]
    wanted = {"tf_memlayers.layers", "tf_memlayers.models", "tf_memlayers.models.step_model"}
    wanted.add("tf_memlayers.layers.associative_memory.associative_gru")
    assert wanted <= set(modules)
    for name, outcome in modules.items():
        if name.startswith(TENSORFLOW_ONLY):  # a module without tf code may import
            assert outcome == "ok" or "needs TensorFlow" in outcome, (name, outcome)
        else:
            assert outcome == "ok", (name, outcome)
    # The state resets, the cache episodes and the cosines: on every backend, `import *` too.
    assert modules["tf_memlayers.callbacks.cache_episodes_callback"] == "ok"
    everywhere = ["CacheEpisodesCallback", "StateResetCallback", "cosine_similarity_matrix"]
    everywhere.append("reset_language_model_states")
    assert report["star"] == everywhere
    for name, part in (
        ("tf_memlayers.callbacks.write_heatmap", "TensorBoard summaries"),
        ("tf_memlayers.callbacks.WindowAttentionCallback", "TensorBoard summaries"),
        ("tf_memlayers.training", "tf_memlayers.training"),
        ("tf_memlayers.ops.associative_gru_loop", "loop (tf_memlayers.ops.associative_gru_loop)"),
    ):
        assert "needs TensorFlow" in modules[name] and part in modules[name], modules[name]
