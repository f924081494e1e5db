"""Truncated-BPTT batches of a token stream, and their `tf.data` pipeline.

`make_bptt_batches` lays a stream out for truncated backpropagation through time (the layout of
Zaremba et al. 2014): the (input, target) pairs are cut into `batch_size` contiguous rows and
each row into consecutive segments of `sequence_length`, so that row ``b`` of batch ``i + 1``
continues row ``b`` of batch ``i`` and a stateful model can carry its state from batch to batch.

Documents are laid out in one of two ways:

* padded (the default): each document starts at a segment boundary (the end of the previous
  document is padded with zero-weight targets), and `BPTTBatches.resets` says which rows
  start a new document at which batch, so the states of exactly those rows can be cleared
  from the host between batches (`tf_memlayers.callbacks.StateResetCallback`);
* packed (``pack=True``): documents follow each other back to back, only the end of the
  stream is padded, and `BPTTBatches.reset_mask` marks the input position where each
  document starts, for a model that restarts its rows inside the graph
  (`tf_memlayers.models.build_language_model` with ``resets=True``).

Every target of the split is counted exactly once with weight 1; padding has weight 0, so a
perplexity computed with the weights is exp(mean NLL over all target tokens of the split).
"""

import dataclasses

import numpy as np
import tensorflow as tf

from examples.harness.checks import check_bool, check_int


@dataclasses.dataclass(frozen=True)
class BPTTBatches:
    """A token stream laid out for truncated BPTT, as `make_bptt_batches` returns it.

    Args:
        inputs: int32 ``[num_batches, batch_size, sequence_length]``.
        targets: int32, same shape: the token following each input.
        weights: float32, same shape: 1 for a real target, 0 for padding.
        resets: bool ``[num_batches, batch_size]``: the row starts a new document at this
            batch, so its carried state must be cleared first (all false when packed: the
            model restarts the rows itself, at ``reset_mask``).
        reset_mask: Optional bool, same shape as ``inputs``: true at the input position
            where a new document starts, for a model built with ``resets=True``; `None`
            when the documents are padded to segment starts instead. Default: `None`.
    """

    inputs: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    resets: np.ndarray
    reset_mask: np.ndarray = None

    @property
    def num_batches(self):
        """int, the number of batches."""
        return self.inputs.shape[0]

    @property
    def batch_size(self):
        """int, the rows of a batch."""
        return self.inputs.shape[1]

    @property
    def sequence_length(self):
        """int, the time steps of a batch."""
        return self.inputs.shape[2]

    @property
    def num_targets(self):
        """The number of real (weight 1) targets."""
        return int(self.weights.sum())

    @property
    def packed(self):
        """bool, whether the documents are packed back to back (``reset_mask`` is given)."""
        return self.reset_mask is not None

    @property
    def padding_fraction(self):
        """float, the share of the layout's positions that are padding (weight 0)."""
        return 1.0 - self.num_targets / self.weights.size

    def take(self, num_batches):
        """The first ``num_batches`` batches (all of them if there are fewer).

        Args:
            num_batches: int >= 1.

        Returns:
            A `BPTTBatches`.
        """
        num_batches = check_int("num_batches", num_batches, 1)
        arrays = (getattr(self, field.name) for field in dataclasses.fields(self))
        return BPTTBatches(*(None if a is None else a[:num_batches] for a in arrays))

    def dataset(self, prefetch=tf.data.AUTOTUNE):
        """A `tf.data.Dataset` of ``(inputs, targets, weights)`` batches, in order.

        The inputs are the token ids, or, when packed, the dict ``{"tokens": ids, "reset":
        reset_mask}`` that a model built with ``resets=True`` takes. The order must not be
        shuffled: consecutive batches continue each other's rows.

        Args:
            prefetch: int, the number of batches to prefetch, `tf.data.AUTOTUNE`, or 0 /
                `None` for no prefetching. Defaults to `tf.data.AUTOTUNE`.

        Returns:
            A `tf.data.Dataset` of ``num_batches`` elements.
        """
        inputs = self.inputs
        if self.packed:
            inputs = {"tokens": self.inputs, "reset": self.reset_mask}
        dataset = tf.data.Dataset.from_tensor_slices((inputs, self.targets, self.weights))
        return dataset.prefetch(prefetch) if prefetch else dataset


