"""Causal windows over a masked sequence with a carried memory.

The memory mechanisms of Daniluk et al. (2017) read, at step t, the previous L items of a
stream: the valid (unmasked) steps of the sequence so far, preceded by L items carried over
from earlier segments. Padded steps are never part of the stream.

The sequence form works in *compacted* coordinates: the valid steps of each row are moved to
the front (`Compaction`), so the window of the r-th valid step is the contiguous block
``stream[r : r + L]`` of ``stream = [memory ; compacted sequence]``. All windows are then
static offset slices (`offset_windows`), O(T·L) time and memory with no scatter in the
backward pass, and results go back to their original steps with `Compaction.restore`.
`window_weighted_sum` reads a wide stream (the values) through its windows without
materialising them: a block-banded matrix product, O(T·L) time and O(T·(width + L)) memory.
Without a mask every step is valid and compaction is the identity.

Written in `keras.ops`, so it runs on every Keras backend; batch and time may be unknown
until run time (TensorFlow graphs), the trailing dimensions must be known.
"""

from keras import ops


def _gather_steps(values, indices):
    """``values[b, indices[b, j]]`` for every ``b, j``: ``[B, T, ...]`` -> ``[B, J, ...]``.

    One row gather over the flattened ``[B * T, ...]`` steps (the equivalent of
    ``tf.gather(values, indices, batch_dims=1)``).
    """
    batch, steps = ops.shape(values)[:2]
    trailing = tuple(values.shape[2:])
    chosen = ops.shape(indices)[1]
    indices = ops.cast(indices, "int32")
    # Row b of the flattened steps starts at b * T (the batch index from a cumulative sum, so
    # that an unknown batch size needs no `arange`).
    rows = ops.cumsum(ops.ones_like(indices[:, :1]), axis=0) - 1
    flat_indices = ops.reshape(indices + rows * ops.cast(steps, "int32"), (-1,))
    gathered = ops.take(ops.reshape(values, (-1, *trailing)), flat_indices, axis=0)
    return ops.reshape(gathered, (batch, chosen, *trailing))


def _permuted_steps(values, indices):
    """``out[b, indices[b, t]] = values[b, t]`` where each row of ``indices`` is a permutation
    of ``0 .. T - 1``: the inverse of `_gather_steps` by the same permutation, ``[B, T]``."""
    if values.shape[1] == 1:
        # The only permutation of one step. (Torch's ONNX export traces a model at batch size
        # 1, where the scatter of a single element is recorded as a reshape to a scalar,
        # which no other batch size fits.)
        return values
    steps = ops.cast(ops.shape(values)[1], "int32")
    rows = ops.cumsum(ops.ones_like(indices[:, :1]), axis=0) - 1
    flat_indices = ops.reshape(indices + rows * steps, (-1, 1))
    flat_values = ops.reshape(values, (-1,))
    permuted = ops.scatter_update(ops.zeros_like(flat_values), flat_indices, flat_values)
    return ops.reshape(permuted, ops.shape(values))


class Compaction:
    """Moves the valid steps of every row to the front, keeping their order.

    Args:
        mask: `None` (every step valid) or bool ``[B, T]``.
    """

    def __init__(self, mask):
        self.mask = mask
        if mask is None:
            return
        valid = ops.cast(mask, "int32")
        position = ops.cumsum(ops.ones_like(valid), axis=1) - 1
        self.rank = ops.cumsum(valid, axis=1) - valid
        self.total = ops.sum(valid, axis=1)
        # Valid steps first, each group in step order: a valid step goes to its rank among
        # the valid ones, a masked step after all of them. ``order`` (the step each position
        # takes) is that permutation's inverse, written by a scatter: linear in T, where a
        # sort is T log T, and exported to ONNX on torch, which cannot export torch's stable
        # sort.
        destination = ops.where(
            ops.cast(mask, "bool"), self.rank, ops.expand_dims(self.total, 1) + position - self.rank
        )
        self.order = _permuted_steps(position, destination)

    def compact(self, sequence):
        """``[B, T, ...]`` -> the same steps with the valid ones first."""
        if self.mask is None:
            return sequence
        return _gather_steps(sequence, self.order)

    def restore(self, compacted):
        """Inverse of `compact` on valid steps; masked steps get exact zeros (selected, not
        multiplied, so a non-finite value computed there never leaks out)."""
        if self.mask is None:
            return compacted
        restored = _gather_steps(compacted, self.rank)
        keep = ops.cast(self.mask, "bool")
        for _ in range(len(restored.shape) - 2):
            keep = ops.expand_dims(keep, -1)
        return ops.where(keep, restored, ops.zeros_like(restored))

    def last(self, stream, window):
        """The last ``window`` items of ``stream = [memory ; compacted]``: the new memory."""
        if not window:
            return _empty_steps(stream, 1)
        if self.mask is None:
            return stream[:, -window:]
        positions = ops.expand_dims(self.total, 1) + ops.arange(window, dtype="int32")
        return _gather_steps(stream, positions)


def _empty_steps(x, axis):
    """``x`` with no steps along ``axis``, made as zeros: TFLite mis-sizes an empty slice."""
    shape = list(ops.shape(x))
    shape[axis] = 0
    return ops.zeros(shape, x.dtype)


def offset_windows(stream, window):
    """``[B, L + T, ...]`` stream -> ``[B, T, L, ...]`` windows, oldest first.

    Window position i of step r is ``stream[:, r + i]``: the L items before the r-th step.
    """
    if window == 0:
        return _empty_steps(ops.expand_dims(stream, 2), 2)
    # Position i takes the steps i .. i + T - 1, i.e. up to ``i - L`` from the end.
    return ops.stack([stream[:, i : i - window] for i in range(window)], axis=2)


