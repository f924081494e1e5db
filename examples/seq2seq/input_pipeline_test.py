"""The auto-encoding example's sentences: the generated corpus, the files, the arrays."""

import doctest
import gzip

import numpy as np
import pytest

from . import input_pipeline as pipeline


def test_generated_sentences_follow_their_seed_and_grammar():
    first = pipeline.generated_sentences(200, seed=4)
    assert first == pipeline.generated_sentences(200, seed=4)
    assert first != pipeline.generated_sentences(200, seed=5)
    shortest, longest = pipeline.GENERATED_LENGTHS
    assert {len(s) for s in first} <= set(range(shortest, longest + 1))
    splits = pipeline.generated_splits("small", seed=1)
    assert [len(splits[name]) for name in pipeline.SPLITS] == [600, 100, 100]
    assert splits["train"][:5] != splits["test"][:5]  # independent streams
    with pytest.raises(ValueError, match="`size` must be one of"):
        pipeline.generated_splits("huge")
    short = pipeline.load_splits(None, "small", 6, 10, seed=1)
    assert len(short["train"]) == 10 and max(map(len, short["test"])) == 6


def test_the_vocabulary_and_the_teacher_forced_arrays():
    vocabulary = pipeline.build_vocabulary([["a", "b", "a"], ["c", "<s>"]])
    assert vocabulary == [*pipeline.SPECIAL_TOKENS, "a", "b", "c"]  # by count, then name
    assert pipeline.build_vocabulary([["a", "b", "a"]], max_size=5)[-1] == "a"
    source, decoder_input, target = pipeline.encode([["a", "b"], ["c", "zzz"]], vocabulary, 3)
    a, b, c = (vocabulary.index(w) for w in "abc")
    np.testing.assert_array_equal(source, [[a, b, 0], [c, 1, 0]])  # zzz: <unk>
    np.testing.assert_array_equal(decoder_input, [[2, a, b, 0], [2, c, 1, 0]])
    np.testing.assert_array_equal(target, [[a, b, 3, 0], [c, 1, 3, 0]])
    # Words spelled as the special tokens are words, unknown ones: the sentence and <eos> stay.
    source, _, target = pipeline.encode([["a", "<pad>", "<eos>", "b"]], vocabulary, 4)
    assert source.tolist() == [[a, 1, 1, b]] and target.tolist() == [[a, 1, 1, b, 3]]
    batches = list(pipeline.make_dataset([["a"], ["a", "b"], ["c"]], vocabulary, 5, 2))
    # Each batch cut to its longest sentence: the last holds one word and its <eos>.
    assert [tuple(t.shape) for _, t in batches] == [(2, 3), (1, 2)]


def test_sentence_files_are_found_and_read(tmp_path):
    (tmp_path / "ptb.train.txt").write_text("a b c\nd e f g h i\n\nb c\n")
    (tmp_path / "ptb.valid.txt").write_text("a b\n")
    with pytest.raises(ValueError, match="one test file.*found none"):
        pipeline.find_sentence_files(tmp_path)
    with gzip.open(tmp_path / "test.txt.gz", "wt") as handle:
        handle.write("c d\n")
    (tmp_path / "ptb.char.train.txt").write_text("a _ b\n")  # as in Penn Treebank's folder
    splits = pipeline.read_sentence_files(tmp_path, max_length=4)
    assert splits["train"] == [["a", "b", "c"], ["b", "c"]]  # the long and blank lines left out
    assert splits["test"] == [["c", "d"]]
    (tmp_path / "ab.test.txt").write_text("c d\n")  # as long as test.txt.gz
    with pytest.raises(ValueError, match="one test file.*found \\['ab.test.txt', 'test.txt.gz'\\]"):
        pipeline.find_sentence_files(tmp_path)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "test.txt is empty"),
        (b"  \n\n", "test.txt is blank"),
        (b"one two three four five\n", "test.txt has no sentence of 1 to 4 words"),
        (b"a\x00b\n", "test.txt is not UTF-8 text"),
        (bytes(range(128, 256)) * 4, "test.txt is not UTF-8 text"),
        ("we had a café au lait that day\n".encode("latin-1") * 10, "10 of its 10 bytes"),
        (gzip.compress(b"a b\n", mtime=0)[:-6], "test.txt.gz is not a valid gzip file"),
        (b"a b\n", "test.txt.gz is not a valid gzip file"),  # not compressed
    ],
)
def test_a_bad_file_is_named_with_what_is_wrong(tmp_path, content, message):
    for split in ("train", "valid"):
        (tmp_path / f"{split}.txt").write_text("a b\n")
    name = "test.txt.gz" if "gzip" in message else "test.txt"
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError, match=message):
        pipeline.read_sentence_files(tmp_path, max_length=4)


def test_the_docstring_examples_run():
    result = doctest.testmod(pipeline)
    assert result.attempted > 0 and result.failed == 0


def test_a_sentence_of_max_length_words_is_kept_and_max_train_cuts_train_alone(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.txt").write_text("a b c d\na b c d e\n")
    splits = pipeline.read_sentence_files(tmp_path, max_length=4)
    assert splits["test"] == [["a", "b", "c", "d"]]  # four words of four: kept
    # --max-train cuts the training sentences only: the scores read every test sentence.
    short = pipeline.load_splits(None, "small", 14, 10, seed=1)
    assert [len(short[name]) for name in pipeline.SPLITS] == [10, 100, 100]
