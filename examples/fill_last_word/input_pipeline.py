"""The data: sentences of ``--data-dir`` with GloVe vectors, else a generated corpus of episodes.

The task of Gaffney's *Cache Attention for Recurrent Language Modeling*: read a sentence minus
its last whitespace token and predict that token. The reference code skips sentences of more
than 40 tokens and right-aligns the context in 40 steps behind at least one padding step;
`encode_last_word` does the same, with id 0 as padding. `make_corpus` picks the source: the
files of ``--data-dir`` (`FileCorpus`), else the embedded generated corpus (`GeneratedCorpus`).
"""

import collections
import gzip
import json
import os
import re
import zlib

import keras
import numpy as np
import tensorflow as tf

from tf_memlayers.callbacks import CacheEpisodesCallback

PAD, UNK = "<pad>", "<unk>"
# Undecodable bytes (read as U+FFFD) and control characters other than white space: real text
# has few (the PWKP files: 157 in 2.8 million characters), bytes that are not text about half.
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f\ufffd]")


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer, got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
    return int(value)


def _open(path, binary):
    """A handle on ``path`` (``.gz`` decompressed): binary, or UTF-8 text (universal newlines, a
    byte-order mark left out) with each undecodable byte kept as a surrogate, for
    `_decoded_lines`."""
    opener = gzip.open if str(path).endswith(".gz") else open
    if binary:
        return opener(path, "rb")
    return opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape")


def _read(path, read, binary=False):
    """``read(handle)`` of `_open`, a corrupt ``.gz`` reported as a `ValueError`."""
    try:
        with _open(path, binary) as handle:
            return read(handle)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(
            f"{path} is not a valid gzip file (its name ends in .gz): {error}."
        ) from error


def read_sentences(path):
    """The non-empty lines of a text file (``.gz`` decompressed), whitespace-stripped.

    CRLF line ends and stray undecodable bytes (replaced with U+FFFD) are read, as in the PWKP
    files.

    Raises:
        ValueError: the file is empty or blank, is not text (NUL bytes, or more than a tenth
            undecodable bytes or control characters), is not UTF-8 (most of its bytes
            that are not ASCII undecodable), or is a ``.gz`` that is not gzip data; the message
            names the file.

    Example:

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "s.txt"
    >>> _ = path.write_bytes(b"a caf\\xc3\\xa9 .\\r\\n\\r\\n  b \\xff c \\r\\n")
    >>> read_sentences(path) == ["a café .", "b \\ufffd c"]
    True
    """
    data = _read(path, lambda handle: handle.read(), binary=True)
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
    if "\x00" in text:
        raise ValueError(f"{path} is not a text file: it contains NUL bytes.")
    if len(_NOT_TEXT.findall(text)) > 0.1 * len(text):
        raise ValueError(
            f"{path} is not UTF-8 text: over a tenth of it is undecodable bytes or control "
            "characters."
        )
    if not text.strip():
        state = "empty" if not text else "blank (only whitespace)"
        raise ValueError(f"{path} is {state}: it holds no sentences.")
    return [line.strip() for line in text.splitlines() if line.strip()]


def build_vocabulary(sentences, max_size=None):
    """``[PAD, UNK, words...]``, the words sorted by (-count, word) as in the reference code.

    Args:
        sentences: iterable of strings, split on whitespace.
        max_size: optional integer >= 2, the most words kept (PAD and UNK included); the rarer
            words are left out (they encode as UNK). Default: `None` (every word).
    """
    if max_size is not None:
        max_size = _check_int("max_size", max_size, 2)
    counts = collections.Counter(word for s in sentences for word in s.split())
    ranked = sorted((w for w in counts if w not in (PAD, UNK)), key=lambda w: (-counts[w], w))
    return [PAD, UNK, *ranked][:max_size]


