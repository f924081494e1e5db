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
from tests.test_docs import _classes_and_functions

SOURCES = sorted((REPO_ROOT / "tf_memlayers").rglob("*.py"))
DOCUMENTED_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _where(path, node):
    return f"{path.relative_to(REPO_ROOT).as_posix()}:{node.lineno}"


def _assigns_doc(target):
    """Whether an assignment target binds ``__doc__`` (a name, an attribute, or inside a tuple)."""
    return any(
        (isinstance(node, ast.Name) and node.id == "__doc__")
        or (isinstance(node, ast.Attribute) and node.attr == "__doc__")
        for node in ast.walk(target)
    )


def test_docstrings_are_plain_string_literals_whose_backslashes_are_not_escapes():
    """No docstring is assembled at import time (an assignment to ``__doc__``, an f-string).
    An invalid escape (``\\operatorname``) is a warning when the module compiles; a valid one
    (``\\tanh``, ``\\frac``, ``\\beta``) silently puts a control character in the text."""
    found = []
    for path in SOURCES:
        source = path.read_text(encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(source, str(path), "exec")
            except SyntaxError as error:
                found.append(f"{path.relative_to(REPO_ROOT).as_posix()}:{error.lineno} {error.msg}")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                if any(_assigns_doc(t) for t in getattr(node, "targets", None) or [node.target]):
                    found.append(f"{_where(path, node)} assigns __doc__")
            if not isinstance(node, DOCUMENTED_NODES) or not node.body:
                continue
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.JoinedStr):
                found.append(f"{_where(path, first)} has an f-string as its docstring")
            doc = ast.get_docstring(node, clean=False) or ""
            control = sorted({repr(c) for c in doc if ord(c) < 32 and c != "\n"})
            if control:
                where = _where(path, node) if hasattr(node, "lineno") else str(path)
                found.append(f"{where} docstring holds {', '.join(control)}")
    message = 'docstrings must be plain string literals, LaTeX in a raw docstring (r"""...""")'
    assert not found, message + ":\n" + "\n".join(found)


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


# The public classes and functions, each with a page of its own in the API reference, as
# ``tf_memlayers.<name>`` or ``tf_memlayers.<subpackage>.<name>``.
PUBLIC = [f"{home}.{name}" for home, name in _classes_and_functions()]


def test_the_public_names_that_are_not_classes_or_functions():
    others = {name for name in tf_memlayers.__all__ if f"tf_memlayers.{name}" not in PUBLIC}
    assert others == {"__version__"}


@pytest.mark.parametrize("name", PUBLIC)
def test_public_docstring_has_the_keras_sections_and_a_layers_call_arguments_its_call_takes(name):
    module, _, attribute = name.rpartition(".")
    layer = getattr(importlib.import_module(module), attribute)
    doc, sections = layer.__doc__, _required_sections(layer)
    assert doc, f"{name} has no docstring of its own"
    missing = [
        s for s in sections if not re.search(rf"^[ \t]*{re.escape(s)}[ \t]*$", doc, re.MULTILINE)
    ]
    assert not missing, f"{name}'s docstring has no {missing} section (a line of its own)"
    if "Call arguments:" not in sections:  # not a layer
        return
    section = inspect.cleandoc(layer.__doc__).split("Call arguments:\n")[1].split("\n\n")[0]
    named = re.findall(r"^    (\w+(?:, \w+)*):", section, re.MULTILINE)
    documented = {one for names in named for one in names.split(", ")}
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(layer.call).parameters.values()
    taken = {p.name for p in parameters if p.name != "self" and p.kind in kinds}
    assert documented == taken, f"{name}: documented {sorted(documented)}, taken {sorted(taken)}"
