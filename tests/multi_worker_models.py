"""Small models trained under a strategy by `examples.harness.training.train`, for
tests/test_multi_worker.py: each worker of a local cluster runs them (through
tests/multi_worker_job.py) and the test runs them in one process on the same global batches.
"""

import keras
import numpy as np
import tensorflow as tf

from examples.harness.training import make_strategy, train
from examples.language_modeling import generated_lm, lm_batches
from examples.language_modeling.memories import language_model
from tf_memlayers.layers import AttentionPooling, HeapCacheAttention
from tf_memlayers.models import HeapCacheModel
from tf_memlayers.models.language_model import compile_language_model

LM_ROWS = 4  # global batch: LM_ROWS // replicas rows on each replica
LM_BATCHES = 5
CACHE_BATCH = 8


def weights_of(model):
    """``{variable path: value}`` of every weight of ``model`` (the caches included)."""
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


def lm_data():
    """The first batches of the generated corpus's training and validation splits."""
    corpus = generated_lm.generate_copy_corpus(1500, 200, 200, seed=0)

    def first(stream, count):
        batches = lm_batches.make_bptt_batches(stream, LM_ROWS, 10)
        return lm_batches.BPTTBatches(
            batches.inputs[:count],
            batches.targets[:count],
            batches.weights[:count],
            batches.resets[:count],
        ).dataset()

    return len(corpus.vocabulary), first(corpus.train, LM_BATCHES), first(corpus.valid, 2)


def train_language_model(strategy):
    """The window-attention language model's training step (each row on its own: no carried
    states), with a clipping threshold that the first steps' gradients exceed."""
    keras.utils.set_random_seed(7)
    vocabulary, train_data, valid_data = lm_data()
    with strategy.scope():
        model = language_model(
            vocabulary,
            kind="attention",
            units=16,
            embedding_dim=8,
            window=3,
            sequence_length=10,
            stateful=False,
        )
        compile_language_model(model, 0.01, 0.05, jit_compile=False)  # clipping at 0.05
    history = train(model, train_data, epochs=2, validation_data=valid_data, verbose=0)
    return weights_of(model), {"history": history.history}


def cache_data():
    rng = np.random.default_rng(3)
    x = rng.integers(1, 20, (4 * CACHE_BATCH, 6)).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, x[:, -1])).batch(CACHE_BATCH)


def train_cache_model(strategy):
    """A `HeapCacheModel` (GRU, `AttentionPooling`, `HeapCacheAttention`): its cache is
    written after every step with the global batch's states."""
    keras.utils.set_random_seed(11)
    with strategy.scope():
        tokens = keras.Input((6,), dtype="int32")
        states = keras.layers.GRU(8, return_sequences=True)(keras.layers.Embedding(20, 8)(tokens))
        state = AttentionPooling(4)(states)
        state = HeapCacheAttention(cache_size=8, attention_units=4, name="cache")(state)
        model = HeapCacheModel(tokens, keras.layers.Dense(20)(state))
        model.compile(
            keras.optimizers.Adam(0.01),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            # An object, not "accuracy": its variables exist before the train step is traced.
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=False,
        )
    history = train(model, cache_data(), epochs=1, verbose=0)
    fill = int(np.asarray(model.get_layer("cache").fill_count()))
    return weights_of(model), {"history": history.history, "fill": fill}


def lm_refused(*argv):
    """The PTB example under the multi-worker strategy: its error message (or `None`)."""
    from tests.multi_worker_job import load_example

    try:
        load_example("ptb_memory_lm").main(list(argv))
    except SystemExit as refused:
        # A command-line error about --strategy (status 2): the message of the ValueError
        # it reports.
        if refused.code != 2 or not isinstance(refused.__cause__, ValueError):
            raise
        return str(refused.__cause__)
    return None


def lm_job(*argv):
    refusal = lm_refused(*argv)
    weights, results = train_language_model(make_strategy("multi_worker"))
    return weights, dict(results, refusal=refusal)


def cache_job():
    return train_cache_model(make_strategy("multi_worker"))


JOBS = {"lm": lm_job, "cache": cache_job}
