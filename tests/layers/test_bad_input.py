"""Bad input to the data readers and the model builders: a clear error naming what is wrong.

Each case gives the call, the exception type and fragments the message must hold: the
argument's name, or the file's name (and where a line is at fault, the line).
"""

import gzip
import json
import os

import keras
import pytest

from examples.fill_last_word import sentences
from examples.harness.data import embeddings
from examples.language_modeling import cbt, ptb, wikitext2
from tests.pair_encoders import pair_encoder
from tf_memlayers import AttentionPooling, ConditionalEncoder
from tf_memlayers.models.fill_last_word import (
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.models.snli import build_snli_model, compile_snli_model

# Bytes that are not text: what `load_ptb` read as 288 "words" of U+FFFD, and
# `read_sentences` as 121 "sentences".
RANDOM_BYTES = bytes(range(256)) * 4 + os.urandom(1024)


def _write(directory, files):
    """Writes ``{name: text or bytes}`` under ``directory``; returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = directory / name
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
    return directory


def _ptb(directory, train="a b c\n", valid="a b\n", test="b c\n"):
    return _write(directory, {"ptb.train.txt": train, "ptb.valid.txt": valid, "ptb.test.txt": test})


# --- readers: (call on tmp_path, exception type, fragments of the message) ------------------

READER_CASES = {
    # GloVe lines of unequal length: `dog 0.6` was read as a word, `cat` dropped.
    "glove_longer_line": (
        lambda d: embeddings.load_word_vectors(
            _write(d, {"v.txt": "cat 0.1 0.2\ndog 0.6 0.5 0.4\n"}) / "v.txt"
        ),
        ValueError,
        ["v.txt", "line 2", "3 values", "has 2"],
    ),
    "glove_shorter_line": (
        lambda d: embeddings.load_word_vectors(
            _write(d, {"v.txt": "dog 0.6\ncat 0.1 0.2\n"}) / "v.txt"
        ),
        ValueError,
        ["v.txt", "line 2"],
    ),
    "glove_line_too_short_for_the_vector": (
        lambda d: embeddings.load_word_vectors(
            _write(d, {"v.txt": "the 1 2 3\ncat 1 2\n"}) / "v.txt"
        ),
        ValueError,
        ["v.txt", "line 2", "2 values", "has 3"],
    ),
    "glove_not_text": (
        lambda d: embeddings.load_word_vectors(_write(d, {"v.txt": RANDOM_BYTES}) / "v.txt"),
        ValueError,
        ["v.txt", "line 1"],
    ),
    "json_vectors_of_unequal_length": (
        lambda d: embeddings.load_word_vectors(
            _write(d, {"v.json": json.dumps({"cat": [1, 2], "dog": [1]})}) / "v.json"
        ),
        ValueError,
        ["v.json", "'dog'", "1 value", "has 2"],
    ),
    "json_truncated": (
        lambda d: embeddings.load_word_vectors(_write(d, {"v.json": '{"cat": [1, 2'}) / "v.json"),
        ValueError,
        ["v.json", "not valid JSON"],
    ),
    "json_not_an_object": (
        lambda d: embeddings.load_word_vectors(_write(d, {"v.json": "[1, 2]"}) / "v.json"),
        ValueError,
        ["v.json", "JSON object"],
    ),
    "json_vector_not_a_list": (
        lambda d: embeddings.load_word_vectors(_write(d, {"v.json": '{"cat": 5}'}) / "v.json"),
        ValueError,
        ["v.json", "'cat'", "list of numbers"],
    ),
    "vectors_gz_not_gzip": (
        lambda d: embeddings.load_word_vectors(_write(d, {"v.txt.gz": "the 1 2\n"}) / "v.txt.gz"),
        ValueError,
        ["v.txt.gz", "gzip"],
    ),
    "corpus_gz_not_gzip": (
        lambda d: ptb.load_ptb(
            _write(
                d, {"ptb.train.txt.gz": "not gzip", "ptb.valid.txt": "a\n", "ptb.test.txt": "a\n"}
            )
        ),
        ValueError,
        ["ptb.train.txt.gz", "gzip"],
    ),
    "corpus_gz_truncated": (
        lambda d: ptb.load_ptb(
            _write(
                d,
                {
                    "ptb.train.txt.gz": gzip.compress(b"a b c\n" * 100)[:30],
                    "ptb.valid.txt": "a\n",
                    "ptb.test.txt": "a\n",
                },
            )
        ),
        ValueError,
        ["ptb.train.txt.gz", "gzip"],
    ),
    "corpus_random_bytes": (
        lambda d: ptb.load_ptb(_ptb(d, train=RANDOM_BYTES)),
        ValueError,
        ["ptb.train.txt", "not", "text"],
    ),
    "corpus_empty": (
        lambda d: ptb.load_ptb(_ptb(d, valid="")),
        ValueError,
        ["ptb.valid.txt", "empty"],
    ),
    "corpus_blank_only": (
        lambda d: ptb.load_ptb(_ptb(d, test=" \n\n\t\n")),
        ValueError,
        ["ptb.test.txt", "blank"],
    ),
    "wikitext_empty": (
        lambda d: wikitext2.load_wikitext2(
            _write(
                d, {"wiki.train.tokens": "", "wiki.valid.tokens": "a\n", "wiki.test.tokens": "a\n"}
            )
        ),
        ValueError,
        ["wiki.train.tokens", "empty"],
    ),
    "cbt_blank_train_file": (
        lambda d: cbt.load_cbt(
            _write(d, {"cbt_train.txt": "\n\n", "cbt_valid.txt": "a\n", "cbt_test.txt": "a\n"})
        ),
        ValueError,
        ["cbt_train.txt", "blank"],
    ),
    "sentences_random_bytes": (
        lambda d: sentences.read_sentences(_write(d, {"s.txt": RANDOM_BYTES}) / "s.txt"),
        ValueError,
        ["s.txt", "not", "text"],
    ),
    "sentences_empty": (
        lambda d: sentences.read_sentences(_write(d, {"s.txt": ""}) / "s.txt"),
        ValueError,
        ["s.txt", "empty"],
    ),
    "sentences_blank_only": (
        lambda d: sentences.read_sentences(_write(d, {"s.txt": "\r\n  \r\n"}) / "s.txt"),
        ValueError,
        ["s.txt", "blank"],
    ),
    "encode_last_word_max_length_0": (
        lambda d: sentences.encode_last_word(["a b c"], ["<pad>", "<unk>", "a"], max_length=0),
        ValueError,
        ["max_length", ">= 2", "0"],
    ),
    "encode_last_word_without_unk": (
        lambda d: sentences.encode_last_word(["a b c"], ["<pad>", "a"]),
        ValueError,
        ["vocabulary", "<unk>"],
    ),
}


@pytest.mark.parametrize("case", sorted(READER_CASES))
def test_bad_files_and_arguments_of_the_readers(case, tmp_path):
    call, error_type, fragments = READER_CASES[case]
    with pytest.raises(error_type) as info:
        call(tmp_path / "data")
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_stray_bytes_in_real_text_are_still_read(tmp_path):
    text = b"the cat sat on the mat .\ncaf\xe9 au lait \xff .\n" * 20
    _ptb(tmp_path, train=text, valid=text, test=text)
    corpus = ptb.load_ptb(tmp_path)
    assert "\ufffd" in corpus.vocabulary.tokens and corpus.train.num_tokens == 20 * 14
    (tmp_path / "s.txt").write_bytes(text)
    assert len(sentences.read_sentences(tmp_path / "s.txt")) == 40


def test_glove_lines_of_one_length_still_read_words_with_spaces(tmp_path):
    path = _write(tmp_path, {"v.txt": "the 1 2\nto name@domain.com 3 4\n2001 5 6\n"}) / "v.txt"
    vectors = embeddings.load_word_vectors(path)
    assert sorted(vectors) == ["2001", "the", "to name@domain.com"]


# --- model builders: (call, exception type, fragments) ---------------------------------------


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
