"""Losses."""

from tf_memlayers.losses.sequence_crossentropy import LOSS_REDUCTIONS, SequenceCrossentropy

__all__ = ["LOSS_REDUCTIONS", "SequenceCrossentropy"]
