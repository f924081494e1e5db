"""What trains and generates over the two replicas of a `tf.distribute.MirroredStrategy` (two
logical CPUs, set before TensorFlow starts: in a process of its own, one for all the checks)."""

import numpy as np

from tests.support import assert_close, json_report_of_script

SCRIPT = """
import json
import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from keras import layers
from tf_memlayers import AssociativeGRU, SequenceCrossentropy, SlidingWindowAttention
from tf_memlayers.layers import HeapCacheAttention
from tf_memlayers.models import build_language_model, build_step_model, generate
from tf_memlayers.training import train
from tf_memlayers.training._custom_loop import train_with_custom_loop

one, two = tf.distribute.get_strategy(), tf.distribute.MirroredStrategy(["cpu:0", "cpu:1"])
report = {"replicas": two.num_replicas_in_sync, "fused_loop": [], "sum_over_time": []}
rng = np.random.default_rng(0)
x, y = rng.normal(size=(8, 6, 5)).astype("float32"), rng.normal(size=(8, 8)).astype("float32")
for fused in (False, True):
    keras.utils.set_random_seed(1)
    with two.scope():
        inputs = keras.Input((6, 5))
        model = keras.Model(inputs, AssociativeGRU(8, num_copies=3, fused_loop=fused)(inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    report["fused_loop"].append(model.predict(x, verbose=0).tolist())
x = np.array([[1, 2, 3, 4, 5, 0], [6, 1, 0, 0, 0, 0], [2, 2, 2, 0, 0, 0], [3, 4, 5, 6, 1, 2]])
# A regularizer's share on each replica, under `fit` and the custom loop, which builds a model
# without an `Input` from the first batch as `fit` does.
for strategy, run in ((one, train), (two, train), (two, train_with_custom_loop)):
    keras.utils.set_random_seed(1)
    with strategy.scope():
        # Each replica's activity regularization its own (a thread's list), its loss weighed.
        dense = layers.Dense(7, kernel_regularizer="l2", activity_regularizer="l2")
        model = keras.Sequential([layers.Embedding(7, 4, mask_zero=True), dense])
        loss = SequenceCrossentropy("sum_over_time")
        model.compile(keras.optimizers.SGD(0.1), loss, loss_weights=0.5)
    history = run(model, tf.data.Dataset.from_tensor_slices((x, x)).batch(4), 2, verbose=0)
    weights = [w.tolist() for w in model.get_weights()]
    report["sum_over_time"].append([history.history["loss"], weights])
with two.scope():
    options = dict(units=6, embedding_dim=4, stateful=False, sequence_length=None)
    model = build_language_model(17, SlidingWindowAttention(window=2), **options)
    step_model = build_step_model(model)
    caches = [HeapCacheAttention(8, 3) for _ in range(2)]
    for cache in caches:
        cache.build((None, 2))
prompt = np.array([[3, 5], [7, 1], [2, 2]])
greedy = generate(step_model, prompt, 4, temperature=0)
logits = model(np.concatenate([prompt, greedy[:, :-1]], axis=1), training=False)
report["generated"] = [greedy.tolist(), np.argmax(logits.numpy()[:, 1:], axis=-1).tolist()]
for cache, shift in zip(caches, (0, 100)):
    cache.insert(rng.normal(size=(4, 2)).astype("float32") + shift)
report["caches"] = [cache.cache.numpy().tolist() for cache in caches]
print(json.dumps(report))
"""


def test_training_and_generation_over_two_replicas():
    report = json_report_of_script(SCRIPT)
    assert report["replicas"] == 2
    # The AM-GRU: two training epochs on two replicas end in the same model with either loop.
    assert_close(*report["fused_loop"], atol=1e-5)
    # A masked sum over time trains as on one replica (each replica holds sequences of other
    # lengths: a mask scaled to each replica's count of tokens made them differ).
    for pair in (report["sum_over_time"][:2], report["sum_over_time"][1:]):
        assert_close(*pair, atol=1e-6)
    # A step model built under the strategy generates three rows on two replicas whole (Keras's
    # predict_on_batch would split them): each greedy token is the full model's most likely.
    np.testing.assert_array_equal(*report["generated"])
    # Two caches of one shape, each given 4 rows (near 0, near 100), hold those rows alone.
    for shift, cache in zip((0, 100), np.array(report["caches"])):
        assert len(rows := cache[cache.any(axis=1)]) == 4 and np.all(np.abs(rows - shift) < 10)
