"""Corpus readers, vocabulary, the generated corpus and truncated-BPTT batching."""

import collections
import gzip

import numpy as np
import pytest
import tensorflow as tf

from examples.harness.data.vocabulary import EOS, UNK, Vocabulary
from examples.language_modeling import cbt, lm_corpora, ptb, wikitext2
from examples.language_modeling.generated_lm import generate_copy_corpus
from examples.language_modeling.lm_batches import make_bptt_batches
from examples.language_modeling.token_streams import TokenStream


def _write(path, lines, compress=False):
    text = "".join(line + "\n" for line in lines)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _reference_counts(path):
    """Tokens of a file counted independently: words of every line plus one <eos> per line."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return sum(len(line.split()) + 1 for line in lines), {w for line in lines for w in line.split()}


# --- Real corpora (FIGURES.md §7) ----------------------------------------------------------


def test_ptb_statistics(shared_data):
    corpus = ptb.load_ptb(shared_data / "ptb")
    assert (corpus.train.num_tokens, corpus.valid.num_tokens, corpus.test.num_tokens) == (
        929_589,
        73_760,
        82_430,
    )
    assert len(corpus.vocabulary) == 10_000
    assert UNK in corpus.vocabulary and EOS in corpus.vocabulary
    assert corpus.train.num_documents == 1
    # The ids decode back to the file's text.
    first_line = (shared_data / "ptb" / "ptb.valid.txt").read_text().splitlines()[0].split()
    assert corpus.vocabulary.decode(corpus.valid.ids[: len(first_line) + 1]) == first_line + [EOS]


def test_wikitext2_statistics(shared_data):
    corpus = wikitext2.load_wikitext2(shared_data / "wikitext2")
    assert (corpus.train.num_tokens, corpus.valid.num_tokens, corpus.test.num_tokens) == (
        2_088_628,
        217_646,
        245_569,
    )
    assert len(corpus.vocabulary) == 33_278
    # WikiText-2 has 600 / 60 / 60 articles; each document starts with its " = Title = " line.
    assert (corpus.train.num_documents, corpus.valid.num_documents) == (600, 60)
    assert corpus.test.num_documents == 60
    words = corpus.vocabulary.decode(corpus.valid.ids)
    for start in corpus.valid.document_starts[1:]:
        assert words[start] == "=" and words[start - 1] == EOS


def test_cbt_single_file_is_split_by_books(shared_data):
    corpus = cbt.load_cbt(shared_data / "cbt")
    path = shared_data / "cbt" / "cbt_test.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    books = sum(line.startswith("_BOOK_TITLE_") for line in lines)
    text_tokens = sum(
        len(line.split()) + 1 for line in lines if not line.startswith("_BOOK_TITLE_")
    )
    streams = (corpus.train, corpus.valid, corpus.test)
    assert sum(s.num_tokens for s in streams) == text_tokens
    assert [s.num_documents for s in streams] == [books - 2, 1, 1]
    assert "_BOOK_TITLE_" not in corpus.vocabulary
    assert lm_corpora.detect_corpus(shared_data / "cbt") == "cbt"


# --- Formats on small files ----------------------------------------------------------------


def test_ptb_format_small_files(tmp_path):
    _write(tmp_path / "ptb.train.txt", [" a b c ", " a <unk> "])
    _write(tmp_path / "ptb.valid.txt", [" c a "])
    _write(tmp_path / "ptb.test.txt", [" b "])
    corpus = lm_corpora.load_corpus(tmp_path)
    assert corpus.name == "ptb"
    assert corpus.vocabulary.tokens == ["<eos>", "a", "<unk>", "b", "c"]
    assert corpus.vocabulary.decode(corpus.train.ids) == ["a", "b", "c", EOS, "a", UNK, EOS]
    assert corpus.valid.num_tokens == 3 and corpus.test.num_tokens == 2


def test_stray_bytes_do_not_stop_the_read(tmp_path):
    _write(tmp_path / "ptb.train.txt", [" a b ", " a c "])
    (tmp_path / "ptb.train.txt").write_bytes(b" a \xff b \n a c \n")
    _write(tmp_path / "ptb.valid.txt", [" a "])
    _write(tmp_path / "ptb.test.txt", [" b "])
    corpus = lm_corpora.load_corpus(tmp_path)
    assert "\ufffd" in corpus.vocabulary.tokens
    assert corpus.train.num_tokens == 7  # a, U+FFFD, b, <eos>, a, c, <eos>


@pytest.mark.parametrize("compress", [False, True])
def test_wikitext_format_plain_or_gz(tmp_path, compress):
    def article(title, text):
        return [" ", f" = {title} = ", " ", " = = Part = = ", f" {text} "]

    lines = article("One", "x y") + article("Two", "y z") + [" = Goals ; A = "]
    # The official layout (all plain), or a gzipped training file beside plain ones.
    _write(tmp_path / ("wiki.train.tokens" + (".gz" if compress else "")), lines, compress)
    for split in ("valid", "test"):
        _write(tmp_path / f"wiki.{split}.tokens", lines)
    corpus = lm_corpora.load_corpus(tmp_path)
    assert corpus.name == "wikitext2"
    expected, _ = _reference_counts(next(tmp_path.glob("wiki.train.tokens*")))
    assert corpus.train.num_tokens == expected == corpus.valid.num_tokens
    words = corpus.vocabulary.decode(corpus.train.ids)
    # Two articles; the table row " = Goals ; A = " is not a title.
    assert corpus.train.num_documents == 2
    second = corpus.train.document_starts[1]
    assert words[second : second + 3] == ["=", "Two", "="]


def test_cbt_format_small_files(tmp_path):
    book = lambda n, words: [f"_BOOK_TITLE_ : book{n}.txt.out", *words]  # noqa: E731
    _write(tmp_path / "cbt_train.txt", book(1, ["a b", "a c"]) + book(2, ["a b", "b d"]))
    _write(tmp_path / "cbt_valid.txt", book(3, ["a z"]))
    _write(tmp_path / "cbt_test.txt", book(4, ["b a"]))
    corpus = cbt.load_cbt(tmp_path, min_count=2)
    # c and d are seen once in training: they become <unk>, as does the unseen z.
    assert corpus.vocabulary.decode(corpus.train.ids) == [
        "a",
        "b",
        EOS,
        "a",
        UNK,
        EOS,
        "a",
        "b",
        EOS,
        "b",
        UNK,
        EOS,
    ]
    assert corpus.train.document_starts.tolist() == [0, 6]
    assert corpus.vocabulary.decode(corpus.valid.ids) == ["a", UNK, EOS]


def test_missing_files_are_named(tmp_path):
    _write(tmp_path / "ptb.train.txt", ["a"])
    with pytest.raises(ValueError, match=r"ptb\.valid\.txt, ptb\.test\.txt"):
        ptb.load_ptb(tmp_path)
    expected = r"holds no known corpus.*ptb\.train\.txt.*wiki\.train\.tokens.*cbt_test\.txt"
    with pytest.raises(ValueError, match=expected):
        lm_corpora.detect_corpus(tmp_path)
    with pytest.raises(ValueError, match="is not a directory"):
        lm_corpora.detect_corpus(tmp_path / "nowhere")


# --- Vocabulary ----------------------------------------------------------------------------


def test_vocabulary_orders_by_frequency_then_alphabet():
    vocab = Vocabulary.from_counts(collections.Counter("b a c a b a d".split()))
    assert vocab.tokens == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(vocab.encode(["d", "a"]), [3, 0])
    assert vocab.decode([1, 2]) == ["b", "c"]


def test_vocabulary_unknown_words():
    capped = Vocabulary.from_counts({"a": 5, "b": 3, "c": 1}, max_size=3, unk_token=UNK)
    assert capped.tokens == ["a", "b", UNK]
    assert capped.encode(["c", "zzz"]).tolist() == [2, 2]
    closed = Vocabulary(["a", "b"])
    with pytest.raises(ValueError, match="'zzz' is not in the vocabulary"):
        closed.encode(["a", "zzz"])
    with pytest.raises(ValueError, match="unique"):
        Vocabulary(["a", "a"])
    with pytest.raises(ValueError, match="min_count"):
        Vocabulary.from_counts({"a": 1}, min_count=0)


# --- Generated corpus ----------------------------------------------------------------------


def test_generated_corpus_repeats_every_span():
    corpus = generate_copy_corpus(3000, 500, 500, num_words=50, min_span=2, max_span=4, seed=3)
    words = corpus.vocabulary.decode(corpus.train.ids)
    sentences = " ".join(words).split(f" {EOS}")[:-1]
    assert len(sentences) > 50
    for sentence in sentences:
        first, second = sentence.split(" again ")
        assert first.split() == second.split()
        assert 2 <= len(first.split()) <= 4
    assert corpus.train.num_documents == -(-len(sentences) // 25)
    again = generate_copy_corpus(3000, 500, 500, num_words=50, seed=3)
    np.testing.assert_array_equal(again.train.ids, corpus.train.ids)
    other = generate_copy_corpus(3000, 500, 500, num_words=50, seed=4)
    assert not np.array_equal(other.train.ids[:100], corpus.train.ids[:100])


def test_generated_corpus_rejects_bad_spans():
    with pytest.raises(ValueError, match="max_span"):
        generate_copy_corpus(100, 10, 10, min_span=3, max_span=2)


# --- Truncated-BPTT batching ---------------------------------------------------------------


def _pairs(batches):
    real = batches.weights > 0
    return sorted(zip(batches.inputs[real].tolist(), batches.targets[real].tolist()))


def test_bptt_rows_continue_across_batches():
    ids = np.arange(1, 1001, dtype=np.int32)  # distinct tokens: position t has token t + 1
    batches = make_bptt_batches(TokenStream(ids, np.array([0])), batch_size=7, sequence_length=9)
    assert batches.inputs.shape[1:] == (7, 9)
    assert _pairs(batches) == list(zip(ids[:-1].tolist(), ids[1:].tolist()))
    real = batches.weights > 0
    np.testing.assert_array_equal(batches.targets[real], batches.inputs[real] + 1)
    for i in range(batches.num_batches - 1):
        for b in range(7):
            if batches.weights[i + 1, b, 0]:
                # Row b of batch i + 1 starts right after where row b of batch i ended.
                assert batches.inputs[i + 1, b, 0] == batches.inputs[i, b, -1] + 1
    # Rows are contiguous pieces of the stream, in order.
    starts = [batches.inputs[0, b, 0] for b in range(7)]
    assert starts == sorted(starts) and starts[0] == 1
    assert not batches.resets[1:].any()  # one document: no resets after the first batch


def test_bptt_documents_start_segments_and_flag_resets():
    ids = np.arange(100, dtype=np.int32)
    starts = np.array([0, 13, 40, 41, 77])
    batches = make_bptt_batches(TokenStream(ids, starts), batch_size=3, sequence_length=5)
    assert _pairs(batches) == [(i, i + 1) for i in range(99)]
    flagged = []
    for i, b in zip(*np.nonzero(batches.resets)):
        first = batches.inputs[i, b, 0]
        assert batches.weights[i, b, 0] == 1
        flagged.append(int(first))
    assert sorted(flagged) == starts.tolist()
    # No segment mixes two documents.
    document = np.searchsorted(starts, batches.inputs, side="right") - 1
    for i in range(batches.num_batches):
        for b in range(3):
            real = batches.weights[i, b] > 0
            assert len(set(document[i, b][real].tolist())) <= 1
    # Without document resets the stream is one document.
    flat = make_bptt_batches(TokenStream(ids, starts), 3, 5, reset_at_documents=False)
    assert _pairs(flat) == _pairs(batches)
    assert flat.resets.sum() == 1 and flat.num_targets == 99


def test_bptt_dataset_yields_the_arrays_in_order():
    corpus = generate_copy_corpus(2000, 200, 200, num_words=20)
    batches = make_bptt_batches(corpus.train, 4, 6)
    dataset = batches.dataset()
    assert dataset.element_spec[0].shape == (4, 6)
    for i, (x, y, w) in enumerate(dataset.as_numpy_iterator()):
        np.testing.assert_array_equal(x, batches.inputs[i])
        np.testing.assert_array_equal(y, batches.targets[i])
        np.testing.assert_array_equal(w, batches.weights[i])
    assert i + 1 == batches.num_batches


def test_bptt_rejects_bad_arguments():
    stream = TokenStream(np.arange(10), np.array([0]))
    with pytest.raises(ValueError, match="`sequence_length` must be >= 1, got 0"):
        make_bptt_batches(stream, 2, 0)
    with pytest.raises(ValueError, match="`batch_size` must be >= 1"):
        make_bptt_batches(stream, 0, 3)
    with pytest.raises(TypeError, match="`sequence_length` must be an integer"):
        make_bptt_batches(stream, 2, 2.5)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        make_bptt_batches(TokenStream(np.arange(1), np.array([0])), 2, 3)
    with pytest.raises(ValueError, match="document_starts"):
        TokenStream(np.arange(5), np.array([1, 3]))


# --- Packed documents ------------------------------------------------------------------------


def _flat_rows(array):
    """``array`` ``[num_batches, batch_size, sequence_length]`` as the rows it lays out, one
    after the other: ``[batch_size * num_batches * sequence_length]``."""
    return array.swapaxes(0, 1).reshape(-1)


@pytest.mark.parametrize("batch_size,sequence_length", [(3, 5), (1, 4), (4, 1), (2, 40)])
def test_packed_layout_holds_every_pair_once_in_order_with_padding_only_at_the_tail(
    batch_size, sequence_length
):
    ids = np.arange(1, 101, dtype=np.int32)  # token t + 1 at position t: pairs are (t+1, t+2)
    starts = np.array([0, 13, 40, 41, 77, 98])
    batches = make_bptt_batches(TokenStream(ids, starts), batch_size, sequence_length, pack=True)
    assert batches.packed and batches.inputs.shape[1:] == (batch_size, sequence_length)
    assert batches.num_targets == 99
    # Read row by row, the layout is the stream itself, then padding with weight 0.
    inputs, targets = _flat_rows(batches.inputs), _flat_rows(batches.targets)
    weights = _flat_rows(batches.weights)
    np.testing.assert_array_equal(inputs[:99], ids[:-1])
    np.testing.assert_array_equal(targets[:99], ids[1:])
    np.testing.assert_array_equal(weights[:99], 1.0)
    assert not weights[99:].any() and not inputs[99:].any() and not targets[99:].any()
    # Fewer than one segment per row of padding: no row is longer than it needs to be.
    assert len(weights) - 99 < batch_size * sequence_length
    assert batches.padding_fraction == pytest.approx((len(weights) - 99) / len(weights))
    # Rows are contiguous: row b of batch i + 1 continues row b of batch i.
    for i in range(batches.num_batches - 1):
        for b in range(batch_size):
            if batches.weights[i + 1, b, 0]:
                assert batches.inputs[i + 1, b, 0] == batches.inputs[i, b, -1] + 1


def test_packed_reset_mask_marks_exactly_the_document_starts():
    ids = np.arange(100, dtype=np.int32)  # the input at a position is its stream offset
    starts = np.array([0, 13, 40, 41, 77, 98])
    batches = make_bptt_batches(TokenStream(ids, starts), 3, 5, pack=True)
    assert batches.reset_mask.shape == batches.inputs.shape
    assert batches.reset_mask.dtype == bool
    marked = batches.inputs[batches.reset_mask]
    assert sorted(marked.tolist()) == starts.tolist()
    assert (batches.weights[batches.reset_mask] == 1).all()  # never on padding
    # The host has nothing to clear: the model restarts the rows itself.
    assert batches.resets.shape == (batches.num_batches, 3) and not batches.resets.any()
    # A document starting at the last token has no pair to read it: nothing to mark.
    last = make_bptt_batches(TokenStream(ids, np.array([0, 99])), 3, 5, pack=True)
    assert last.inputs[last.reset_mask].tolist() == [0]


def test_packing_leaves_a_one_document_stream_as_it_was():
    ids = np.arange(1, 201, dtype=np.int32)
    stream = TokenStream(ids, np.array([0]))
    padded = make_bptt_batches(stream, 4, 7)
    packed = make_bptt_batches(stream, 4, 7, pack=True)
    for name in ("inputs", "targets", "weights"):
        np.testing.assert_array_equal(getattr(packed, name), getattr(padded, name))
    assert packed.padding_fraction == padded.padding_fraction
    assert packed.reset_mask.sum() == 1 and packed.reset_mask[0, 0, 0]
    assert padded.reset_mask is None and not padded.packed


def test_packing_removes_the_padding_between_documents():
    corpus = generate_copy_corpus(3000, 300, 300, num_words=20, sentences_per_document=3)
    stream = corpus.train
    assert stream.num_documents > 10
    padded = make_bptt_batches(stream, 4, 9)
    packed = make_bptt_batches(stream, 4, 9, pack=True)
    assert packed.num_targets == padded.num_targets == stream.num_tokens - 1
    assert _pairs(packed) == _pairs(padded)
    assert packed.padding_fraction < padded.padding_fraction
    assert packed.num_batches <= padded.num_batches
    # Without document resets, packing marks only the start of the stream.
    flat = make_bptt_batches(stream, 4, 9, reset_at_documents=False, pack=True)
    assert flat.reset_mask.sum() == 1


def test_packed_dataset_yields_tokens_and_reset_mask():
    corpus = generate_copy_corpus(2000, 200, 200, num_words=20, sentences_per_document=2)
    batches = make_bptt_batches(corpus.train, 4, 6, pack=True)
    dataset = batches.dataset()
    assert set(dataset.element_spec[0]) == {"tokens", "reset"}
    assert dataset.element_spec[0]["reset"].dtype == tf.bool
    for i, (x, y, w) in enumerate(dataset.as_numpy_iterator()):
        np.testing.assert_array_equal(x["tokens"], batches.inputs[i])
        np.testing.assert_array_equal(x["reset"], batches.reset_mask[i])
        np.testing.assert_array_equal(y, batches.targets[i])
        np.testing.assert_array_equal(w, batches.weights[i])
    assert i + 1 == batches.num_batches
    first = batches.take(2)
    assert first.num_batches == 2 and first.packed
    np.testing.assert_array_equal(first.reset_mask, batches.reset_mask[:2])
    assert batches.take(10_000).num_batches == batches.num_batches
    with pytest.raises(TypeError, match="`pack` must be a bool"):
        make_bptt_batches(corpus.train, 4, 6, pack="yes")
