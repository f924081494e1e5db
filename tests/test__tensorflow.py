"""`require_tensorflow`, the one way the TensorFlow-only parts get TensorFlow."""

import builtins
import sys

import pytest

from tf_memlayers._tensorflow import require_tensorflow


def test_without_tensorflow_the_error_names_the_part_that_needs_it(monkeypatch):
    # None in sys.modules: the next `import tensorflow` fails as on a machine without it.
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    error = pytest.raises(ModuleNotFoundError, require_tensorflow, "the fused AM-GRU loop").value
    assert error.name == "tensorflow"
    message = str(error)
    assert message.startswith("the fused AM-GRU loop needs TensorFlow, which is not installed.")
    assert "`pip install tensorflow`" in message
    assert "step model and `generate`, and the callbacks StateResetCallback" in message
    # The import's own error stays attached, for the traceback.
    assert isinstance(error.__cause__, ModuleNotFoundError) and error.__cause__.name == "tensorflow"


def test_a_module_missing_inside_tensorflow_is_reported_as_it_is(monkeypatch):
    # TensorFlow installed, a dependency of its own missing: that error, not "not installed".
    missing = ModuleNotFoundError("No module named 'absl'", name="absl")
    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name == "tensorflow":
            raise missing
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing_import)
    raised = pytest.raises(ModuleNotFoundError, require_tensorflow, "TensorBoard summaries")
    assert raised.value is missing
