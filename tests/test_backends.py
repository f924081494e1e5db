"""What runs on which backend: the TensorFlow-only parts refuse elsewhere, the documentation
says so, and CI runs the selected tests on JAX."""

import re

import pytest

import tf_memlayers
import tf_memlayers.models
from tests.selection import backend_neutral_files, collected
from tests.support import BACKEND, REPO_ROOT
from tf_memlayers.layers import AssociativeGRU, DualAssociativeGRU

BACKENDS_PAGE = (REPO_ROOT / "docs" / "backends.rst").read_text(encoding="utf-8")


@pytest.mark.parametrize("layer_cls", [AssociativeGRU, DualAssociativeGRU])
def test_the_fused_loop_runs_on_tensorflow_and_jax(layer_cls):
    if BACKEND in ("tensorflow", "jax"):
        assert layer_cls(4, num_copies=2, fused_loop=True).fused_loop
        return
    message = str(pytest.raises(ValueError, layer_cls, 4, num_copies=2, fused_loop=True).value)
    for fragment in (layer_cls.__name__, "fused_loop=True", "TensorFlow backend", "JAX", BACKEND):
        assert fragment in message, (fragment, message)


def test_the_backend_table_covers_every_layer_and_names_only_real_ones():
    """The table's first row covers every layer (each layer's test class runs on every
    backend, `test_ci_runs_the_backend_neutral_tests_on_jax`); its other rows are the
    exceptions, and every layer they name exists."""
    match = re.search(r"^Backends\n-+\n(.*?)(?=^\S[^\n]*\n[-=~]+\n)", BACKENDS_PAGE, re.M | re.S)
    assert match, "docs/backends.rst has no 'Backends' section"
    section = match.group(1)
    assert "every layer and cell of the package" in section
    exported = set(tf_memlayers.__all__) | set(tf_memlayers.models.__all__) | {"ValueError"}
    # A name is a link (`Name`) or a literal (``Name``).
    named = set(re.findall(r"(?<!`)``?([A-Z][A-Za-z]+)``?(?!`)", section))
    assert {"AssociativeGRU", "HeapCacheAttention", "ResettableRNN"} <= named
    assert named <= exported, sorted(named - exported)
    for part in ("fused_loop=True", "insert", "HeapCacheModel", "tf.data", "callbacks"):
        assert part in section, part


def test_ci_runs_the_backend_neutral_tests_on_jax():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    # In an environment without TensorFlow (checked before the tests run).
    assert "--no-deps -e .\n" in ci and '-c "import tensorflow"' in ci
    jax = 'KERAS_BACKEND=jax "$jax_venv/bin/python" -m pytest -q -rs -n 2 --dist loadgroup tests\n'
    assert jax in ci
    # Off TensorFlow, collection keeps exactly tests/selection.py's files, every layer's among them.
    tests = REPO_ROOT / "tests"
    files = sorted(tests.rglob("test_*.py"))
    kept = {path.relative_to(tests).as_posix() for path in files if collected("jax", path)}
    assert kept == backend_neutral_files()
    assert "layers/window_attention/test_sliding_window_attention.py" in kept
    assert all(collected("tensorflow", path) for path in files)
