"""Causal windows over a masked sequence with a carried memory.

The memory mechanisms of Daniluk et al. (2017) read, at step t, the previous L items of a
stream: the valid (unmasked) steps of the sequence so far, preceded by L items carried over
from earlier segments. Padded steps are never part of the stream.

The sequence form works in *compacted* coordinates: the valid steps of each row are moved to
the front (`Compaction`), so the window of the r-th valid step is the contiguous block
``stream[r : r + L]`` of ``stream = [memory ; compacted sequence]``. All windows are then
static offset slices (`offset_windows`), O(T·L) time and memory with no scatter in the
backward pass, and results go back to their original steps with `Compaction.restore`.
Without a mask every step is valid and compaction is the identity.
"""

import tensorflow as tf


class Compaction:
    """Moves the valid steps of every row to the front, keeping their order.

    Args:
        mask: `None` (every step valid) or bool ``[B, T]``.
    """

    def __init__(self, mask):
        self.mask = mask
        if mask is None:
            return
        self.order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), axis=1, stable=True)
        self.rank = tf.cumsum(tf.cast(mask, tf.int32), axis=1, exclusive=True)
        self.total = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)

    def compact(self, sequence):
        """``[B, T, ...]`` -> the same steps with the valid ones first."""
        if self.mask is None:
            return sequence
        return tf.gather(sequence, self.order, batch_dims=1)

    def restore(self, compacted):
        """Inverse of `compact` on valid steps; masked steps get exact zeros (selected, not
        multiplied, so a non-finite value computed there never leaks out)."""
        if self.mask is None:
            return compacted
        restored = tf.gather(compacted, self.rank, batch_dims=1)
        trailing = [1] * (restored.shape.rank - 2)
        keep = tf.reshape(self.mask, tf.concat([tf.shape(self.mask), trailing], 0))
        return tf.where(keep, restored, tf.zeros_like(restored))

    def last(self, stream, window):
        """The last ``window`` items of ``stream = [memory ; compacted]``: the new memory."""
        if self.mask is None:
            return stream[:, -window:] if window else stream[:, :0]
        positions = self.total[:, None] + tf.range(window, dtype=tf.int32)
        return tf.gather(stream, positions, batch_dims=1)


def offset_windows(stream, window):
    """``[B, L + T, ...]`` stream -> ``[B, T, L, ...]`` windows, oldest first.

    Window position i of step r is ``stream[:, r + i]``: the L items before the r-th step.
    """
    steps = tf.shape(stream)[1] - window
    if window == 0:
        return tf.expand_dims(stream, 2)[:, :, :0]
    return tf.stack([stream[:, i : i + steps] for i in range(window)], axis=2)
