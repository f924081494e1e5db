"""The TensorBoard views of sliding-window attention (`WindowAttentionCallback`)."""

import importlib

import keras
import numpy as np
import pytest

from tests.language_models import language_model
from tests.models.test_language_model import VOCAB, _tokens
from tests.support import summary_events, summary_table, summary_text, tensorflow_only
from tf_memlayers.callbacks import window_attention_callback
from tf_memlayers.callbacks.window_attention_callback import (
    WindowAttentionCallback,
    average_attention_by_position,
    window_position_labels,
)
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights
from tf_memlayers.models.language_model import compile_language_model

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")

# The module, not the function of its name that the package exports.
heatmap = importlib.import_module("tf_memlayers.callbacks.write_heatmap")


def _model(kind, probe=False):
    """A small language model; with ``probe``, its stateless probe returning the scores."""
    options = dict(units=12, embedding_dim=6, window=3, stateful=not probe)
    options.update(batch_size=None if probe else 2, sequence_length=None if probe else 5)
    return language_model(VOCAB, kind, return_attention_scores=probe, **options)


def test_positions_are_labelled_oldest_first_and_averaged_over_every_full_window():
    assert window_position_labels(1) == ["t-1"]
    assert window_position_labels(5) == ["t-5", "t-4", "t-3", "t-2", "t-1"]
    # The average attention by position is the mean over every full window.
    rng = np.random.default_rng(0)
    scores = rng.dirichlet(np.ones(4), size=(3, 9)).astype("float32")  # [batch, time, window]
    average = average_attention_by_position(scores, 4)
    assert average.dtype == np.float64
    # The steps 4 .. 8, whose window t-4 .. t-1 lies in the sequence.
    np.testing.assert_allclose(average, scores[:, 4:].mean(axis=(0, 1)), rtol=1e-6)
    np.testing.assert_allclose(average.sum(), 1.0, rtol=1e-6)
    # Scores of another shape, or no full window.
    for shape in ((9, 4), (2, 9, 3), (2, 9, 4, 1)):
        with pytest.raises(ValueError, match=r"`scores` must have shape \[batch, time, 4\]"):
            average_attention_by_position(np.zeros(shape), 4)
    with pytest.raises(ValueError, match="more than window=4"):
        average_attention_by_position(np.zeros((2, 4, 4)), 4)


def test_the_callback_in_fit_writes_the_probe_of_the_current_weights(tmp_path, monkeypatch):
    drawn, draw = [], window_attention_callback.write_heatmap
    record = lambda tag, *a, **kw: drawn.append((tag, kw)) or draw(tag, *a, **kw)  # noqa: E731
    monkeypatch.setattr(window_attention_callback, "write_heatmap", record)
    model = _model("attention")
    compile_language_model(model, jit_compile=False)
    sentence, validation = _tokens(1, 6, seed=1)[0], _tokens(3, 8, seed=2)
    labels = [f"w{i}" for i in sentence]
    callback = WindowAttentionCallback(
        _model("attention", probe=True), tmp_path, sentence, labels, validation, 3, 2
    )
    rng = np.random.default_rng(3)

    def new_weights(epoch, logs):  # each epoch other weights, far from the trained ones
        for weight in model.trainable_weights:
            weight.assign(rng.uniform(-0.8, 0.8, weight.shape))

    epochs, x = keras.callbacks.LambdaCallback(on_epoch_end=new_weights), _tokens(2, 5)
    model.fit(x, x, epochs=4, verbose=0, callbacks=[epochs, callback])
    events = summary_events(tmp_path)
    for tag in (
        "window_attention/probe_sentence",
        "window_attention/probe_sentence/table",
        "window_attention/average_by_position",
        "window_attention/probe_sentence_text",
    ):
        assert [step for step, _ in events[tag]] == [1, 3], tag  # the 2nd and 4th epochs
    # The last tables hold the last weights' scores, read from a copy of the trained model.
    reference = _model("attention", probe=True)
    copy_trainable_weights(model, reference)
    scores = reference(sentence[None])[1].numpy()[0]
    rows, columns, written = summary_table(events["window_attention/probe_sentence/table"][-1][1])
    assert rows == labels and columns == ["t-3", "t-2", "t-1"]
    np.testing.assert_allclose(written, scores, atol=5e-4 + 1e-7)
    np.testing.assert_allclose(scores[3:].sum(axis=-1), 1.0, atol=1e-5)
    expected = reference(validation)[1].numpy()[:, 3:].mean(axis=(0, 1))
    rows, _, written = summary_table(events["window_attention/average_by_position/table"][-1][1])
    assert rows == ["mean"]
    np.testing.assert_allclose(written[0], expected, atol=5e-4 + 1e-7)
    assert summary_text(events["window_attention/probe_sentence_text"][-1][1]) == " ".join(labels)
    # The titles leave the epoch to TensorBoard's step (from 0; a title's count from 1 was off).
    assert {(tag, kw["title"]) for tag, kw in drawn} == {
        ("window_attention/probe_sentence", "attention weights"),
        ("window_attention/average_by_position", "average attention per position"),
    }


