"""What the TensorBoard views of a sentence-pair encoder share: one probe pair, its word ids,
its embedded words, and a summary writer made at the first image."""

import collections.abc

import keras
import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_path
from tf_memlayers.callbacks.write_heatmap import _markdown_text, write_heatmap

tf = require_tensorflow("tf_memlayers.callbacks (TensorBoard summaries)")


class PairProbe(keras.callbacks.Callback):
    """A callback that draws, each epoch, what a pair encoder does with one probe pair.

    A view says what it draws: `matrix` (``[len(hypothesis), len(premise)]``, or `None` when
    the encoder has nothing to draw), the image's ``tag`` and its ``image`` options (those
    of `tf_memlayers.callbacks.write_heatmap`). Each epoch the image, its table and the
    sentence pair (``<subdir>/sentence``) are written at the epoch's step, and the matrix is
    kept as ``last_matrix``.

    Args:
        log_dir: String or path, the TensorBoard log directory; the images go to its
            ``subdir`` subdirectory (a run in TensorBoard), made at the first image (an
            encoder with nothing to draw leaves no empty run).
        subdir: String, the subdirectory.
        premise: List of strings, the probe premise's tokens (at least one).
        hypothesis: List of strings, the probe hypothesis's tokens (at least one).
        vocabulary: List of strings, the words by id (row = id); unknown tokens map to the
            id of ``"<unk>"`` (1 if the vocabulary has none).
        encoder_name: String, the name of the model's encoder.
        embedding_name: String, the name of the model's embedding layer.

    Example:

    >>> import tempfile
    >>> probe = PairProbe(tempfile.mkdtemp(), "view", ["a", "dog"], ["a", "cat"],
    ...                   ["<pad>", "<unk>", "a", "dog"], "encoder", "embedding")
    >>> probe.premise_ids.tolist(), probe.hypothesis_ids.tolist()  # "cat" is unknown
    ([[2, 3]], [[2, 1]])
    """

    def __init__(
        self, log_dir, subdir, premise, hypothesis, vocabulary, encoder_name, embedding_name
    ):
        super().__init__()
        for name, tokens in (
            ("premise", premise),
            ("hypothesis", hypothesis),
            ("vocabulary", vocabulary),
        ):
            if not isinstance(tokens, collections.abc.Iterable):
                raise TypeError(
                    f"{type(self).__name__}: `{name}` must be a list of tokens, got {tokens!r}."
                )
        index = {w: i for i, w in enumerate(vocabulary)}
        unk = index.get("<unk>", 1)
        for name, tokens in (("premise", premise), ("hypothesis", hypothesis)):
            if isinstance(tokens, str):
                raise TypeError(
                    f"{type(self).__name__}: the probe `{name}` must be a list of tokens, got "
                    f"the string {tokens!r} (its .split() is a list of words)."
                )
            if not list(tokens):
                raise ValueError(
                    f"{type(self).__name__}: the probe `{name}` must have at least one token, "
                    f"got {tokens!r}."
                )
        self.premise, self.hypothesis = list(premise), list(hypothesis)
        self.premise_ids = np.array([[index.get(w, unk) for w in self.premise]], np.int32)
        self.hypothesis_ids = np.array([[index.get(w, unk) for w in self.hypothesis]], np.int32)
        self.encoder_name, self.embedding_name = encoder_name, embedding_name
        self.log_dir = check_path("log_dir", log_dir, type(self).__name__)
        self.subdir = subdir
        self._writer = None
        self.last_matrix = None

    tag = None
    image = {}

    def matrix(self):
        """The matrix to draw under the current weights, or `None`."""
        raise NotImplementedError(f"{type(self).__name__} must say what it draws (`matrix`).")

    def on_train_begin(self, logs=None):
        # Looked up before the first epoch trains, not at its end.
        names = [layer.name for layer in self.model.layers]
        for argument in ("encoder_name", "embedding_name"):
            if getattr(self, argument) not in names:
                raise ValueError(
                    f"{type(self).__name__}: `{argument}` {getattr(self, argument)!r} names no "
                    f"layer of the model; its layers are {names}."
                )

    def embedded_pair(self):
        """``(encoder, premise [Tp, dim], hypothesis [Th, dim])`` under the current weights."""
        embedding = self.model.get_layer(self.embedding_name)
        encoder = self.model.get_layer(self.encoder_name)
        return encoder, embedding(self.premise_ids)[0], embedding(self.hypothesis_ids)[0]

    def writer(self):
        """The summary writer of ``log_dir/subdir``, made at its first use."""
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(f"{self.log_dir}/{self.subdir}")
        return self._writer

    def write_sentence(self, tag, step):
        """The probe pair as text, under ``tag``."""
        premise, hypothesis = (_markdown_text(" ".join(s)) for s in (self.premise, self.hypothesis))
        text = f"premise: {premise}\n\nhypothesis: {hypothesis}"
        tf.summary.text(tag, text, step=step)

    def on_epoch_end(self, epoch, logs=None):
        matrix = self.matrix()
        if matrix is None:
            return
        self.last_matrix = matrix
        with self.writer().as_default():
            write_heatmap(
                self.tag,
                matrix,
                step=epoch,
                row_labels=self.hypothesis,
                col_labels=self.premise,
                **self.image,
            )
            self.write_sentence(f"{self.subdir}/sentence", epoch)
        self.writer().flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
