"""What runs on which backend: the TensorFlow-only parts refuse elsewhere, the documentation
says so, CI runs the selected tests on JAX, and the other backends' masked loop is right."""

import re

import keras
import numpy as np
import pytest

import tf_memlayers
import tf_memlayers.models
from tests.selection import backend_neutral_files, collected
from tests.support import BACKEND, REPO_ROOT
from tf_memlayers.layers import AssociativeGRU, DualAssociativeGRU

BACKENDS_PAGE = (REPO_ROOT / "docs" / "backends.rst").read_text(encoding="utf-8")


@pytest.mark.parametrize("layer_cls", [AssociativeGRU, DualAssociativeGRU])
def test_the_fused_loop_is_tensorflow_only(layer_cls):
    if BACKEND == "tensorflow":
        assert layer_cls(4, num_copies=2, fused_loop=True).fused_loop
        return
    with pytest.raises(ValueError) as info:
        layer_cls(4, num_copies=2, fused_loop=True)
    message = str(info.value)
    for fragment in (layer_cls.__name__, "fused_loop=True", "TensorFlow backend", BACKEND):
        assert fragment in message, (fragment, message)
    # The default ("auto") runs Keras's loop there: the same layer on every backend.
    default = layer_cls(4, num_copies=2)
    assert default.fused_loop == "auto" and not default.uses_fused_loop


def test_heap_cache_model_is_tensorflow_only():
    from tf_memlayers.layers import HeapCacheAttention
    from tf_memlayers.models.heap_cache_model import HeapCacheModel

    inputs = keras.Input((4,))
    outputs = HeapCacheAttention(cache_size=3, attention_units=2)(inputs)
    if BACKEND == "tensorflow":
        assert HeapCacheModel(inputs, outputs).cache_layers
        return
    with pytest.raises(ValueError) as info:
        HeapCacheModel(inputs, outputs)
    for fragment in ("HeapCacheModel", "TensorFlow backend", repr(BACKEND), "insert"):
        assert fragment in str(info.value), fragment


def _backend_section():
    match = re.search(r"^Backends\n-+\n(.*?)(?=^\S[^\n]*\n[-=~]+\n)", BACKENDS_PAGE, re.M | re.S)
    assert match, "docs/backends.rst has no 'Backends' section"
    return match.group(1)


def test_the_backend_table_covers_every_layer_and_names_only_real_ones():
    """The table's first row covers every layer (each layer's test class runs on every
    backend, `test_ci_runs_the_backend_neutral_tests_on_jax`); its other rows are the
    exceptions, and every layer they name exists."""
    section = _backend_section()
    assert "every layer and cell of the package" in section
    exported = set(tf_memlayers.__all__) | set(tf_memlayers.models.__all__) | {"ValueError"}
    # A name is a link (`Name`) or a literal (``Name``).
    named = set(re.findall(r"(?<!`)``?([A-Z][A-Za-z]+)``?(?!`)", section))
    assert {"AssociativeGRU", "HeapCacheAttention", "ResettableRNN"} <= named
    assert named <= exported, sorted(named - exported)
    for part in ("fused_loop=True", "insert", "HeapCacheModel", "tf.data", "callbacks"):
        assert part in section, part


def _python_scan(f, init, xs):
    carry, ys = init, []
    for step in range(int(keras.tree.flatten(xs)[0].shape[0])):
        carry, y = f(carry, keras.tree.map_structure(lambda x, step=step: x[step], xs))
        ys.append(y)
    return carry, keras.ops.stack(ys)


def test_ci_runs_the_backend_neutral_tests_on_jax():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    # In an environment without TensorFlow (checked before the tests run).
    assert "-m pip install --no-deps -e .\n" in ci and '-c "import tensorflow"' in ci
    assert (
        'KERAS_BACKEND=jax "$jax_venv/bin/python" -m pytest -q -rs -n 2 --dist loadgroup tests\n'
    ) in ci
    # Off TensorFlow, collection keeps exactly the selected test files (tests/selection.py),
    # every layer's test module among them.
    tests = REPO_ROOT / "tests"
    files = sorted(tests.rglob("test_*.py"))
    kept = {path.relative_to(tests).as_posix() for path in files if collected("jax", path)}
    assert kept == backend_neutral_files()
    assert "layers/window_attention/test_sliding_window_attention.py" in kept
    assert all(collected("tensorflow", path) for path in files)


def _masked_inputs(rng):
    mask = np.ones((3, 6), bool)
    mask[1, 4:] = False  # right padding
    mask[2, 1] = False  # a hole
    return rng.normal(size=(3, 6, 5)).astype("float32"), mask


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("zero_output_for_mask", [False, True])
@pytest.mark.parametrize("layer_cls", [AssociativeGRU, DualAssociativeGRU])
def test_the_masked_loop_of_the_other_backends_equals_keras_tensorflow_loop(
    layer_cls, zero_output_for_mask, go_backwards, monkeypatch
):
    # On JAX and PyTorch, AssociativeGRU and DualAssociativeGRU run their masked loop with
    # `tf_memlayers.layers.resettable_rnn.scan_loop` (Keras's loop there emits the memory at
    # masked steps). On TensorFlow the same loop is checked against Keras's TensorFlow loop;
    # on JAX, the layer tests check it against the cell form.
    if BACKEND != "tensorflow":
        pytest.skip(
            "compares with Keras's TensorFlow loop; on this backend the layer tests "
            "compare the masked loop with the cell form"
        )
    rng = np.random.default_rng(3)
    xs, mask = _masked_inputs(rng)
    layer = layer_cls(
        4,
        num_copies=2,
        return_sequences=True,
        return_state=True,
        go_backwards=go_backwards,
        zero_output_for_mask=zero_output_for_mask,
    )
    layer.build((None, None, 5))
    layer.set_weights([rng.normal(scale=0.5, size=w.shape) for w in layer.weights])
    states = [rng.normal(size=(3, size)).astype("float32") for size in layer.cell.state_size]
    expected = layer(xs, mask=mask, initial_state=states)
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    # Keras's `scan` on TensorFlow wants outputs shaped like the carry; the loop's steps are
    # checked here with a plain Python scan.
    monkeypatch.setattr(keras.ops, "scan", _python_scan)
    got = layer(xs, mask=mask, initial_state=states)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-6)
