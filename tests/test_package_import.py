"""`import tf_memlayers` is light and registers every serializable class of the package."""

import ast
import json
import subprocess
import sys

from conftest import REPO_ROOT

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


def test_import_registers_every_class_without_data_or_training():
    names = registered_class_names()
    assert {"TiedEmbedding", "Perplexity", "SequenceCrossentropy", "ConditionalEncoder"} <= set(
        names
    )
    script = (
        "import json, sys, keras, tf_memlayers\n"
        f"names = {names!r}\n"
        "print(json.dumps({\n"
        "  'modules': sorted(m for m in sys.modules if m.startswith('tf_memlayers.')),\n"
        "  'missing': [n for n in names\n"
        "              if keras.saving.get_registered_object('tf_memlayers>' + n) is None],\n"
        "}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT,
        timeout=300, check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["missing"] == []
    loaded = report["modules"]
    for heavy in ("tf_memlayers.data", "tf_memlayers.training", "tf_memlayers.callbacks"):
        assert not [m for m in loaded if m == heavy or m.startswith(heavy + ".")], loaded
    for light in ("tf_memlayers.layers", "tf_memlayers.metrics", "tf_memlayers.losses"):
        assert light in loaded
