"""`import tf_memlayers` is light and registers every serializable class of the package."""

import ast
import json
import os
import subprocess
import sys

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "tf_memlayers"


def registered_class_names():
    """Names of the classes decorated with ``register_keras_serializable`` in the package."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                "register_keras_serializable" in ast.unparse(d) for d in node.decorator_list
            ):
                names.append(node.name)
    return names


def test_import_registers_every_class_and_loads_no_callbacks_nor_training():
    names = registered_class_names()
    assert {"TiedEmbedding", "Perplexity", "SequenceCrossentropy", "ConditionalEncoder"} <= set(
        names
    )
    script = (
        "import json, sys, keras, tf_memlayers\n"
        f"names = {names!r}\n"
        "print(json.dumps({\n"
        "  'modules': sorted(m for m in sys.modules if m.startswith('tf_memlayers.')),\n"
        "  'examples': sorted(m for m in sys.modules if m.split('.')[0] == 'examples'),\n"
        "  'missing': [n for n in names\n"
        "              if keras.saving.get_registered_object('tf_memlayers>' + n) is None],\n"
        "}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["missing"] == []
    assert report["examples"] == []
    loaded = report["modules"]
    assert not [
        m for m in loaded if m.startswith(("tf_memlayers.callbacks", "tf_memlayers.training"))
    ], loaded
    for light in ("tf_memlayers.layers", "tf_memlayers.metrics", "tf_memlayers.losses"):
        assert light in loaded


def test_the_package_holds_no_experiment_harness():
    """The experiments' corpus readers and input pipelines live with the examples: the
    package has no ``data`` part and imports nothing from ``examples``."""
    assert not (PACKAGE / "data").exists()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = []
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            found += [f"{path.name}: {m}" for m in modules if m.split(".")[0] == "examples"]
    assert found == []


# The modules that exist for TensorFlow only: they import it through
# `tf_memlayers._tensorflow.require_tensorflow`, whose error names them.
TENSORFLOW_ONLY = (
    "tf_memlayers.callbacks",
    "tf_memlayers.training",
    "tf_memlayers.ops.associative_gru_loop",
    "tf_memlayers.ops.associative_gru_passes",
)

# Run in a child process on Keras's JAX backend with every import of TensorFlow refused, as
# on a machine without it: imports each module of the package and reports what happened.
_WITHOUT_TENSORFLOW = """
import importlib, json, pathlib, sys

class RefuseTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, RefuseTensorFlow())
import tf_memlayers
report = {"top": sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"),
          "modules": {}}
root = pathlib.Path(tf_memlayers.__file__).parent
for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root.parent).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    try:
        importlib.import_module(name)
        report["modules"][name] = "ok"
    except ModuleNotFoundError as error:
        report["modules"][name] = str(error)
report["after"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
print(json.dumps(report))
"""


def test_the_layers_import_without_tensorflow():
    """On JAX without TensorFlow, ``import tf_memlayers`` and every module of its layers,
    models, ops, losses and metrics import, and none imports TensorFlow; the TensorFlow-only
    modules refuse with an error naming what needs TensorFlow. Fails if a module-level
    ``import tensorflow`` comes back on a layer's import path."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("jax") is None:
        pytest.skip("needs JAX (Keras's JAX backend), which is not installed")
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TENSORFLOW],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        env={**os.environ, "KERAS_BACKEND": "jax"},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["top"] == [] and report["after"] == [], report
    modules = report["modules"]
    assert {
        "tf_memlayers.layers",
        "tf_memlayers.models",
        "tf_memlayers.models.step_model",
        "tf_memlayers.layers.associative_memory.associative_gru",
    } <= set(modules)
    for name, outcome in modules.items():
        if name.startswith(TENSORFLOW_ONLY):  # a module without tf code may import
            assert outcome == "ok" or "needs TensorFlow" in outcome, (name, outcome)
        else:
            assert outcome == "ok", (name, outcome)
    for name, part in (
        ("tf_memlayers.callbacks", "tf_memlayers.callbacks"),
        ("tf_memlayers.training", "tf_memlayers.training"),
        ("tf_memlayers.ops.associative_gru_loop", "fused AM-GRU loop"),
    ):
        assert "needs TensorFlow" in modules[name] and part in modules[name], modules[name]
