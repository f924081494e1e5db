"""The sentences of the auto-encoding example: a generated corpus, files of real sentences, the
vocabulary and the teacher-forced batches.

Auto-encoding reads a sentence and writes it back: the encoder reads ``x_1 … x_n``, the decoder
reads ``<s> x_1 … x_n`` and predicts ``x_1 … x_n <eos>``.

* `generated_sentences`: sentences of a small grammar (subject, verb, object, an optional
  place and time), 5 to 14 words over a vocabulary of 62, each word chosen at random, so
  every sentence must be remembered word by word. Runs anywhere, reproducible from a seed.
* `read_sentence_files`: a folder of one sentence per line, tokens separated by spaces, with
  ``train``, ``valid`` and ``test`` files (``train.txt`` or a name ending ``.train.txt``, as
  Penn Treebank's ``ptb.train.txt``; ``.gz`` files are read too).
"""

import collections
import gzip
import os
import zlib

import numpy as np

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "<eos>"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)  # ids 0, 1, 2, 3
SPLITS = ("train", "valid", "test")
GENERATED_SIZES = {"small": (600, 100, 100), "medium": (4000, 500, 500)}
GENERATED_LENGTHS = (5, 14)  # the shortest and longest generated sentence, in words

_DETERMINERS = "the a every some one that".split()
_ADJECTIVES = "old young red small tall quiet happy green dark bright tired clever".split()
_NOUNS = (
    "man woman dog cat child farmer teacher bird horse doctor sailor painter boat house tree "
    "river car apple"
).split()
_VERBS = "sees follows paints finds carries watches likes meets pushes feeds draws visits".split()
_PREPOSITIONS = "near behind under beside inside above".split()
_TIMES = ("today", "at night", "in the morning", "every day", "again", "slowly")


def _noun_phrase(rng):
    words = [rng.choice(_DETERMINERS)]
    if rng.random() < 0.6:
        words.append(rng.choice(_ADJECTIVES))
    return words + [rng.choice(_NOUNS)]


def generated_sentences(count, seed=0):
    """``count`` sentences of the example's grammar, as token lists of 5 to 14 words.

    Example:

    >>> " ".join(generated_sentences(1, seed=1)[0])
    'every doctor sees the child behind a bright painter every day'
    """
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(count):
        words = _noun_phrase(rng) + [rng.choice(_VERBS)] + _noun_phrase(rng)
        if rng.random() < 0.5:
            words += [rng.choice(_PREPOSITIONS)] + _noun_phrase(rng)
        if rng.random() < 0.4:
            words += rng.choice(_TIMES).split()
        sentences.append([str(word) for word in words])
    return sentences


def generated_splits(size="medium", seed=0):
    """The generated corpus's train, valid and test splits (`GENERATED_SIZES`), drawn from
    independent streams of one seed."""
    if size not in GENERATED_SIZES:
        raise ValueError(f"`size` must be one of {tuple(GENERATED_SIZES)}; got {size!r}.")
    return {
        split: generated_sentences(count, seed=seed * 3 + i)
        for i, (split, count) in enumerate(zip(SPLITS, GENERATED_SIZES[size]))
    }


def find_sentence_files(directory):
    """The train, valid and test files of ``directory``: ``<split>.txt`` or a name ending in
    ``.<split>.txt`` (optionally ``.gz``), the shortest where several match (Penn Treebank's
    ``ptb.train.txt`` over ``ptb.char.train.txt``).

    Returns:
        Dict split -> path.

    Raises:
        ValueError: ``directory`` is not a folder, or a split has no file or several.
    """
    if not os.path.isdir(directory):
        raise ValueError(f"{directory} is not a folder.")
    names = sorted(os.listdir(directory))
    found = {}
    for split in SPLITS:
        ends = [f"{split}.txt", f"{split}.txt.gz"]
        matches = [n for n in names if n in ends or n.endswith(tuple("." + e for e in ends))]
        shortest = [n for n in matches if len(n) == min(map(len, matches))]
        if len(shortest) != 1:
            raise ValueError(
                f"{directory} must hold one {split} file (one sentence per line), named "
                f"{split}.txt or *.{split}.txt (optionally .gz; the shortest such name is "
                f"read); found {shortest or 'none'}."
            )
        found[split] = os.path.join(directory, shortest[0])
    return found


def read_text(path):
    """The UTF-8 text of ``path`` (``.gz`` decompressed).

    Raises:
        ValueError: The file is not gzip data (for ``.gz``), not text (NUL bytes, or more than a
            tenth of it undecodable), not UTF-8 (most of its bytes that are not ASCII
            undecodable), or blank; the message names it.
    """
    try:
        with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as handle:
            data = handle.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(f"{path} is not a valid gzip file: {error}.") from error
    # A few stray bytes are read (as U+FFFD); in a file of another encoding (Latin-1, say) most
    # bytes that are not ASCII do not decode, and its words would be garbled.
    undecodable = len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
    not_ascii = len(data) - len(data.decode("ascii", "ignore"))
    if undecodable >= 10 and undecodable > not_ascii / 2:
        raise ValueError(
            f"{path} is not UTF-8 text: {undecodable:,} of its {not_ascii:,} bytes that are not "
            "ASCII are undecodable (a file in another encoding: convert it to UTF-8)."
        )
    text = data.decode("utf-8-sig", errors="replace")  # a byte-order mark is not text
    if "\x00" in text or text.count("\ufffd") > 0.1 * len(text):
        raise ValueError(f"{path} is not UTF-8 text.")
    if not text.strip():
        raise ValueError(f"{path} is {'blank' if text else 'empty'}: it holds no sentences.")
    return text


