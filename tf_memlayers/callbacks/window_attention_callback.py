"""TensorBoard views of sliding-window attention (Daniluk et al. 2017, Fig. 3), live.

Each epoch a probe model with the training model's weights (built with
``return_attention_scores=True``, stateless) reads

* a fixed probe sentence: a heatmap of alpha with one row per token of the sentence and one
  column per window position t-L .. t-1 (Fig. 3a);
* a validation batch: the average attention weight per window position (Fig. 3b), over the
  time steps whose window is full.

The layers themselves write no summaries (that would break `jit_compile`).
"""

import collections.abc

import keras
import numpy as np

from tf_memlayers._tensorflow import require_tensorflow
from tf_memlayers._validation import check_int, check_path
from tf_memlayers.callbacks.write_heatmap import _markdown_text, write_heatmap
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights

tf = require_tensorflow("tf_memlayers.callbacks (TensorBoard summaries)")


def window_position_labels(window):
    """Column labels ``["t-L", ..., "t-1"]``, oldest first like the layer's scores.

    Args:
        window: Positive integer, the window length L.

    Returns:
        List of ``window`` strings.

    Example:

    >>> window_position_labels(3)
    ['t-3', 't-2', 't-1']
    """
    return [f"t-{window - j}" for j in range(window)]


