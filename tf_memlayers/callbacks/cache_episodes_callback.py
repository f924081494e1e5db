"""Training and evaluating a model with heap caches on episodes, each starting with an empty
cache."""

import keras

from tf_memlayers.models.heap_cache_model import cache_attention_layers


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
        batches_per_episode: training batches per episode.
        evaluation_facts: for each evaluation batch, the model inputs to write to the caches
            first (``None``: evaluation leaves the caches alone).
    """

    def __init__(self, batches_per_episode, evaluation_facts=None):
        super().__init__()
        self.batches_per_episode = int(batches_per_episode)
        self.evaluation_facts = evaluation_facts

    def _reset(self):
        for layer in cache_attention_layers(self.model):
            layer.reset_cache()

    def on_train_batch_begin(self, batch, logs=None):
        if batch % self.batches_per_episode == 0:
            self._reset()

    def on_test_batch_begin(self, batch, logs=None):
        if self.evaluation_facts is not None:
            self._reset()
            self.model.write_caches(self.evaluation_facts[batch])
