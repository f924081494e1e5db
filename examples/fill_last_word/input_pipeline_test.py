"""Sentences, vocabulary and encoding as in the reference code; the generated corpus; word
vectors; bad files named in the error; the read weight on chosen cache entries; the folder's
docstring examples."""

import collections
import doctest
import gzip
import importlib
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_memlayers import HeapCacheAttention
from tf_memlayers.models import HeapCacheModel

from . import input_pipeline as data


def reference_encoding(sentence, index, max_length=40):
    """parser_util.make_fill_blank_data (:96-136) for one sentence, PAD written as 0."""
    tokens = sentence.split(" ")
    offset = max_length - len(tokens)
    enc = [0] * max_length
    for j in range(offset, max_length - 1):
        enc[j + 1] = index.get(tokens[j - offset], index[data.UNK])
    return enc, index.get(tokens[-1], index[data.UNK])


def test_sentences_read_crlf_and_stray_bytes(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes(
        b"In 1839 , cells were basic .\r\nMeistersr\xc3\xbcte and \xff it .\r\n\r\n  x y  \r\n"
    )
    lines = data.read_sentences(path)
    assert lines == ["In 1839 , cells were basic .", "Meistersr\u00fcte and \ufffd it .", "x y"]
    text = b"\xef\xbb\xbf" + b"the cat sat on the mat .\ncaf\xc3\xa9 au lait \xff .\n" * 20
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(text))
    sentences = data.read_sentences(tmp_path / "t.txt.gz")  # the byte-order mark left out
    assert len(sentences) == 40 and sentences[0] == "the cat sat on the mat ."
    path.write_bytes("we had a café au lait that day .\n".encode("latin-1") * 10)  # not UTF-8
    with pytest.raises(ValueError, match="10 of its 10 bytes that are not ASCII are undecodable"):
        data.read_sentences(path)


@pytest.mark.parametrize(
    "name,content,fragments",
    [
        ("s.txt", bytes(range(256)) * 4 + os.urandom(1024), ["s.txt", "not", "text"]),
        ("s.txt", b"", ["s.txt", "empty"]),
        ("s.txt", b"\r\n  \r\n", ["s.txt", "blank"]),
        ("s.txt", b"a b\x00 c\n", ["s.txt", "NUL"]),
        ("s.txt.gz", gzip.compress(b"a b c\n" * 100, mtime=0)[:30], ["s.txt.gz", "gzip"]),
    ],
    ids=["random_bytes", "empty", "blank", "nul", "truncated_gzip"],
)
def test_a_file_that_holds_no_sentences_is_named(tmp_path, name, content, fragments):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError) as info:
        data.read_sentences(tmp_path / name)
    assert all(fragment in str(info.value) for fragment in fragments), info.value


def test_vocabulary_order_and_encoding_match_the_reference():
    sentences = ["b a c a", "a b", "c c c c a", "one", " ".join(["w"] * 41), "z " * 39 + "end"]
    vocabulary = data.build_vocabulary(sentences)
    counts = collections.Counter(t for s in sentences for t in s.split())
    assert vocabulary[:2] == [data.PAD, data.UNK]
    assert vocabulary[2:] == sorted(counts, key=lambda w: (-counts[w], w))
    index = {w: i for i, w in enumerate(vocabulary)}
    x, y, kept = data.encode_last_word(sentences, vocabulary)
    assert kept == [0, 1, 2, 5]  # one token: no context; 41 tokens: too long
    for row, label, position in zip(x, y, kept):
        enc, expected_label = reference_encoding(sentences[position].strip(), index)
        assert row.tolist() == enc and label == expected_label
    assert x.dtype == np.int32 and np.all(x[:, 0] == 0)  # always one leading PAD
    capped = data.build_vocabulary(sentences, max_size=4)
    x, y, _ = data.encode_last_word(["c end"], capped)
    assert y.tolist() == [capped.index(data.UNK)]
    x, _, _ = data.encode_last_word(["c <pad> a"], ["<pad>", "<unk>", "c"], 4)  # a word: UNK
    assert x.tolist() == [[0, 0, 2, 1]]
    # The cap keeps room for PAD and UNK.
    assert data.build_vocabulary(["a b b"], max_size=2) == ["<pad>", "<unk>"]
    with pytest.raises(ValueError, match="`max_size` must be >= 2, got 1"):
        data.build_vocabulary(["a b"], max_size=1)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: data.encode_last_word(["a b"], [data.PAD, data.UNK], 0), ["max_length", ">= 2"]),
        (lambda: data.encode_last_word(["a b c"], [data.PAD, "a"]), ["vocabulary", "<unk>"]),
        (lambda: data.generated_last_word_corpus(houses=0), ["houses", "0"]),
        (lambda: data.generated_last_word_corpus(houses=133), ["houses", "132"]),
        (lambda: data.generated_last_word_corpus(episodes=0), ["episodes"]),
        (lambda: data.generated_last_word_corpus(copies=-1), ["copies"]),
        (lambda: data.generated_last_word_corpus(epoch=-1), ["epoch"]),
    ],
)
def test_bad_arguments_are_named(call, fragments):
    with pytest.raises(ValueError) as info:
        call()
    assert all(fragment in str(info.value) for fragment in fragments), info.value


