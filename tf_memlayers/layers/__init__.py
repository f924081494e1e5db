"""Memory layers and RNN cells: one folder per mechanism (``window_attention``,
``associative_memory``, ``cache_attention``, ``memory_attention``), and the parts they share."""

from tf_memlayers.layers.associative_memory.associative_gru import AssociativeGRU
from tf_memlayers.layers.associative_memory.associative_gru_cell import AssociativeGRUCell
from tf_memlayers.layers.associative_memory.associative_memory_cell import AssociativeMemoryCell
from tf_memlayers.layers.associative_memory.dual_associative_encoder import (
    DualAssociativeEncoder,
)
from tf_memlayers.layers.associative_memory.dual_associative_gru import (
    DualAssociativeGRU,
    DualAssociativeGRUCell,
)
from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.layers.conditional_encoder import ConditionalEncoder
from tf_memlayers.layers.frozen_batch_normalization import FrozenBatchNormalization
from tf_memlayers.layers.lstm_use_cudnn import lstm_use_cudnn
from tf_memlayers.layers.memory_attention.attention_mechanism import (
    AttentionMechanism,
    monotonic_alignments,
)
from tf_memlayers.layers.memory_attention.attention_rnn import AttentionRNN
from tf_memlayers.layers.memory_attention.attention_wrapper import AttentionWrapper
from tf_memlayers.layers.memory_attention.conditional_attention_encoder import (
    ConditionalAttentionEncoder,
)
from tf_memlayers.layers.memory_attention.word_by_word_attention import WordByWordAttention
from tf_memlayers.layers.philox_dropout import PhiloxDropout
from tf_memlayers.layers.resettable_rnn import ResettableCell, ResettableRNN, dropout_masks
from tf_memlayers.layers.tied_embedding import TiedEmbedding
from tf_memlayers.layers.window_attention.key_value_predict_split import KeyValuePredictSplit
from tf_memlayers.layers.window_attention.ngram_concat import NGramConcat, NGramConcatCell
from tf_memlayers.layers.window_attention.sliding_window_attention import (
    SlidingWindowAttention,
    SlidingWindowAttentionCell,
)

__all__ = [
    "AssociativeGRU",
    "AssociativeGRUCell",
    "AssociativeMemoryCell",
    "AttentionMechanism",
    "AttentionPooling",
    "AttentionRNN",
    "AttentionWrapper",
    "ConditionalAttentionEncoder",
    "ConditionalEncoder",
    "DualAssociativeEncoder",
    "DualAssociativeGRU",
    "DualAssociativeGRUCell",
    "FrozenBatchNormalization",
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
    "dropout_masks",
    "lstm_use_cudnn",
    "monotonic_alignments",
]
