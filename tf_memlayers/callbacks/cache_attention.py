"""TensorBoard view of a heap cache: attention by heap index (Gaffney Fig. 5) and fill."""

import keras
import numpy as np
import tensorflow as tf

from tf_memlayers.callbacks.heatmap import heatmap_image
from tf_memlayers.models.heap_cache_model import cache_attention_layers


def cache_attention_by_index(model, layer, probe_inputs=None):
    """Mean cache-attention weight of each slot (heap index), as a NumPy ``[K]`` array.

    With ``query="none"`` the weights are the same for every example; with
    ``query="additive"`` they are averaged over the states ``probe_inputs`` produce.
    """
    if layer.query == "none":
        return np.asarray(layer.attention_weights(), dtype=np.float64)
    if probe_inputs is None:
        raise ValueError(
            f"Layer {layer.name!r} reads with query='additive': pass `probe_inputs` so the "
            "weights can be averaged over their states."
        )
    states = keras.Function(model.input, layer.input)(probe_inputs)
    return np.asarray(layer.attention_weights(states), dtype=np.float64).mean(axis=0)


class CacheAttentionCallback(keras.callbacks.Callback):
    """Writes, every epoch, each cache's attention weight by heap index and how full it is.

    The weight curve is drawn on a logarithmic index axis (Gaffney, Fig. 5), under the tag
    ``cache_attention/<layer>``; the fill fraction is the scalar ``cache_fill/<layer>``.

    Args:
        log_dir: TensorBoard directory (a ``cache`` subdirectory is written).
        probe_inputs: model inputs used to average the weights of additive-query caches.
    """

    def __init__(self, log_dir, probe_inputs=None):
        super().__init__()
        self.log_dir = log_dir
        self.probe_inputs = probe_inputs
        self._writer = None

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