def encode_last_word(sentences, vocabulary, max_length=40):
    """Encodes sentences as (context ids, last-word id).

    A sentence of ``n`` tokens (``2 <= n <= max_length``; others are skipped) gives
    ``x[max_length - n + 1:] = ids of tokens[:-1]`` after ``max_length - n + 1 >= 1`` padding
    steps, and ``y = id(tokens[-1])``. Unknown words map to UNK, and so does a word spelled
    as the padding token (``<pad>`` in the text is a word, not padding).

    Args:
        sentences: iterable of strings.
        vocabulary: list of words (row = id) holding UNK, e.g. from `build_vocabulary`.
        max_length: integer >= 2, the context steps (one padding step and one word at least).

    Returns:
        ``(x int32 [N, max_length], y int32 [N], kept)``, ``kept`` the indices of the
        sentences used.

    Example:

    >>> x, y, kept = encode_last_word(["a b c", "c", "b a"], build_vocabulary(["a b c"]), 4)
    >>> x.tolist(), y.tolist(), kept
    ([[0, 0, 2, 3], [0, 0, 0, 3]], [4, 2], [0, 2])
    """
    max_length = _check_int("max_length", max_length, 2)
    index = {word: i for i, word in enumerate(vocabulary) if word != PAD}
    if UNK not in index:
        raise ValueError(
            f"`vocabulary` must hold the unknown-word token {UNK!r} (see `build_vocabulary`); "
            f"got {len(index)} words without it."
        )
    x, y, kept = [], [], []
    for position, sentence in enumerate(sentences):
        tokens = sentence.split()
        if not 2 <= len(tokens) <= max_length:
            continue
        row = np.zeros(max_length, np.int32)
        row[max_length - len(tokens) + 1 :] = [index.get(t, index[UNK]) for t in tokens[:-1]]
        x.append(row)
        y.append(index.get(tokens[-1], index[UNK]))
        kept.append(position)
    x = np.stack(x) if x else np.zeros((0, max_length), np.int32)
    return x, np.asarray(y, np.int32), kept


def last_word_dataset(x, y, batch_size, shuffle=False, seed=0):
    """A batched, prefetched `tf.data.Dataset` of ``(x, y)``, reshuffled every pass."""
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if shuffle:
        dataset = dataset.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


# -- word vectors -------------------------------------------------------------------------------


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def _trailing_numbers(fields):
    """How many fields after the first are numbers, counted from the end."""
    count = 0
    while count < len(fields) - 1 and _is_number(fields[-1 - count]):
        count += 1
    return count


def _glove_entries(lines, path):
    """``(word, value strings)`` of each line ``word v1 ... vd`` of a GloVe file.

    ``d`` is that of the first line, and the word everything before the last ``d`` fields, so
    words with spaces (``glove.840B.300d.txt``) are read whole; a ``count dim`` header line and
    blank lines are skipped. A line with another number of values is a `ValueError`.
    """
    dim = None
    for number, line in enumerate(lines, 1):
        fields = line.rstrip().split(" ")
        if fields == [""] or (dim is None and len(fields) == 2 and "".join(fields).isdigit()):
            continue
        if dim is None:
            dim, first = _trailing_numbers(fields), number
            if not dim:
                raise ValueError(f"{path}, line {number}: no vector after the word.")
        if len(fields) - 1 < dim or (len(fields) - 1 > dim and _is_number(fields[-dim - 1])):
            found = _trailing_numbers(fields)
            raise ValueError(
                f"{path}, line {number}: a vector of {found} value{'s' * (found != 1)}, but the "
                f"vector on line {first} has {dim}; every vector must have the same length."
            )
        yield " ".join(fields[:-dim]), fields[-dim:]


def _decoded_lines(handle, path):
    """The lines of `_open`'s text ``handle``, a stray undecodable byte read as U+FFFD; after the
    last, a `ValueError` when most bytes that are not ASCII do not decode (a file in another
    encoding, whose words would match no vocabulary)."""
    undecodable = not_ascii = 0
    for line in handle:
        if not line.isascii():
            data = line.encode("utf-8", "surrogateescape")  # the bytes read
            undecodable += len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
            not_ascii += len(data) - len(data.decode("ascii", "ignore"))
            line = data.decode("utf-8", "replace")
        yield line
    if undecodable >= 10 and undecodable > not_ascii / 2:
        raise ValueError(
            f"{path} is not UTF-8 text: {undecodable:,} of its {not_ascii:,} bytes that are not "
            "ASCII are undecodable (a file in another encoding: convert it to UTF-8)."
        )


