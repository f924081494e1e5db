"""Callbacks that show in TensorBoard what the memories do (no `tf.summary` inside layers),
and the state resets of stateful language models."""

from tf_memlayers.callbacks.associative_memory import MemoryRetrievalHeatmap
from tf_memlayers.callbacks.cache_attention import CacheAttentionCallback
from tf_memlayers.callbacks.heatmap import heatmap_image, matrix_markdown, write_heatmap
from tf_memlayers.callbacks.memory_attention import PairAttentionHeatmap
from tf_memlayers.callbacks.state_reset import StateResetCallback, reset_language_model_states
from tf_memlayers.callbacks.window_attention import WindowAttentionCallback

__all__ = [
    "CacheAttentionCallback",
    "MemoryRetrievalHeatmap",
    "PairAttentionHeatmap",
    "StateResetCallback",
    "WindowAttentionCallback",
    "heatmap_image",
    "matrix_markdown",
    "reset_language_model_states",
    "write_heatmap",
]
