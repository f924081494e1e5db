"""TensorBoard view of an attention over the premise: where each hypothesis word looks
(Rocktäschel et al. 2016, Fig. 3; the word-by-word attention of the SNLI example)."""

from tf_memlayers.callbacks.pair_probe import PairProbe


class PairAttentionHeatmap(PairProbe):
    """Each epoch, writes to TensorBoard where the hypothesis of one probe pair attends in its
    premise.

    The image (tag ``attention/alignment``, in the ``attention`` run) shows, for each
    hypothesis word (y axis), the attention's weights over the premise's words (x axis), from
    0 to 1; a Markdown table of the same matrix and the sentence pair go alongside as text.
    An encoder that does not attend over the premise draws nothing.

    Args:
        log_dir: String or path, the TensorBoard log directory (an ``attention``
            subdirectory is written).
        premise: List of strings, the probe premise's tokens (at least one).
        hypothesis: List of strings, the probe hypothesis's tokens (at least one).
        vocabulary: List of strings, the words by id (row = id); unknown tokens map to the
            id of ``"<unk>"`` (1 if the vocabulary has none).
        encoder_name: String, the name of the model's encoder (a
            `tf_memlayers.ConditionalEncoder`, or any layer with an
            ``premise_attention(premise, hypothesis)`` method). Default: `"encoder"`.
        embedding_name: String, the name of the model's embedding layer.
            Default: `"embedding"`.

    Example:

    >>> import pathlib, tempfile
    >>> import keras
    >>> from tf_memlayers import (
    ...     AttentionRNN, ConditionalAttentionEncoder, ConditionalEncoder, WordByWordAttention)
    >>> from tf_memlayers.models import build_snli_model
    >>> from tf_memlayers.callbacks import PairAttentionHeatmap
    >>> encoder = ConditionalEncoder([ConditionalAttentionEncoder(
    ...     keras.layers.LSTM(4, return_sequences=True, return_state=True),
    ...     AttentionRNN(WordByWordAttention(keras.layers.LSTMCell(4))),
    ... )])
    >>> vocabulary = ["<pad>", "<unk>", "a", "dog", "runs", "sleeps"]
    >>> model = build_snli_model(len(vocabulary), encoder=encoder, embedding_dim=3)
    >>> log_dir = tempfile.mkdtemp()
    >>> heatmap = PairAttentionHeatmap(log_dir, ["a", "dog", "runs"], ["a", "dog", "sleeps"],
    ...                                vocabulary)
    >>> heatmap.set_model(model)
    >>> heatmap.on_epoch_end(0)
    >>> heatmap.last_matrix.shape, [path.name for path in pathlib.Path(log_dir).iterdir()]
    ((3, 3), ['attention'])
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
            log_dir, "attention", premise, hypothesis, vocabulary, encoder_name, embedding_name
        )

    tag = "attention/alignment"
    image = dict(
        title="attention weights over the premise",
        xlabel="premise (attended)",
        ylabel="hypothesis",
        vmin=0.0,
        vmax=1.0,
    )

    def attention(self):
        """The attention's weights over the probe pair under the current weights.

        Returns:
            float64 array ``[len(hypothesis), len(premise)]``, or `None` when the encoder
            does not attend over the premise.
        """
        encoder, premise, hypothesis = self.embedded_pair()
        if not hasattr(encoder, "premise_attention"):
            return None
        return encoder.premise_attention(premise, hypothesis)

    matrix = attention
