"""The corpora's readers, the generated corpus and the truncated-BPTT batches."""

import doctest
import gzip
import importlib
import os

import numpy as np
import pytest
import tensorflow as tf

from . import input_pipeline
from .input_pipeline import EOS, UNK, bptt_batches, generated_corpus, read_corpus


def write(folder, files, compress=()):
    """Writes ``{name: lines or bytes}`` into ``folder`` (gzipped where named in ``compress``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        data = content if isinstance(content, bytes) else "".join(f"{x}\n" for x in content)
        data = data if isinstance(data, bytes) else data.encode("utf-8")
        if name in compress:
            name, data = f"{name}.gz", gzip.compress(data)
        (folder / name).write_bytes(data)
    return folder


def ptb(folder, train=(" a b c ", " a <unk> "), valid=(" c a ",), test=(" b ",)):
    return write(folder, {"ptb.train.txt": train, "ptb.valid.txt": valid, "ptb.test.txt": test})


# --- the real corpora ---------------------------------------------------------------------


def test_ptb_statistics(shared_data):
    corpus = read_corpus(shared_data / "ptb")
    assert [len(ids) for ids, _ in corpus.splits.values()] == [929_589, 73_760, 82_430]
    assert len(corpus.vocabulary) == 10_000 and {UNK, EOS} <= set(corpus.vocabulary)
    assert corpus.splits["train"][1].tolist() == [0]  # one document
    first = (shared_data / "ptb" / "ptb.valid.txt").read_text().splitlines()[0].split()
    assert corpus.decode(corpus.splits["valid"][0][: len(first) + 1]) == [*first, EOS]


def test_wikitext2_statistics(shared_data):
    corpus = read_corpus(shared_data / "wikitext2")
    assert [len(ids) for ids, _ in corpus.splits.values()] == [2_088_628, 217_646, 245_569]
    assert len(corpus.vocabulary) == 33_278
    # 600 / 60 / 60 articles, each starting with its " = Title = " line.
    assert [len(starts) for _, starts in corpus.splits.values()] == [600, 60, 60]
    ids, starts = corpus.splits["valid"]
    words = corpus.decode(ids)
    assert all(words[s] == "=" and words[s - 1] == EOS for s in starts[1:])


def test_cbt_test_file_alone_is_split_by_books(shared_data):
    corpus = read_corpus(shared_data / "cbt")
    lines = (shared_data / "cbt" / "cbt_test.txt").read_text(encoding="utf-8").splitlines()
    books = sum(line.startswith("_BOOK_TITLE_") for line in lines)
    text = [line for line in lines if not line.startswith("_BOOK_TITLE_")]
    assert sum(len(ids) for ids, _ in corpus.splits.values()) == sum(
        len(x.split()) + 1 for x in text
    )
    assert [len(starts) for _, starts in corpus.splits.values()] == [books - 2, 1, 1]
    assert "_BOOK_TITLE_" not in corpus.vocabulary and corpus.name == "cbt"


# --- the formats on small files -----------------------------------------------------------


def test_ptb_format(tmp_path):
    corpus = read_corpus(ptb(tmp_path))
    assert corpus.name == "ptb" and corpus.vocabulary == ["<eos>", "a", "<unk>", "b", "c"]
    assert corpus.decode(corpus.splits["train"][0]) == ["a", "b", "c", EOS, "a", UNK, EOS]
    assert corpus.encode(["zzz"]).tolist() == [2]  # unknown words are <unk>
    # Without <unk> in training the vocabulary is closed: an unseen word is an error.
    with pytest.raises(ValueError, match="token 'b' is not in the vocabulary of 3 tokens"):
        read_corpus(ptb(tmp_path / "closed", train=(" a c ",), test=(" b ",)))


def test_stray_bytes_in_real_text_are_read_and_a_byte_order_mark_is_not_a_word(tmp_path):
    text = b"\xef\xbb\xbf" + b"the cat sat on the mat .\r\ncaf\xc3\xa9 au lait \xff .\n" * 20
    corpus = read_corpus(write(tmp_path, {f"ptb.{s}.txt": text for s in input_pipeline.SPLITS}))
    assert "\ufffd" in corpus.vocabulary and len(corpus.splits["train"][0]) == 20 * 14
    assert {"the", "café"} <= set(corpus.vocabulary) and "\ufeffthe" not in corpus.vocabulary


@pytest.mark.parametrize("compress", [(), ("wiki.train.tokens",)], ids=["plain", "gz"])
def test_wikitext_format(tmp_path, compress):
    def article(title, text):
        return [" ", f" = {title} = ", " ", " = = Part = = ", f" {text} "]

    # The second title's spaces stripped, as an editor may do.
    lines = article("One", "x y") + [line.strip() for line in article("Two", "y z")]
    lines += [" = Goals ; A = "]
    files = {f"wiki.{split}.tokens": lines for split in input_pipeline.SPLITS}
    corpus = read_corpus(write(tmp_path, files, compress))
    assert corpus.name == "wikitext2"
    ids, starts = corpus.splits["train"]
    assert len(ids) == sum(len(line.split()) + 1 for line in lines)
    # Two articles; the table row " = Goals ; A = " is not a title.
    assert len(starts) == 2 and corpus.decode(ids[starts[1] : starts[1] + 3]) == ["=", "Two", "="]


def test_cbt_format(tmp_path):
    def book(n, *lines):
        return [f"_BOOK_TITLE_ : book{n}.txt.out", *lines]

    files = {"cbt_train.txt": book(1, "a b", "a c") + book(2, "a b", "b d")}
    files.update({"cbt_valid.txt": book(3, "a z"), "cbt_test.txt": book(4, "b a")})
    corpus = read_corpus(write(tmp_path, files))
    # c and d are seen once in training: they become <unk>, as does the unseen z.
    ids, starts = corpus.splits["train"]
    assert " ".join(corpus.decode(ids)) == "a b <eos> a <unk> <eos> a b <eos> b <unk> <eos>"
    assert starts.tolist() == [0, 6]
    assert corpus.decode(corpus.splits["valid"][0]) == ["a", UNK, EOS]
    # cbt_test.txt alone: its last book is the test split, the one before it validation's.
    alone = {"cbt_test.txt": book(1, "a a") + book(2, "a a") + book(3, "a") + book(4, "a a a")}
    corpus = read_corpus(write(tmp_path / "alone", alone))
    assert corpus.decode(corpus.splits["valid"][0]) == ["a", EOS]
    assert corpus.decode(corpus.splits["test"][0]) == ["a", "a", "a", EOS]


BAD_FILES = {
    "gz_not_gzip": ({"ptb.train.txt.gz": b"not gzip"}, ["ptb.train.txt.gz", "gzip"]),
    "gz_truncated": (
        {"ptb.train.txt.gz": gzip.compress(b"a b c\n" * 100, mtime=0)[:30]},
        ["ptb.train.txt.gz", "gzip"],
    ),
    "random_bytes": (
        {"ptb.train.txt": bytes(range(256)) * 4 + os.urandom(1024)},
        ["ptb.train.txt", "not", "text"],
    ),
    "latin_1": (
        {"ptb.train.txt": "we had a café au lait that day\n".encode("latin-1") * 10},
        ["ptb.train.txt is not UTF-8 text: 10 of its 10 bytes that are not ASCII"],
    ),
    "empty": ({"ptb.valid.txt": b""}, ["ptb.valid.txt is empty"]),
    "blank": ({"ptb.test.txt": b" \n\n\t\n"}, ["ptb.test.txt is blank"]),
    "wikitext_empty": (
        {"wiki.train.tokens": b"", "wiki.valid.tokens": b"a\n", "wiki.test.tokens": b"a\n"},
        ["wiki.train.tokens is empty"],
    ),
    "cbt_blank": (
        {"cbt_train.txt": b"\n\n", "cbt_valid.txt": b"a\n", "cbt_test.txt": b"a\n"},
        ["cbt_train.txt is blank"],
    ),
    "cbt_too_few_books": ({"cbt_test.txt": b"_BOOK_TITLE_ : a\nb c\n"}, ["needs 3 books"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_named(tmp_path, case):
    files, fragments = BAD_FILES[case]
    if any(name.startswith("ptb") for name in files):
        ptb(tmp_path)
        for split in input_pipeline.SPLITS:  # a gzipped file takes the plain one's place
            if f"ptb.{split}.txt.gz" in files:
                (tmp_path / f"ptb.{split}.txt").unlink()
    write(tmp_path, files)
    with pytest.raises(ValueError) as info:
        read_corpus(tmp_path)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_a_folder_without_a_corpus_names_the_files_looked_for(tmp_path):
    write(tmp_path, {"ptb.train.txt": ["a"]})
    expected = r"holds no known corpus.*ptb\.valid\.txt.*wiki\.train\.tokens.*cbt_test\.txt"
    with pytest.raises(ValueError, match=expected):
        input_pipeline.corpus_name(tmp_path)
    with pytest.raises(ValueError, match="is not a directory"):
        input_pipeline.corpus_name(tmp_path / "nowhere")


# --- the generated corpus -----------------------------------------------------------------


def test_generated_corpus_repeats_every_span():
    corpus = generated_corpus(3000, seed=3, num_words=50)
    ids, starts = corpus.splits["train"]
    sentences = " ".join(corpus.decode(ids)).split(f" {EOS}")[:-1]
    assert len(sentences) > 50 and len(starts) == -(-len(sentences) // 25)
    for sentence in sentences:
        first, second = sentence.split(" again ")
        assert first.split() == second.split() and 2 <= len(first.split()) <= 4
    assert [len(ids) for ids, _ in corpus.splits.values()][1] < len(ids) / 5
    np.testing.assert_array_equal(
        generated_corpus(3000, seed=3, num_words=50).splits["train"][0], ids
    )
    assert not np.array_equal(
        generated_corpus(3000, seed=4, num_words=50).splits["train"][0][:100], ids[:100]
    )
    # Each split is drawn with its own seed: validation's and test's sentences do not start
    # as the training text does.
    for split in ("valid", "test"):
        drawn = " ".join(corpus.decode(corpus.splits[split][0])).split(f" {EOS}")[:-1]
        assert [len(s.split()) for s in drawn] != [len(s.split()) for s in sentences][: len(drawn)]


# --- truncated-BPTT batches ---------------------------------------------------------------


def pairs(batches):
    real = batches.weights > 0
    return sorted(zip(batches.inputs[real].tolist(), batches.targets[real].tolist()))


def flat_rows(array):
    """``[num_batches, batch_size, time]`` as the rows it lays out, one after the other."""
    return array.swapaxes(0, 1).reshape(-1)


STARTS = np.array([0, 13, 40, 41, 77, 98])


def test_padded_rows_continue_across_batches_and_documents_start_segments():
    ids = np.arange(1, 1001, dtype=np.int32)  # distinct tokens: position t holds t + 1
    batches = bptt_batches(ids, [0], batch_size=7, sequence_length=9)
    assert batches.inputs.shape[1:] == (7, 9)
    assert pairs(batches) == list(zip(ids[:-1].tolist(), ids[1:].tolist()))
    for i in range(len(batches.inputs) - 1):
        for b in range(7):
            if batches.weights[i + 1, b, 0]:  # row b of batch i + 1 continues row b of batch i
                assert batches.inputs[i + 1, b, 0] == batches.inputs[i, b, -1] + 1
    starts = [batches.inputs[0, b, 0] for b in range(7)]
    assert starts == sorted(starts) and starts[0] == 1 and not batches.resets[1:].any()

    ids = np.arange(100, dtype=np.int32)  # the input at a position is its offset
    batches = bptt_batches(ids, STARTS[:-1], batch_size=3, sequence_length=5)
    assert pairs(batches) == [(i, i + 1) for i in range(99)]
    flagged = batches.inputs[:, :, 0][batches.resets]
    assert sorted(flagged.tolist()) == STARTS[:-1].tolist()
    assert (batches.weights[:, :, 0][batches.resets] == 1).all()
    document = np.searchsorted(STARTS[:-1], batches.inputs, side="right") - 1
    real = batches.weights > 0
    for i, b in np.ndindex(batches.resets.shape):  # no segment mixes two documents
        assert len(set(document[i, b][real[i, b]].tolist())) <= 1
    assert batches.reset_mask is None and batches.padding_fraction > 0


@pytest.mark.parametrize("batch_size, sequence_length", [(3, 5), (1, 4), (4, 1), (2, 40)])
def test_packed_layout_holds_every_pair_once_in_order(batch_size, sequence_length):
    ids = np.arange(1, 101, dtype=np.int32)
    batches = bptt_batches(ids, STARTS, batch_size, sequence_length, pack=True)
    assert batches.inputs.shape[1:] == (batch_size, sequence_length)
    assert batches.num_targets == 99
    inputs, targets, weights = (flat_rows(a) for a in batches[:3])
    np.testing.assert_array_equal(inputs[:99], ids[:-1])
    np.testing.assert_array_equal(targets[:99], ids[1:])
    np.testing.assert_array_equal(weights[:99], 1.0)
    assert not weights[99:].any() and not inputs[99:].any() and not targets[99:].any()
    assert len(weights) - 99 < batch_size * sequence_length  # padding only at the end
    assert batches.padding_fraction == pytest.approx((len(weights) - 99) / len(weights))
    # The reset mask marks exactly the document starts, the host clears nothing.
    assert sorted(batches.inputs[batches.reset_mask].tolist()) == (STARTS + 1).tolist()
    assert batches.resets.shape == batches.inputs.shape[:2] and not batches.resets.any()


def test_packing_removes_the_padding_between_documents_only():
    ids = np.arange(1, 201, dtype=np.int32)
    padded, packed = (bptt_batches(ids, [0], 4, 7, pack=pack) for pack in (False, True))
    for a, b in zip(padded[:3], packed[:3]):  # one document: the same layout
        np.testing.assert_array_equal(a, b)
    assert packed.reset_mask.sum() == 1 and packed.reset_mask[0, 0, 0]
    ids, starts = generated_corpus(3000, num_words=20, sentences_per_document=3).splits["train"]
    padded, packed = (bptt_batches(ids, starts, 4, 9, pack=pack) for pack in (False, True))
    assert packed.num_targets == padded.num_targets == len(ids) - 1
    assert pairs(packed) == pairs(padded) and len(starts) > 10
    assert packed.padding_fraction < padded.padding_fraction
    # A document starting at the last token has no pair to read it: nothing to mark.
    last = bptt_batches(np.arange(100), [0, 99], 3, 5, pack=True)
    assert last.inputs[last.reset_mask].tolist() == [0]


@pytest.mark.parametrize("pack", [False, True])
def test_the_dataset_yields_the_arrays_in_order(pack):
    ids, starts = generated_corpus(2000, num_words=20, sentences_per_document=2).splits["train"]
    batches = bptt_batches(ids, starts, 4, 6, pack=pack).take(5)
    assert len(batches.inputs) == 5 and (batches.reset_mask is not None) == pack
    data = list(batches.dataset().as_numpy_iterator())
    assert len(data) == 5
    for i, (x, y, w) in enumerate(data):
        if pack:
            np.testing.assert_array_equal(x["reset"], batches.reset_mask[i])
            assert batches.dataset().element_spec[0]["reset"].dtype == tf.bool
            x = x["tokens"]
        np.testing.assert_array_equal(x, batches.inputs[i])
        np.testing.assert_array_equal(y, batches.targets[i])
        np.testing.assert_array_equal(w, batches.weights[i])


@pytest.mark.parametrize("module", ["input_pipeline", "models"])
def test_docstring_examples_run(module):
    module = importlib.import_module(f"{__package__}.{module}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
