"""`lstm_use_cudnn`: Keras's cuDNN LSTM only where it computes the LSTM's dtype right."""

import keras
import pytest

from tests.support import BACKEND
from tf_memlayers import lstm_use_cudnn
from tf_memlayers.layers import SlidingWindowAttention
from tf_memlayers.models import build_fill_last_word_model, build_language_model

# JAX's cuDNN LSTM (which Keras's JAX backend takes on a GPU) computes float32 only.
EXPECTED = dict.fromkeys(["float16", "bfloat16", "float64"], False if BACKEND == "jax" else "auto")
EXPECTED["float32"] = "auto"


@pytest.mark.parametrize("dtype", sorted(EXPECTED))
def test_cudnn_only_where_it_computes_the_dtype(dtype):
    assert lstm_use_cudnn(dtype) == EXPECTED[dtype]
    # By default, the global policy's compute dtype.
    keras.config.set_dtype_policy(f"mixed_{dtype}" if dtype.endswith("16") else dtype)
    assert lstm_use_cudnn() == EXPECTED[dtype]
    # Torch's fused LSTM cannot train a stateful layer (the language-model builder's stateful
    # rows in tests/models/test_builders_on_every_backend.py train it with this).
    stateful = False if BACKEND == "torch" else EXPECTED[dtype]
    assert lstm_use_cudnn(dtype, stateful=True) == stateful


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_the_builders_lstms_follow_the_rule(policy):
    keras.config.set_dtype_policy(policy)
    expected = EXPECTED[keras.config.dtype_policy().compute_dtype]
    options = dict(units=8, embedding_dim=8, batch_size=2, sequence_length=4, stateful=False)
    model = build_language_model(50, SlidingWindowAttention(window=3), **options)
    lstms = [layer for layer in model.layers if isinstance(layer, keras.layers.LSTM)]
    assert lstms and all(layer.use_cudnn == expected for layer in lstms)
    # The last-word model's masked encoder runs Keras's loop whatever the dtype (cuDNN takes
    # right-padded masks only); unmasked (the original code's layout) it follows the rule.
    for faithful, want in ((False, False), (True, expected)):
        model = build_fill_last_word_model(
            30, sequence_length=5, embedding_dim=4, units=4, faithful_to_code=faithful
        )
        assert model.get_layer("encoder").use_cudnn == want


@pytest.mark.parametrize(
    "bad, error", [(32, TypeError), ("int32", ValueError), ("float", ValueError)]
)
def test_a_bad_argument_is_refused_with_its_name(bad, error):
    pytest.raises(error, lstm_use_cudnn, bad).match(rf"`compute_dtype`.*{bad!r}")
    with pytest.raises(TypeError, match="`stateful` must be a bool, got 'yes'"):
        lstm_use_cudnn("float32", stateful="yes")