def read_sentence_files(directory, max_length):
    """The sentences of ``directory``'s files (`find_sentence_files`), one per line, split at
    spaces; blank lines and sentences longer than ``max_length`` words are left out.

    Returns:
        Dict split -> list of token lists.

    Raises:
        ValueError: A file is missing, not text (`read_text`), or has no sentence of at most
            ``max_length`` words; the message names it.
    """
    splits = {}
    for split, path in find_sentence_files(directory).items():
        sentences = [line.split() for line in read_text(path).splitlines()]
        splits[split] = [s for s in sentences if 0 < len(s) <= max_length]
        if not splits[split]:
            raise ValueError(f"{path} has no sentence of 1 to {max_length} words.")
    return splits


def load_splits(data_dir, train_size, max_length, max_train, seed):
    """The train, valid and test sentences of at most ``max_length`` words: ``data_dir``'s
    files (`read_sentence_files`), else the generated corpus of ``train_size`` drawn with
    ``seed``; the first ``max_train`` training sentences (`None`: all)."""
    if data_dir:
        splits = read_sentence_files(data_dir, max_length)
    else:
        splits = generated_splits(train_size, seed=seed)
        splits = {
            name: [s for s in found if len(s) <= max_length] for name, found in splits.items()
        }
    splits["train"] = splits["train"][:max_train]
    return splits


def build_vocabulary(sentences, max_size=None):
    """`SPECIAL_TOKENS`, then the words of ``sentences``, most frequent first (ties in
    alphabetical order), at most ``max_size`` in all (the rest read as ``<unk>``).

    >>> build_vocabulary([["b", "a", "b"], ["c", "a", "b"]], max_size=6)
    ['<pad>', '<unk>', '<s>', '<eos>', 'b', 'a']
    """
    counts = collections.Counter(word for sentence in sentences for word in sentence)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    words = [word for word, _ in ranked if word not in SPECIAL_TOKENS]
    return [*SPECIAL_TOKENS, *words][:max_size]


def encode(sentences, vocabulary, max_length):
    """The teacher-forced arrays of ``sentences``, padded with 0; a word spelled as one of
    `SPECIAL_TOKENS` (``<pad>`` in the text) is a word, encoded as ``<unk>``.

    Returns:
        ``(source, decoder_input, target)``, int32 arrays: ``source`` ``[N, max_length]``
        (the words), ``decoder_input`` and ``target`` ``[N, max_length + 1]`` (``<s>`` and the
        words; the words and ``<eos>``).
    """
    index = {word: i for i, word in enumerate(vocabulary)}
    unk, bos, eos = index[UNK], index[BOS], index[EOS]
    words = {word: i for word, i in index.items() if word not in SPECIAL_TOKENS}
    source = np.zeros((len(sentences), max_length), np.int32)
    decoder_input = np.zeros((len(sentences), max_length + 1), np.int32)
    target = np.zeros_like(decoder_input)
    for row, sentence in enumerate(sentences):
        ids = [words.get(word, unk) for word in sentence[:max_length]]
        source[row, : len(ids)] = ids
        decoder_input[row, : len(ids) + 1] = [bos, *ids]
        target[row, : len(ids) + 1] = [*ids, eos]
    return source, decoder_input, target


def make_dataset(
    sentences, vocabulary, max_length, batch_size, shuffle=False, seed=0, repeat=False
):
    """A `tf.data.Dataset` of ``((source, decoder_input), target)`` batches (`encode`), each
    cut to its longest sentence, shuffled each pass with ``shuffle``, endless with
    ``repeat``. The padding (id 0) is masked by the models' embeddings, and the loss and
    accuracy count the target's words and ``<eos>`` only."""
    import tensorflow as tf

    source, decoder_input, target = encode(sentences, vocabulary, max_length)
    data = tf.data.Dataset.from_tensor_slices(((source, decoder_input), target))
    if shuffle:
        data = data.shuffle(len(sentences), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        data = data.repeat()

    def trim(inputs, target):
        source, decoder_input = inputs
        steps = tf.reduce_max(tf.reduce_sum(tf.cast(source > 0, tf.int32), axis=1))
        return (source[:, :steps], decoder_input[:, : steps + 1]), target[:, : steps + 1]

    return data.batch(batch_size).map(trim).prefetch(tf.data.AUTOTUNE)
