"""Callbacks that show in TensorBoard what the memories do (no `tf.summary` inside layers),
and the state resets of stateful language models.

The TensorBoard callbacks need TensorFlow; `StateResetCallback`, `reset_language_model_states`,
`CacheEpisodesCallback` and `cosine_similarity_matrix` run on every Keras backend. Without
TensorFlow the module imports (``import *`` gives those four), and a TensorBoard callback's name
raises the error that says what needs it.
"""

import importlib.util

from tf_memlayers.callbacks.cache_episodes_callback import CacheEpisodesCallback
from tf_memlayers.callbacks.cosine_similarity_matrix import cosine_similarity_matrix
from tf_memlayers.callbacks.reset_language_model_states import reset_language_model_states
from tf_memlayers.callbacks.state_reset_callback import StateResetCallback

#: The names that need TensorFlow.
TENSORBOARD = (
    "CacheAttentionCallback",
    "MemoryRetrievalHeatmap",
    "PairAttentionHeatmap",
    "WindowAttentionCallback",
    "heatmap_image",
    "matrix_markdown",
    "write_heatmap",
)
__all__ = [
    "CacheAttentionCallback",
    "CacheEpisodesCallback",
    "MemoryRetrievalHeatmap",
    "PairAttentionHeatmap",
    "StateResetCallback",
    "WindowAttentionCallback",
    "cosine_similarity_matrix",
    "heatmap_image",
    "matrix_markdown",
    "reset_language_model_states",
    "write_heatmap",
]

if importlib.util.find_spec("tensorflow") is not None:
    from tf_memlayers.callbacks.cache_attention_callback import CacheAttentionCallback
    from tf_memlayers.callbacks.memory_retrieval_heatmap import MemoryRetrievalHeatmap
    from tf_memlayers.callbacks.pair_attention_heatmap import PairAttentionHeatmap
    from tf_memlayers.callbacks.window_attention_callback import WindowAttentionCallback
    from tf_memlayers.callbacks.write_heatmap import heatmap_image, matrix_markdown, write_heatmap
else:
    __all__ = [name for name in __all__ if name not in TENSORBOARD]  # for `import *`

    def __getattr__(name):
        if name in TENSORBOARD:
            from tf_memlayers._tensorflow import require_tensorflow

            require_tensorflow("tf_memlayers.callbacks (TensorBoard summaries)")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
