"""Training and evaluating a model with heap caches on episodes, each starting with an empty
cache."""

import keras

from tf_memlayers._validation import check_int, check_one_batch_per_call
from tf_memlayers.models.heap_cache_model import cache_attention_layers

_OWNER = "CacheEpisodesCallback"


class CacheEpisodesCallback(keras.callbacks.Callback):
    """Trains and evaluates on episodes: each starts with an empty cache.

    Training batches come in episodes of ``batches_per_episode`` batches (e.g. the facts, then
    the questions about them): every cache is emptied before the first batch of each episode,
    so the questions can only be answered from the facts of their own episode. Before each
    evaluation batch ``i`` (the questions of evaluation episode ``i``) every cache is emptied
    and ``evaluation_facts[i]`` are written to it (`HeapCacheModel.write_caches`: the states
    the facts produce, without a training step). Pass the callback to ``fit`` (it then also
    applies to the validation at the end of each epoch) and to ``evaluate``.

    Args:
        batches_per_episode: training batches per episode, a positive integer.
        evaluation_facts: for each evaluation batch, the model inputs to write to the caches
            first (a list, or an array indexed by batch; ``None``: evaluation leaves the caches
            alone).

    Raises:
        TypeError: If ``batches_per_episode`` is not an integer, or ``evaluation_facts``
            cannot be indexed by batch.
        ValueError: If ``batches_per_episode`` is below 1.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import HeapCacheAttention
    >>> from tf_memlayers.callbacks import CacheEpisodesCallback
    >>> from tf_memlayers.models import build_fill_last_word_model, compile_fill_last_word_model
    >>> model = build_fill_last_word_model(30, cache=HeapCacheAttention(16, 4),
    ...                                    sequence_length=6, embedding_dim=4, units=8)
    >>> model = compile_fill_last_word_model(model)
    >>> x = np.random.default_rng(0).integers(1, 30, (16, 6))
    >>> # Episodes of two batches of 4: the cache is emptied before batches 0 and 2.
    >>> _ = model.fit(x, x[:, -1], batch_size=4, verbose=0,
    ...               callbacks=[CacheEpisodesCallback(batches_per_episode=2)])
    >>> int(model.get_layer("cache_attention").fill_count())  # the last episode's 8 rows
    8
    """

    def __init__(self, batches_per_episode, evaluation_facts=None):
        super().__init__()
        self.batches_per_episode = check_int(
            "batches_per_episode", batches_per_episode, 1, owner=_OWNER
        )
        indexable = hasattr(evaluation_facts, "__len__") and hasattr(
            evaluation_facts, "__getitem__"
        )
        if evaluation_facts is not None and (not indexable or isinstance(evaluation_facts, str)):
            raise TypeError(
                f"{_OWNER}: `evaluation_facts` must be a list of model inputs, one per "
                f"evaluation batch, or None; got {evaluation_facts!r}."
            )
        self.evaluation_facts = evaluation_facts

    def _reset(self):
        for layer in cache_attention_layers(self.model):
            layer.reset_cache()

    def on_train_begin(self, logs=None):
        what = "empties the caches at the first batch of each episode"
        check_one_batch_per_call(self.model, "batches_per_episode", what, _OWNER)
        # Keras counts an epoch's batches from 0, and with `steps_per_epoch` it goes on reading
        # the data where the last epoch stopped: only whole episodes keep the two in step.
        steps = (self.params or {}).get("steps")
        if steps and steps % self.batches_per_episode:
            raise ValueError(
                f"{_OWNER}: an epoch of {steps} batches (`steps_per_epoch`, or the data's "
                f"length) must hold whole episodes of batches_per_episode="
                f"{self.batches_per_episode} batches: episodes would run across epochs."
            )

    def on_train_batch_begin(self, batch, logs=None):
        if batch % self.batches_per_episode == 0:
            self._reset()

    def on_test_begin(self, logs=None):
        if self.evaluation_facts is None:
            return
        what = "are written to the caches before each evaluation batch"
        check_one_batch_per_call(self.model, "evaluation_facts", what, _OWNER)
        if not hasattr(self.model, "write_caches"):
            raise ValueError(
                f"{_OWNER}: `evaluation_facts` are written with HeapCacheModel.write_caches; "
                f"the model is a {type(self.model).__name__}, without it (build it as a "
                "HeapCacheModel, as build_fill_last_word_model does with a cache)."
            )

    def on_test_batch_begin(self, batch, logs=None):
        if self.evaluation_facts is not None:
            if batch >= len(self.evaluation_facts):
                raise ValueError(
                    f"{_OWNER}: `evaluation_facts` has facts for {len(self.evaluation_facts)} "
                    f"evaluation batches; batch {batch} has none (give one per batch)."
                )
            self._reset()
            self.model.write_caches(self.evaluation_facts[batch])
