"""TensorBoard view of an associative memory: what the hypothesis read vs what the premise
wrote (Weissenborn 2016, Fig. 2)."""

from tf_memlayers.callbacks.cosine_similarity_matrix import cosine_similarity_matrix
from tf_memlayers.callbacks.pair_probe import PairProbe


class MemoryRetrievalHeatmap(PairProbe):
    """Each epoch, writes the retrieval heatmap of one probe sentence pair to TensorBoard.

    The image (tag ``memory/retrieval``) shows the cosine similarity between what the premise
    wrote to the associative memory at each step (x axis, premise tokens) and what the
    hypothesis retrieved at each step (y axis, hypothesis tokens); a Markdown table of the
    same matrix and the sentence pair go alongside as text.

    Args:
        log_dir: String or path, the TensorBoard log directory (a ``memory`` subdirectory
            is written).
        premise: List of strings, the probe premise's tokens (at least one).
        hypothesis: List of strings, the probe hypothesis's tokens (at least one).
        vocabulary: List of strings, the words by id (row = id); unknown tokens map to the
            id of ``"<unk>"`` (1 if the vocabulary has none).
        encoder_name: String, the name of the model's encoder (a
            `tf_memlayers.ConditionalEncoder`, or any layer with a
            ``memory_retrievals(premise, hypothesis)`` method). Default: `"encoder"`.
        embedding_name: String, the name of the model's embedding layer.
            Default: `"embedding"`.

    Example:

    >>> import pathlib, tempfile
    >>> import keras
    >>> from tf_memlayers import DualAssociativeEncoder
    >>> from tf_memlayers import ConditionalEncoder
    >>> from tf_memlayers.models import build_snli_model
    >>> from tf_memlayers.callbacks import MemoryRetrievalHeatmap
    >>> encoder = ConditionalEncoder([
    ...     DualAssociativeEncoder(4, num_copies=2, return_sequences=True),
    ...     keras.layers.GRU(4, return_state=True),
    ... ])
    >>> vocabulary = ["<pad>", "<unk>", "a", "dog", "runs", "sleeps"]
    >>> model = build_snli_model(len(vocabulary), encoder=encoder, embedding_dim=3)
    >>> log_dir = tempfile.mkdtemp()
    >>> heatmap = MemoryRetrievalHeatmap(log_dir, ["a", "dog", "runs"], ["a", "dog", "sleeps"],
    ...                                  vocabulary)
    >>> heatmap.set_model(model)
    >>> heatmap.on_epoch_end(0)
    >>> [path.name for path in pathlib.Path(log_dir).iterdir()]
    ['memory']
    """

    def __init__(
        self,
        log_dir,
        premise,
        hypothesis,
        vocabulary,
        encoder_name="encoder",
        embedding_name="embedding",
    ):
        super().__init__(
            log_dir, "memory", premise, hypothesis, vocabulary, encoder_name, embedding_name
        )

    tag = "memory/retrieval"
    image = dict(
        title="cosine(premise write, hypothesis read)",
        xlabel="premise (written)",
        ylabel="hypothesis (read)",
        vmin=-1.0,
        vmax=1.0,
    )

    def similarity(self):
        """The cosine-similarity matrix of the probe pair under the current weights.

        Returns:
            float64 array ``[len(hypothesis), len(premise)]``, or `None` when the encoder's
            first layer has no associative memory (a GRU) or the encoder no
            ``memory_retrievals``.
        """
        encoder, premise, hypothesis = self.embedded_pair()
        if not hasattr(encoder, "memory_retrievals"):
            return None
        retrievals = encoder.memory_retrievals(premise, hypothesis)
        if not retrievals:
            return None
        return cosine_similarity_matrix(
            retrievals["hypothesis_read"], retrievals["premise_written"]
        )

    matrix = similarity
