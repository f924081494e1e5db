"""Training: ``train`` (``fit``, or a custom loop where ``fit`` fails under several workers),
strategies, resumable runs and metric reports."""

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
    check_run_settings,
    resumable_callbacks,
    resumed_epoch,
    run_history,
)
from tf_memlayers.training.strategy import make_strategy

__all__ = [
    "check_run_settings",
    "evaluate",
    "evaluate_language_model",
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
