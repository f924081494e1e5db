"""The documentation site builds with warnings as errors, and its API reference documents every
public name: each name of the ``__all__`` lists of the package and of its public subpackages
(the public names of a module without ``__all__``), under the import path users write."""

import ast
import html
import html.parser
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys

import pytest

from tests.support import REPO_ROOT, load_script

SUBPACKAGES = "models callbacks training metrics losses regularizers initializers compat".split()
PUBLIC_MODULES = ["tf_memlayers", *(f"tf_memlayers.{name}" for name in SUBPACKAGES)]


def _public_names(module):
    """``__all__``, or else the classes and functions the module itself defines."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and value.__module__ == module.__name__
    ]


def _documented_modules():
    """Every public module with the names it exports; the public submodules of packages
    that have no ``__all__`` included."""
    modules = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        modules[name] = _public_names(module)
        if not hasattr(module, "__all__") and hasattr(module, "__path__"):
            for info in pkgutil.iter_modules(module.__path__, name + "."):
                if not info.name.rsplit(".", 1)[1].startswith("_"):
                    modules[info.name] = _public_names(importlib.import_module(info.name))
    return modules


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The documentation built into a temporary folder (with warnings as errors)."""
    for needed in ("sphinx", "furo", "sphinx-mathjax-offline"):
        pytest.importorskip(needed, reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("html")
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", REPO_ROOT / "docs", out]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (out / "_static" / "mathjax" / "tex-chtml.js").is_file()  # equations render offline
    return out


def _generated(site, full_name):
    return (site / "api" / "generated" / f"{full_name}.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def api_html(site):
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((site / "api").rglob("*.html")))


def test_the_reference_documents_every_public_name_and_every_name_it_mentions(site, api_html):
    """Every public name, each class and function on a page of its own; and every name of the
    package that its pages mention."""
    ids = set(re.findall(r'id="([^"]+)"', api_html))
    modules, missing = _documented_modules(), []
    for module_name, names in modules.items():
        module = importlib.import_module(module_name)
        for name in names:
            if f"{module_name}.{name}" in ids:
                continue
            # A name re-exported from another module is documented there once, linked here.
            homes = [
                other
                for other in modules
                if other != module_name
                and f"{other}.{name}" in ids
                and getattr(importlib.import_module(other), name, None) is getattr(module, name)
            ]
            linked = any(f'#{home}.{name}"' in api_html for home in homes)
            if not linked or f"{module_name}.{name}" not in api_html:
                missing.append(f"{module_name}.{name}")
    assert not missing, missing
    pages = {path.stem for path in (site / "api" / "generated").glob("*.html")}
    wanted = {f"{home}.{name}" for home, name in _classes_and_functions()}
    assert wanted <= pages, sorted(wanted - pages)
    for full_name in wanted:
        assert f'id="{full_name}"' in _generated(site, full_name)
    # The reference's contents list every page, grouped under its mechanism's heading.
    index = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert all(f'href="generated/{full_name}.html' in index for full_name in wanted)
    assert "Window attention" in index and "Attention over a memory" in index
    documented = {i for i in ids if i.startswith("tf_memlayers")} | set(PUBLIC_MODULES)

    def documented_under_another_path(name):
        """``tf_memlayers.metrics.Perplexity`` is ``tf_memlayers.Perplexity``."""
        module, _, attribute = name.rpartition(".")
        home = _home(module, attribute) if module in PUBLIC_MODULES else None
        return home == "tf_memlayers" and f"tf_memlayers.{attribute}" in documented

    undocumented = set()
    for path in sorted((site / "api").rglob("*.html")):
        text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8")))
        undocumented |= {
            f"{path.name}: {name}"
            for name in re.findall(r"tf_memlayers(?:\.\w+)+", text)
            if name not in documented and not documented_under_another_path(name)
        }
    assert not undocumented, sorted(undocumented)


class _PageText(html.parser.HTMLParser):
    """A built page's prose (the text outside code, code blocks, scripts and styles) and
    the code spans of its cross-references that are not inside a link (references Sphinx
    could not resolve)."""

    CODE = ("pre", "code", "script", "style", "kbd", "samp")

    def __init__(self):
        super().__init__()
        self.prose, self.unlinked = [], []
        self._open, self._code, self._links, self._xref = [], 0, 0, None

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class") or ""
        code = tag in self.CODE or "highlight" in classes
        self._open.append((tag, code))
        self._code += code
        self._links += tag == "a"
        if tag == "code" and "xref" in classes and not self._links:
            self._xref = []

    def handle_endtag(self, tag):
        while self._open:
            opened, code = self._open.pop()
            self._code -= code
            self._links -= opened == "a"
            if opened == "code" and self._xref is not None:
                self.unlinked.append("".join(self._xref))
                self._xref = None
            if opened == tag:
                break

    def handle_data(self, data):
        if self._xref is not None:
            self._xref.append(data)
        if not self._code:
            self.prose.append(data)


def _site_pages(site):
    skipped, pages = ("genindex.html", "search.html"), sorted(site.rglob("*.html"))
    return [path for path in pages if "_static" not in path.parts and path.name not in skipped]


def _home(module_name, name):
    """The module under whose path ``name`` of ``module_name`` is documented: the package's
    top level for what it re-exports (``Perplexity``, ``SequenceCrossentropy``)."""
    value = getattr(importlib.import_module(module_name), name, None)
    top = importlib.import_module("tf_memlayers")
    at_top = value is not None and getattr(top, name, None) is value
    return "tf_memlayers" if at_top else module_name


def _classes_and_functions():
    pairs = set()
    for module, names in _documented_modules().items():
        for name in names:
            value = getattr(importlib.import_module(module), name)
            if inspect.isclass(value) or inspect.isfunction(value):
                pairs.add((_home(module, name), name))
    return sorted(pairs)


def test_each_page_gives_the_example_before_the_arguments_and_the_notes_last(site):
    page = _generated(site, "tf_memlayers.SlidingWindowAttention")
    markers = ['id="tf_memlayers.SlidingWindowAttention"', ">Example<", ">Parameters"]
    order = [page.index(m) for m in [*markers, ">Call arguments", ">Returns", ">Notes<"]]
    assert order == sorted(order)
    # The notes hold the paragraphs after the summary, the equations included.
    assert page.index("W^Y", order[-1]) > order[-1]


# Methods of Keras's layer protocol, which a docstring names as Keras's, not as the package's.
KERAS_PROTOCOL = set(
    "build call compute_output_shape from_config get_config get_initial_state inner_loop "
    "output_size reset_state reset_states state_size".split()
)


def test_code_spans_are_code_or_links(site, api_html):
    """No backquote in any page's prose (each code span became code or a link); a name of the
    package in a code span links to its page, a Keras, TensorFlow or JAX name to that library's
    documentation; and no page names a function or class of the package's own modules that the
    reference does not document (a private helper, a primitive of ``tf_memlayers.ops``)."""
    public, defined = {name for _, name in _classes_and_functions()}, set()
    for path in (REPO_ROOT / "tf_memlayers").rglob("*.py"):
        defined |= {
            node.name
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        }
    documented = {n.rsplit(".", 1)[-1] for n in re.findall(r'id="tf_memlayers\.([^"]+)"', api_html)}
    undocumented = defined - documented - KERAS_PROTOCOL
    stray, unlinked = [], []
    for path in _site_pages(site):
        page = _PageText()
        page.feed(path.read_text(encoding="utf-8"))
        prose, names = "".join(page.prose), page.unlinked
        where = path.relative_to(site)
        stray += [f"{where}: {m}" for m in re.findall(r".{0,30}`.{0,30}", prose)]
        unlinked += [
            f"{where}: {name}"
            for name in names
            if name.split(".")[0] in ("keras", "tf", "jax", "tf_memlayers")
            or name.rstrip("()") in public
            or name.split("(")[0].split(".")[-1] in undocumented
        ]
    assert not stray, stray[:20]
    assert not unlinked, unlinked
    page = _generated(site, "tf_memlayers.AttentionRNN")
    assert 'href="https://keras.io/api/layers/recurrent_layers/rnn/"' in page
    assert 'href="tf_memlayers.AttentionWrapper.html#tf_memlayers.AttentionWrapper"' in page


def test_no_object_is_documented_twice_nothing_private_is_and_no_table_is_too_wide(site):
    """A table has at most `MAX_COLUMNS` columns (`benchmarks/docs_tables.py`): with more, it
    overflows the content column at 1280 px."""
    limit = load_script("benchmarks", "docs_tables").MAX_COLUMNS
    signature = r'<dt class="sig sig-object py" id="([^"]+)"'
    defined, wide, tables = [], [], 0
    for path in _site_pages(site):
        text = path.read_text(encoding="utf-8")
        defined += re.findall(signature, text)
        for table in re.findall(r"<table.*?</table>", text, re.S):
            tables += 1
            first_row = re.search(r"<tr[^>]*>(.*?)</tr>", table, re.S).group(1)
            columns = len(re.findall(r"<t[hd][ >]", first_row))
            if columns > limit:
                wide.append(f"{path.relative_to(site)}: {columns} columns")
    assert defined and tables > 40  # the results page's tables are read
    twice = sorted({name for name in defined if defined.count(name) > 1})
    assert not twice, twice
    private = [n for n in defined if re.search(r"(^|\.)_", n) and not n.endswith(".__version__")]
    assert not private, private
    assert not wide, wide