def _skewed(weights, width):
    """``[..., R, L]`` -> ``[..., R, width]`` (``width >= R + L - 1``, R and L static): row c's
    L weights in columns ``c .. c + L - 1``, zeros elsewhere. No arithmetic: padded to
    ``width + 1`` columns, the rows read back ``width`` wide each start one column further."""
    rows, window = weights.shape[-2:]
    lead = ops.shape(weights)[:-2]
    pad = [[0, 0]] * (len(weights.shape) - 1) + [[0, width + 1 - window]]
    flat = ops.reshape(ops.pad(weights, pad), (*lead, rows * (width + 1)))
    return ops.reshape(flat[..., : rows * width], (*lead, rows, width))


def window_weighted_sum(weights, carried, steps):
    """``out[:, r] = sum_i weights[:, r, i] * stream[:, r + i]``, without the windows, where
    ``stream = [carried ; steps]``.

    The same as ``einsum("btl,btld->btd", weights, offset_windows(stream, L))`` but neither
    the ``[B, T, L, width]`` windows nor the joined stream is built: each step's weights are
    placed into a banded matrix over the stream (`_skewed`), read by matrix products. With
    at most ``C = max(L, 8)`` steps, known when traced, one band ``[T, L + T]`` covers the
    carried items and the steps. Otherwise the steps are cut into blocks of C, each block's
    band ``[C, 2C]`` spans the block before it and its own, and batched matrix products read
    the blocks of ``steps`` in place (the carried items form the block before the first).
    Memory O(T·(width + L)) instead of O(T·L·width); the products add zeros outside the band.

    Args:
        weights: ``[B, T, L]``, L static.
        carried: ``[B, L, width]`` of the dtype of ``weights``: the L items before the steps.
        steps: ``[B, T, width]`` of the dtype of ``weights``, width static.

    Returns:
        ``[B, T, width]``.
    """
    window = weights.shape[-1]
    block = max(window, 8)
    known = weights.shape[1]
    if known is not None and known <= block:
        band = _skewed(weights, window + known)
        return ops.matmul(band[..., :window], carried) + ops.matmul(band[..., window:], steps)
    batch, length = ops.shape(weights)[:2]
    width = steps.shape[-1]
    blocks = (length + block - 1) // block
    tail = blocks * block - length
    weights = ops.pad(weights, [[0, 0], [0, tail], [0, 0]])
    weights = ops.reshape(weights, (batch, blocks, block, window))
    # Window position i of row c lands in column C - L + c + i of [previous block ; own].
    band = _skewed(ops.pad(weights, [[0, 0], [0, 0], [0, 0], [block - window, 0]]), 2 * block)
    previous, own = band[..., :block], band[..., block:]
    # Step s of the stream (carried items first) lies at row s + C - L of [carried block ;
    # step blocks], so the window of step r lies in the block before r's and in r's own.
    step_blocks = ops.reshape(
        ops.pad(steps, [[0, 0], [0, tail], [0, 0]]), (batch, blocks, block, width)
    )
    carried_block = ops.expand_dims(ops.pad(carried, [[0, 0], [block - window, 0], [0, 0]]), 1)
    # Every product reads whole operands (slicing the step blocks would copy them): the band
    # of block k + 1 over block k is computed at k and moved to k + 1 afterwards.
    from_previous = ops.matmul(
        ops.pad(previous[:, 1:], [[0, 0], [0, 1], [0, 0], [0, 0]]), step_blocks
    )
    from_carried = ops.matmul(previous[:, :1], carried_block)
    out = ops.matmul(own, step_blocks) + ops.concatenate(
        [from_carried, from_previous[:, :-1]], axis=1
    )
    return ops.reshape(out, (batch, blocks * block, width))[:, :length]


class Documents:
    """The documents of a stream with resets: which window positions share a step's document.

    With ``reset`` (bool ``[B, T]``, true where a new document starts), each valid step of the
    compacted sequence belongs to a document, numbered by the resets up to it; the carried
    memory belongs to the document in progress at the start of the call (number 0). A window
    position of another document than its step must read as a position before the start of
    the stream (zero, and invalid), which is what a fresh sequence would see there. Resets at
    masked steps are compacted past the valid steps and so change no valid step.

    Args:
        reset: Bool ``[B, T]``.
        compaction: The `Compaction` of the call's mask.
        window: Non-negative integer L, the length of the windows.
    """

    def __init__(self, reset, compaction, window):
        starts = compaction.compact(ops.cast(reset, "int32"))
        document = ops.cumsum(starts, axis=1)
        carried = ops.repeat(ops.zeros_like(document[:, :1]), window, axis=1)
        stream = ops.concatenate([carried, document], axis=1)
        #: Bool ``[B, T, L]``: window position i of compacted step r is in r's document.
        self.same = ops.equal(offset_windows(stream, window), ops.expand_dims(document, -1))
        last = compaction.last(stream, window)
        #: Bool ``[B, L]``: the items of the new memory that are in the last document.
        self.last_same = ops.equal(last, last[:, -1:]) if window else last > 0

    @staticmethod
    def keep(same, items):
        """``items`` ``[B, ..., L, ...]`` where ``same`` (``[B, ..., L]``) holds, else zero."""
        for _ in range(len(items.shape) - len(same.shape)):
            same = ops.expand_dims(same, -1)
        return ops.where(same, items, ops.zeros_like(items))
