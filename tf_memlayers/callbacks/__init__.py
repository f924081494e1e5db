"""Every callback of the package: TensorBoard views of what the memories do (no `tf.summary`
inside layers), learning-rate rules, state resets of stateful language models, and the
callbacks that make a run resumable."""

from tf_memlayers.callbacks.associative_memory import MemoryRetrievalHeatmap
from tf_memlayers.callbacks.backup import RunBackup
from tf_memlayers.callbacks.best_model import BestModelCheckpoint
from tf_memlayers.callbacks.cache_attention import CacheAttentionCallback
from tf_memlayers.callbacks.heatmap import heatmap_image, matrix_markdown, write_heatmap
from tf_memlayers.callbacks.hparams import log_hparams
from tf_memlayers.callbacks.learning_rate import (
    EpochLearningRate,
    ResumableReduceLROnPlateau,
    epoch_learning_rate,
    halve_learning_rate_callback,
)
from tf_memlayers.callbacks.state_reset import StateResetCallback, reset_language_model_states
from tf_memlayers.callbacks.window_attention import WindowAttentionCallback

__all__ = [
    "BestModelCheckpoint",
    "CacheAttentionCallback",
    "EpochLearningRate",
    "MemoryRetrievalHeatmap",
    "ResumableReduceLROnPlateau",
    "RunBackup",
    "StateResetCallback",
    "WindowAttentionCallback",
    "epoch_learning_rate",
    "halve_learning_rate_callback",
    "heatmap_image",
    "log_hparams",
    "matrix_markdown",
    "reset_language_model_states",
    "write_heatmap",
]
