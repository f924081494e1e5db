"""Training utilities shared by the example scripts: strategies, resumable runs, reports."""

from tf_memlayers.training.reporting import write_metrics
from tf_memlayers.training.resumable import (
    ResumableReduceLROnPlateau,
    RunBackup,
    resumable_callbacks,
    resumed_epoch,
    run_history,
    run_settings,
    run_workdir,
)
from tf_memlayers.training.strategy import make_strategy

__all__ = [
    "ResumableReduceLROnPlateau",
    "RunBackup",
    "make_strategy",
    "resumable_callbacks",
    "resumed_epoch",
    "run_history",
    "run_settings",
    "run_workdir",
    "write_metrics",
]
