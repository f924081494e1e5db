"""Reader of tokenized WikiText-2.

The files ``wiki.train.tokens``, ``wiki.valid.tokens`` and ``wiki.test.tokens`` (each
optionally ``.gz``) hold Wikipedia articles with rare words already ``<unk>``. Every line
becomes its words and one ``<eos>`` (blank lines included): 2,088,628 / 217,646 / 245,569
tokens, a 33,278-token vocabulary, and 600 / 60 / 60 articles, which are the documents.
"""

import re

from examples.language_modeling.token_streams import SPLITS, find_split_files, read_corpus

WIKITEXT2_FILES = {split: f"wiki.{split}.tokens" for split in SPLITS}
# An article title is a line " = Title = " (section headings have "= =").
_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")


def is_wikitext_title(lines, i):
    """Whether a line is a WikiText article title: `` = Title = `` between blank lines.

    Section headings (``= = Section = =``) and table rows such as `` = Goals ; A = `` inside
    an article are not titles; with this rule WikiText-2 has 600 / 60 / 60 articles.

    Args:
        lines: sequence of str, the file's lines.
        i: int, the index of the line.

    Returns:
        bool.
    """
    blank = lambda j: 0 <= j < len(lines) and not lines[j].strip()  # noqa: E731
    return bool(_WIKITEXT_TITLE.match(lines[i])) and blank(i - 1) and blank(i + 1)


def load_wikitext2(data_dir):
    """Reads tokenized WikiText-2 from a folder.

    Every article (from its `` = Title = `` line) is a document.

    Args:
        data_dir: str or path-like, the folder holding ``wiki.{train,valid,test}.tokens``
            (each optionally ``.gz``).

    Returns:
        An `LMCorpus` named ``"wikitext2"`` with the 33,278-token vocabulary.

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data; the message names the file.
    """
    paths = find_split_files(data_dir, WIKITEXT2_FILES, "WikiText-2")
    return read_corpus("wikitext2", paths, is_document_start=is_wikitext_title)
