"""Bad input to the data readers and the model builders: a clear error naming what is wrong.

Each case gives the call, the exception type and fragments the message must hold: the
argument's name, or the file's name (and where a line is at fault, the line).
"""

import json
import os
import zipfile

import keras
import pytest

from examples.harness.data import embeddings
from examples.snli import generated_nli, snli
from examples.snli.encoders import make_encoder
from tf_memlayers import AttentionPooling, ConditionalEncoder
from tf_memlayers.models.fill_last_word import (
    build_fill_last_word_model,
    compile_fill_last_word_model,
)
from tf_memlayers.models.snli import build_snli_model, compile_snli_model

# Bytes that are not text.
RANDOM_BYTES = bytes(range(256)) * 4 + os.urandom(1024)
JSONL_PAIR = '{"sentence1": "a cat .", "sentence2": "an animal .", "gold_label": "entailment"}\n'


def _write(directory, files):
    """Writes ``{name: text or bytes}`` under ``directory``; returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = directory / name
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
    return directory


def _infersent(directory, s1="a cat .\n", s2="an animal .\n", labels="entailment\n"):
    return _write(directory, {"s1.dev": s1, "s2.dev": s2, "labels.dev": labels})


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
    "snli_zip_not_a_zip": (
        lambda d: snli.read_files(
            str(_write(d, {"snli_1.0.zip": "no zip"}) / "snli_1.0.zip"), "dev"
        ),
        ValueError,
        ["snli_1.0.zip", "zip"],
    ),
    "snli_jsonl_not_utf8": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.jsonl": JSONL_PAIR.encode() + b'{"sentence1": "\xff"}\n'}),
            "dev",
        ),
        ValueError,
        ["snli_1.0_dev.jsonl", "line 2", "UTF-8"],
    ),
    "snli_jsonl_truncated": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.jsonl": JSONL_PAIR + '{"sentence1": "a", "sent'}), "dev"
        ),
        ValueError,
        ["snli_1.0_dev.jsonl", "line 2", "JSON"],
    ),
    "snli_jsonl_without_sentence1": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.jsonl": '{"sentence2": "a", "gold_label": "neutral"}\n'}),
            "dev",
        ),
        ValueError,
        ["snli_1.0_dev.jsonl", "line 1", "sentence1"],
    ),
    "snli_jsonl_without_gold_label": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.jsonl": '{"sentence1": "a", "sentence2": "b"}\n'}), "dev"
        ),
        ValueError,
        ["snli_1.0_dev.jsonl", "gold_label"],
    ),
    "snli_zip_member_without_gold_label": (
        lambda d: snli.read_files(str(_zip(d, '{"sentence1": "a", "sentence2": "b"}\n')), "dev"),
        ValueError,
        ["snli_1.0.zip", "snli_1.0_dev.jsonl", "gold_label"],
    ),
    "snli_txt_without_gold_label_column": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.txt": "sentence1\tsentence2\na\tb\n"}), "dev"
        ),
        ValueError,
        ["snli_1.0_dev.txt", "gold_label"],
    ),
    "snli_unknown_label": (
        lambda d: snli.read_files(_infersent(d, labels="maybe\n"), "dev"),
        ValueError,
        ["labels.dev", "line 1", "'maybe'"],
    ),
    "snli_split_empty": (
        lambda d: snli.read_files(_write(d, {"snli_1.0_dev.jsonl": ""}), "dev"),
        ValueError,
        ["snli_1.0_dev.jsonl", "empty"],
    ),
    "snli_split_without_gold_labels": (
        lambda d: snli.read_files(
            _write(d, {"snli_1.0_dev.jsonl": JSONL_PAIR.replace("entailment", "-")}), "dev"
        ),
        ValueError,
        ["snli_1.0_dev.jsonl", "gold label"],
    ),
    "infersent_blank_file": (
        lambda d: snli.read_files(_infersent(d, s2="\n \n"), "dev"),
        ValueError,
        ["s2.dev", "blank"],
    ),
    "infersent_not_utf8": (
        lambda d: snli.read_files(_infersent(d, s1=RANDOM_BYTES), "dev"),
        ValueError,
        ["s1.dev"],
    ),
    "recall_corpus_max_facts_100": (
        lambda d: generated_nli.generate_recall_corpus(10, max_facts=100),
        ValueError,
        ["max_facts", "100", "25"],
    ),
    "recall_corpus_min_facts_0": (
        lambda d: generated_nli.generate_recall_corpus(10, min_facts=0),
        ValueError,
        ["min_facts", "0"],
    ),
    "recall_corpus_min_above_max": (
        lambda d: generated_nli.generate_recall_corpus(10, min_facts=3, max_facts=2),
        ValueError,
        ["min_facts=3", "max_facts=2"],
    ),
}


def _zip(directory, member_text):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "snli_1.0.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("snli_1.0/snli_1.0_dev.jsonl", member_text)
    return path


@pytest.mark.parametrize("case", sorted(READER_CASES))
def test_bad_files_and_arguments_of_the_readers(case, tmp_path):
    call, error_type, fragments = READER_CASES[case]
    with pytest.raises(error_type) as info:
        call(tmp_path / "data")
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_glove_lines_of_one_length_still_read_words_with_spaces(tmp_path):
    path = _write(tmp_path, {"v.txt": "the 1 2\nto name@domain.com 3 4\n2001 5 6\n"}) / "v.txt"
    vectors = embeddings.load_word_vectors(path)
    assert sorted(vectors) == ["2001", "the", "to name@domain.com"]


# --- model builders: (call, exception type, fragments) ---------------------------------------


def _snli(**kwargs):
    encoder = make_encoder("dual_am_gru", 4, num_copies=2)
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
