"""Truncated-BPTT batches of a token stream, and their `tf.data` pipeline.

`make_bptt_batches` lays a stream out for truncated backpropagation through time (the layout of
Zaremba et al. 2014): the (input, target) pairs are cut into `batch_size` contiguous rows and
each row into consecutive segments of `seq_len`, so that row ``b`` of batch ``i + 1`` continues
row ``b`` of batch ``i`` and a stateful model can carry its state from batch to batch. Each
document starts at a segment boundary (the end of the previous document is padded with
zero-weight targets), and `BPTTBatches.resets` says which rows start a new document at which
batch, so the states of exactly those rows can be cleared. Every target of the split is counted
exactly once with weight 1; padding has weight 0, so a perplexity computed with the weights is
exp(mean NLL over all target tokens of the split).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from tf_memlayers._validation import check_int


@dataclasses.dataclass(frozen=True)
class BPTTBatches:
    """A token stream laid out for truncated BPTT, as `make_bptt_batches` returns it.

    Args:
        inputs: int32 ``[num_batches, batch_size, seq_len]``.
        targets: int32, same shape: the token following each input.
        weights: float32, same shape: 1 for a real target, 0 for padding.
        resets: bool ``[num_batches, batch_size]``: the row starts a new document at this
            batch, so its carried state must be cleared first.
    """

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    resets: np.ndarray

    @property
    def num_batches(self):
        """int, the number of batches."""
        return self.inputs.shape[0]

    @property
    def batch_size(self):
        """int, the rows of a batch."""
        return self.inputs.shape[1]

    @property
    def seq_len(self):
        """int, the time steps of a batch."""
        return self.inputs.shape[2]

    @property
    def num_targets(self):
        """The number of real (weight 1) targets."""
        return int(self.weights.sum())

    def dataset(self, prefetch=tf.data.AUTOTUNE):
        """A `tf.data.Dataset` of ``(inputs, targets, weights)`` batches, in order.

        The order must not be shuffled: consecutive batches continue each other's rows.

        Args:
            prefetch: int, the number of batches to prefetch, `tf.data.AUTOTUNE`, or 0 /
                `None` for no prefetching. Defaults to `tf.data.AUTOTUNE`.

        Returns:
            A `tf.data.Dataset` of ``num_batches`` elements.
        """
        dataset = tf.data.Dataset.from_tensor_slices((self.inputs, self.targets, self.weights))
        return dataset.prefetch(prefetch) if prefetch else dataset


def make_bptt_batches(stream, batch_size, seq_len, reset_at_documents=True, pad_id=0):
    """Lays a `TokenStream` out as truncated-BPTT batches (Zaremba et al. layout).

    The ``num_tokens - 1`` (input, target) pairs of the stream are grouped by document (the
    document of the input word); each document is cut into segments of ``seq_len`` pairs, its
    last segment padded with zero-weight pairs; the sequence of all segments is split into
    ``batch_size`` contiguous rows of equal length (the last row padded with empty segments);
    batch ``i`` holds segment ``i`` of every row. As in Zaremba et al.'s layout, a row may
    begin inside a document, which it then reads from a zero state.

    Args:
        stream: `TokenStream`, the split.
        batch_size: int, rows per batch (streams advanced in parallel).
        seq_len: int, time steps per batch (the truncated-BPTT length).
        reset_at_documents: bool; if False the stream is treated as one document (no
            padding between documents, no resets). Defaults to True.
        pad_id: int, input/target id of padding positions. Defaults to 0.

    Returns:
        A `BPTTBatches`.

    Raises:
        ValueError: ``batch_size`` or ``seq_len`` is below 1, or the stream has fewer than
            2 tokens.
        TypeError: ``batch_size`` or ``seq_len`` is not an integer.

    Example:

    >>> from tf_memlayers.data.token_streams import TokenStream
    >>> stream = TokenStream(np.arange(13), np.array([0]))
    >>> batches = make_bptt_batches(stream, batch_size=2, seq_len=3)
    >>> batches.inputs[:, 0].tolist()  # row 0: pairs 0..5
    [[0, 1, 2], [3, 4, 5]]
    >>> batches.inputs[:, 1].tolist()  # row 1: pairs 6..11
    [[6, 7, 8], [9, 10, 11]]
    >>> batches.targets[1, 1].tolist()
    [10, 11, 12]
    """
    batch_size = check_int("batch_size", batch_size, 1)
    seq_len = check_int("seq_len", seq_len, 1)
    ids = stream.ids
    num_pairs = len(ids) - 1
    if num_pairs < 1:
        raise ValueError(f"`stream` needs at least 2 tokens to form a target, got {len(ids)}.")
    starts = stream.document_starts if reset_at_documents else np.array([0])
    starts = starts[starts < num_pairs]
    lengths = np.diff(np.append(starts, num_pairs))
    segments_per_doc = -(-lengths // seq_len)
    first_segment = np.concatenate([[0], np.cumsum(segments_per_doc)[:-1]])
    num_segments = int(segments_per_doc.sum())
    rows = -(-num_segments // batch_size)

    # Where each pair goes in the flat [segments * seq_len] layout.
    pair = np.arange(num_pairs)
    document = np.searchsorted(starts, pair, side="right") - 1
    offset = pair - starts[document]
    slot = (first_segment[document] + offset // seq_len) * seq_len + offset % seq_len

    total = rows * batch_size * seq_len
    inputs = np.full(total, pad_id, np.int32)
    targets = np.full(total, pad_id, np.int32)
    weights = np.zeros(total, np.float32)
    inputs[slot], targets[slot], weights[slot] = ids[:-1], ids[1:], 1.0
    starts_document = np.zeros(rows * batch_size, bool)
    starts_document[first_segment] = True

    # Segment s belongs to row s // rows, at batch s % rows.
    to_batches = lambda a: a.reshape(batch_size, rows, *a.shape[1:]).swapaxes(0, 1)  # noqa: E731
    return BPTTBatches(
        inputs=np.ascontiguousarray(to_batches(inputs.reshape(-1, seq_len))),
        targets=np.ascontiguousarray(to_batches(targets.reshape(-1, seq_len))),
        weights=np.ascontiguousarray(to_batches(weights.reshape(-1, seq_len))),
        resets=np.ascontiguousarray(to_batches(starts_document)),
    )
