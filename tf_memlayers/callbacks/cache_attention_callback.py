"""`CacheAttentionCallback`: heap caches in training, the TensorBoard view of attention by heap
index (Gaffney Fig. 5) and fill."""

import keras
import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_path
from tf_memlayers.callbacks.write_heatmap import heatmap_image
from tf_memlayers.models.heap_cache_model import cache_attention_layers, like_inputs

tf = require_tensorflow("tf_memlayers.callbacks (TensorBoard summaries)")


def cache_attention_by_index(model, layer, probe_inputs=None):
    """Mean cache-attention weight of each slot (heap index), as a NumPy ``[K]`` array.

    With ``query="none"`` the weights are the same for every example; with
    ``query="additive"`` or ``"dot"`` they are averaged over the states ``probe_inputs``
    produce.
    """
    if layer.query == "none":
        return np.asarray(layer.attention_weights(), dtype=np.float64)
    if probe_inputs is None:
        raise ValueError(
            f"Layer {layer.name!r} reads with query={layer.query!r}: pass `probe_inputs` so "
            "the weights can be averaged over their states."
        )
    states = keras.Function(model.input, layer.input)(like_inputs(model, probe_inputs))
    return np.asarray(layer.attention_weights(states), dtype=np.float64).mean(axis=0)


class CacheAttentionCallback(keras.callbacks.Callback):
    """Writes, every epoch, each cache's attention weight by heap index and how full it is.

    The weight curve is drawn on a logarithmic index axis (Gaffney, Fig. 5), under the tag
    ``cache_attention/<layer>``; the fill fraction is the scalar ``cache_fill/<layer>``.

    Args:
        log_dir: TensorBoard directory (a ``cache`` subdirectory is written).
        probe_inputs: model inputs used to average the weights of caches whose read depends
            on the example (``query="additive"`` or ``"dot"``): needed when the model has
            such a cache. Default: `None`.

    Raises:
        ValueError: When training begins, if the model has no `HeapCacheAttention` layer, or
            a cache that reads with a query and no ``probe_inputs`` were given.

    Example:

    >>> import pathlib, tempfile
    >>> import numpy as np
    >>> from tf_memlayers import HeapCacheAttention
    >>> from tf_memlayers.callbacks import CacheAttentionCallback
    >>> from tf_memlayers.models import build_fill_last_word_model, compile_fill_last_word_model
    >>> model = build_fill_last_word_model(30, cache=HeapCacheAttention(16, 4),
    ...                                    sequence_length=6, embedding_dim=4, units=8)
    >>> model = compile_fill_last_word_model(model)
    >>> log_dir = tempfile.mkdtemp()
    >>> x = np.random.default_rng(0).integers(1, 30, (8, 6))
    >>> _ = model.fit(x, x[:, -1], verbose=0, callbacks=[CacheAttentionCallback(log_dir)])
    >>> [path.name for path in pathlib.Path(log_dir).iterdir()]
    ['cache']
    """

    def __init__(self, log_dir, probe_inputs=None):
        super().__init__()
        self.log_dir = check_path("log_dir", log_dir, "CacheAttentionCallback")
        self.probe_inputs = probe_inputs
        self._writer = None

    def on_train_begin(self, logs=None):
        if not (layers := cache_attention_layers(self.model)):
            raise ValueError(
                "CacheAttentionCallback: the model has no HeapCacheAttention layer, so the "
                "callback has no cache to draw."
            )
        queried = [layer.name for layer in layers if layer.query != "none"]
        if queried and self.probe_inputs is None:
            raise ValueError(
                f"CacheAttentionCallback: the caches {queried} read with a query, so their "
                "weights depend on the example: pass `probe_inputs`, the model inputs to "
                "average them over."
            )

    def on_epoch_end(self, epoch, logs=None):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(f"{self.log_dir}/cache")
        layers = cache_attention_layers(self.model)
        with self._writer.as_default():
            for layer in layers:
                weights = cache_attention_by_index(self.model, layer, self.probe_inputs)
                image = heatmap_image(
                    weights[None],
                    title=f"{layer.name}: attention weight by heap index",
                    xlabel="heap index + 1",
                    ylabel="attention weight",
                    log_x=True,
                )
                tag = f"cache_attention/{layer.name}"
                tf.summary.image(tag, image[None], step=epoch)
                top = np.argsort(weights)[::-1][:10]
                table = "| heap index | weight |\n|---|---|\n" + "\n".join(
                    f"| {i} | {weights[i]:.4g} |" for i in top
                )
                tf.summary.text(tag + "/top_slots", table, step=epoch)
                fill = float(np.asarray(layer.fill_count())) / layer.cache_size
                tf.summary.scalar(f"cache_fill/{layer.name}", fill, step=epoch)
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
