"""The TensorBoard views of sliding-window attention
(`tf_memlayers.callbacks.window_attention_callback`): the window positions' labels; the average
attention per position over the full windows only, against its definition; and what
`WindowAttentionCallback` writes (the probe sentence's weights under the trained model's current
weights and their average per position, at the epochs it is asked to), and the inputs it refuses."""

import importlib

import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import language_model
from tests.support import summary_events, tensorflow_only
from tf_memlayers.callbacks.window_attention_callback import (
    WindowAttentionCallback,
    average_attention_by_position,
    window_position_labels,
)
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights
from tf_memlayers.models.language_model import compile_language_model

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")

VOCAB = 23
SMALL = dict(units=12, embedding_dim=6, window=3, ngram=4)


def _tokens(batch, time, seed=0):
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, time)).astype("int32")


def _model(kind, **overrides):
    kwargs = dict(SMALL, kind=kind, batch_size=2, sequence_length=5)
    kwargs.update(overrides)
    return language_model(VOCAB, **kwargs)


def _table(value):
    """The labels and values of a table `write_heatmap` wrote: ``(rows, columns, matrix)``."""
    lines = tf.make_ndarray(value.tensor).item().decode().splitlines()
    columns = lines[0].strip("| ").split(" | ")
    cells = [line.strip("| ").split(" | ") for line in lines[2:]]
    return [c[0] for c in cells], columns, np.array([[float(v) for v in c[1:]] for c in cells])


def test_window_positions_are_labelled_oldest_first():
    assert window_position_labels(1) == ["t-1"]
    assert window_position_labels(5) == ["t-5", "t-4", "t-3", "t-2", "t-1"]


