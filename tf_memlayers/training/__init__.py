"""Training utilities shared by the example scripts: strategies, resumable runs, reports."""

from tf_memlayers.training.reporting import write_metrics
from tf_memlayers.training.resumable import resumable_callbacks
from tf_memlayers.training.strategy import make_strategy

__all__ = ["make_strategy", "resumable_callbacks", "write_metrics"]
