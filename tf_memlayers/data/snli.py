"""SNLI-style sentence-pair data: readers, an embedded generated corpus and `tf.data` input.

Sources, in the order `load_nli_splits` tries them with ``source="auto"``:

1. files under ``data_dir`` when it is given: the official SNLI 1.0 release
   (``snli_1.0_{train,dev,test}.jsonl`` or ``.txt``, or the ``snli_1.0.zip`` archive itself,
   read without extracting) or the InferSent layout (``s1.{split}``, ``s2.{split}``,
   ``labels.{split}``);
2. the tensorflow-datasets ``snli`` builder when it is installed and already prepared
   (never downloads: ``download=False``);
3. the embedded default, `generate_recall_corpus`: generated pairs whose labels need the
   premise to be recalled, so a model can be trained on a fresh machine with no download.

Every source yields `NLIExample` tuples of lower-cased tokens; pairs whose gold label is
``-`` (no annotator majority) are dropped. Labels: 0 entailment, 1 neutral, 2 contradiction
(the order of the tensorflow-datasets builder).
"""

import collections
import io
import json
import os
import random
import re
import zipfile
import zlib

import numpy as np
import tensorflow as tf

from tf_memlayers._validation import check_choice, check_int
from tf_memlayers.data._files import check_not_blank, decode_utf8

LABELS = ("entailment", "neutral", "contradiction")
PAD, UNK = "<pad>", "<unk>"
SPLITS = ("train", "dev", "test")

NLIExample = collections.namedtuple("NLIExample", ["premise", "hypothesis", "label"])

_TOKEN = re.compile(r"\w+(?=n't\b)|n't\b|'\w*|\w+|[^\w\s]")


def tokenize(text):
    """Lower-cases and splits into words and punctuation (PTB-style ``n't`` and ``'s``)."""
    return tuple(_TOKEN.findall(text.lower()))


def label_id(label):
    """Maps a label name or id to 0/1/2; returns None for the no-majority label ``-``."""
    if isinstance(label, str):
        label = label.strip()
        if label in ("-", ""):
            return None
        if label not in LABELS:
            raise ValueError(f"Unknown label {label!r}; allowed: {', '.join(LABELS)} or '-'.")
        return LABELS.index(label)
    value = int(label)
    if value == -1:
        return None
    if not 0 <= value < len(LABELS):
        raise ValueError(f"Label id {value} is outside the three classes 0, 1, 2.")
    return value


def make_example(premise, hypothesis, label):
    """An `NLIExample` from raw text, or None when the label is ``-``."""
    label = label_id(label)
    if label is None:
        return None
    return NLIExample(tokenize(premise), tokenize(hypothesis), label)


def _collect(rows):
    return [e for e in (make_example(*row) for row in rows) if e is not None]


# -- official SNLI 1.0 release --------------------------------------------------------------

_OFFICIAL_FIELDS = ("sentence1", "sentence2", "gold_label")


def _decoded_lines(raw_lines, name):
    """``(line number, text)`` of binary lines, decoded strictly as UTF-8, line end removed."""
    for number, raw in enumerate(raw_lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{name}, line {number}: not UTF-8 text (byte {raw[error.start]:#04x}: "
                f"{error.reason})."
            ) from error
        yield number, text.rstrip("\r\n")


def _official_rows(lines, suffix, name):
    """``(line number, (sentence1, sentence2, gold_label))`` of an official SNLI file."""
    if suffix == ".jsonl":
        for number, line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{name}, line {number}: not valid JSON: {error.msg} (column "
                    f"{error.colno})."
                ) from error
            if not isinstance(record, dict):
                raise ValueError(
                    f"{name}, line {number}: expected a JSON object with "
                    f"{', '.join(_OFFICIAL_FIELDS)}; got {record!r:.60}."
                )
            missing = [field for field in _OFFICIAL_FIELDS if field not in record]
            if missing:
                raise ValueError(
                    f"{name}, line {number}: the record has no {', '.join(missing)} (an SNLI "
                    f"1.0 record has {', '.join(_OFFICIAL_FIELDS)})."
                )
            yield number, tuple(record[field] for field in _OFFICIAL_FIELDS)
        return
    header = next(lines, None)
    if header is None:
        return
    columns = {column: i for i, column in enumerate(header[1].split("\t"))}
    missing = [field for field in _OFFICIAL_FIELDS if field not in columns]
    if missing:
        raise ValueError(
            f"{name}: the header line has no column {', '.join(missing)} (an SNLI 1.0 .txt "
            f"file has tab-separated columns including {', '.join(_OFFICIAL_FIELDS)})."
        )
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) < len(columns):
            continue
        yield number, tuple(fields[columns[field]] for field in _OFFICIAL_FIELDS)


def _file_examples(numbered_rows, name):
    """`NLIExample`s of ``(line number, (premise, hypothesis, label))`` rows of file ``name``.

    Raises:
        ValueError: a row has a sentence that is not text or an unknown label, or the file
            holds no pair with a gold label; the message names the file (and the line).
    """
    examples, rows = [], 0
    for number, (premise, hypothesis, label) in numbered_rows:
        rows += 1
        for what, sentence in (("premise", premise), ("hypothesis", hypothesis)):
            if not isinstance(sentence, str):
                raise ValueError(
                    f"{name}, line {number}: the {what} must be text, got {sentence!r:.60}."
                )
        try:
            example = make_example(premise, hypothesis, label)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}, line {number}: {error}") from error
        if example is not None:
            examples.append(example)
    if not examples and rows:
        raise ValueError(
            f"{name} holds no usable sentence pairs: none of its {rows:,} pairs has a gold "
            "label (all are '-')."
        )
    if not examples:
        raise ValueError(f"{name} is empty: it holds no sentence pairs.")
    return examples


