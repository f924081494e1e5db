"""The package's layout: model builders compose public layers only."""

import ast
import pathlib

import tf_memlayers

ROOT = pathlib.Path(tf_memlayers.__file__).parent
# What a builder must not reach for: the primitives below the layers, and the cells' internals
# that only the layers themselves use to run their loops.
CELL_INTERNALS = {
    "projection_kernels",
    "stepping_on_projections",
    "projected_call",
    "run_step",
    "controller_step",
    "permutations",
    "dual_gate_kernel",
    "dual_candidate_kernel",
}


def _modules(folder=""):
    return sorted((ROOT / folder).rglob("*.py"))


def test_model_builders_use_public_layers_only():
    found = []
    for path in _modules("models"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "tf_memlayers.ops"
            ):
                found.append(f"{where} imports {node.module}")
            if isinstance(node, ast.Import):
                found += [
                    f"{where} imports {a.name}"
                    for a in node.names
                    if a.name.startswith("tf_memlayers.ops")
                ]
            if isinstance(node, ast.Attribute) and node.attr in CELL_INTERNALS:
                found.append(f"{where} uses .{node.attr}")
    assert not found, found
