"""Sphinx configuration of the tf-memlayers documentation.

Build with ``python -m sphinx -W -b html docs docs/_build/html`` after
``pip install -e ".[docs]"``. The build needs no network: there is no intersphinx inventory
(Keras and TensorFlow are linked by URL), and MathJax is served from the site's own
``_static/mathjax`` folder (``sphinx-mathjax-offline``), so the equations render offline.
"""

import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Importing the package imports TensorFlow; keep its start-up messages out of the build log.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from docutils import nodes  # noqa: E402
from docutils.statemachine import StringList  # noqa: E402
from sphinx.util.docutils import SphinxDirective  # noqa: E402
from sphinx.util.nodes import make_refnode  # noqa: E402

from tf_memlayers.version import __version__  # noqa: E402

project = "tf-memlayers"
author = "The tf-memlayers authors"
copyright = "The tf-memlayers authors"
release = __version__
version = __version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",
]

# docs/api/_layers.rst is part of docs/api/index.rst (an include), not a page of its own.
exclude_patterns = ["_build", "api/_layers.rst"]
templates_path = ["_templates"]
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
# One page per class and function (docs/api/index.rst lists them, the layers by mechanism
# from docs/api/_layers.rst; the pages are generated into docs/api/generated at each build,
# from docs/_templates/autosummary).
autosummary_generate = ["api/index.rst", "api/_layers.rst"]
# `x` in a docstring or page links to the object it names where the reference documents
# it, to Keras's, TensorFlow's or JAX's documentation for their names (`external_url`), and
# is shown as code otherwise.
default_role = "py:obj"

html_theme = "furo"
html_title = f"tf-memlayers {release}"


# The page of a mechanism (a folder of tf_memlayers/layers/), where it is not the folder's name.
MECHANISM_PAGES = {"cache_attention": "heap_cache"}
# The title of the layers defined in tf_memlayers/layers/ itself, outside a mechanism's folder.
BUILDING_BLOCKS = "Resets and utilities"


def layer_sections(root=ROOT):
    """The API reference's sections of the layers, as reStructuredText: one per mechanism (a
    folder of ``tf_memlayers/layers/``, titled after it and summed up by its docstring's first
    paragraph, linking to its page), then the building blocks defined in
    ``tf_memlayers/layers/`` itself; each lists what ``tf_memlayers`` exports from there, in
    the order of the modules and of the definitions in each. A new layer is listed once it is
    exported."""
    import importlib
    import inspect

    import tf_memlayers

    layers_dir = pathlib.Path(root) / "tf_memlayers" / "layers"
    found = {}
    for name in tf_memlayers.__all__:
        module = getattr(getattr(tf_memlayers, name), "__module__", "") or ""
        if module.startswith("tf_memlayers.layers."):
            parts = module.split(".")
            group = parts[2] if len(parts) > 3 else None
            line = inspect.getsourcelines(getattr(tf_memlayers, name))[1]
            found.setdefault(group, []).append((module, line, name))
    folders = sorted(p.name for p in layers_dir.iterdir() if (p / "__init__.py").is_file())
    text = []
    for group in [*folders, None]:
        if group not in found:
            continue
        if group is None:
            title, intro = BUILDING_BLOCKS, []
        else:
            package = importlib.import_module(f"tf_memlayers.layers.{group}")
            summary = " ".join((package.__doc__ or "").strip().split("\n\n")[0].split())
            page = MECHANISM_PAGES.get(group, group)
            title = group.replace("_", " ").capitalize()
            intro = [f"{summary} The mechanism's page: :doc:`../{page}`.", ""]
        text += [
            title,
            "-" * len(title),
            "",
            *intro,
            ".. autosummary::",
            "   :toctree: generated",
            "   :nosignatures:",
            "",
        ]
        text += [f"   tf_memlayers.{name}" for _, _, name in sorted(found[group])]
        text.append("")
    return "\n".join(text)


def _write_layer_sections():
    path = pathlib.Path(__file__).resolve().parent / "api" / "_layers.rst"
    text = layer_sections()
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


# Written before Sphinx reads the sources (autosummary generates the layers' pages from it).
_write_layer_sections()


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
        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 30 70",
            "",
            "   * - name",
            "     - what it is",
        ]
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


