"""`CacheEpisodesCallback`: it empties the caches at the start of each training episode, and
before each evaluation batch writes that batch's facts to them (on every backend)."""

import keras
import numpy as np
import pytest

from tests.last_word_models import small_model, token_batch
from tests.support import as_numpy
from tf_memlayers.callbacks import CacheEpisodesCallback
from tf_memlayers.layers.cache_attention.heap_cache_attention import HeapCacheAttention
from tf_memlayers.models.fill_last_word import compile_fill_last_word_model
from tf_memlayers.models.heap_cache_model import HeapCacheModel


def test_episodes_start_with_an_empty_cache_and_evaluation_writes_its_facts():
    rng = np.random.default_rng(4)
    model = small_model(pooling="attention", cache_size=16, query="dot")
    compile_fill_last_word_model(model)
    # Four batches of 4 in order: facts, questions, facts, questions.
    x, y = token_batch(rng, 16)
    facts = [token_batch(rng, 3)[0], token_batch(rng, 5)[0]]
    questions, answers = token_batch(rng, 4)  # two evaluation batches of 2
    episodes = CacheEpisodesCallback(2, evaluation_facts=facts)
    # The cache at the start of every training and evaluation batch.
    train, test = [], []
    # (A callback's `model`: on JAX, reading it attaches the state of the step running.)
    cache = lambda: as_numpy(probe.model.get_layer("cache_attention").cache)  # noqa: E731
    losses = []  # the evaluation's loss after its first batch: that batch's
    probe = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs=None: train.append(cache()),
        on_test_batch_begin=lambda batch, logs=None: test.append(cache()),
        on_test_batch_end=lambda batch, logs=None: losses.append(logs["loss"]),
    )
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[episodes, probe])
    filled = [int(np.any(cache != 0, axis=-1).sum()) for cache in train]
    assert filled == [0, 4, 0, 4]  # emptied before each episode's facts
    model.evaluate(questions, answers, batch_size=2, verbose=0, callbacks=[episodes, probe])
    states = keras.Function(model.input, model.get_layer("cache_attention").input)
    assert len(test) == len(facts)
    for cache, written in zip(test, facts):
        rows, expected = cache[np.any(cache != 0, axis=-1)], as_numpy(states(written))
        assert len(rows) == len(expected)  # those facts and nothing else
        sort = lambda a: np.sort(a, axis=0)  # noqa: E731
        np.testing.assert_allclose(sort(rows), sort(expected), rtol=1e-5, atol=1e-6)
    # The first batch was scored with its facts in the cache (and an empty cache scores it
    # otherwise): the step saw the write, not only the variable.
    layer = model.get_layer("cache_attention")
    for written, close in ((facts[0], True), (None, False)):
        layer.reset_cache()
        if written is not None:
            model.write_caches(written)
        loss = model.evaluate(questions[:2], answers[:2], verbose=0, return_dict=True)["loss"]
        assert np.isclose(loss, losses[0], rtol=1e-5) == close, (loss, losses[0])


def test_every_cache_is_emptied_at_the_first_batch_of_each_episode_only():
    pytest.raises(ValueError, CacheEpisodesCallback, 0).match("`batches_per_episode` must be >= 1")
    pytest.raises(TypeError, CacheEpisodesCallback, 2.0).match("`batches_per_episode` must be an")
    for bad in (3, "abc", {1, 2}):  # neither a sequence nor a dict
        pytest.raises(TypeError, CacheEpisodesCallback, 1, bad).match("`evaluation_facts` must be")
    rng, inputs = np.random.default_rng(5), keras.Input((4,))
    first, second = HeapCacheAttention(5, 3, name="first"), HeapCacheAttention(5, 3, name="second")
    model, episodes = HeapCacheModel(inputs, second(first(inputs))), CacheEpisodesCallback(3)
    episodes.set_model(model)
    emptied = []
    for batch in range(7):
        model.write_caches(rng.normal(size=(2, 4)).astype("float32"))
        episodes.on_train_batch_begin(batch)
        counts = {int(first.fill_count()), int(second.fill_count())}
        assert len(counts) == 1  # both caches alike
        emptied.append(counts == {0})
    assert emptied == [batch % 3 == 0 for batch in range(7)]
    # Without evaluation facts an evaluation leaves the caches as they are.
    model.write_caches(rng.normal(size=(2, 4)).astype("float32"))
    before = as_numpy(first.cache)
    episodes.on_test_batch_begin(0)
    np.testing.assert_array_equal(as_numpy(first.cache), before)
    episodes = CacheEpisodesCallback(3, evaluation_facts=[np.zeros((2, 4), "float32")])
    episodes.set_params({"steps": 4})  # epochs of 4 batches would split the episodes of 3
    for target, call, message in [
        (model, lambda: episodes.on_test_batch_begin(1), "for 1 evaluation batches; batch 1"),
        (keras.Model(inputs, second(first(inputs))), episodes.on_test_begin, "is a Functional"),
        (model, episodes.on_train_begin, "`batches_per_episode` empties .*_execution=2 "),
        (model, episodes.on_test_begin, "`evaluation_facts` are .*_execution=2 "),
        (model, episodes.on_train_begin, "epoch of 4 batches .* batches_per_episode=3 "),
    ]:
        episodes.set_model(target)
        target.compile("sgd", "mse", steps_per_execution=2 if "execution=2" in message else 1)
        pytest.raises(ValueError, call).match(message)