def test_average_attention_by_position_skips_partial_windows():
    scores = np.zeros((2, 6, 3))
    scores[:, :3] = [1.0, 0.0, 0.0]  # partial windows: must not count
    scores[:, 3:] = [0.2, 0.3, 0.5]
    np.testing.assert_allclose(average_attention_by_position(scores, 3), [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="more than window=3"):
        average_attention_by_position(scores[:, :3], 3)


def test_average_attention_by_position_is_the_mean_over_every_full_window():
    rng = np.random.default_rng(0)
    scores = rng.dirichlet(np.ones(4), size=(3, 9)).astype("float32")  # [batch, time, window]
    total, count = np.zeros(4), 0
    for example in scores:
        for step in range(4, 9):  # the steps whose window t-4 .. t-1 lies in the sequence
            total += example[step]
            count += 1
    average = average_attention_by_position(scores, 4)
    assert average.dtype == np.float64
    np.testing.assert_allclose(average, total / count, rtol=1e-6)
    np.testing.assert_allclose(average.sum(), 1.0, rtol=1e-6)


@pytest.mark.parametrize("shape", [(9, 4), (2, 9, 3), (2, 9, 4, 1)])
def test_scores_of_another_shape_are_refused(shape):
    with pytest.raises(ValueError, match=r"`scores` must have shape \[batch, time, 4\]"):
        average_attention_by_position(np.zeros(shape), 4)


def test_window_attention_callback_writes_heatmaps(tmp_path, monkeypatch):
    from tf_memlayers.callbacks import window_attention_callback

    drawn = []
    draw = window_attention_callback.write_heatmap
    monkeypatch.setattr(
        window_attention_callback,
        "write_heatmap",
        lambda tag, *a, **kw: drawn.append((tag, kw)) or draw(tag, *a, **kw),
    )
    model = _model("key_value")
    compile_language_model(model, jit_compile=False)
    probe = _model(
        "key_value",
        stateful=False,
        batch_size=None,
        sequence_length=None,
        return_attention_scores=True,
    )
    sentence = _tokens(1, 7)[0]
    validation = _tokens(4, 9)
    callback = WindowAttentionCallback(
        probe, tmp_path, sentence, [f"w{i}" for i in sentence], validation, window=3
    )
    x = _tokens(2, 5)
    model.fit(x, x, epochs=2, verbose=0, callbacks=[callback])
    sentence_scores, average = callback.probe()
    # The probe has the trained weights: its scores are the trained model's.
    _, direct = _probe_with_weights_of(model)(sentence[None])
    np.testing.assert_allclose(sentence_scores, direct.numpy()[0], atol=1e-6)
    assert sentence_scores.shape == (7, 3)
    np.testing.assert_allclose(sentence_scores[3:].sum(axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(average.sum(), 1.0, atol=1e-5)
    events = summary_events(tmp_path)
    for tag in ("window_attention/probe_sentence", "window_attention/average_by_position"):
        assert [step for step, _ in events[tag]] == [0, 1]
    table = events["window_attention/average_by_position/table"][-1][1]
    text = tf.make_ndarray(table.tensor).item().decode()
    assert "t-3" in text and f"{average[-1]:.3f}" in text
    # The titles leave the epoch to TensorBoard's step (counted from 0, where a title's count
    # from 1 disagreed with it).
    assert {(tag, kw["title"]) for tag, kw in drawn} == {
        ("window_attention/probe_sentence", "attention weights"),
        ("window_attention/average_by_position", "average attention per position"),
    }


def test_near_equal_averages_are_drawn_in_near_equal_colours(tmp_path, monkeypatch):
    from tf_memlayers.callbacks import window_attention_callback

    # The module, not the function of its name that the package exports.
    heatmap = importlib.import_module("tf_memlayers.callbacks.write_heatmap")
    drawn = {}

    def record(tag, matrix, step, row_labels=None, col_labels=None, **image_kwargs):
        drawn[tag] = image_kwargs
        return heatmap.write_heatmap(tag, matrix, step, row_labels, col_labels, **image_kwargs)

    monkeypatch.setattr(window_attention_callback, "write_heatmap", record)
    probe = _model(
        "key_value",
        stateful=False,
        batch_size=None,
        sequence_length=None,
        return_attention_scores=True,
    )
    sentence = _tokens(1, 7)[0]
    callback = WindowAttentionCallback(
        probe, tmp_path, sentence, [f"w{i}" for i in sentence], _tokens(4, 9), window=3
    )
    callback.set_model(_model("key_value"))
    callback.on_epoch_end(0)
    scale = drawn["window_attention/average_by_position"]
    # An average as an untrained model gives: 1/3 each, up to rounding.
    colours = heatmap.colour_map([[0.3332, 0.3333, 0.3335]], scale.get("vmin"), scale.get("vmax"))
    assert np.abs(colours.astype(int) - colours[0, 0].astype(int)).max() <= 2


def _probe_with_weights_of(model, kind="key_value"):
    probe = _model(
        kind, stateful=False, batch_size=None, sequence_length=None, return_attention_scores=True
    )
    copy_trainable_weights(model, probe)
    return probe


def test_every_n_epochs_writes_the_probe_of_the_current_weights(tmp_path):
    model = _model("attention")
    model(_tokens(2, 5))
    probe = _model(
        "attention",
        stateful=False,
        batch_size=None,
        sequence_length=None,
        return_attention_scores=True,
    )
    sentence = _tokens(1, 6, seed=1)[0]
    labels = [f"w{i}" for i in sentence]
    validation = _tokens(3, 8, seed=2)
    callback = WindowAttentionCallback(
        probe, tmp_path, sentence, labels, validation, window=3, every_n_epochs=2
    )
    callback.set_model(model)
    rng = np.random.default_rng(3)
    for epoch in range(4):
        for weight in model.trainable_weights:  # each epoch other weights
            weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
        callback.on_epoch_end(epoch)
    callback.on_train_end()
    events = summary_events(tmp_path)
    for tag in (
        "window_attention/probe_sentence",
        "window_attention/probe_sentence/table",
        "window_attention/average_by_position",
        "window_attention/probe_sentence_text",
    ):
        assert [step for step, _ in events[tag]] == [1, 3], tag  # the 2nd and 4th epochs
    # The last tables hold the last weights' scores, read from a copy of the trained model.
    reference = _probe_with_weights_of(model, "attention")
    _, scores = reference(sentence[None])
    rows, columns, written = _table(events["window_attention/probe_sentence/table"][-1][1])
    assert rows == labels and columns == ["t-3", "t-2", "t-1"]
    np.testing.assert_allclose(written, scores.numpy()[0], atol=5e-4 + 1e-7)
    _, validation_scores = reference(validation)
    rows, _, written = _table(events["window_attention/average_by_position/table"][-1][1])
    expected = validation_scores.numpy()[:, 3:].mean(axis=(0, 1))
    assert rows == ["mean"]
    np.testing.assert_allclose(written[0], expected, atol=5e-4 + 1e-7)
    text = events["window_attention/probe_sentence_text"][-1][1]
    assert tf.make_ndarray(text.tensor).item().decode() == " ".join(labels)


def test_window_attention_callback_checks_inputs(tmp_path):
    probe = _model(
        "attention",
        stateful=False,
        batch_size=None,
        sequence_length=None,
        return_attention_scores=True,
    )
    with pytest.raises(ValueError, match="`token_labels` has 2 entries"):
        WindowAttentionCallback(probe, tmp_path, [1, 2, 3], ["a", "b"], _tokens(2, 9), 3)
    with pytest.raises(ValueError, match="time > window"):
        WindowAttentionCallback(probe, tmp_path, [1, 2], ["a", "b"], _tokens(2, 3), 3)


def test_validation_inputs_must_be_a_batch_of_sequences(tmp_path):
    probe = _model(
        "attention",
        stateful=False,
        batch_size=None,
        sequence_length=None,
        return_attention_scores=True,
    )
    with pytest.raises(ValueError, match=r"must be \[batch, time\].*got shape \(9,\)"):
        WindowAttentionCallback(probe, tmp_path, [1, 2], ["a", "b"], _tokens(1, 9)[0], 3)