def read_official(path, split):
    """Reads ``split`` of the official SNLI 1.0 release from a directory or ``snli_1.0.zip``.

    Args:
        path: a directory holding ``snli_1.0_{split}.jsonl`` or ``.txt``, or the
            ``snli_1.0.zip`` archive (read without extracting).
        split: ``"train"``, ``"dev"`` or ``"test"``.

    Returns:
        A list of `NLIExample` (pairs labelled ``-`` dropped).

    Raises:
        FileNotFoundError: there is no file for ``split``.
        ValueError: the archive is not a zip file, or the split's file is not UTF-8, has a
            line that is not JSON or lacks ``sentence1``, ``sentence2`` or ``gold_label``,
            has an unknown label, or holds no labelled pair. The message names the file.
    """
    check_choice("split", split, SPLITS)
    path = str(path)
    if path.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as archive:
                for suffix in (".jsonl", ".txt"):
                    name = next(
                        (n for n in archive.namelist() if n.endswith(f"snli_1.0_{split}{suffix}")),
                        None,
                    )
                    if name:
                        with archive.open(name) as raw:
                            lines = _decoded_lines(raw, f"{path}:{name}")
                            return _file_examples(
                                _official_rows(lines, suffix, f"{path}:{name}"), f"{path}:{name}"
                            )
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{path} is not a valid zip archive: {error}.") from error
        raise FileNotFoundError(f"{path} holds no snli_1.0_{split}.jsonl or .txt.")
    for suffix in (".jsonl", ".txt"):
        file = os.path.join(path, f"snli_1.0_{split}{suffix}")
        if os.path.exists(file):
            with open(file, "rb") as raw:
                lines = _decoded_lines(raw, file)
                return _file_examples(_official_rows(lines, suffix, file), file)
    raise FileNotFoundError(f"{path} holds no snli_1.0_{split}.jsonl or .txt.")


# -- InferSent layout -------------------------------------------------------------------------


_INFERSENT_CONTENTS = {"s1": "premises", "s2": "hypotheses", "labels": "labels"}


def read_infersent(directory, split):
    """Reads ``s1.{split}``, ``s2.{split}``, ``labels.{split}`` (one item per line).

    Args:
        directory: the folder holding the three files.
        split: ``"train"``, ``"dev"`` or ``"test"``.

    Returns:
        A list of `NLIExample` (pairs labelled ``-`` dropped).

    Raises:
        ValueError: a file is empty or blank, is not UTF-8 text, or has an unknown label; the
            files have different numbers of lines; no pair has a gold label. The message
            names the file.
    """
    check_choice("split", split, SPLITS)
    lines = []
    for prefix, contents in _INFERSENT_CONTENTS.items():
        file = os.path.join(directory, f"{prefix}.{split}")
        with open(file, "rb") as handle:
            text = decode_utf8(handle.read(), file)
        lines.append(check_not_blank(text, file, contents).splitlines())
    if not len(lines[0]) == len(lines[1]) == len(lines[2]):
        raise ValueError(
            f"s1/s2/labels.{split} in {directory} have different numbers of lines: "
            f"{[len(x) for x in lines]}."
        )
    labels_file = os.path.join(directory, f"labels.{split}")
    return _file_examples(enumerate(zip(*lines), 1), labels_file)