def test_near_equal_averages_are_drawn_in_near_equal_colours(tmp_path, monkeypatch):
    drawn = {}

    def record(tag, matrix, step, row_labels=None, col_labels=None, **image_kwargs):
        drawn[tag] = image_kwargs
        return heatmap.write_heatmap(tag, matrix, step, row_labels, col_labels, **image_kwargs)

    monkeypatch.setattr(window_attention_callback, "write_heatmap", record)
    sentence = _tokens(1, 7)[0]
    callback = WindowAttentionCallback(
        _model("key_value", probe=True), tmp_path, sentence, list(sentence), _tokens(4, 9), 3
    )
    callback.set_model(_model("key_value"))
    callback.on_epoch_end(0)
    scale = drawn["window_attention/average_by_position"]
    # An average as an untrained model gives: 1/3 each, up to rounding.
    colours = heatmap.colour_map([[0.3332, 0.3333, 0.3335]], scale.get("vmin"), scale.get("vmax"))
    assert np.abs(colours.astype(int) - colours[0, 0].astype(int)).max() <= 2


def test_bad_probe_inputs_are_refused(tmp_path):
    probe = _model("attention", probe=True)
    for model, sentence, labels, validation, message in [
        (probe, [1, 2, 3], ["a", "b"], _tokens(2, 9), "Callback: `token_labels` has 2 entries"),
        (probe, [1, 2], ["a", "b"], _tokens(2, 3), "Callback: `validation_inputs`.* > window"),
        (probe, [1, 2], ["a", "b"], _tokens(1, 9)[0], r"be \[batch, time\].*got shape \(9,\)"),
        (_model("attention"), [1, 2], ["a", "b"], _tokens(2, 9), "scores .* has 1 output"),
    ]:
        with pytest.raises(ValueError, match=message):
            WindowAttentionCallback(model, tmp_path, sentence, labels, validation, 3)
    for model, more, message in [
        (probe, (4,), "its attention scores cover 3 positions, got window=4"),
        (probe, (3, 0), "`every_n_epochs` must be >= 1, got 0"),
        (None, (3,), "`probe_model` must be a keras.Model"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            WindowAttentionCallback(model, tmp_path, [1, 2], ["a", "b"], _tokens(2, 9), *more)
    for sentence, labels in (("the cat", ["a", "b"]), ([1.5, 2], ["a", "b"]), ([1, 2], "ab")):
        with pytest.raises(TypeError, match="must be token ids|`token_labels` must be a list"):
            WindowAttentionCallback(probe, tmp_path, sentence, labels, _tokens(2, 9), 3)
    make = lambda tokens: WindowAttentionCallback(probe, tmp_path, [1, 2], ["a", "b"], tokens, 3)  # noqa: E731
    pytest.raises(TypeError, make, _tokens(2, 9) + 0.5).match("`validation_inputs` must be token")
    (callback := make(_tokens(2, 9))).set_model(_model("lstm"))  # without the probe's memory
    pytest.raises(ValueError, callback.probe).match("model's weights: `source` and `target` have")