def _json_entries(lines, path):
    try:
        entries = json.loads("".join(lines))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}.") from error
    if not isinstance(entries, dict):
        raise ValueError(f"{path} must hold a JSON object {{word: [numbers]}}.")
    lengths = {len(v) if isinstance(v, list) else -1 for v in entries.values()}
    if len(lengths) > 1 or -1 in lengths:
        raise ValueError(f"{path}: every vector must be a list of numbers of one length.")
    return entries.items()


def load_word_vectors(path, vocabulary):
    """The vectors of ``vocabulary``'s words (and their lowercase forms) in a word-vector file:
    GloVe text (``word v1 v2 ...`` per line) or JSON ``{word: [numbers]}`` (``.json``), either
    optionally gzipped. Returns ``{word: float32 vector}``; a `ValueError` names the file (and
    the line) when it is malformed, not UTF-8, or holds no vector for the vocabulary."""
    keep = set(vocabulary) | {word.lower() for word in vocabulary}
    is_json = str(path).endswith((".json", ".json.gz"))

    def read(handle):
        lines = _decoded_lines(handle, path)
        entries = _json_entries(lines, path) if is_json else _glove_entries(lines, path)
        vectors = {}
        for word, values in entries:
            if word in keep:
                try:
                    vectors[word] = np.asarray(values, np.float32)
                except (TypeError, ValueError):
                    continue  # a value that is not a number: the word is skipped
        return vectors

    vectors = _read(path, read)
    if not vectors:
        raise ValueError(f"No word vectors in {path} for any of {len(vocabulary):,} words.")
    return vectors


def embedding_matrix(vocabulary, vectors, scale=0.9, seed=0):
    """``(matrix [len(vocabulary), dim], words found)``: a word's pretrained vector (or its
    lowercase form's), else a row drawn from ``N(0, scale^2)`` as in the reference code."""
    dim = len(next(iter(vectors.values())))
    matrix = np.random.default_rng(seed).normal(0.0, scale, (len(vocabulary), dim))
    matrix = matrix.astype(np.float32)
    found = 0
    for row, word in enumerate(vocabulary):
        vector = vectors.get(word, vectors.get(word.lower()))
        if vector is not None:
            matrix[row], found = vector, found + 1
    return matrix, found


# -- the generated corpus -----------------------------------------------------------------------

_COLOURS = ("red", "blue", "green", "yellow", "white", "black", "grey", "brown")
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "de", "pa", "zu", "ho")
_THINGS = ("fence", "door", "gate", "roof", "car", "boat")
_END = "."
_HOUSE_NAMES = sorted(a + b for a in _SYLLABLES for b in _SYLLABLES if a != b)  # e.g. "kalo"
GENERATED_HOUSES = len(_HOUSE_NAMES)
GENERATED_STEPS = 3  # context steps of the generated sentences: one padding step and 2 words


class LastWordEpisode(collections.namedtuple("LastWordEpisode", "facts questions houses")):
    """One episode of the generated corpus: facts, then the questions they answer.

    Attributes:
        facts: sentences ``"<colour> <house> ."`` (last word ``"."``), in the order given.
        questions: sentences ``"<house> <colour>"`` about the episode's houses, and colour
            sentences ``"<colour> <thing> <colour>"`` that name no house, in the order given.
        houses: ``{house: colour}`` of the episode.
    """

    @staticmethod
    def house(sentence):
        """The house a generated sentence is about, or ``None`` (a colour sentence)."""
        words = sentence.split()
        if len(words) == 3 and words[-1] == _END:
            return words[1]
        return words[0] if len(words) == 2 else None


def generated_vocabulary():
    """Every word of `generated_last_word_corpus`, in a fixed order (for `build_vocabulary`)."""
    return [_END, *_COLOURS, *_THINGS, *_HOUSE_NAMES]