def find_files(data_dir):
    """``"official"``, ``"infersent"`` or None, by the files present under ``data_dir``."""
    data_dir = str(data_dir)
    if data_dir.endswith(".zip") and os.path.isfile(data_dir):
        return "official"
    if not os.path.isdir(data_dir):
        return None
    names = set(os.listdir(data_dir))
    if any(n.startswith("snli_1.0_") for n in names):
        return "official"
    if {"s1.dev", "s2.dev", "labels.dev"} <= names or {"s1.train", "s2.train"} <= names:
        return "infersent"
    return None


def _no_files_error(data_dir):
    return FileNotFoundError(
        f"{data_dir} holds neither SNLI 1.0 files (snli_1.0_<split>.jsonl/.txt, snli_1.0.zip) "
        "nor InferSent files (s1.<split>, s2.<split>, labels.<split>)."
    )


def check_files(data_dir, splits=SPLITS):
    """Checks that ``data_dir`` holds a file for each of ``splits``, without reading them.

    Args:
        data_dir: a directory of official SNLI 1.0 or InferSent files, or ``snli_1.0.zip``.
        splits: the splits needed.

    Returns:
        ``"official"`` or ``"infersent"`` (`find_files`).

    Raises:
        FileNotFoundError: ``data_dir`` holds no SNLI files, or none for a split (the message
            names the missing files).
        ValueError: ``data_dir`` is a ``.zip`` that is not a zip archive.
    """
    kind = find_files(data_dir)
    if kind is None:
        raise _no_files_error(data_dir)
    data_dir = str(data_dir)
    if kind == "infersent":
        names = set(os.listdir(data_dir))
        wanted = [f"{prefix}.{split}" for split in splits for prefix in _INFERSENT_CONTENTS]
        missing = [name for name in wanted if name not in names]
    else:
        if data_dir.endswith(".zip"):
            try:
                with zipfile.ZipFile(data_dir) as archive:
                    names = {name.rsplit("/", 1)[-1] for name in archive.namelist()}
            except zipfile.BadZipFile as error:
                raise ValueError(f"{data_dir} is not a valid zip archive: {error}.") from error
        else:
            names = set(os.listdir(data_dir))
        missing = [
            f"snli_1.0_{split}.jsonl (or .txt)"
            for split in splits
            if not {f"snli_1.0_{split}.jsonl", f"snli_1.0_{split}.txt"} & names
        ]
    if missing:
        raise FileNotFoundError(f"{data_dir} has no {', '.join(missing)}.")
    return kind


def read_files(data_dir, split):
    """Reads ``split`` from ``data_dir`` in whichever distributed format it holds."""
    kind = find_files(data_dir)
    if kind == "official":
        return read_official(data_dir, split)
    if kind == "infersent":
        return read_infersent(data_dir, split)
    raise _no_files_error(data_dir)


# -- tensorflow-datasets ----------------------------------------------------------------------

_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def examples_from_tfds(dataset):
    """`NLIExample`s from a tensorflow-datasets ``snli`` split (label -1 = no majority)."""
    rows = []
    for record in dataset.as_numpy_iterator():
        rows.append(
            (record["premise"].decode("utf-8"), record["hypothesis"].decode("utf-8"),
             int(record["label"]))
        )
    return _collect(rows)


def read_tfds(split, data_dir=None):
    """Reads ``split`` from the prepared tensorflow-datasets ``snli`` builder, never
    downloading. Raises ImportError / FileNotFoundError when unavailable."""
    check_choice("split", split, SPLITS)
    try:
        import tensorflow_datasets as tfds  # optional dependency (extra "datasets")
    except ImportError as error:
        raise ImportError(
            "Reading SNLI through tensorflow-datasets needs the `datasets` extra: "
            "pip install \"tf-memlayers[datasets]\" (from a checkout: pip install \".[datasets]\")."
        ) from error

    try:
        dataset = tfds.load("snli", split=_TFDS_SPLITS[split], download=False, data_dir=data_dir)
    except Exception as error:  # tfds raises AssertionError/DatasetNotFoundError when unprepared
        raise FileNotFoundError(f"tensorflow-datasets `snli` is not prepared: {error}") from error
    return examples_from_tfds(dataset)


# -- embedded default: a generated corpus that needs premise recall ---------------------------

_ENTITIES = (
    "cat dog bird horse cow sheep goat pig duck rabbit fox bear lion tiger mouse frog "
    "man woman boy girl child baby chef doctor farmer player"
).split()
_COLOURS = "red blue green yellow black white brown pink orange purple grey gold".split()
_PLACES = "in the park|on the beach|near the river|in the street|at the market|in the garden".split("|")
_VERBS = "are playing|are sitting|are resting|are waiting|stand together|are running".split("|")


