"""TensorBoard callbacks that show what the memories do (no `tf.summary` inside layers)."""

from tf_memlayers.callbacks.associative_memory import MemoryRetrievalHeatmap
from tf_memlayers.callbacks.cache_attention import CacheAttentionCallback
from tf_memlayers.callbacks.heatmap import heatmap_image, matrix_markdown, write_heatmap
from tf_memlayers.callbacks.window_attention import WindowAttentionCallback

__all__ = [
    "CacheAttentionCallback",
    "MemoryRetrievalHeatmap",
    "WindowAttentionCallback",
    "heatmap_image",
    "matrix_markdown",
    "write_heatmap",
]
