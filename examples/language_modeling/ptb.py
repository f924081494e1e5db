"""Reader of the Penn Treebank in Mikolov's language-model version.

The files ``ptb.train.txt``, ``ptb.valid.txt`` and ``ptb.test.txt`` (each optionally
``.gz``) hold one sentence per line with rare words already ``<unk>``. Every line becomes its
words and one ``<eos>``: 929,589 / 73,760 / 82,430 tokens and a 10,000-word vocabulary.
"""

from examples.language_modeling.token_streams import SPLITS, find_split_files, read_corpus

PTB_FILES = {split: f"ptb.{split}.txt" for split in SPLITS}


def load_ptb(data_dir):
    """Reads Mikolov's Penn Treebank LM files from a folder.

    The corpus is one stream (its article boundaries were not kept), so it is one document.

    Args:
        data_dir: str or path-like, a folder with ``ptb.train.txt``, ``ptb.valid.txt``,
            ``ptb.test.txt`` (each optionally ``.gz``).

    Returns:
        An `LMCorpus` named ``"ptb"`` with a 10,000-word vocabulary (``<unk>`` and
        ``<eos>`` included).

    Raises:
        ValueError: a split file is missing, empty or blank, not text, or a ``.gz`` that is
            not gzip data; the message names the file.

    Example:

    >>> corpus = load_ptb("../shared/data/ptb")  # doctest: +SKIP
    >>> len(corpus.vocabulary), corpus.train.num_tokens  # doctest: +SKIP
    (10000, 929589)
    """
    return read_corpus("ptb", find_split_files(data_dir, PTB_FILES, "Penn Treebank"))
