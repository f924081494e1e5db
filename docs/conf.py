"""Sphinx configuration of the tf-memlayers documentation.

Build with ``python -m sphinx -W -b html docs docs/_build/html`` after
``pip install -e ".[docs]"``. The build needs no network: there is no intersphinx inventory
(Keras and TensorFlow are linked by URL), and MathJax is served from the site's own
``_static/mathjax`` folder (``sphinx-mathjax-offline``), so the equations render offline.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Importing the package imports TensorFlow; keep its start-up messages out of the build log.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from docutils import nodes  # noqa: E402
from docutils.statemachine import StringList  # noqa: E402
from sphinx.util.docutils import SphinxDirective  # noqa: E402

from tf_memlayers.version import __version__  # noqa: E402

project = "tf-memlayers"
author = "The tf-memlayers authors"
copyright = "The tf-memlayers authors"
release = __version__
version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",
]

exclude_patterns = ["_build"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["custom.css"]

# Docstrings are Google style with Keras-style ``Args:`` / ``Returns:`` / ``Example:``.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Keras's docstring section for the arguments of `call`.
napoleon_custom_sections = [("Call arguments", "params_style")]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Keras methods a layer does not override (get_config, build, ...) are Keras's to document.
autodoc_inherit_docstrings = False
autodoc_default_options = {"members": True}
# `x` in a docstring is code, as in the docstrings' Markdown-like convention.
default_role = "code"

html_theme = "furo"
html_title = f"tf-memlayers {release}"



def _summary(obj):
    """The first sentence-line of a docstring, joined across its wrapped lines."""
    import inspect

    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.split("\n\n")[0].split())


class PublicNames(SphinxDirective):
    """``.. public-names:: tf_memlayers`` — a table of the module's ``__all__`` (classes and
    functions) with the first paragraph of each docstring, linked to the API reference, so
    that the table follows the package instead of being kept by hand."""

    required_arguments = 1

    def run(self):
        import importlib
        import inspect

        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "",
                 "   * - name", "     - what it is"]  # fmt: skip
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            role = "class" if inspect.isclass(obj) else "func"
            lines += [f"   * - :py:{role}:`~{module_name}.{name}`", f"     - {_summary(obj)}"]
        node = nodes.section()
        node.document = self.state.document
        self.state.nested_parse(StringList(lines, source="public-names"), 0, node)
        return node.children


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """Keras layers define ``__new__(cls, *args, **kwargs)``, which autodoc would show as a
    class's signature; show the arguments of ``__init__`` instead."""
    import inspect

    if what != "class" or "__init__" not in vars(obj):
        return None
    init = inspect.signature(obj.__init__)
    parameters = list(init.parameters.values())[1:]  # without self
    return str(init.replace(parameters=parameters, return_annotation=init.empty)), None


def setup(app):
    app.add_directive("public-names", PublicNames)
    app.connect("autodoc-process-signature", _init_signature)
