"""The package's layout: model builders compose public layers only; the examples and
benchmarks use the public package only, and the package nothing of the examples; every module
has its test module at the mirrored path."""

import ast
import contextlib
import importlib
import pathlib

import tf_memlayers
from tests.selection import mirrored_test_module

ROOT = pathlib.Path(tf_memlayers.__file__).parent
# What a builder must not reach for: the primitives below the layers, and the cells' internals
# that only the layers themselves use to run their loops.
CELL_INTERNALS = {"_projection_kernels", "_stepping_on_projections", "_projected_call", "_run_step"}
CELL_INTERNALS |= {"_controller_step", "permutations", "dual_gate_kernel", "dual_candidate_kernel"}


def _modules(folder=""):
    return sorted((ROOT / folder).rglob("*.py"))


def _imports(path):
    """``(line, module name)`` of every import in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or ""
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


def test_model_builders_use_public_layers_only():
    found = []
    for path in _modules("models"):
        ops = [(line, name) for line, name in _imports(path) if name.startswith("tf_memlayers.ops")]
        found += [f"{path.name}:{line} imports {name}" for line, name in ops]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in CELL_INTERNALS:
                found.append(f"{path.name}:{node.lineno} uses .{node.attr}")
    assert not found, found


REPOSITORY = ROOT.parent
# The subpackages users import from (docs/api/index.rst; the guides: ``tf_memlayers.layers``).
PUBLIC_SUBPACKAGES = ("callbacks", "compat", "initializers", "layers", "losses", "metrics")
PUBLIC_SUBPACKAGES += ("models", "regularizers", "training")


def _private_imports(path):
    """The imports in ``path`` of a private module of the package (a dotted name with a part
    starting with an underscore, such as ``tf_memlayers._validation``)."""
    return [
        f"{path.relative_to(REPOSITORY)}:{line} imports {name}"
        for line, name in _imports(path)
        if name.split(".")[0] == "tf_memlayers"
        and any(part.startswith("_") for part in name.split(".")[1:])
    ]


def _names_from(path):
    """``(line, "module.name")`` of each name a ``from module import`` of ``path`` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return [(node.lineno, f"{node.module}.{a.name}") for node in found for a in node.names]


def _documented(name):
    """Whether ``name`` is the package, a public subpackage, or a name in one's ``__all__``."""
    parts = name.split(".")
    if len(parts) == 1 or len(parts) == 2 and parts[1] in PUBLIC_SUBPACKAGES:
        return True
    if len(parts) > 3 or len(parts) == 3 and parts[1] not in PUBLIC_SUBPACKAGES:
        return False
    return parts[-1] in _all(".".join(parts[:-1]))


def _all(module):
    """The ``__all__`` of ``module``, read from its source where it is a list of strings there
    (importing ``tf_memlayers.training`` needs TensorFlow), else imported."""
    path = REPOSITORY.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            with contextlib.suppress(ValueError):  # a list made of others: imported below
                return ast.literal_eval(node.value)
    return importlib.import_module(module).__all__


def test_the_examples_and_benchmarks_use_the_public_package_only_and_it_nothing_of_them():
    # What users fork must run against the installed package's public names.
    found = [
        hit
        for folder in ("examples", "benchmarks")
        for path in sorted((REPOSITORY / folder).rglob("*.py"))
        for hit in _private_imports(path)
    ]
    assert not found, found
    # Not vacuous: the package's own modules do import its private ones.
    assert _private_imports(ROOT / "models" / "snli.py")
    # A copied example runs on later releases too: its code (not its tests, the repository's)
    # imports only the names of the `__all__` of the package or of its public subpackages.
    undocumented = [
        f"{path.relative_to(REPOSITORY)}:{line} imports {name}"
        for path in sorted((REPOSITORY / "examples").rglob("*.py"))
        if not path.name.endswith("_test.py") and path.name != "conftest.py"
        for line, name in [*_imports(path), *_names_from(path)]
        if name.split(".")[0] == "tf_memlayers" and not _documented(name)
    ]
    assert not undocumented, undocumented
    assert not any(map(_documented, ["tf_memlayers.models.snli.PAPER_UNITS", "tf_memlayers.ops"]))
    # The experiments' corpus readers and input pipelines live with the examples: the package
    # has no ``data`` part and imports nothing from ``examples``.
    assert not (ROOT / "data").exists()
    imported = [(p.name, n) for p in _modules() for _, n in _imports(p)]
    assert [f"{p}: {n}" for p, n in imported if n.split(".")[0] == "examples"] == []


def test_every_package_module_has_its_test_module_at_the_mirrored_path():
    """``tf_memlayers/a/b.py`` is tested by ``tests/a/test_b.py``: a reader finds a module's
    tests without searching, and a new module without tests fails here."""
    tests = pathlib.Path(__file__).resolve().parent
    modules = [p.relative_to(ROOT).as_posix() for p in _modules() if p.name != "__init__.py"]
    missing = [m for m in modules if not (tests / mirrored_test_module(m)).is_file()]
    assert not missing, [f"tests/{mirrored_test_module(m)} (for tf_memlayers/{m})" for m in missing]
