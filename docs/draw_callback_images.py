"""Draws the example images of the mechanism pages with the TensorBoard callbacks' own code.

Each callback runs on a small model for one epoch end, writes its TensorBoard event file into a
temporary folder, and the image it logged is copied out as a PNG into ``docs/images/``:

* ``window_attention_probe.png``: `WindowAttentionCallback` on a small window-attention
  language model trained for a few epochs on the generated copy corpus (a span of words,
  ``again``, the span repeated);
* ``memory_retrieval.png``: `MemoryRetrievalHeatmap` on a small, untrained Dual AM-GRU
  SNLI model;
* ``cache_attention_by_index.png``: `CacheAttentionCallback` on a small last-word model whose
  heap cache of 255 slots was filled with random states.

Run from the repository root: ``python docs/draw_callback_images.py``. It takes about a minute
on a CPU.
"""

import os
import pathlib
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

IMAGES = ROOT / "docs" / "images"


def logged_image(log_dir, tag):
    """The PNG bytes of the last image logged under ``tag`` below ``log_dir``."""
    found = None
    for path in sorted(pathlib.Path(log_dir).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == tag:
                    found = tf.make_ndarray(value.tensor)[-1]
    if found is None:
        raise RuntimeError(f"no image {tag!r} under {log_dir}")
    return found


def save(png, name):
    (IMAGES / name).write_bytes(png)
    print(f"wrote docs/images/{name}")


def window_attention(log_dir):
    from examples.language_modeling.input_pipeline import generated_corpus
    from examples.language_modeling.models import language_model
    from tf_memlayers.callbacks import WindowAttentionCallback
    from tf_memlayers.models import compile_language_model

    corpus = generated_corpus(200_000, seed=0)
    size = len(corpus.vocabulary)
    options = dict(units=64, embedding_dim=32, window=5, stateful=False)
    model = language_model(size, "attention", sequence_length=20, **options)
    compile_language_model(model, jit_compile=False)
    train = corpus.splits["train"][0]
    ids = train[: len(train) // 21 * 21].reshape(-1, 21)
    keras.utils.set_random_seed(0)
    model.fit(ids[:, :-1], ids[:, 1:], batch_size=32, epochs=8, verbose=0)
    probe = language_model(
        size, "attention", sequence_length=None, return_attention_scores=True, **options
    )
    valid = corpus.splits["valid"][0][:4_000]
    start = int(np.flatnonzero(valid == corpus.vocabulary.index("<eos>"))[3]) + 1
    tokens = valid[start : start + 12]
    callback = WindowAttentionCallback(
        probe,
        log_dir,
        tokens,
        corpus.decode(tokens),
        valid[: len(valid) // 40 * 40].reshape(-1, 40)[:32],
        window=5,
    )
    callback.set_model(model)
    callback.on_epoch_end(0)
    callback.on_train_end()
    save(
        logged_image(f"{log_dir}/attention", "window_attention/probe_sentence"),
        "window_attention_probe.png",
    )


def memory_retrieval(log_dir):
    from tf_memlayers.callbacks import MemoryRetrievalHeatmap
    from tf_memlayers.layers import ConditionalEncoder, DualAssociativeEncoder
    from tf_memlayers.models import build_snli_model

    keras.utils.set_random_seed(0)
    words = "a man plays the guitar on stage person is playing music"
    vocabulary = ["<pad>", "<unk>", *words.split()]
    init = keras.initializers.RandomUniform(-0.5, 0.5, seed=keras.random.SeedGenerator(123))
    encoder = ConditionalEncoder(
        [
            DualAssociativeEncoder(
                32, num_copies=4, seed=123, kernel_initializer=init, return_sequences=True
            ),
            keras.layers.GRU(
                32, kernel_initializer=init, recurrent_initializer=init, return_state=True
            ),
        ]
    )
    model = build_snli_model(
        len(vocabulary), encoder, embedding_dim=16, kernel_initializer=init, name="snli"
    )
    callback = MemoryRetrievalHeatmap(
        log_dir,
        "a man plays the guitar on stage".split(),
        "a person is playing music".split(),
        vocabulary,
    )
    callback.set_model(model)
    callback.on_epoch_end(0)
    save(logged_image(f"{log_dir}/memory", "memory/retrieval"), "memory_retrieval.png")


def cache_attention(log_dir):
    from tf_memlayers import AttentionPooling, HeapCacheAttention
    from tf_memlayers.callbacks import CacheAttentionCallback
    from tf_memlayers.models import build_fill_last_word_model
    from tf_memlayers.models.heap_cache_model import cache_attention_layers

    keras.utils.set_random_seed(0)
    model = build_fill_last_word_model(
        50,
        AttentionPooling(8),
        HeapCacheAttention(255, 8),
        sequence_length=8,
        embedding_dim=8,
        units=16,
    )
    layer = cache_attention_layers(model)[0]
    rng = np.random.default_rng(0)
    for _ in range(8):
        layer.insert(rng.normal(size=(64, 16)).astype("float32"))
    callback = CacheAttentionCallback(log_dir)
    callback.set_model(model)
    callback.on_epoch_end(0)
    callback.on_train_end()
    save(
        logged_image(f"{log_dir}/cache", f"cache_attention/{layer.name}"),
        "cache_attention_by_index.png",
    )


if __name__ == "__main__":
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for draw in (window_attention, memory_retrieval, cache_attention):
            draw(f"{folder}/{draw.__name__}")
