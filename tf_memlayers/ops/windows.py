"""Causal windows over a masked sequence with a carried memory.

The memory mechanisms of Daniluk et al. (2017) read, at step t, the previous L items of a
stream: the valid (unmasked) steps of the sequence so far, preceded by L items carried over
from earlier segments. Padded steps are never part of the stream. All windows are gathered at
once, in O(T·L) time and memory.
"""

import tensorflow as tf


def _exclusive_count(mask):
    """Number of valid steps strictly before each step, ``[B, T]`` int32."""
    return tf.cumsum(tf.cast(mask, tf.int32), axis=1, exclusive=True)


def window_indices(mask, batch, steps, window):
    """Positions in ``[memory ; compacted sequence]`` of the previous ``window`` valid items.

    Args:
        mask: `None` or bool ``[B, T]`` (True for a real step).
        batch, steps: the (possibly dynamic) batch size and number of steps.
        window: L, a Python int.

    Returns:
        ``(indices [B, T, L], last [B, L])``: ``indices[b, t, i]`` is the stream position of the
        item at window position i (oldest first) for step t; ``last`` the positions of the L
        items that form the memory after the sequence.
    """
    offsets = tf.range(window, dtype=tf.int32)
    if mask is None:
        before = tf.broadcast_to(tf.range(steps, dtype=tf.int32)[None], [batch, steps])
        total = tf.fill([batch], steps)
    else:
        before = _exclusive_count(mask)
        total = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    # Stream position of valid item with rank r is window + r; the window of step t holds the
    # ranks before[t] - L .. before[t] - 1, i.e. positions before[t] .. before[t] + L - 1.
    return before[:, :, None] + offsets, total[:, None] + offsets


def compact(sequence, mask):
    """Moves the valid steps of ``sequence`` ``[B, T, ...]`` to the front, keeping their order."""
    if mask is None:
        return sequence
    order = tf.argsort(tf.cast(tf.logical_not(mask), tf.int32), axis=1, stable=True)
    return tf.gather(sequence, order, batch_dims=1)


def stream(sequence, memory, mask):
    """The stream ``[memory ; valid steps of sequence]``, ``[B, L + T, ...]``."""
    return tf.concat([memory, compact(sequence, mask)], axis=1)


def gather_positions(stream_tensor, positions):
    """Gathers stream items at ``positions`` (``[B, ...]`` int32) per batch row."""
    return tf.gather(stream_tensor, positions, batch_dims=1)
