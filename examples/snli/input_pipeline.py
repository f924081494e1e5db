"""The SNLI example's data: where its sentence pairs come from, and the batches the model reads.

`load_splits` takes the first source there is (``--source auto``):

1. ``--data-dir``: the official SNLI 1.0 files or InferSent's (`corpora.read_files`);
2. the tensorflow-datasets ``snli`` builder, if prepared (`corpora.read_tfds`); with
   ``download`` tensorflow-datasets downloads and prepares it first, and with ``download`` or
   ``tfds_data_dir`` the chain stops there;
3. the embedded default, `generated_splits`: pairs whose labels need the premise to be
   recalled, so that the example trains on a fresh machine with no download.

`build_vocabulary` and `make_dataset` turn pairs into ``((premise ids, hypothesis ids),
label)`` batches, padded with id 0 (which the model masks).
"""

import collections
import random

import numpy as np
import tensorflow as tf

from . import corpora

SOURCES = ("auto", "files", "tfds", "generated")


def load_splits(
    source, data_dir=None, tfds_data_dir=None, train_size="medium", seed=0, download=False
):
    """``({"train", "dev", "test"}: [Pair], the source read)`` of the first available source
    (the module's docstring) or of ``source`` itself (``"files"``, ``"tfds"`` or
    ``"generated"``)."""
    if source in ("auto", "files") and data_dir is not None:
        return {split: corpora.read_files(data_dir, split) for split in corpora.SPLITS}, "files"
    if source in ("auto", "tfds"):
        try:
            read = [corpora.read_tfds(split, tfds_data_dir, download) for split in corpora.SPLITS]
            return dict(zip(corpora.SPLITS, read)), "tfds"
        except (ImportError, FileNotFoundError):
            if source == "tfds" or download or tfds_data_dir is not None:
                raise
    return generated_splits(train_size, seed), "generated"


# -- the generated corpus ---------------------------------------------------------------------

_ENTITIES = (
    "cat dog bird horse cow sheep goat pig duck rabbit fox bear lion tiger mouse frog "
    "man woman boy girl child baby chef doctor farmer player"
).split()
_COLOURS = "red blue green yellow black white brown pink orange purple grey gold".split()
_PLACES = "in the park|on the beach|near the river|in the street|at the market|in the garden"
_VERBS = "are playing|are sitting|are resting|are waiting|stand together|are running"


def _premise(facts, rng):
    verb = rng.choice(_VERBS.split("|"))
    if len(facts) == 1:
        verb = verb.replace("are ", "is ").replace("stand together", "stands alone")
    things = [f"a {colour} {entity}" for entity, colour in facts]
    listed = things[-1] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
    if rng.random() < 0.5:
        return f"{listed} {verb} {rng.choice(_PLACES.split('|'))} ."
    return f"there is {listed} {rng.choice(_PLACES.split('|'))} ."


def generate_recall_corpus(num_pairs, seed=0):
    """Generated pairs whose labels need the premise to be recalled, balanced, the same for
    the same ``seed``.

    A premise gives 1 to 3 entities a colour each ("a red cat , a blue dog and a green bird
    are playing in the park ."); the hypothesis names one entity and a colour: entailment, an
    entity of the premise with its colour; contradiction, one with another colour, half of the
    time the colour of another of its entities (so that the words alone do not decide: the
    binding must be recalled); neutral, an entity not in the premise.

    >>> pair = generate_recall_corpus(3, seed=1)[0]
    >>> pair.premise[:3], pair.hypothesis, pair.label  # a contradiction
    (('a', 'blue', 'boy'), ('the', 'boy', 'is', 'red', '.'), 2)
    """
    rng = random.Random(seed)
    rows = []
    for i in range(num_pairs):
        count = rng.randint(1, 3)
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
        premise = _premise(facts, rng)
        templates = ("the {e} is {c} .", "a {c} {e} is there .", "one of them is a {c} {e} .")
        hypothesis = rng.choice(templates).format(e=entity, c=colour)
        rows.append((premise, hypothesis, corpora.LABELS[label]))
    rng.shuffle(rows)
    return [corpora.make_pair(*row) for row in rows]


