"""Memory layers and RNN cells, one mechanism per module."""

from tf_memlayers.layers.associative_gru import AssociativeGRU
from tf_memlayers.layers.associative_gru_cell import AssociativeGRUCell
from tf_memlayers.layers.associative_memory import AssociativeMemoryCell
from tf_memlayers.layers.attention_pooling import AttentionPooling
from tf_memlayers.layers.dual_associative_gru import (
    DualAssociativeGRU,
    DualAssociativeGRUCell,
    premise_sharing_clone_function,
)
from tf_memlayers.layers.heap_cache_attention import HeapCacheAttention
from tf_memlayers.layers.key_value_predict_split import KeyValuePredictSplit
from tf_memlayers.layers.ngram import NGramConcat, NGramConcatCell
from tf_memlayers.layers.sliding_window_attention import (
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)
from tf_memlayers.layers.tied_embedding import TiedEmbedding

__all__ = [
    "AssociativeGRU",
    "AssociativeGRUCell",
    "AssociativeMemoryCell",
    "AttentionPooling",
    "DualAssociativeGRU",
    "DualAssociativeGRUCell",
    "HeapCacheAttention",
    "KeyValuePredictSplit",
    "NGramConcat",
    "NGramConcatCell",
    "SlidingWindowAttention",
    "SlidingWindowAttentionCell",
    "TiedEmbedding",
    "premise_sharing_clone_function",
]