def test_dataset_is_fixed_length_and_prefetched():
    x = np.zeros((10, 40), np.int32)
    dataset = data.last_word_dataset(x, np.arange(10, dtype=np.int32), 4, shuffle=True)
    assert [tuple(b[0].shape) for b in dataset] == [(4, 40), (4, 40), (2, 40)]
    assert "Prefetch" in type(dataset).__name__
    # Its shuffle follows its seed (under one TensorFlow seed, as a run sets it).
    x, y = np.zeros((40, 3), np.int32), np.arange(40, dtype=np.int32)

    def order(seed):
        tf.random.set_seed(0)
        shuffled = data.last_word_dataset(x, y, 40, shuffle=True, seed=seed)
        return next(iter(shuffled))[1].numpy().tolist()

    assert order(1) == order(1) != order(2)


def test_generated_answers_are_stated_only_in_their_own_episodes_facts():
    corpus = dict(episodes=5, houses=8, copies=4, evaluation_episodes=3, seed=1)
    train, evaluation = data.generated_last_word_corpus(epoch=3, **corpus)
    assert len(train) == 5 and len(evaluation) == 3
    for episode in train + evaluation:
        assert len(episode.facts) == len(episode.houses) == 8
        assert sorted(episode.houses.values()) == sorted(data._COLOURS)  # each colour once
        assert all(fact.split()[-1] == "." for fact in episode.facts)
        asked = [q for q in episode.questions if episode.house(q) is not None]
        assert sorted(episode.house(q) for q in asked) == sorted(episode.houses)
        for question in asked:
            name, answer = question.split()
            assert answer == episode.houses[name] and name not in data._COLOURS
            # The answer is stated once in the episode: in the fact about the asked house.
            stating = [fact for fact in episode.facts if answer in fact.split()]
            assert stating == [f"{answer} {name} ."]
            assert [episode.house(fact) for fact in stating] == [name]
        for sentence in episode.questions:
            if episode.house(sentence) is None:  # a colour sentence: names no house
                first, thing, last = sentence.split()
                assert first == last in data._COLOURS and thing in data._THINGS
    assert all(len(e.questions) == 8 + 4 for e in train)
    assert all(len(e.questions) == 8 for e in evaluation)  # only questions about houses
    # Deterministic; other epochs draw other training episodes, never other evaluation ones.
    assert data.generated_last_word_corpus(epoch=3, **corpus) == (train, evaluation)
    later, same = data.generated_last_word_corpus(epoch=4, **corpus)
    assert same == evaluation and later != train
    vocabulary = set(data.generated_vocabulary())
    words = {w for e in train + evaluation for s in e.facts + e.questions for w in s.split()}
    assert words <= vocabulary


def test_generated_houses_change_colour_and_colours_are_equally_common():
    """No weight can hold a house's colour: the same house gets other colours elsewhere."""
    colours = collections.defaultdict(set)
    for epoch in range(10):
        for episode in data.generated_last_word_corpus(epoch=epoch, seed=0)[0]:
            for name, colour in episode.houses.items():
                colours[name].add(colour)
    assert len(colours) == data.GENERATED_HOUSES  # every name is trained
    assert min(len(c) for c in colours.values()) >= 3
    evaluation = data.generated_last_word_corpus(seed=0)[1]
    answers = collections.Counter(c for e in evaluation for c in e.houses.values())
    assert set(answers.values()) == {len(evaluation)}  # the commonest colour: 1/8
    (episode,), _ = data.generated_last_word_corpus(episodes=1, houses=20, seed=2)
    assert sorted(collections.Counter(episode.houses.values()).values()) == [2] * 4 + [3] * 4


