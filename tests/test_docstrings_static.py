"""Docstrings are static text (what editors and ``help()`` read from the source; LaTeX in a raw
string), and the public names' docstrings have Keras's sections."""

import ast
import importlib
import inspect
import re
import warnings

import keras
import pytest

import tf_memlayers
from tests.support import REPO_ROOT

SOURCES = sorted((REPO_ROOT / "tf_memlayers").rglob("*.py"))
DOCUMENTED_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _where(path, node):
    return f"{path.relative_to(REPO_ROOT).as_posix()}:{node.lineno}"


def _trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _assigns_doc(target):
    """Whether an assignment target binds ``__doc__`` (a name, an attribute, or inside a tuple)."""
    return any(
        (isinstance(node, ast.Name) and node.id == "__doc__")
        or (isinstance(node, ast.Attribute) and node.attr == "__doc__")
        for node in ast.walk(target)
    )


def test_no_docstring_is_assembled_at_import_time():
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            else:
                targets = []
            if any(_assigns_doc(target) for target in targets):
                found.append(f"{_where(path, node)} assigns __doc__")
            if isinstance(node, DOCUMENTED_NODES) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.JoinedStr):
                    found.append(f"{_where(path, first)} has an f-string as its docstring")
    assert not found, "docstrings must be plain string literals:\n" + "\n".join(found)


def test_backslashes_in_docstrings_are_not_escapes():
    """An invalid escape (``\\operatorname``) is a warning when the module compiles; a valid
    one (``\\tanh``, ``\\frac``, ``\\beta``) silently puts a control character in the text."""
    found = []
    for path in SOURCES:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            except SyntaxError as error:
                found.append(f"{path.relative_to(REPO_ROOT).as_posix()}:{error.lineno} {error.msg}")
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, DOCUMENTED_NODES):
                doc = ast.get_docstring(node, clean=False) or ""
                control = sorted({repr(c) for c in doc if ord(c) < 32 and c != "\n"})
                if control:
                    where = _where(path, node) if hasattr(node, "lineno") else str(path)
                    found.append(f"{where} docstring holds {', '.join(control)}")
    assert not found, 'use a raw docstring (r"""...""") for LaTeX:\n' + "\n".join(found)


def _takes_arguments(function):
    parameters = inspect.signature(function).parameters.values()
    return any(p.name != "self" and p.kind is not p.VAR_KEYWORD for p in parameters)


def _required_sections(obj):
    sections = []
    if inspect.isclass(obj):
        if _takes_arguments(obj.__init__):
            sections.append("Args:")
        # A model is called as any Keras model is; a layer or cell documents its call.
        if issubclass(obj, keras.layers.Layer) and not issubclass(obj, keras.Model):
            sections += ["Call arguments:", "Returns:"]
    elif _takes_arguments(obj):
        sections.append("Args:")
    return [*sections, "Example:"]


PUBLIC = [
    name
    for name, obj in ((name, getattr(tf_memlayers, name)) for name in tf_memlayers.__all__)
    if inspect.isclass(obj) or inspect.isfunction(obj)
]
# The classes and functions of the public subpackages, each with a page of its own in the API
# reference: the model builders, the callbacks, the regularizer, the training utilities and
# the loader of the original weights.
SUBPACKAGES = ("models", "callbacks", "regularizers", "training", "compat")
PUBLIC_IN_SUBPACKAGES = [
    f"{package}.{name}"
    for package in SUBPACKAGES
    for name in importlib.import_module(f"tf_memlayers.{package}").__all__
]


def test_the_public_names_that_are_not_classes_or_functions():
    assert set(tf_memlayers.__all__) - set(PUBLIC) == {"__version__"}


@pytest.mark.parametrize("name", PUBLIC + PUBLIC_IN_SUBPACKAGES)
def test_public_docstring_has_the_keras_sections(name):
    package, _, attribute = name.rpartition(".")
    obj = getattr(importlib.import_module(f"tf_memlayers.{package}".rstrip(".")), attribute)
    doc = obj.__doc__
    assert doc, f"{name} has no docstring of its own"
    missing = [
        section
        for section in _required_sections(obj)
        if not re.search(rf"^[ \t]*{re.escape(section)}[ \t]*$", doc, re.MULTILINE)
    ]
    assert not missing, f"{name}'s docstring has no {missing} section (a line of its own)"
