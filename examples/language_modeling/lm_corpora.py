"""Word-level language-model corpora: the reader for a folder, and the LM data API in one place.

`detect_corpus` tells which distributed corpus a folder holds and `load_corpus` reads it with
its reader: Penn Treebank (`ptb`), WikiText-2 (`wikitext2`) or the Children's Book Test (`cbt`).
Every reader returns an `LMCorpus` of `TokenStream` splits (`token_streams`);
`generate_copy_corpus` (`generated_lm`) stands in when no corpus is at hand, and
`make_bptt_batches` (`lm_batches`) lays a split out for truncated BPTT with per-row state resets
at document boundaries. Those names are importable from here too.
"""

import pathlib

from examples.harness.data.vocabulary import EOS, UNK, Vocabulary
from examples.language_modeling.cbt import CBT_FILES, load_cbt
from examples.language_modeling.generated_lm import generate_copy_corpus
from examples.language_modeling.lm_batches import BPTTBatches, make_bptt_batches
from examples.language_modeling.ptb import PTB_FILES, load_ptb
from examples.language_modeling.token_streams import SPLITS, LMCorpus, TokenStream
from examples.language_modeling.wikitext2 import WIKITEXT2_FILES, load_wikitext2

__all__ = [
    "BPTTBatches",
    "CORPUS_LOADERS",
    "EOS",
    "LMCorpus",
    "SPLITS",
    "TokenStream",
    "UNK",
    "Vocabulary",
    "detect_corpus",
    "generate_copy_corpus",
    "load_cbt",
    "load_corpus",
    "load_ptb",
    "load_wikitext2",
    "make_bptt_batches",
]

#: Corpus name -> (the files that identify it, its reader).
CORPUS_LOADERS = {
    "ptb": (PTB_FILES, load_ptb),
    "wikitext2": (WIKITEXT2_FILES, load_wikitext2),
    "cbt": ({"test": CBT_FILES["test"]}, load_cbt),
}


def detect_corpus(data_dir):
    """The name of the corpus whose files are in a folder.

    Args:
        data_dir: str or path-like, the folder.

    Returns:
        ``"ptb"``, ``"wikitext2"`` or ``"cbt"`` (the first of `CORPUS_LOADERS` whose files
        are all present, each optionally ``.gz``).

    Raises:
        ValueError: ``data_dir`` is not a directory, or holds no known corpus (the message
            lists the files looked for).
    """
    data_dir = pathlib.Path(data_dir)
    if not data_dir.is_dir():
        raise ValueError(f"`data_dir` {str(data_dir)!r} is not a directory.")
    for name, (files, _) in CORPUS_LOADERS.items():
        names = list(files.values())
        if all((data_dir / n).is_file() or (data_dir / (n + ".gz")).is_file() for n in names):
            return name
    looked_for = "; ".join(
        f"{name}: {', '.join(files.values())}" for name, (files, _) in CORPUS_LOADERS.items()
    )
    raise ValueError(
        f"`data_dir` {str(data_dir)!r} holds no known corpus; looked for {looked_for} "
        "(each file optionally .gz)."
    )


def load_corpus(data_dir):
    """Detects and reads the corpus in a folder (PTB, WikiText-2 or CBT).

    Args:
        data_dir: str or path-like, the folder.

    Returns:
        An `LMCorpus`, named after the corpus.

    Raises:
        ValueError: as `detect_corpus`, or as the corpus's reader for bad files.
    """
    return CORPUS_LOADERS[detect_corpus(data_dir)][1](data_dir)