def _premise(facts, rng):
    verb = rng.choice(_VERBS)
    if len(facts) == 1:
        verb = verb.replace("are ", "is ").replace("stand together", "stands alone")
    things = [f"a {colour} {entity}" for entity, colour in facts]
    listed = things[-1] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
    if rng.random() < 0.5:
        return f"{listed} {verb} {rng.choice(_PLACES)} ."
    return f"there is {listed} {rng.choice(_PLACES)} ."


def _hypothesis(entity, colour, rng):
    templates = ("the {e} is {c} .", "a {c} {e} is there .", "one of them is a {c} {e} .")
    return rng.choice(templates).format(e=entity, c=colour)


def generate_recall_corpus(num_examples, seed=0, min_facts=1, max_facts=3):
    """Generated entailment-style pairs whose labels need the premise to be recalled.

    A premise lists 1-3 entities with a colour each ("a red cat , a blue dog and a green bird
    are playing in the park ."). The hypothesis names one entity and a colour:

    * entailment: an entity of the premise with its own colour;
    * contradiction: an entity of the premise with another colour, half of the time the colour
      of another premise entity (so the words alone do not decide: the entity-colour binding
      must be recalled);
    * neutral: an entity that is not in the premise.

    Labels are balanced; the same ``seed`` gives the same corpus.

    Args:
        num_examples: number of pairs, at least 1.
        seed: seed of the corpus.
        min_facts, max_facts: range of the number of entities in a premise,
            ``1 <= min_facts <= max_facts <= 25`` (a neutral hypothesis names one of the 26
            entities that is not in the premise).

    Returns:
        A list of `NLIExample`.
    """
    num_examples = check_int("num_examples", num_examples, 1)
    min_facts = check_int("min_facts", min_facts, 1)
    max_facts = check_int("max_facts", max_facts, 1)
    if not min_facts <= max_facts <= len(_ENTITIES) - 1:
        raise ValueError(
            f"`min_facts` and `max_facts` must satisfy 1 <= min_facts <= max_facts <= "
            f"{len(_ENTITIES) - 1} (a neutral hypothesis names an entity that is not in the "
            f"premise); got min_facts={min_facts}, max_facts={max_facts}."
        )
    rng = random.Random(seed)
    rows = []
    for i in range(num_examples):
        count = rng.randint(min_facts, max_facts)
        entities = rng.sample(_ENTITIES, count)
        colours = [rng.choice(_COLOURS) for _ in entities]
        facts = list(zip(entities, colours))
        label = i % 3
        target = rng.randrange(count)
        entity, colour = facts[target]
        if label == 1:
            entity = rng.choice([e for e in _ENTITIES if e not in entities])
            colour = rng.choice(_COLOURS)
        elif label == 2:
            others = [c for j, c in enumerate(colours) if j != target and c != colour]
            if others and rng.random() < 0.5:
                colour = rng.choice(others)
            else:
                colour = rng.choice([c for c in _COLOURS if c != colour])
        rows.append((_premise(facts, rng), _hypothesis(entity, colour, rng), LABELS[label]))
    rng.shuffle(rows)
    return _collect(rows)


GENERATED_SIZES = {"small": (900, 300, 300), "medium": (3000, 600, 600), "full": (30000, 3000, 3000)}


def generated_splits(train_size="medium", seed=0):
    """``{"train", "dev", "test"}`` of `generate_recall_corpus` with disjoint seeds."""
    check_choice("train_size", train_size, tuple(GENERATED_SIZES))
    sizes = GENERATED_SIZES[train_size]
    return {
        split: generate_recall_corpus(size, seed=seed * 10 + k)
        for k, (split, size) in enumerate(zip(SPLITS, sizes))
    }


# -- the chain --------------------------------------------------------------------------------

SOURCES = ("auto", "files", "tfds", "generated")


def load_nli_splits(source="auto", data_dir=None, tfds_data_dir=None, train_size="medium", seed=0):
    """Loads train/dev/test examples from the first available source (see module docstring).

    Returns:
        ``(splits dict, name of the source used)``.
    """
    check_choice("source", source, SOURCES)
    if source in ("auto", "files") and data_dir is not None:
        return {s: read_files(data_dir, s) for s in SPLITS}, "files"
    if source == "files":
        raise ValueError("`source='files'` needs `data_dir`.")
    if source in ("auto", "tfds"):
        try:
            return {s: read_tfds(s, tfds_data_dir) for s in SPLITS}, "tfds"
        except (ImportError, FileNotFoundError):
            if source == "tfds":
                raise
    return generated_splits(train_size, seed), "generated"