def average_attention_by_position(scores, window):
    """Mean attention weight per window position over examples and full-window steps.

    Args:
        scores: Array ``[batch, time, window]``, the attention weights (oldest position
            first) of a stateless pass starting at time 0, with ``time > window``.
        window: Positive integer, the window length L.

    Returns:
        float64 ``[window]``; the steps t < L, whose window reaches before the start, are left
        out, so every weight averaged is over a complete window.

    Example:

    >>> import numpy as np
    >>> scores = np.zeros((1, 4, 2)); scores[:, :, 1] = 1.0
    >>> average_attention_by_position(scores, 2).tolist()
    [0.0, 1.0]
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 3 or scores.shape[-1] != window:
        raise ValueError(f"`scores` must have shape [batch, time, {window}], got {scores.shape}.")
    if scores.shape[1] <= window:
        raise ValueError(
            f"`scores` needs more than window={window} time steps to have a full window, "
            f"got {scores.shape[1]}."
        )
    return scores[:, window:, :].mean(axis=(0, 1))


class WindowAttentionCallback(keras.callbacks.Callback):
    """Writes the window-attention heatmaps of a language model to TensorBoard each epoch.

    Args:
        probe_model: A `keras.Model` of the same design as the trained model, built with
            a memory layer that returns its attention scores (``SlidingWindowAttention(...,
            return_attention_scores=True)``; typically ``stateful=False``,
            ``batch_size=None``, ``sequence_length=None``); it outputs ``[logits, scores]``. It gets
            the trained model's weights before each probe.
        log_dir: String or path, the TensorBoard log directory (the images go to
            ``log_dir/attention``).
        probe_tokens: Integer array ``[time]``, the ids of the probe sentence.
        token_labels: List of ``time`` strings, the tokens of the probe sentence (row
            labels).
        validation_inputs: Integer array ``[batch, time]`` with ``time > window``, for the
            average attention per position.
        window: Positive integer, the attention window L.
        every_n_epochs: Positive integer, how often to write: every this many epochs.
            Default: `1`.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import SlidingWindowAttention
    >>> from tf_memlayers.models import build_language_model
    >>> from tf_memlayers.callbacks import WindowAttentionCallback
    >>> memory = SlidingWindowAttention(window=3, return_attention_scores=True)
    >>> probe = build_language_model(30, memory, units=8, embedding_dim=8, stateful=False,
    ...     sequence_length=None)
    >>> callback = WindowAttentionCallback(probe, "/tmp/logs", np.arange(6), list("abcdef"),
    ...     np.ones((2, 8), "int32"), window=3)
    """

    def __init__(
        self,
        probe_model,
        log_dir,
        probe_tokens,
        token_labels,
        validation_inputs,
        window,
        every_n_epochs=1,
    ):
        super().__init__()
        owner = type(self).__name__
        if not isinstance(probe_model, keras.Model):
            raise TypeError(
                f"{owner}: `probe_model` must be a keras.Model (the trained model's design, "
                f"its memory returning its attention scores), got {probe_model!r}."
            )
        outputs = getattr(probe_model, "outputs", None)
        if outputs is not None and len(outputs) != 2:
            raise ValueError(
                f"{owner}: `probe_model` must output the logits and the attention scores (its "
                "memory built with return_attention_scores=True); it has "
                f"{len(outputs)} output(s)."
            )
        self.window = check_int("window", window, 1, owner)
        covered = outputs[1].shape[-1] if outputs is not None else None
        if covered is not None and covered != self.window:
            raise ValueError(
                f"{owner}: `window` must be the probe's window: its attention scores cover "
                f"{covered} positions, got window={window!r}."
            )
        self.every_n_epochs = check_int("every_n_epochs", every_n_epochs, 1, owner)
        self.probe_model = probe_model
        self.log_dir = check_path("log_dir", log_dir, owner)
        for name, ids in (("probe_tokens", probe_tokens), ("validation_inputs", validation_inputs)):
            if np.asarray(ids).dtype.kind not in "iu":
                raise TypeError(f"{owner}: `{name}` must be token ids (integers), got {ids!r:.80}.")
        if isinstance(token_labels, str) or not isinstance(token_labels, collections.abc.Iterable):
            raise TypeError(f"{owner}: `token_labels` must be a list, got {token_labels!r}.")
        self.probe_tokens = np.asarray(probe_tokens, dtype=np.int32).reshape(1, -1)
        self.token_labels = [str(t) for t in token_labels]
        if len(self.token_labels) != self.probe_tokens.shape[1]:
            raise ValueError(
                f"{owner}: `token_labels` has {len(self.token_labels)} entries but "
                f"`probe_tokens` has {self.probe_tokens.shape[1]}."
            )
        self.validation_inputs = np.asarray(validation_inputs, dtype=np.int32)
        if self.validation_inputs.ndim != 2 or self.validation_inputs.shape[1] <= self.window:
            raise ValueError(
                f"{owner}: `validation_inputs` must be [batch, time] with time > window "
                f"({self.window}), got shape {self.validation_inputs.shape}."
            )
        self._writer = None

    def _scores(self, inputs):
        _, scores = self.probe_model(inputs, training=False)
        return np.asarray(scores, dtype=np.float64)

    def probe(self):
        """Returns ``(sentence_scores [time, window], average [window])`` for the current
        weights of the trained model."""
        try:  # the function undecorated: its errors are this callback's
            copy_trainable_weights.__wrapped__(self.model, self.probe_model)
        except ValueError as error:
            raise ValueError(
                f"{type(self).__name__}: `probe_model` must have the trained model's weights: "
                f"{error}"
            ) from error
        sentence = self._scores(self.probe_tokens)[0]
        average = average_attention_by_position(self._scores(self.validation_inputs), self.window)
        return sentence, average

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every_n_epochs:
            return
        sentence, average = self.probe()
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(f"{self.log_dir}/attention")
        columns = window_position_labels(self.window)
        with self._writer.as_default():
            write_heatmap(
                "window_attention/probe_sentence",
                sentence,
                step=epoch,
                row_labels=self.token_labels,
                col_labels=columns,
                title="attention weights",
                xlabel="window position",
                ylabel="token",
                vmin=0.0,
                vmax=1.0,
            )
            write_heatmap(
                "window_attention/average_by_position",
                average[None, :],
                step=epoch,
                row_labels=["mean"],
                col_labels=columns,
                title="average attention per position",
                xlabel="window position",
                # From 0: near-equal averages (about 1/window each) take near-equal colours,
                # where a scale from their own minimum would stretch rounding into contrast.
                vmin=0.0,
            )
            tf.summary.text(
                "window_attention/probe_sentence_text",
                _markdown_text(" ".join(self.token_labels)),
                step=epoch,
            )
        self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
