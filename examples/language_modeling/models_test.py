"""The models of ``--model``, the presets, the equal parameter budget, and perplexity over a
whole split as the run scores it."""

import pathlib

import keras
import numpy as np
import pytest

from tf_memlayers.callbacks import StateResetCallback
from tf_memlayers.models import compile_language_model
from tf_memlayers.models.copy_trainable_weights import copy_trainable_weights, weight_role
from tf_memlayers.training import evaluate

from . import input_pipeline, main, models, train

VOCAB = 23


@pytest.mark.parametrize("kind", models.KINDS)
def test_every_kind_builds_both_forms_with_the_same_weight_roles(kind):
    forms = models.FORMS if kind != "lstm" else ("parallel",)
    options = dict(units=6, embedding_dim=4, window=2, ngram=3, stateful=False)
    built = [models.language_model(VOCAB, kind, form, **options) for form in forms]
    roles = [sorted(weight_role(w.path) for w in model.trainable_weights) for model in built]
    assert all(r == roles[0] for r in roles) and built[0].name == f"{kind}_language_model"
    assert any(role.startswith("memory/") for role in roles[0]) == (kind != "lstm")


@pytest.mark.parametrize("kind", models.KINDS)
def test_the_budget_width_is_the_closest_to_the_lstm_parameter_count(kind):
    common = dict(embedding_dim=10, window=3, ngram=4)
    count = lambda units: models.parameter_count(  # noqa: E731
        models.language_model(VOCAB, kind, units=units, stateful=False, **common)
    )
    budget = models.parameter_count(
        models.language_model(VOCAB, "lstm", units=20, stateful=False, **common)
    )
    units, found = models.units_for_budget(VOCAB, kind, budget, **common)
    multiple = models.pieces(kind, common["ngram"])
    assert units % multiple == 0 and found == count(units)
    for neighbour in (units - multiple, units + multiple):
        assert abs(found - budget) <= abs(count(neighbour) - budget)


@pytest.mark.parametrize("name", ["zaremba-small", "zaremba-medium"])
def test_zaremba_presets_build_the_papers_model(name):
    config = main.parse_args(["--config", name])
    model = train.build_model(config, 1000, batch_size=2, sequence_length=3)
    h = config.units  # embedding, two LSTM layers, softmax with a bias
    assert model.count_params() == 1000 * h + 2 * (4 * h * 2 * h + 4 * h) + h * 1000 + 1000
    dropouts = [layer for layer in model.layers if isinstance(layer, keras.layers.Dropout)]
    assert [layer.rate for layer in dropouts] == [config.dropout] * (3 if config.dropout else 0)
    np.testing.assert_array_equal(model.get_layer("lstm_0").cell.bias.numpy(), 0.0)


def perplexity(model, batches):
    resets = StateResetCallback(eval_resets=batches.resets)
    return evaluate(model, batches.dataset(), callbacks=[resets])["perplexity"]


def numpy_perplexity(model, ids, piece_starts):
    """exp(mean NLL) in NumPy of ``model`` (stateless), each piece of ``ids`` from a zero
    state (the last input's target is the next piece's first token)."""
    bounds = [*sorted(set(piece_starts)), len(ids) - 1]
    total = 0.0
    for start, stop in zip(bounds[:-1], bounds[1:]):
        logits = np.asarray(model(ids[None, start:stop]), np.float64)[0]
        logits -= logits.max(axis=-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
        total -= log_probs[np.arange(stop - start), ids[start + 1 : stop + 1]].sum()
    return np.exp(total / (len(ids) - 1))


def aligned():
    """Nine documents whose rows (batch 3, segments of 5) start at a document when padded and
    when packed: each row holds 20 pairs, in 4 segments packed, 5 padded."""
    lengths = [7, 3, 10, 4, 12, 4, 9, 2, 10]
    ids = np.random.default_rng(3).integers(1, VOCAB, sum(lengths)).astype("int32")
    return (ids, np.cumsum([0, *lengths[:-1]])), 3, 5


def generated():
    corpus = input_pipeline.generated_corpus(600, num_words=VOCAB - 2, sentences_per_document=4)
    return corpus.splits["valid"], 3, 7


@pytest.mark.parametrize("kind", ["lstm", "attention"])
@pytest.mark.parametrize("layout", [aligned, generated])
def test_a_split_is_scored_token_by_token_from_fresh_states(kind, layout):
    """Every target token is scored once, each document and each row from a fresh state: in
    the padded layout, states cleared from the host between batches; in the packed layout,
    the model's resets inside the graph. Where the rows start at documents in both layouts,
    the two perplexities are equal."""
    (ids, starts), batch_size, length = layout()
    options = dict(units=12, embedding_dim=6, window=3, init_scale=0.5)
    build = lambda **o: models.language_model(VOCAB, kind, **options, **o)  # noqa: E731
    plain = build(batch_size=batch_size, sequence_length=length)
    resetting = build(batch_size=batch_size, sequence_length=length, resets=True)
    alone = build(stateful=False, sequence_length=None)
    rng = np.random.default_rng(0)
    for weight in plain.trainable_weights:
        weight.assign(rng.uniform(-0.5, 0.5, weight.shape))
    for model in (resetting, alone):
        copy_trainable_weights(plain, model)
    found = []
    for pack, model in ((False, plain), (True, resetting)):
        compile_language_model(model, jit_compile=False)
        batches = input_pipeline.bptt_batches(ids, starts, batch_size, length, pack)
        # Where each row begins: at a document start or inside one (then read from zero).
        rows = input_pipeline.bptt_batches(np.arange(len(ids)), starts, batch_size, length, pack)
        expected = numpy_perplexity(alone, ids, [*starts, *rows.inputs[0, :, 0]])
        found.append(perplexity(model, batches))
        np.testing.assert_allclose(found[-1], expected, rtol=1e-5)
    if layout is aligned:
        np.testing.assert_allclose(found[0], found[1], rtol=1e-5)
    # Without the resets a row carries one document into the next: another figure.
    carried = evaluate(
        plain, input_pipeline.bptt_batches(ids, starts, batch_size, length).dataset()
    )
    assert abs(carried["perplexity"] - found[0]) > 1e-4 * found[0]


@pytest.mark.parametrize(
    "kind, option, owner",
    [
        ("key_value", dict(window=0), "window_attention_mechanism.py"),
        ("ngram", dict(ngram=1), "ngram_concat.py"),
    ],
)
def test_the_layer_that_takes_an_argument_checks_it(kind, option, owner):
    """`models` passes the memory's arguments on: the layer refuses a bad value, naming it."""
    with pytest.raises(ValueError, match="`window`" if "window" in option else "`n`") as raised:
        models.language_model(30, kind, units=8, embedding_dim=4, batch_size=2, **option)
    assert raised.traceback[-1].path.name in (owner, "_validation.py")
    assert owner in {entry.path.name for entry in raised.traceback}
    assert "check_" not in pathlib.Path(models.__file__).read_text()