#: keras.io's page of each Keras name the documentation mentions; a name below one of these
#: (a method, an attribute) links to its page. Other Keras names link to the API index.
KERAS_PAGES = {
    "keras.Input": "layers/core_layers/input/",
    "keras.KerasTensor": "layers/core_layers/input/",
    "keras.Model": "models/model/",
    "keras.config.dtype_policy": "mixed_precision/policy/",
    "keras.distribution": "distribution/",
    "keras.initializers": "layers/initializers/",
    "keras.layers.Bidirectional": "layers/recurrent_layers/bidirectional/",
    "keras.layers.Dropout": "layers/regularization_layers/dropout/",
    "keras.layers.Embedding": "layers/core_layers/embedding/",
    "keras.layers.GRU": "layers/recurrent_layers/gru/",
    "keras.layers.GRUCell": "layers/recurrent_layers/gru_cell/",
    "keras.layers.LSTM": "layers/recurrent_layers/lstm/",
    "keras.layers.LSTMCell": "layers/recurrent_layers/lstm_cell/",
    "keras.layers.Layer": "layers/base_layer/",
    "keras.layers.MultiHeadAttention": "layers/attention_layers/multi_head_attention/",
    "keras.layers.RNN": "layers/recurrent_layers/rnn/",
    "keras.layers.SimpleRNN": "layers/recurrent_layers/simple_rnn/",
    "keras.layers.StackedRNNCells": "layers/recurrent_layers/stacked_rnn_cell/",
    "keras.layers.Wrapper": "layers/",
    "keras.losses": "losses/",
    "keras.metrics": "metrics/",
    "keras.models.clone_model": "models/cloning/",
    "keras.ops": "ops/",
    "keras.optimizers": "optimizers/",
    "keras.random": "random/",
}


def external_url(name):
    """The documentation page of a Keras, TensorFlow or JAX name (`None` for other names):
    keras.io's page from `KERAS_PAGES`, TensorFlow's API page, which follows the name's
    path, and JAX's API page."""
    if name.startswith("keras."):
        parts = name.split(".")
        for end in range(len(parts), 1, -1):
            page = KERAS_PAGES.get(".".join(parts[:end]))
            if page is not None:
                return "https://keras.io/api/" + page
        return "https://keras.io/api/"
    if name.startswith("tf."):
        return "https://www.tensorflow.org/api_docs/python/" + name.replace(".", "/")
    if name.startswith("jax."):
        return f"https://docs.jax.dev/en/latest/_autosummary/{name}.html"
    return None


def _resolve_missing(app, env, node, contnode):
    """A Python reference Sphinx's own lookup does not resolve: a Keras, TensorFlow or JAX
    name links to its documentation (the build has no network, so no inventory); a name of
    this package written without its module (`AssociativeGRUCell` in a page, or in the
    docstring of a builder in `tf_memlayers.models`) links to the one documented object of
    that name; anything else stays code."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    url = external_url(target)
    if url is not None:
        reference = nodes.reference("", "", internal=False, refuri=url)
        reference += contnode
        return reference
    domain = env.get_domain("py")
    # Not the aliases autodoc records under the defining module's path.
    found = [
        name
        for name, entry in domain.objects.items()
        if name.startswith("tf_memlayers.") and name.endswith("." + target) and not entry.aliased
    ]
    if len(found) != 1:
        return None
    entry = domain.objects[found[0]]
    return make_refnode(
        app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, found[0]
    )


#: The sections of a Google-style docstring, in the order an API page shows them.
SECTION_ORDER = (
    "Example",
    "Examples",
    "Args",
    "Arguments",
    "Call arguments",
    "Returns",
    "Yields",
    "Raises",
)
_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")


def keras_io_order(lines):
    """A class's or function's docstring lines in the order of a keras.io page: the first
    paragraph, the example, the arguments, the call arguments, what it returns and raises,
    then the paragraphs that followed the first (how it is computed) under "Notes"."""
    headers = [(i, _SECTION.match(line)) for i, line in enumerate(lines)]
    starts = [i for i, match in headers if match and match.group(1) in SECTION_ORDER]
    head = lines[: starts[0]] if starts else list(lines)
    sections = {}
    for start, end in zip(starts, starts[1:] + [len(lines)]):
        sections[_SECTION.match(lines[start]).group(1)] = lines[start:end]
    blank = next((i for i, line in enumerate(head) if not line.strip()), len(head))
    summary, notes = head[:blank], head[blank:]
    ordered = list(summary) + [""]
    for name in SECTION_ORDER:
        if name not in sections:
            continue
        section = sections[name]
        if name.startswith("Example"):
            # Keras writes the example unindented under its header, which napoleon does not
            # take for a section: a heading of its own, the example as written.
            body = section[1:]
            indent = min(
                (len(line) - len(line.lstrip()) for line in body if line.strip()), default=0
            )
            section = [".. rubric:: Example", ""] + [line[indent:] for line in body]
        ordered += section + [""]
    if any(line.strip() for line in notes):
        ordered += [".. rubric:: Notes", ""] + list(notes) + [""]
    return ordered


def _reorder_docstring(app, what, name, obj, options, lines):
    if what in ("class", "function", "exception"):
        lines[:] = keras_io_order(lines)


def setup(app):
    app.add_directive("public-names", PublicNames)
    app.connect("autodoc-process-signature", _init_signature)
    # Before napoleon (priority 500) turns the sections into fields.
    app.connect("autodoc-process-docstring", _reorder_docstring, priority=400)
    app.connect("missing-reference", _resolve_missing)
