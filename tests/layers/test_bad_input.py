"""Bad arguments to the model builders and their compile functions: a clear error naming the
argument. Each case gives the call, the exception type and fragments the message must hold."""

import keras
import pytest

from tests.pair_encoders import pair_encoder
from tf_memlayers import AttentionPooling, ConditionalEncoder
from tf_memlayers.models.fill_last_word import (
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.models.snli import build_snli_model, compile_snli_model


def _snli(**kwargs):
    encoder = pair_encoder("dual_am_gru", 4, num_copies=2)
    return build_snli_model(20, **{"encoder": encoder, "embedding_dim": 4, **kwargs})


def _sequence_encoder():
    return ConditionalEncoder([keras.layers.GRU(4, return_sequences=True, return_state=True)])


def _fill(**kwargs):
    settings = {"embedding_dim": 4, "units": 4, "pooling": AttentionPooling(4)}
    return build_fill_last_word_model(20, **{**settings, **kwargs})


BUILDER_CASES = {
    "snli_embedding_dim_0": (lambda: _snli(embedding_dim=0), ValueError, ["embedding_dim", "0"]),
    "snli_encoder_a_string": (
        lambda: _snli(encoder="dual_am_gru"),
        TypeError,
        ["`encoder`", "'dual_am_gru'"],
    ),
    "snli_encoder_returns_sequences": (
        lambda: _snli(encoder=_sequence_encoder()),
        ValueError,
        ["`encoder`", "two vectors", "(None, None, 4)"],
    ),
    "snli_classifier_units_0": (
        lambda: _snli(classifier_units=0),
        ValueError,
        ["classifier_units", "0"],
    ),
    "snli_dropout_1_5": (lambda: _snli(dropout=1.5), ValueError, ["dropout", "1.5"]),
    "snli_seed_float": (lambda: _snli(seed=1.5), TypeError, ["seed", "1.5"]),
    "snli_train_embeddings_str": (
        lambda: _snli(train_embeddings="no"),
        TypeError,
        ["train_embeddings", "'no'"],
    ),
    "fill_pooling_a_string": (
        lambda: _fill(pooling="attention"),
        TypeError,
        ["`pooling`", "'attention'", "Keras layer"],
    ),
    "fill_embedding_dim_0": (lambda: _fill(embedding_dim=0), ValueError, ["embedding_dim", "0"]),
    "fill_units_0": (lambda: _fill(units=0), ValueError, ["units", "0"]),
    "fill_weight_decay_nan": (
        lambda: _fill(weight_decay=float("nan")),
        ValueError,
        ["weight_decay", "nan"],
    ),
    "fill_embeddings_shape": (
        lambda: _fill(embeddings=[[1.0]]),
        ValueError,
        ["`embeddings`", "(1, 1)"],
    ),
    "fill_faithful_to_code_str": (
        lambda: _fill(faithful_to_code="no"),
        TypeError,
        ["faithful_to_code"],
    ),
}

COMPILE_CASES = {
    "learning_rate_negative": ({"learning_rate": -1.0}, ValueError, ["learning_rate", "-1.0"]),
    "learning_rate_nan": ({"learning_rate": float("nan")}, ValueError, ["learning_rate", "nan"]),
    "learning_rate_inf": ({"learning_rate": float("inf")}, ValueError, ["learning_rate", "inf"]),
    "learning_rate_str": ({"learning_rate": "fast"}, TypeError, ["learning_rate", "'fast'"]),
    "clip_norm_negative": ({"clip_norm": -5}, ValueError, ["clip_norm", "-5"]),
}


@pytest.mark.parametrize("case", sorted(BUILDER_CASES))
def test_builders_name_the_users_argument(case):
    call, error_type, fragments = BUILDER_CASES[case]
    with pytest.raises(error_type) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert "output_dim" not in message and "Received" not in message  # no Keras-internal names


@pytest.fixture
def small_models():
    return {"snli": _snli(), "fill": _fill()}


@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
@pytest.mark.parametrize("which", ["snli", "fill"])
def test_compile_functions_check_learning_rate_and_clip_norm(which, case, small_models):
    kwargs, error_type, fragments = COMPILE_CASES[case]
    compile_model = compile_snli_model if which == "snli" else compile_fill_last_word_model
    with pytest.raises(error_type) as info:
        compile_model(small_models[which], **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_compile_functions_still_accept_no_clipping(small_models):
    compile_snli_model(small_models["snli"], 1e-3, clip_norm=None)
    compile_snli_model(small_models["snli"], 1e-3, clip_norm=0)
    compile_fill_last_word_model(small_models["fill"], learning_rate=1e-3, clip_norm=0)
    assert small_models["fill"].optimizer.learning_rate.numpy() == pytest.approx(1e-3)
