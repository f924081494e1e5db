"""Memory layers and RNN cells, one mechanism per module."""

from tf_memlayers.layers.key_value_predict_split import KeyValuePredictSplit
from tf_memlayers.layers.ngram import NGramConcat, NGramConcatCell
from tf_memlayers.layers.sliding_window_attention import (
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)

__all__ = [
    "KeyValuePredictSplit",
    "NGramConcat",
    "NGramConcatCell",
    "SlidingWindowAttention",
    "SlidingWindowAttentionCell",
]
