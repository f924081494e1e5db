"""From sentence-pair examples to model input: vocabulary, ids and `tf.data` batches.

`build_vocabulary` lists the words of the training examples after ``<pad>`` (id 0) and
``<unk>`` (id 1); `make_dataset` encodes examples with it and batches them as
``((premise ids, hypothesis ids), label)``, padded with id 0, either to one fixed length or
per bucket of similar lengths.
"""

import collections

import numpy as np
import tensorflow as tf

from examples.harness.checks import check_choice, check_int
from examples.harness.data.vocabulary import UNK, build_token_list
from examples.snli.nli_examples import label_id


def build_vocabulary(examples, min_count=1):
    """The vocabulary of training examples as a list (row = id).

    Args:
        examples: non-empty list of `NLIExample`; the words of premises and hypotheses count.
        min_count: int, drop words seen fewer times. Defaults to 1.

    Returns:
        A list of str: ``<pad>`` (id 0), ``<unk>`` (id 1), then the words, most frequent
        first, ties alphabetical.

    Raises:
        ValueError: ``examples`` is empty, or ``min_count`` is below 1.
    """
    if not examples:
        raise ValueError("Cannot build a vocabulary from an empty list of examples.")
    return build_token_list(
        (tokens for e in examples for tokens in (e.premise, e.hypothesis)), min_count=min_count
    )


def encode(examples, vocabulary, max_length=None):
    """Maps examples to ids with a vocabulary list.

    Args:
        examples: list of `NLIExample`.
        vocabulary: list of str (row = id) holding ``<unk>``, e.g. from `build_vocabulary`;
            words not in it map to ``<unk>``.
        max_length: int or `None`, keep the first ``max_length`` tokens of each sentence.
            Defaults to `None` (whole sentences).

    Returns:
        ``(premises, hypotheses, labels)``: lists of id lists, id lists and label ids.

    Raises:
        KeyError: ``vocabulary`` has no ``<unk>``.
    """
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

    Args:
        examples: non-empty list of `NLIExample`.
        vocabulary: list of str holding ``<unk>``, as for `encode`.
        batch_size: int, pairs per batch. Defaults to 50.
        padding: str, ``"bucket"`` or ``"fixed"`` (`PADDINGS`). Defaults to ``"bucket"``.
        bucket_width: int, with ``padding="bucket"`` the padded lengths are multiples of it.
            Defaults to 8.
        max_length: int or `None`, cut sentences to this many tokens. Defaults to `None`.
        shuffle: bool, shuffle the pairs (anew each epoch). Defaults to False.
        repeat: bool, repeat without end. Defaults to False.
        seed: int, seed of the shuffling. Defaults to 0.

    Returns:
        A prefetched `tf.data.Dataset`; without ``repeat`` its cardinality is the number of
        batches.

    Raises:
        ValueError: ``examples`` is empty, ``padding`` is unknown, ``batch_size`` is below
            1, or a label is outside the three classes.
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
    # holds pairs of one (premise width, hypothesis width) bucket. The pair of buckets is
    # numbered as one "length" with a boundary at every number, so that
    # `bucket_by_sequence_length` gives each pair of buckets its own batches.
    buckets = -(-longest // bucket_width)

    def bucket(p, h, y):
        del y
        premise_bucket = (tf.maximum(tf.shape(p)[0], 1) - 1) // bucket_width
        hypothesis_bucket = (tf.maximum(tf.shape(h)[0], 1) - 1) // bucket_width
        return premise_bucket * buckets + hypothesis_bucket

    def pad_to_bucket_width(p, h, y):
        def padded(ids):
            width = -(-tf.shape(ids)[1] // bucket_width) * bucket_width
            return tf.pad(ids, [[0, 0], [0, tf.maximum(width, bucket_width) - tf.shape(ids)[1]]])

        return padded(p), padded(h), y

    dataset = dataset.bucket_by_sequence_length(
        bucket,
        bucket_boundaries=list(range(1, buckets * buckets)),
        bucket_batch_sizes=[batch_size] * (buckets * buckets),
    ).map(pad_to_bucket_width)
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
