"""What the pair encoders' TensorBoard views share (`tf_memlayers.callbacks.pair_probe`)."""

import numpy as np
import pytest
import tensorflow as tf

from tests.pair_encoders import snli_model
from tests.support import summary_events, summary_table, summary_text, tensorflow_only
from tf_memlayers.callbacks import MemoryRetrievalHeatmap, PairAttentionHeatmap
from tf_memlayers.callbacks.pair_probe import PairProbe

pytestmark = tensorflow_only("writes TensorBoard summaries with tf.summary")


def _probe(tmp_path, premise=("a", "dog", "runs"), hypothesis=("cats", "sleep"), **kwargs):
    words = kwargs.pop("vocabulary", ["<pad>", "<unk>", "a", "dog", "runs", "sleep"])
    return PairProbe(tmp_path, "view", premise, hypothesis, words, "encoder", "embedding", **kwargs)


def check_two_epochs(heatmap, tmp_path, tag, expected, **tolerance):
    """Ends epochs 0 and 3 of ``heatmap`` (set on its model), with new word vectors between
    them: each time its matrix is ``expected()``, and it writes at the epoch's step the image,
    the table (premise words label the columns, hypothesis words the rows) and the pair."""
    matrices = []
    for epoch in (0, 3):
        if matrices:
            vectors = heatmap.model.get_layer("embedding").embeddings
            vectors.assign(np.random.default_rng(1).normal(size=vectors.shape))
        heatmap.on_epoch_end(epoch)
        matrices.append(heatmap.last_matrix)
        np.testing.assert_allclose(heatmap.last_matrix, expected(), **tolerance)
    assert not np.allclose(*matrices)
    view = tag.split("/")[0]
    events = summary_events(tmp_path / view)
    for name in (tag, f"{tag}/table", f"{view}/sentence"):
        assert [step for step, _ in events[name]] == [0, 3], name
    pair = [" ".join(sentence) for sentence in (heatmap.premise, heatmap.hypothesis)]
    text = summary_text(events[f"{view}/sentence"][-1][1])
    assert text == "premise: {}\n\nhypothesis: {}".format(*pair)
    # An image summary holds [width, height, encoded PNG].
    pixels = tf.io.decode_png(tf.make_ndarray(events[tag][-1][1].tensor)[2]).numpy()
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and pixels.shape[0] >= len(pair[1])
    rows, columns, written = summary_table(events[f"{tag}/table"][-1][1])
    assert columns == heatmap.premise and rows == heatmap.hypothesis
    np.testing.assert_allclose(written, heatmap.last_matrix, atol=5e-4 + 1e-9)
    return matrices


def test_the_pair_is_read_as_word_ids_unknown_words_as_unk_and_embedded_by_the_model(tmp_path):
    probe = _probe(tmp_path)
    np.testing.assert_array_equal(probe.premise_ids, [[2, 3, 4]])
    np.testing.assert_array_equal(probe.hypothesis_ids, [[1, 5]])  # "cats" is not a word
    # Without "<unk>" in the vocabulary, id 1 stands for the unknown words.
    odd = _probe(tmp_path, vocabulary=["<pad>", "?", "a", "dog", "runs", "sleep"])
    np.testing.assert_array_equal(odd.hypothesis_ids, [[1, 5]])
    assert probe.premise == ["a", "dog", "runs"] and probe.hypothesis == ["cats", "sleep"]
    model = snli_model(6, "gru", units=4, embedding_dim=3)
    probe.set_model(model)
    got_encoder, premise, hypothesis = probe.embedded_pair()
    vectors = np.asarray(model.get_layer("embedding").embeddings)
    assert got_encoder is model.get_layer("encoder")
    np.testing.assert_array_equal(np.asarray(premise), vectors[[2, 3, 4]])
    np.testing.assert_array_equal(np.asarray(hypothesis), vectors[[1, 5]])
    # GRUs: no attention, and no memory whose writes and reads line up with the words.
    for view, matrix, folder in [
        (PairAttentionHeatmap, "attention", "attention"),
        (MemoryRetrievalHeatmap, "similarity", "memory"),
    ]:
        heatmap = view(tmp_path, ["a", "dog"], ["a", "dog"], ["<pad>", "<unk>", "a"])
        heatmap.set_model(model)
        assert getattr(heatmap, matrix)() is None, view
        heatmap.on_epoch_end(0)
        # Not even an empty run for TensorBoard to list.
        assert heatmap.last_matrix is None and not (tmp_path / folder).exists(), view
        typo = view(tmp_path, ["a"], ["a"], ["a"], encoder_name="encodr")
        typo.set_model(model)  # refused before the first epoch trains
        with pytest.raises(ValueError, match=f"{view.__name__}: `encoder_name` 'encodr' names"):
            typo.on_train_begin()


@pytest.mark.parametrize(
    "premise, hypothesis, name", [((), "a", "premise"), (("a",), (), "hypothesis")]
)
@pytest.mark.parametrize("view", [PairAttentionHeatmap, MemoryRetrievalHeatmap])
def test_an_empty_probe_sentence_is_refused_naming_the_view(
    tmp_path, view, premise, hypothesis, name
):
    with pytest.raises(ValueError, match=f"{view.__name__}: the probe `{name}` must have"):
        view(tmp_path, premise, hypothesis, ["<pad>", "<unk>", "a"])
    with pytest.raises(TypeError, match=f"{view.__name__}: the probe `{name}` must be a list"):
        view(tmp_path, *(("a dog", ["a"]) if name == "premise" else (["a"], "a dog")), ["a"])
    pytest.raises(TypeError, view, tmp_path, ["a"], ["a"], None).match("`vocabulary` must be a")


def test_a_view_says_what_it_draws_and_its_writer_is_made_at_first_use(tmp_path):
    """Its writer is made at its first use, and closed at the end of training."""
    probe = _probe(tmp_path)
    with pytest.raises(NotImplementedError, match="PairProbe must say what it draws"):
        probe.on_epoch_end(0)
    assert not (tmp_path / "view").exists()
    writer = probe.writer()
    assert probe.writer() is writer
    with writer.as_default():
        probe.write_sentence("view/sentence", step=2)
    probe.on_train_end()
    ((step, value),) = summary_events(tmp_path / "view")["view/sentence"]
    assert step == 2 and summary_text(value) == "premise: a dog runs\n\nhypothesis: cats sleep"
    assert probe.writer() is not writer  # a new one after training ended