def _episode(rng, houses, copies):
    picked = [_HOUSE_NAMES[i] for i in rng.choice(GENERATED_HOUSES, houses, replace=False)]
    # Different colours for up to 8 houses, each colour as often as the others with more: the
    # commonest colour of an episode is no better a guess than any other.
    drawn = np.resize(rng.permutation(len(_COLOURS)), houses)
    colours = {name: _COLOURS[i] for name, i in zip(picked, drawn)}
    facts = [f"{colour} {name} {_END}" for name, colour in colours.items()]
    questions = [f"{name} {colour}" for name, colour in colours.items()]
    for thing, i in zip(
        rng.integers(0, len(_THINGS), copies), rng.integers(0, len(_COLOURS), copies)
    ):
        questions.append(f"{_COLOURS[i]} {_THINGS[thing]} {_COLOURS[i]}")
    facts = [facts[i] for i in rng.permutation(len(facts))]
    questions = [questions[i] for i in rng.permutation(len(questions))]
    return LastWordEpisode(facts, questions, colours)


def generated_last_word_corpus(
    epoch=0, episodes=20, houses=8, copies=8, evaluation_episodes=10, seed=0
):
    """Episodes of facts about made-up houses, and questions that only those facts answer.

    An episode names ``houses`` houses (made-up two-syllable names such as ``kalo``), each
    with a colour: different colours for up to 8 houses, each colour equally often with more.
    Its facts are ``"red kalo ."``, one per house, whose last word is ``"."``; its questions
    are ``"kalo red"``, one per house: the house's name, and its colour as the last word to
    predict. In training, ``copies`` colour sentences ``"red fence red"``, which name no
    house, come among the questions. An epoch is ``episodes`` episodes drawn afresh for that
    epoch, so a house has other colours in other episodes; the evaluation episodes come from a
    random stream of their own and are the same in every epoch.

    The corpus is meant for a cache emptied before each episode: the facts are trained (and written
    to the cache by their training step), then the questions, whose answers only the facts of their
    own episode state, so no weight can hold them. An evaluation episode writes its facts to the
    emptied cache, then asks its questions (`GeneratedCorpus` does both with
    `tf_memlayers.callbacks.CacheEpisodesCallback`). Without a cache a model can only guess: always
    answering the commonest colour gets 1/8 of the answers with 8 houses. To answer, a cache read
    has to match the name in a question with the same name in one cached fact and pass on the colour
    that fact's state carries: the read with ``query="dot"`` learns both here, the paper's
    ``query="none"`` cannot (it gives every question the same read). In trial runs each of these
    choices was needed:

    * short sentences, so that a state is mostly its house's name (with facts such as
      ``"the house of kalo is painted red ."`` the states of different houses hardly differed
      and the read did not learn to find the facts);
    * small episodes with different colours, so that even a diffuse read starts with some
      weight on the right fact, and only the asked house's fact has the answer's colour;
    * the colour sentences: the cache holds states without a gradient, so nothing else
      teaches the encoder to keep a colour it has read in a form the output layer reads;
    * a read gate that starts at 1 (the dot read's default here), so that a recalled state
      reaches the output layer along the directions it reads in the example's own state;
    * every name trained, with colours that change (houses held out of training, mentioned
      only in facts ending in ``"."``, were answered with ``"."``).

    Args:
        epoch: which epoch's training episodes to draw (each epoch draws new ones).
        episodes: training episodes per epoch.
        houses: houses per episode (at most `GENERATED_HOUSES`, 132).
        copies: colour sentences among each training episode's questions (0: none).
        evaluation_episodes: number of evaluation episodes (the same for every epoch).
        seed: seed of the whole corpus.

    Returns:
        ``(training episodes of the epoch, evaluation episodes)``: two lists of
        `LastWordEpisode`. Evaluation episodes have no colour sentences.

    Example:

    >>> train, evaluation = generated_last_word_corpus(episodes=1, houses=2, copies=1)
    >>> episode = train[0]
    >>> len(episode.facts), len(episode.questions), len(evaluation)
    (2, 3, 10)
    >>> sorted(episode.house(fact) for fact in episode.facts) == sorted(episode.houses)
    True
    """
    epoch, episodes = _check_int("epoch", epoch, 0), _check_int("episodes", episodes, 1)
    houses, copies = _check_int("houses", houses, 1), _check_int("copies", copies, 0)
    if houses > GENERATED_HOUSES:
        raise ValueError(
            f"`houses` must be <= {GENERATED_HOUSES} (the made-up names), got {houses}."
        )
    evaluation_episodes = _check_int("evaluation_episodes", evaluation_episodes, 1)
    seed = _check_int("seed", seed, 0)
    train_rng = np.random.default_rng([seed, 1, epoch])
    evaluation_rng = np.random.default_rng([seed, 2])
    train = [_episode(train_rng, houses, copies) for _ in range(episodes)]
    evaluation = [_episode(evaluation_rng, houses, 0) for _ in range(evaluation_episodes)]
    return train, evaluation


