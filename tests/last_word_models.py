"""The last-word model of Gaffney for the package's tests, made by `build_fill_last_word_model`
with the paper's or the reference code's pooling and cache, and batches of its tokens."""

import keras
import numpy as np

from tf_memlayers.layers.cache_attention.attention_pooling import AttentionPooling
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models.fill_last_word import build_fill_last_word_model


def small_model(pooling=None, cache_size=None, query="none", faithful_to_code=False, **kwargs):
    """The builder's model over 10 steps of a 30-word vocabulary, with the pooling named by
    ``pooling`` (``"attention"``: the paper's, or the reference code's sum) and a cache of
    ``cache_size`` states read by ``query``, as the paper or the reference code makes them."""
    kwargs.setdefault("embedding_dim", 6)
    kwargs.setdefault("units", 8)
    if pooling == "attention":
        time_sum = [keras.layers.GlobalAveragePooling1D(), keras.layers.Rescaling(10.0)]
        pooling = keras.Sequential(time_sum) if faithful_to_code else AttentionPooling(4)
    cache = None
    if cache_size:
        gate = "ones" if query == "dot" else "glorot_uniform"
        options = dict(query=query, mask_empty=not faithful_to_code, gate_initializer=gate)
        cache = HeapCacheAttention(cache_size, 4, **options)
    pooling = pooling if pooling != "last" else None
    kwargs.update(sequence_length=10, faithful_to_code=faithful_to_code)
    return build_fill_last_word_model(30, pooling, cache, **kwargs)


def token_batch(rng, count=16):
    x = rng.integers(2, 30, (count, 10)).astype(np.int32)
    x[:, :3] = 0
    return x, rng.integers(2, 30, count).astype(np.int32)
