"""Memory layers and RNN cells: one folder per mechanism (``window_attention``,
``associative_memory``, ``cache_attention``, ``memory_attention``), and the parts they share."""

from tf_memlayers.layers.associative_memory.am_gru import AssociativeGRU
from tf_memlayers.layers.associative_memory.am_gru_cell import AssociativeGRUCell
from tf_memlayers.layers.associative_memory.dual_am_gru import (
    DualAssociativeGRU,
    DualAssociativeGRUCell,
)
from tf_memlayers.layers.associative_memory.dual_associative_encoder import (
    DualAssociativeEncoder,
)
from tf_memlayers.layers.associative_memory.memory_cell import AssociativeMemoryCell
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.layers.cudnn import lstm_use_cudnn
from tf_memlayers.layers.dropout import PhiloxDropout
from tf_memlayers.layers.memory_attention.attention_wrapper import AttentionRNN, AttentionWrapper
from tf_memlayers.layers.memory_attention.word_by_word_attention import WordByWordAttention
from tf_memlayers.layers.resettable_rnn import ResettableCell, ResettableRNN
from tf_memlayers.layers.tied_embedding import TiedEmbedding
from tf_memlayers.layers.window_attention.key_value_predict_split import KeyValuePredictSplit
from tf_memlayers.layers.window_attention.ngram import NGramConcat, NGramConcatCell
from tf_memlayers.layers.window_attention.sliding_window_attention import (
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)

__all__ = [
    "AssociativeGRU",
    "AssociativeGRUCell",
    "AssociativeMemoryCell",
    "AttentionPooling",
    "AttentionRNN",
    "AttentionWrapper",
    "DualAssociativeEncoder",
    "DualAssociativeGRU",
    "DualAssociativeGRUCell",
    "HeapCacheAttention",
    "KeyValuePredictSplit",
    "NGramConcat",
    "NGramConcatCell",
    "PhiloxDropout",
    "ResettableCell",
    "ResettableRNN",
    "SlidingWindowAttention",
    "SlidingWindowAttentionCell",
    "TiedEmbedding",
    "WordByWordAttention",
    "lstm_use_cudnn",
]
