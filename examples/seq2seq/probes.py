"""What the auto-encoders' memories do (Weissenborn 2016, §5.3 and Figure 3), as numbers and
as TensorBoard heatmaps.

For the Dual AM-GRU, Figure 3 is the cosine similarity between what the encoder wrote to its
memory at each source step (x axis) and what the decoder read from that memory at each step
(y axis). The paper found that "the encoder AM-GRU learned very quickly to write everything with
the same key", so that every read resembles the last writes. Two numbers say whether a run
does the same:

* ``key_similarity``: the mean cosine similarity between the keys the encoder wrote under at
  two different steps of a sentence (1: one key for everything);
* ``read_aligned`` and ``read_last``: the share of decoder steps whose read is most similar to
  the write of the word it is about to predict (the diagonal of Figure 3: a memory addressed by
  position), or to the last word's write (the paper's finding).

For the attention decoder the same two shares are read off its alignments (``attention/``
heatmap), and the plain GRU has no memory to probe.
"""

import keras
import numpy as np

from tf_memlayers.callbacks import cosine_similarity_matrix, write_heatmap

# The statistics each kind of model reports, by kind.
STATISTICS = {
    "dual_am_gru": ("key_similarity", "read_aligned", "read_last"),
    "attention": ("read_aligned", "read_last"),
    "gru": (),
}


def key_similarity(keys):
    """The mean cosine similarity between the keys ``[S, n]`` of two different steps; `nan`
    for a one-word sentence."""
    if len(keys) < 2:
        return float("nan")
    similarity = cosine_similarity_matrix(keys, keys)
    return float(similarity[~np.eye(len(keys), dtype=bool)].mean())


def position_shares(matrix):
    """``(aligned, last)`` of a ``[T, S]`` matrix over decoder steps (``T = S + 1``: step
    ``t`` predicts word ``t``, the last step ``<eos>``): the share of the word-predicting steps
    whose largest entry is at source position ``t``, and at the last position."""
    steps = min(matrix.shape[0], matrix.shape[1])
    best = np.argmax(matrix[:steps], axis=1)
    return float(np.mean(best == np.arange(steps))), float(np.mean(best == matrix.shape[1] - 1))


def heatmap_matrix(kind, probe):
    """The matrix the probe of one sentence draws: read-vs-written cosine similarities (Dual
    AM-GRU) or the alignments (attention); `None` for the GRU."""
    if kind == "dual_am_gru":
        return cosine_similarity_matrix(probe["read"], probe["written"])
    if kind == "attention":
        return probe["alignments"]
    return None


def probe_statistics(autoencoder, sentences):
    """`STATISTICS` of ``autoencoder`` averaged over ``sentences`` (``(source ids,
    decoder input ids)`` pairs without padding); an empty dict for the GRU."""
    names = STATISTICS[autoencoder.kind]
    if not names:
        return {}
    values = {name: [] for name in names}
    for source, decoder_input in sentences:
        probe = autoencoder.memory_probe(source, decoder_input)
        aligned, last = position_shares(heatmap_matrix(autoencoder.kind, probe))
        values["read_aligned"].append(aligned)
        values["read_last"].append(last)
        if "key_similarity" in values and len(source) > 1:
            values["key_similarity"].append(key_similarity(probe["keys"]))
    # `None` where no sentence gave a value (key similarity needs two words).
    return {
        name: round(float(np.mean(found)), 4) if found else None for name, found in values.items()
    }


# The TensorBoard run (a subdirectory of the log directory) and tag prefix of each kind of
# model's probe: the Dual AM-GRU's memory, or the attention (as the SNLI example names them).
RUNS = {"dual_am_gru": "memory", "attention": "attention"}


class MemoryProbe(keras.callbacks.Callback):
    """Each epoch, writes one sentence's heatmap (``memory/retrieval``: Figure 3, or
    ``attention/alignment``) and the `probe_statistics` over the probe sentences
    (``memory/<name>`` or ``attention/<name>`` scalars) to TensorBoard; keeps the last values
    in ``history``.

    Args:
        log_dir: The TensorBoard log directory (its run `RUNS` of the model's kind is
            written: ``memory`` or ``attention``).
        autoencoder: The `models.AutoEncoder` being trained.
        sentences: List of ``(source ids, decoder input ids)`` pairs without padding; the first
            is drawn.
        vocabulary: List of str, the words by id (the heatmap's labels).
    """

    def __init__(self, log_dir, autoencoder, sentences, vocabulary):
        super().__init__()
        self.autoencoder, self.sentences, self.vocabulary = autoencoder, sentences, vocabulary
        self.log_dir = str(log_dir)
        self._writer = None  # made at the first image: the GRU leaves no empty run behind
        self.history = []

    def on_epoch_end(self, epoch, logs=None):
        import tensorflow as tf

        kind = self.autoencoder.kind
        if not STATISTICS[kind]:
            return
        source, decoder_input = self.sentences[0]
        matrix = heatmap_matrix(kind, self.autoencoder.memory_probe(source, decoder_input))
        statistics = probe_statistics(self.autoencoder, self.sentences)
        self.history.append(statistics)
        words = [self.vocabulary[i] for i in source]
        inputs = [self.vocabulary[i] for i in decoder_input]
        run = RUNS[kind]
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(f"{self.log_dir}/{run}")
        with self._writer.as_default():
            dual = kind == "dual_am_gru"
            write_heatmap(
                f"{run}/retrieval" if dual else f"{run}/alignment",
                matrix,
                step=epoch,
                row_labels=inputs,
                col_labels=words,
                title="cosine(encoder write, decoder read)" if dual else "attention weights",
                xlabel="source (written)" if dual else "source",
                ylabel="decoder input",
                vmin=-1.0 if dual else 0.0,
                vmax=1.0,
            )
            for name, value in statistics.items():
                if value is not None:
                    tf.summary.scalar(f"{run}/{name}", value, step=epoch)
        self._writer.flush()
