"""Reader of the Children's Book Test in its language-model format.

The files ``cbt_train.txt``, ``cbt_valid.txt`` and ``cbt_test.txt`` (each optionally ``.gz``)
hold one sentence per line; a line ``_BOOK_TITLE_ : ...`` starts each book, and the books
are the documents. CBT is not preprocessed for language modelling, so the reader builds an
open vocabulary: rare and unseen words become ``<unk>``.
"""

import collections

from examples.harness.data.vocabulary import UNK, Vocabulary, tokenize_lines
from examples.language_modeling.token_streams import (
    SPLITS,
    encode_corpus,
    find_split_files,
    read_corpus_lines,
    read_split_tokens,
)

CBT_FILES = {split: f"cbt_{split}.txt" for split in SPLITS}
CBT_TITLE_PREFIX = "_BOOK_TITLE_"


def _split_books(tokens, starts, valid_books=1, test_books=1):
    """Splits one book stream into train / valid / test by whole books (the last ones held out)."""
    count = len(starts)
    if count < valid_books + test_books + 1:
        raise ValueError(
            f"CBT: splitting one file by books needs at least {valid_books + test_books + 1} "
            f"books, found {count}."
        )
    bounds = list(starts) + [len(tokens)]
    first_valid, first_test = count - valid_books - test_books, count - test_books

    def part(first, last):
        offset = bounds[first]
        return tokens[offset : bounds[last]], [s - offset for s in bounds[first:last]]

    return {
        "train": part(0, first_valid),
        "valid": part(first_valid, first_test),
        "test": part(first_test, count),
    }


def load_cbt(data_dir, min_count=2):
    """Reads the Children's Book Test in its LM format (one sentence per line).

    Books start at ``_BOOK_TITLE_`` lines (dropped from the text) and are the documents.
    With ``cbt_train.txt``, ``cbt_valid.txt`` and ``cbt_test.txt`` present they are the
    splits; with only ``cbt_test.txt`` (e.g. the test books alone) its last book is the test
    split, the one before it the validation split and the rest the training split. Words seen
    fewer than ``min_count`` times in training, and unseen words, become ``<unk>``.

    Args:
        data_dir: str or path-like, the folder holding the CBT files.
        min_count: int, minimum training count of a vocabulary word. Defaults to 2.

    Returns:
        An `LMCorpus` named ``"cbt"``.

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data (the message names the file); a lone ``cbt_test.txt`` has fewer
            than three books; ``min_count`` is below 1.
    """
    is_title = lambda line: line.startswith(CBT_TITLE_PREFIX)  # noqa: E731
    starts_book = lambda lines, i: is_title(lines[i])  # noqa: E731
    try:
        paths = find_split_files(data_dir, CBT_FILES, "CBT")
    except ValueError:
        paths = None
    if paths is not None:
        split_tokens = read_split_tokens(paths, is_document_start=starts_book, skip=is_title)
    else:
        only_test = find_split_files(data_dir, {"test": CBT_FILES["test"]}, "CBT")
        lines = read_corpus_lines(only_test["test"])
        tokens, starts = tokenize_lines(lines, is_document_start=starts_book, skip=is_title)
        split_tokens = _split_books(tokens, starts)
    vocabulary = Vocabulary.from_counts(
        collections.Counter(split_tokens["train"][0]), min_count=min_count, unk_token=UNK
    )
    return encode_corpus("cbt", vocabulary, split_tokens)