# -- vocabulary and tf.data -------------------------------------------------------------------


def build_vocabulary(examples, min_count=1):
    """Words of the training examples (premise and hypothesis), most frequent first, after
    ``<pad>`` (id 0) and ``<unk>`` (id 1)."""
    if not examples:
        raise ValueError("Cannot build a vocabulary from an empty list of examples.")
    counts = collections.Counter()
    for example in examples:
        counts.update(example.premise)
        counts.update(example.hypothesis)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return [PAD, UNK] + words


def encode(examples, vocabulary, max_length=None):
    """Ids (lists, truncated to ``max_length``) and labels of ``examples``."""
    index = {w: i for i, w in enumerate(vocabulary)}
    unk = index[UNK]
    cut = (lambda s: s[:max_length]) if max_length else (lambda s: s)
    premises = [[index.get(w, unk) for w in cut(e.premise)] for e in examples]
    hypotheses = [[index.get(w, unk) for w in cut(e.hypothesis)] for e in examples]
    labels = [e.label for e in examples]
    return premises, hypotheses, labels


def _pad(sequences, length):
    out = np.zeros((len(sequences), length), dtype=np.int32)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = s
    return out


PADDINGS = ("bucket", "fixed")


def make_dataset(
    examples,
    vocabulary,
    batch_size=50,
    padding="bucket",
    bucket_width=8,
    max_length=None,
    shuffle=False,
    repeat=False,
    seed=0,
):
    """A `tf.data.Dataset` of ``((premise ids, hypothesis ids), label)`` batches.

    ``padding="fixed"`` pads every sequence to the longest one (or ``max_length``): one shape,
    so XLA compiles once. ``padding="bucket"`` pads each batch to a multiple of
    ``bucket_width`` after grouping pairs of similar length: fewer padded steps, few shapes.
    Id 0 is padding (the model masks it).
    """
    check_choice("padding", padding, PADDINGS)
    batch_size = check_int("batch_size", batch_size, 1)
    if not examples:
        raise ValueError("Cannot make a dataset from an empty list of examples.")
    premises, hypotheses, labels = encode(examples, vocabulary, max_length)
    for label in labels:
        label_id(label)
    longest = max(max(len(p) for p in premises), max(len(h) for h in hypotheses), 1)
    if padding == "fixed":
        length = max_length or longest
        dataset = tf.data.Dataset.from_tensor_slices(
            ((_pad(premises, length), _pad(hypotheses, length)), np.asarray(labels, np.int32))
        )
        if shuffle:
            dataset = dataset.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
        if repeat:
            dataset = dataset.repeat()
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    def generator():
        order = np.arange(len(labels))
        epoch = 0
        while True:
            if shuffle:
                np.random.default_rng(seed + epoch).shuffle(order)
            for i in order:
                yield premises[i], hypotheses[i], labels[i]
            epoch += 1
            if not repeat:
                return

    signature = (
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.int32),
    )
    dataset = tf.data.Dataset.from_generator(generator, output_signature=signature)

    # Premise and hypothesis are padded to their own multiple of `bucket_width`; a batch
    # holds pairs of one (premise width, hypothesis width) bucket.
    buckets = -(-longest // bucket_width)

    def bucket(p, h, y):
        premise_bucket = (tf.maximum(tf.shape(p)[0], 1) - 1) // bucket_width
        hypothesis_bucket = (tf.maximum(tf.shape(h)[0], 1) - 1) // bucket_width
        return tf.cast(premise_bucket * buckets + hypothesis_bucket, tf.int64)

    def pad_batch(key, window):
        key = tf.cast(key, tf.int32)
        premise_width = (key // buckets + 1) * bucket_width
        hypothesis_width = (key % buckets + 1) * bucket_width
        return window.padded_batch(
            batch_size, padded_shapes=([premise_width], [hypothesis_width], [])
        )

    dataset = dataset.group_by_window(bucket, pad_batch, window_size=batch_size)
    dataset = dataset.map(lambda p, h, y: ((p, h), y))
    if not repeat:
        # Each bucket emits full batches and one final partial batch.
        keys = collections.Counter(
            ((max(len(p), 1) - 1) // bucket_width, (max(len(h), 1) - 1) // bucket_width)
            for p, h in zip(premises, hypotheses)
        )
        batches = sum(-(-count // batch_size) for count in keys.values())
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE)
