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
html_static_path = []

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
autodoc_default_options = {"members": True, "show-inheritance": False}
# `x` in a docstring is code, as in the docstrings' Markdown-like convention.
default_role = "code"

html_theme = "furo"
html_title = f"tf-memlayers {release}"