def test_word_vectors_of_glove_and_json_files(tmp_path):
    glove = tmp_path / "v.txt.gz"
    glove.write_bytes(gzip.compress(b"2 2\nthe 1 2\nto name@domain.com 3 4\n2001 5 6\nx 7 y\n"))
    vectors = data.load_word_vectors(glove, ["the", "to name@domain.com", "2001", "x", "cat"])
    assert sorted(vectors) == ["2001", "the", "to name@domain.com"]  # x: not a number
    # A byte-order mark is left out, any line end ends a line, a stray undecodable byte is U+FFFD.
    glove.write_bytes(gzip.compress(b"\xef\xbb\xbfthe 1 2\rcaf\xc3\xa9 3 4\r\nb\xff 5 6\n"))
    vectors = data.load_word_vectors(glove, ["the", "café", "b\ufffd"])
    assert sorted(vectors) == ["b\ufffd", "café", "the"]
    (tmp_path / "v.json").write_text(json.dumps({"the": [1, 2], "Cat": [3, 4], "dog": [5, 6]}))
    vectors = data.load_word_vectors(tmp_path / "v.json", ["the", "cat", "Cat"])
    assert sorted(vectors) == ["Cat", "the"]
    # A word without a vector takes its lowercase form's; the others are drawn.
    matrix, found = data.embedding_matrix(["<pad>", "The", "Cat", "cow"], vectors, seed=1)
    assert found == 2 and matrix.shape == (4, 2) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix[1:3], [[1, 2], [3, 4]])
    drawn = data.embedding_matrix([f"w{i}" for i in range(400)], {"the": np.ones(50)})[0]
    assert drawn.std() == pytest.approx(0.9, abs=0.01)  # N(0, 0.9^2) as in the reference code


@pytest.mark.parametrize(
    "name,content,fragments",
    [
        # `dog 0.6` would be read as a word, `cat` dropped.
        ("v.txt", "cat 0.1 0.2\ndog 0.6 0.5 0.4\n", ["v.txt, line 2", "3 values", "line 1 has 2"]),
        ("v.txt", "cat 0.1 0.2\ndog 0.6\n", ["v.txt, line 2", "of 1 value,"]),
        ("v.txt", "cat dog\n", ["v.txt, line 1", "no vector"]),
        ("v.txt", "cat 0.1\n", ["No word vectors in", "v.txt"]),
        ("v.json", '{"the": [1, 2], "a": [1]}', ["v.json", "one length"]),
        ("v.json", '{"the": [1, 2', ["v.json is not valid JSON"]),
        ("v.txt", "café 1 2\n".encode("latin-1") * 10, ["v.txt is not UTF-8", "10 of its 10"]),
    ],
)
def test_a_bad_word_vector_file_is_named(tmp_path, name, content, fragments):
    (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError) as info:
        data.load_word_vectors(tmp_path / name, ["the", "a", "dog"])
    assert all(fragment in str(info.value) for fragment in fragments), info.value


@pytest.mark.parametrize("query", ["none", "additive", "dot"])
def test_attention_on_entries_sums_each_probes_read_weight_on_the_slots_of_its_entries(query):
    rng = np.random.default_rng(7)
    inputs = keras.Input((4,))  # the states are the inputs
    layer = HeapCacheAttention(6, 3, query=query)
    model = HeapCacheModel(inputs, layer(inputs))
    for weight in layer.trainable_weights:  # far from zero: each slot's weight differs
        weight.assign(rng.uniform(-1, 1, weight.shape))
    entries = rng.normal(size=(5, 4)).astype("float32")
    model.write_caches(entries)  # 5 of 6 slots, in the heap's order
    probes = rng.normal(size=(3, 4)).astype("float32")
    alpha = np.broadcast_to(layer.attention_weights(None if query == "none" else probes), (3, 6))
    held = [np.flatnonzero(np.all(entries == row, axis=-1)) for row in layer.cache.numpy()]
    assert sorted(len(entry) for entry in held) == [0, 1, 1, 1, 1, 1]
    wanted = np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 1]], bool)
    # Every entry listed, then the last three only: a slot holding no listed entry counts nothing.
    for first in (0, 2):
        got = data.attention_on_entries(model, layer, probes, entries[first:], wanted[:, first:])
        expected = sum(
            alpha[:, slot] * wanted[:, entry[0]]
            for slot, entry in enumerate(held)
            if len(entry) and entry[0] >= first
        )
        assert got.dtype == np.float64 and got[1] == 0.0
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("module", ["input_pipeline", "models", "train", "main"])
def test_docstring_examples_run(module):
    module = importlib.import_module(f"{__package__}.{module}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    if module.__name__.endswith(("input_pipeline", "models")):
        assert result.attempted > 0