# Pairs of the train, dev and test splits of each ``--train-size``.
GENERATED_SIZES = dict(small=(900, 300, 300), medium=(3000, 600, 600), full=(30000, 3000, 3000))


def generated_splits(train_size="medium", seed=0):
    """The splits of `generate_recall_corpus` of a size of `GENERATED_SIZES` (split ``k``
    seeded by ``10 * seed + k``)."""
    sizes = GENERATED_SIZES[train_size]
    return {
        split: generate_recall_corpus(size, seed=seed * 10 + k)
        for k, (split, size) in enumerate(zip(corpora.SPLITS, sizes))
    }


# -- vocabulary and batches -------------------------------------------------------------------


def build_vocabulary(pairs):
    """The words of ``pairs`` after ``<pad>`` (id 0) and ``<unk>`` (id 1), most frequent
    first, ties alphabetical: a list, row = id.

    >>> build_vocabulary([corpora.make_pair("a b b", "c", "neutral")])
    ['<pad>', '<unk>', 'b', 'a', 'c']
    """
    counts = collections.Counter(word for p in pairs for s in p[:2] for word in s)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ["<pad>", "<unk>"] + [word for word, _ in ranked if word not in ("<pad>", "<unk>")]


def _pad(sequences, length):
    out = np.zeros((len(sequences), length), dtype=np.int32)
    for i, ids in enumerate(sequences):
        out[i, : len(ids)] = ids
    return out


PADDINGS = ("bucket", "fixed")


def make_dataset(
    pairs,
    vocabulary,
    batch_size=50,
    padding="bucket",
    max_length=None,
    shuffle=False,
    repeat=False,
    seed=0,
    bucket_width=8,
):
    """A `tf.data.Dataset` of ``((premise ids, hypothesis ids), label)`` batches.

    Words not in ``vocabulary`` map to ``<unk>``; sentences are cut to ``max_length`` tokens.
    ``padding="fixed"`` pads every sentence to ``max_length`` (else to the longest): one shape
    for every batch of every split, one XLA compilation;
    ``"bucket"`` groups pairs by the widths of their premise and hypothesis, each padded to a
    multiple of ``bucket_width``: fewer padded steps, few shapes. ``shuffle`` shuffles anew
    each epoch (from ``seed``); ``repeat`` repeats without end. Without ``repeat`` the
    dataset's cardinality is its number of batches.
    """
    index = {word: i for i, word in enumerate(vocabulary)}
    ids = [[[index.get(w, 1) for w in s[:max_length]] for s in pair[:2]] for pair in pairs]
    premises, hypotheses = [p for p, _ in ids], [h for _, h in ids]
    labels = [pair.label for pair in pairs]
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
        order, epoch = np.arange(len(labels)), 0
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
    # A pair's bucket is (premise width, hypothesis width), numbered as one "length" with a
    # boundary at every number: `bucket_by_sequence_length` batches each pair of widths alone.
    buckets = -(-longest // bucket_width)

    def bucket(p, h, y):
        widths = [(tf.maximum(tf.shape(s)[0], 1) - 1) // bucket_width for s in (p, h)]
        return widths[0] * buckets + widths[1]

    def padded(ids):
        size = -(-tf.shape(ids)[1] // bucket_width) * bucket_width
        return tf.pad(ids, [[0, 0], [0, tf.maximum(size, bucket_width) - tf.shape(ids)[1]]])

    dataset = dataset.bucket_by_sequence_length(
        bucket,
        bucket_boundaries=list(range(1, buckets * buckets)),
        bucket_batch_sizes=[batch_size] * (buckets * buckets),
    ).map(lambda p, h, y: ((padded(p), padded(h)), y))
    if not repeat:  # each bucket gives its full batches and a last partial one
        widths = [tuple((max(len(s), 1) - 1) // bucket_width for s in pair) for pair in ids]
        sizes = collections.Counter(widths)
        batches = sum(-(-count // batch_size) for count in sizes.values())
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE)
