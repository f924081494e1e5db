"""What the examples' runs share to train: ``train`` (``fit``, or a custom loop where ``fit``
fails under several workers), strategies, resumable runs (backups, the best model, the
learning-rate rules that resume), hyperparameters in TensorBoard and metric reports."""

from examples.harness.training.distributed import (
    evaluate,
    fit_works_under,
    is_chief,
    train,
    train_with_custom_loop,
    worker_directory,
)
from examples.harness.training.reporting import write_metrics
from examples.harness.training.resumable import (
    check_run_settings,
    resumable_callbacks,
    resumed_epoch,
    run_history,
)
from examples.harness.training.strategy import make_strategy

__all__ = [
    "check_run_settings",
    "evaluate",
    "fit_works_under",
    "is_chief",
    "make_strategy",
    "resumable_callbacks",
    "resumed_epoch",
    "run_history",
    "train",
    "train_with_custom_loop",
    "worker_directory",
    "write_metrics",
]