def make_bptt_batches(
    stream, batch_size, sequence_length, reset_at_documents=True, pad_id=0, pack=False
):
    """Lays a `TokenStream` out as truncated-BPTT batches (Zaremba et al. layout).

    The ``num_tokens - 1`` (input, target) pairs of the stream are grouped by document (the
    document of the input word). Padded (the default): each document is cut into segments of
    ``sequence_length`` pairs, its last segment padded with zero-weight pairs. Packed
    (``pack=True``): the pairs stay back to back and only the last segment of the stream is
    padded. The sequence of all segments is split into ``batch_size`` contiguous rows of
    equal length (the last row padded with empty segments); batch ``i`` holds segment ``i``
    of every row. As in Zaremba et al.'s layout, a row may begin inside a document, which it
    then reads from a zero state.

    Args:
        stream: `TokenStream`, the split.
        batch_size: int, rows per batch (streams advanced in parallel).
        sequence_length: int, time steps per batch (the truncated-BPTT length).
        reset_at_documents: bool; if False the stream is treated as one document (no
            padding between documents, no resets). Defaults to True.
        pad_id: int, input/target id of padding positions. Defaults to 0.
        pack: bool; if True the documents are packed back to back and the result's
            ``reset_mask`` marks where each starts (its ``resets`` are then all false), for
            a model built with ``resets=True``. A stream of one document (PTB) gets the
            same layout either way. Defaults to False.

    Returns:
        A `BPTTBatches`.

    Raises:
        ValueError: ``batch_size`` or ``sequence_length`` is below 1, or the stream has fewer than
            2 tokens.
        TypeError: ``batch_size`` or ``sequence_length`` is not an integer, or ``pack`` is not a
            bool.

    Example:

    >>> from examples.language_modeling.token_streams import TokenStream
    >>> stream = TokenStream(np.arange(13), np.array([0]))
    >>> batches = make_bptt_batches(stream, batch_size=2, sequence_length=3)
    >>> batches.inputs[:, 0].tolist()  # row 0: pairs 0..5
    [[0, 1, 2], [3, 4, 5]]
    >>> batches.inputs[:, 1].tolist()  # row 1: pairs 6..11
    [[6, 7, 8], [9, 10, 11]]
    >>> batches.targets[1, 1].tolist()
    [10, 11, 12]

    Two documents, of 4 and 6 tokens: padded, the second starts a new segment; packed, it
    follows the first and ``reset_mask`` marks its first input.

    >>> stream = TokenStream(np.arange(1, 11), np.array([0, 4]))
    >>> padded = make_bptt_batches(stream, batch_size=1, sequence_length=3)
    >>> padded.inputs[:, 0].tolist()
    [[1, 2, 3], [4, 0, 0], [5, 6, 7], [8, 9, 0]]
    >>> packed = make_bptt_batches(stream, batch_size=1, sequence_length=3, pack=True)
    >>> packed.inputs[:, 0].tolist()
    [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    >>> packed.reset_mask[:, 0].astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    >>> round(padded.padding_fraction, 3), packed.padding_fraction
    (0.25, 0.0)
    """
    batch_size = check_int("batch_size", batch_size, 1)
    sequence_length = check_int("sequence_length", sequence_length, 1)
    pack = check_bool("pack", pack)
    ids = stream.ids
    num_pairs = len(ids) - 1
    if num_pairs < 1:
        raise ValueError(f"`stream` needs at least 2 tokens to form a target, got {len(ids)}.")
    starts = stream.document_starts if reset_at_documents else np.array([0])
    starts = starts[starts < num_pairs]
    if pack:
        return _packed(ids, starts, batch_size, sequence_length, pad_id)
    lengths = np.diff(np.append(starts, num_pairs))
    segments_per_doc = -(-lengths // sequence_length)
    first_segment = np.concatenate([[0], np.cumsum(segments_per_doc)[:-1]])
    num_segments = int(segments_per_doc.sum())
    rows = -(-num_segments // batch_size)

    # Where each pair goes in the flat [segments * sequence_length] layout.
    pair = np.arange(num_pairs)
    document = np.searchsorted(starts, pair, side="right") - 1
    offset = pair - starts[document]
    slot = (
        first_segment[document] + offset // sequence_length
    ) * sequence_length + offset % sequence_length

    inputs, targets, weights = _flat_layout(ids, slot, rows * batch_size * sequence_length, pad_id)
    starts_document = np.zeros(rows * batch_size, bool)
    starts_document[first_segment] = True

    to_batches = _to_batches(batch_size, rows, sequence_length)
    return BPTTBatches(
        inputs=to_batches(inputs),
        targets=to_batches(targets),
        weights=to_batches(weights),
        resets=_to_batches(batch_size, rows, None)(starts_document),
    )


def _flat_layout(ids, slot, total, pad_id):
    """Inputs, targets and weights of ``total`` positions, the pairs of ``ids`` at ``slot``."""
    inputs = np.full(total, pad_id, np.int32)
    targets = np.full(total, pad_id, np.int32)
    weights = np.zeros(total, np.float32)
    inputs[slot], targets[slot], weights[slot] = ids[:-1], ids[1:], 1.0
    return inputs, targets, weights


def _to_batches(batch_size, rows, sequence_length):
    """A function from a flat array of ``batch_size * rows`` segments (of ``sequence_length``
    positions; `None`: one value per segment) to ``[rows, batch_size, ...]``: segment ``s``
    belongs to row ``s // rows``, at batch ``s % rows``."""

    def convert(flat):
        segments = flat if sequence_length is None else flat.reshape(-1, sequence_length)
        shaped = segments.reshape(batch_size, rows, *segments.shape[1:]).swapaxes(0, 1)
        return np.ascontiguousarray(shaped)

    return convert


def _packed(ids, starts, batch_size, sequence_length, pad_id):
    """The packed layout: pair ``p`` at flat position ``p``, the reset mask at ``starts``."""
    num_pairs = len(ids) - 1
    num_segments = -(-num_pairs // sequence_length)
    rows = -(-num_segments // batch_size)
    total = rows * batch_size * sequence_length
    inputs, targets, weights = _flat_layout(ids, np.arange(num_pairs), total, pad_id)
    reset_mask = np.zeros(total, bool)
    reset_mask[starts] = True
    to_batches = _to_batches(batch_size, rows, sequence_length)
    return BPTTBatches(
        inputs=to_batches(inputs),
        targets=to_batches(targets),
        weights=to_batches(weights),
        resets=np.zeros((rows, batch_size), bool),
        reset_mask=to_batches(reset_mask),
    )
