"""Perplexity over a whole split: padded documents with host-side resets, packed documents
with in-graph resets."""

import keras
import numpy as np
import pytest

from examples.language_modeling.evaluation import evaluate_language_model
from examples.language_modeling.generated_lm import generate_copy_corpus
from examples.language_modeling.lm_batches import make_bptt_batches
from examples.language_modeling.memories import language_model
from examples.language_modeling.token_streams import TokenStream
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights
from tf_memlayers.models.language_model import compile_language_model

VOCAB = 23
SMALL = dict(units=12, embedding_dim=6, window=3, init_scale=0.5)


def _aligned_stream():
    """Nine documents of different lengths whose three rows (batch 3, sequence_length 5) start at a
    document in both layouts: each row holds 20 pairs, packed in 4 segments, padded in 5."""
    lengths = [7, 3, 10, 4, 12, 4, 9, 2, 10]  # tokens; the last document has 9 pairs
    rng = np.random.default_rng(3)
    ids = rng.integers(1, VOCAB, sum(lengths)).astype("int32")
    return TokenStream(ids, np.concatenate([[0], np.cumsum(lengths)[:-1]]))


def _generated_stream():
    corpus = generate_copy_corpus(200, 400, 200, num_words=VOCAB - 2, sentences_per_document=2)
    return corpus.valid


LAYOUTS = {"aligned_rows": (_aligned_stream, 3, 5), "one_row": (_generated_stream, 1, 7)}


def _document_by_document(model, stream):
    """exp(mean NLL) of ``model`` (not stateful, any length) over each document alone."""
    bounds = [*stream.document_starts.tolist(), stream.num_tokens]
    total, count = 0.0, 0
    for start, stop in zip(bounds[:-1], bounds[1:]):
        # The pairs of a document: its inputs, and the token after each (the last input's
        # target is the next document's first token).
        inputs = stream.ids[start : min(stop, stream.num_tokens - 1)]
        targets = stream.ids[start + 1 : start + 1 + len(inputs)]
        logits = np.asarray(model(inputs[None].astype("int32")), "float64")[0]
        logits -= logits.max(axis=-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        total -= log_probs[np.arange(len(targets)), targets].sum()
        count += len(targets)
    return np.exp(total / count), count


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", ["lstm", "attention"])
def test_packed_and_padded_validation_score_the_same_perplexity(kind, layout):
    """Every target token scored once, each document from a fresh state: the padded layout
    with host-side resets between batches and the packed layout with resets inside the graph
    give the same perplexity, that of each document scored alone."""
    make_stream, batch_size, sequence_length = LAYOUTS[layout]
    stream = make_stream()
    assert stream.num_documents > 3
    padded = make_bptt_batches(stream, batch_size, sequence_length)
    packed = make_bptt_batches(stream, batch_size, sequence_length, pack=True)
    assert packed.padding_fraction < padded.padding_fraction
    keras.utils.set_random_seed(5)
    options = dict(
        SMALL, kind=kind, batch_size=batch_size, sequence_length=sequence_length, stateful=True
    )
    packed_model = language_model(VOCAB, resets=True, **options)
    padded_model = language_model(VOCAB, **options)
    padded_model.set_weights(packed_model.get_weights())  # the same weights, in the same order
    for model in (packed_model, padded_model):
        compile_language_model(model, jit_compile=False)

    from_packed = evaluate_language_model(packed_model, packed)
    from_padded = evaluate_language_model(padded_model, padded)
    assert from_packed["tokens"] == from_padded["tokens"] == stream.num_tokens - 1
    np.testing.assert_allclose(from_packed["perplexity"], from_padded["perplexity"], rtol=1e-5)

    alone = language_model(
        VOCAB, **dict(options, stateful=False, batch_size=None, sequence_length=None)
    )
    copy_trainable_weights(padded_model, alone)
    expected, count = _document_by_document(alone, stream)
    assert count == stream.num_tokens - 1
    np.testing.assert_allclose(from_packed["perplexity"], expected, rtol=1e-5)
    # The packed tokens read without their resets carry each document into the next: another
    # figure, so the comparison above would see a reset that did not happen.
    carried = padded_model.evaluate(
        packed.inputs.reshape(-1, sequence_length),
        packed.targets.reshape(-1, sequence_length),
        sample_weight=packed.weights.reshape(-1, sequence_length),
        batch_size=batch_size,
        verbose=0,
        return_dict=True,
    )
    assert abs(carried["perplexity"] - expected) > 1e-4 * expected


def test_batches_laid_out_otherwise_than_the_model_reads_them_are_refused():
    stream = _aligned_stream()
    options = dict(SMALL, batch_size=3, sequence_length=5)
    plain = compile_language_model(language_model(VOCAB, **options), jit_compile=False)
    resetting = compile_language_model(
        language_model(VOCAB, resets=True, **options), jit_compile=False
    )
    with pytest.raises(ValueError, match=r"packed .*resets=True"):
        evaluate_language_model(plain, make_bptt_batches(stream, 3, 5, pack=True))
    with pytest.raises(ValueError, match=r"padded .*resets=False"):
        evaluate_language_model(resetting, make_bptt_batches(stream, 3, 5))
