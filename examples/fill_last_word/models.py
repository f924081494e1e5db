"""The paper's model and the reference code's, from `build_fill_last_word_model`'s layers."""

import keras

from tf_memlayers.layers import AttentionPooling, HeapCacheAttention
from tf_memlayers.models import build_fill_last_word_model, compile_fill_last_word_model


def memory_layers(config, sequence_length):
    """The ``pooling`` and ``cache`` layers of `build_fill_last_word_model` that ``config``
    names (`None` for none): the paper's attention pooling, or the reference code's plain sum
    over every step with ``faithful_to_code``; a `HeapCacheAttention` of ``cache_size``
    states, its read `cache_query`, the read's gate starting at 1 with the dot read, else
    Glorot uniform as in the reference code.

    Example:

    >>> import types
    >>> config = types.SimpleNamespace(
    ...     pooling="attention", attention_units=8, faithful_to_code=False, cache_size=16,
    ...     cache_gate_init=None, policy="heap", query=None)
    >>> pooling, cache = memory_layers(config, sequence_length=40)
    >>> type(pooling).__name__, cache.cache_size, cache.query
    ('AttentionPooling', 16, 'dot')
    >>> config.faithful_to_code = True  # the reference code's read: one for every example
    >>> memory_layers(config, sequence_length=40)[1].query
    'none'
    """
    if config.pooling == "last":
        pooling = None
    elif config.faithful_to_code:
        pooling = keras.Sequential(
            [keras.layers.GlobalAveragePooling1D(), keras.layers.Rescaling(float(sequence_length))]
        )
    else:
        pooling = AttentionPooling(config.attention_units)
    cache = None
    if config.cache_size:
        cache = HeapCacheAttention(
            config.cache_size,
            config.attention_units,
            policy=config.policy,
            query=cache_query(config),
            mask_empty=not config.faithful_to_code,
            gate_initializer=cache_gate_init(config),
        )
    return pooling, cache


def cache_query(config):
    """The cache read ``--query`` names; by default ``"dot"`` (the read that finds one earlier
    example), or ``"none"`` (the reference code's) with ``--faithful-to-code``."""
    return config.query or ("none" if config.faithful_to_code else "dot")


def cache_gate_init(config):
    """The initializer of the cache read's gate ``--cache-gate-init`` names; by default
    ``"ones"`` with the dot read (`cache_query`), else ``"glorot_uniform"`` (the reference
    code's)."""
    return config.cache_gate_init or ("ones" if cache_query(config) == "dot" else "glorot_uniform")


def build_model(config, vocabulary_size, sequence_length, embeddings=None):
    """The compiled last-word model of ``config`` (the command line's options): LSTM,
    `memory_layers`, L2 penalty, and Adam as in the paper or the reference code."""
    model = build_fill_last_word_model(
        vocabulary_size,
        *memory_layers(config, sequence_length),
        sequence_length=sequence_length,
        embedding_dim=config.embedding_dim,
        units=config.units,
        embeddings=embeddings,
        weight_decay=config.weight_decay,
        faithful_to_code=config.faithful_to_code,
    )
    compile_fill_last_word_model(
        model,
        config.faithful_to_code,
        config.learning_rate,
        clipnorm=config.clipnorm,
        jit_compile=config.jit_compile,
    )
    return model