# -- the two sources ------------------------------------------------------------------------------


def data_file(data_dir, name):
    """``name``, else ``name + ".gz"``: the first that ``data_dir`` holds (a file, or a folder
    or a link to nothing, which `main.parse_args` refuses), or `None`."""
    for candidate in (name, name + ".gz"):
        if os.path.lexists(os.path.join(data_dir, candidate)):
            return candidate
    return None


def data_files(config):
    """``(training file, evaluation file)`` of ``--data-dir``, each plain or ``.gz`` (`None`
    where neither is there): ``--train-file``, else ``train.txt``, else ``test.txt`` (the 20%
    split of PWKP that the reference code's data holds); ``--eval-file``."""
    names = [config.train_file] if config.train_file else ["train.txt", "test.txt"]
    train = next(filter(None, (data_file(config.data_dir, name) for name in names)), None)
    return train, data_file(config.data_dir, config.eval_file)


def source_name(config):
    """What the run reads: ``generated``, or ``<data dir>:<train file>/<eval file>``."""
    if not config.data_dir:
        return "generated"
    return "{}:{}/{}".format(config.data_dir, *data_files(config))


class FileCorpus:
    """Sentences of ``--data-dir``: a training set reshuffled every epoch, an evaluation set."""

    def __init__(self, config):
        self.config, self.source = config, source_name(config)
        self.sequence_length = config.max_length
        train, evaluation = (
            read_sentences(os.path.join(config.data_dir, name)) for name in data_files(config)
        )
        if config.max_train:  # read until that many sentences are usable (2 to max_length words)
            usable = [i for i, s in enumerate(train) if 2 <= len(s.split()) <= config.max_length]
            train = train[: (usable[: config.max_train] or [-1])[-1] + 1]
        self.vocabulary = build_vocabulary(train, config.max_vocabulary)
        self.x_train, self.y_train, _ = encode_last_word(train, self.vocabulary, config.max_length)
        self.x_eval, self.y_eval, _ = encode_last_word(
            evaluation, self.vocabulary, config.max_length
        )
        self.train_sentences = len(self.x_train)

    def datasets(self, batch_size, initial_epoch):
        """(training stream from ``initial_epoch`` on, steps per epoch, evaluation batches)."""
        # One endless stream of the epochs' batches: a resumed run skips the completed epochs'
        # batches and sees the orders an uninterrupted run sees.
        stream = last_word_dataset(
            self.x_train, self.y_train, batch_size, shuffle=True, seed=self.config.seed
        ).repeat()
        steps = -(-len(self.x_train) // batch_size)
        evaluation = last_word_dataset(self.x_eval, self.y_eval, batch_size)
        return stream.skip(initial_epoch * steps), steps, evaluation

    def callbacks(self):
        return []

    def probe(self, batch_size):
        return self.x_eval[:batch_size]

    def attention_on_fact(self, model):
        return None


class GeneratedCorpus:
    """Episodes of facts, then questions (`generated_last_word_corpus`), each episode with an
    emptied cache (`CacheEpisodesCallback`)."""

    source = "generated"
    sequence_length = GENERATED_STEPS  # longer rows would only add padding

    def __init__(self, config):
        self.config = config
        self.vocabulary = build_vocabulary(
            [" ".join(generated_vocabulary())], config.max_vocabulary
        )
        train, self.evaluation = self.episodes(0)
        self.train_sentences = sum(len(e.facts) + len(e.questions) for e in train)
        self.facts = [self.encode(e.facts)[0] for e in self.evaluation]
        questions = [self.encode(e.questions) for e in self.evaluation]
        self.x_eval = np.concatenate([x for x, _ in questions])
        self.y_eval = np.concatenate([y for _, y in questions])

    def episodes(self, epoch):
        config = self.config
        return generated_last_word_corpus(
            epoch, episodes=config.episodes, houses=config.houses, seed=config.seed
        )

    def encode(self, sentences):
        x, y, _ = encode_last_word(sentences, self.vocabulary, self.sequence_length)
        return x, y

    def datasets(self, batch_size, initial_epoch):
        """(training stream from ``initial_epoch`` on, steps per epoch, evaluation batches).

        Each episode is two batches, its facts and then its questions; an evaluation batch is
        the questions of one evaluation episode. ``batch_size`` does not apply.
        """

        def batches():
            for epoch in range(initial_epoch, self.config.epochs):
                for episode in self.episodes(epoch)[0]:
                    yield self.encode(episode.facts)
                    yield self.encode(episode.questions)

        spec = (
            tf.TensorSpec((None, self.sequence_length), tf.int32),
            tf.TensorSpec((None,), tf.int32),
        )
        stream = tf.data.Dataset.from_generator(batches, output_signature=spec)
        evaluation = last_word_dataset(self.x_eval, self.y_eval, self.config.houses)
        return stream.prefetch(tf.data.AUTOTUNE), 2 * self.config.episodes, evaluation

    def callbacks(self):
        return [CacheEpisodesCallback(2, evaluation_facts=self.facts)]

    def probe(self, batch_size):
        # After an evaluation the caches hold the last evaluation episode's facts.
        return self.x_eval[-self.config.houses :]

    def attention_on_fact(self, model):
        """Mean read weight of the evaluation questions on the asked house's fact."""
        if not model.cache_layers:
            return None
        layer, weights = model.cache_layers[0], []
        for episode, facts in zip(self.evaluation, self.facts):
            layer.reset_cache()
            model.write_caches(facts)
            houses = [episode.house(s) for s in episode.facts]
            wanted = [[episode.house(q) == h for h in houses] for q in episode.questions]
            questions = self.encode(episode.questions)[0]
            weights.append(attention_on_entries(model, layer, questions, facts, wanted))
        return float(np.mean(np.concatenate(weights)))


def attention_on_entries(model, layer, probes, entries, wanted):
    """The read weight each probe puts on the cache slots that hold its wanted entries' states.

    The cache of ``layer`` (a `HeapCacheAttention` of ``model``) must hold the states that
    ``entries`` produce now, as `HeapCacheModel.write_caches` writes them; a slot holds the
    entry whose state equals it to float rounding.

    Args:
        model: A one-input model of ``layer``.
        layer: A `HeapCacheAttention` layer of ``model``.
        probes: Model inputs whose reads are measured (``P`` rows).
        entries: Model inputs whose states were written to the cache (``E`` rows).
        wanted: bool ``[P, E]``: the entries that count for each probe.

    Returns:
        float64 array ``[P]``: each probe's total read weight on its wanted entries.
    """
    states = keras.Function(model.input, layer.input)
    written = np.asarray(states(entries), dtype=np.float64)
    cache = np.asarray(layer.cache, dtype=np.float64)
    distances = ((cache[:, None, :] - written[None, :, :]) ** 2).sum(-1)  # [K, E]
    scale = 1e-8 * max(1.0, float((written**2).sum(-1).max()))
    held = np.where(distances.min(axis=1) <= scale, distances.argmin(axis=1), -1)  # [K]
    wanted = np.asarray(wanted, dtype=bool)
    if layer.query == "none":  # one read for every example
        weights = np.broadcast_to(np.asarray(layer.attention_weights()), (len(wanted), len(cache)))
    else:
        weights = np.asarray(layer.attention_weights(states(probes)))
    on_wanted = np.where(held >= 0, wanted[:, np.maximum(held, 0)], False)  # [P, K]
    return (np.asarray(weights, dtype=np.float64) * on_wanted).sum(axis=1)


def make_corpus(config):
    """`FileCorpus` with ``--data-dir``, else `GeneratedCorpus`."""
    return FileCorpus(config) if config.data_dir else GeneratedCorpus(config)
