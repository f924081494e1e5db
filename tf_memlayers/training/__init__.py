"""Training utilities shared by the example scripts: strategies, resumable runs, reports."""

from tf_memlayers.callbacks.backup import RunBackup
from tf_memlayers.callbacks.learning_rate import ResumableReduceLROnPlateau
from tf_memlayers.training.distributed import (
    evaluate,
    fit_works_under,
    is_chief,
    train,
    train_with_custom_loop,
    worker_directory,
)
from tf_memlayers.training.evaluation import evaluate_language_model
from tf_memlayers.training.reporting import write_metrics
from tf_memlayers.training.resumable import (
    resolved_settings,
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
    "evaluate",
    "evaluate_language_model",
    "fit_works_under",
    "is_chief",
    "make_strategy",
    "resolved_settings",
    "resumable_callbacks",
    "resumed_epoch",
    "run_history",
    "run_settings",
    "run_workdir",
    "train",
    "train_with_custom_loop",
    "worker_directory",
    "write_metrics",
]
