"""The step model of a language model: token by token with explicit state, it gives the full
model's logits at every position, generates, and exports to SavedModel and TFLite."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import KINDS, language_model
from tf_memlayers.models import (
    build_language_model,
    build_step_model,
    generate,
    initial_step_state,
)

VOCAB, STEPS, BATCH = 17, 6, 2


def _language_model(kind, form="parallel", stateful=False, **options):
    model = language_model(
        VOCAB,
        kind=kind,
        units=6,
        embedding_dim=4,
        window=2,
        ngram=3,
        form=form,
        stateful=stateful,
        batch_size=BATCH if stateful else None,
        sequence_length=STEPS if stateful else None,
        **options,
    )
    rng = np.random.default_rng(3)
    for weight in model.trainable_weights:  # weights far from their initial values
        weight.assign(rng.normal(scale=0.3, size=weight.shape).astype("float32"))
    return model


def _step_by_step(step_model, tokens):
    state = initial_step_state(step_model, tokens.shape[0])
    logits = []
    for position in range(tokens.shape[1]):
        step_logits, *state = step_model([tokens[:, position : position + 1], *state])
        state = [keras.ops.convert_to_numpy(s) for s in state]
        logits.append(keras.ops.convert_to_numpy(step_logits))
    return np.concatenate(logits, axis=1)


def _full(model, tokens):
    logits = model(tokens, training=False)
    return keras.ops.convert_to_numpy(logits[0] if isinstance(logits, list) else logits)


CASES = [
    (kind, form, stateful)
    for kind in KINDS
    for form in (("parallel", "cell") if kind != "lstm" else ("parallel",))
    for stateful in (False, True)
]


@pytest.mark.parametrize("kind, form, stateful", CASES)
def test_step_model_gives_the_full_models_logits_at_every_position(kind, form, stateful):
    model = _language_model(kind, form, stateful, layers=2, dropout=0.3)
    tokens = np.random.default_rng(0).integers(0, VOCAB, size=(BATCH, STEPS))
    step_model = build_step_model(model)
    np.testing.assert_allclose(
        _step_by_step(step_model, tokens), _full(model, tokens), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize(
    "kind, options",
    [("key_value", {"tie_weights": True}), ("attention", {"return_attention_scores": True})],
    ids=["tied_weights", "attention_scores"],
)
def test_step_model_of_tied_and_probing_models(kind, options):
    model = _language_model(kind, **options)
    tokens = np.random.default_rng(1).integers(0, VOCAB, size=(BATCH, STEPS))
    np.testing.assert_allclose(
        _step_by_step(build_step_model(model), tokens), _full(model, tokens), rtol=0, atol=1e-5
    )


def test_step_model_of_a_frozen_model_has_its_weights():
    model = _language_model("key_value", stateful=True, layers=2)
    model.trainable = False
    tokens = np.random.default_rng(2).integers(0, VOCAB, size=(BATCH, STEPS))
    np.testing.assert_allclose(
        _step_by_step(build_step_model(model), tokens), _full(model, tokens), rtol=0, atol=1e-5
    )


def test_step_model_names_its_state_and_starts_from_zeros():
    step_model = build_step_model(_language_model("ngram", form="cell"))
    names = [spec.name for spec in step_model.inputs]
    # The N-gram cell wraps the top LSTM cell: its states are the LSTM's h and c and the memory.
    assert names == ["tokens", "memory_rnn_state_0", "memory_rnn_state_1", "memory_rnn_state_2"]
    state = initial_step_state(step_model, 3)
    assert [s.shape for s in state] == [(3, 6)] * 3 and not any(s.any() for s in state)


def test_greedy_generation_follows_the_full_models_most_likely_token():
    model = _language_model("key_value_predict")
    prompt = np.array([[3, 5, 7], [2, 2, 9]])
    generated = generate(build_step_model(model), prompt, 4, temperature=0)
    assert generated.shape == (2, 4)
    text = prompt
    for position in range(4):
        expected = np.argmax(_full(model, text)[:, -1], axis=-1)
        np.testing.assert_array_equal(generated[:, position], expected)
        text = np.concatenate([text, expected[:, None]], axis=1)


def test_sampled_generation_is_set_by_its_seed():
    step_model = build_step_model(_language_model("attention"))
    prompt = np.array([[1, 2]])
    first = generate(step_model, prompt, 8, temperature=1.0, seed=5)
    assert np.array_equal(first, generate(step_model, prompt, 8, temperature=1.0, seed=5))
    draws = {tuple(generate(step_model, prompt, 8, seed=s)[0]) for s in range(6)}
    assert len(draws) > 1
    assert generate(step_model, prompt, 0).shape == (1, 0)


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ({"prompt": np.zeros((2, 0), int)}, "`prompt`"),
        ({"prompt": np.array([1.5, 2.5])}, "`prompt`"),
        ({"num_tokens": -1}, "`num_tokens`"),
        ({"temperature": -0.5}, "`temperature`"),
        ({"temperature": float("nan")}, "`temperature`"),
        ({"prompt": np.array([[1, -3]])}, r"`prompt` holds token ids outside \[0, 17\).*\[-3\]"),
        ({"prompt": np.array([[1, 17, 40]])}, r"outside \[0, 17\).*\[17, 40\]"),
    ],
)
def test_generation_names_a_bad_argument(arguments, fragment):
    step_model = build_step_model(_language_model("lstm"))
    call = dict(prompt=np.array([[1, 2]]), num_tokens=2) | arguments
    with pytest.raises(ValueError, match=fragment):
        generate(step_model, **call)


@pytest.mark.parametrize(
    "seed, error, fragment",
    [
        ("a", TypeError, "`seed` must be an integer, got 'a' of type str"),
        (1.5, TypeError, "`seed` must be an integer, got 1.5 of type float"),
        (-1, ValueError, "`seed` must be >= 0, got -1"),
    ],
)
def test_generation_names_a_bad_seed(seed, error, fragment):
    step_model = build_step_model(_language_model("lstm"))
    with pytest.raises(error) as raised:
        generate(step_model, np.array([[1, 2]]), 2, seed=seed)
    assert fragment in str(raised.value)


def test_the_initial_state_names_a_bad_batch_size_or_model():
    model = _language_model("lstm")
    step_model = build_step_model(model)
    for batch_size, error, fragment in [
        (0, ValueError, "`batch_size` must be >= 1, got 0"),
        (2.5, TypeError, "`batch_size` must be an integer, got 2.5"),
        ("2", TypeError, "`batch_size` must be an integer, got '2'"),
    ]:
        with pytest.raises(error) as raised:
            initial_step_state(step_model, batch_size)
        assert fragment in str(raised.value)
    # The language model is not its step model: no state would come back.
    with pytest.raises(ValueError, match=r"`step_model` must be a step model.*build_step_model"):
        initial_step_state(model, 2)


@pytest.mark.parametrize("resets", [False, True])
def test_generation_from_the_language_model_itself_names_build_step_model(resets):
    """One output and one input (or tokens and resets): not a step model."""
    model = _language_model("key_value", resets=resets)
    refused = r"`step_model` must be a step model.*build_step_model"
    for prompt in (np.array([[1, 2]]), np.array([[1, 2], [3, 4]])):
        with pytest.raises(ValueError, match=refused):
            generate(model, prompt, 2)


def test_a_model_that_is_not_a_language_model_is_refused():
    inputs = keras.Input((3,))
    with pytest.raises(ValueError, match="build_language_model"):
        build_step_model(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    with pytest.raises(TypeError, match="`model` must be a keras.Model .* got 'x' of type str"):
        build_step_model("x")


def test_a_memory_the_step_model_cannot_step_is_named():
    model = build_language_model(
        VOCAB,
        keras.layers.Dense(4, name="projection"),
        units=6,
        embedding_dim=4,
        stateful=False,
        sequence_length=None,
    )
    with pytest.raises(ValueError, match="layer 'projection' \\(Dense\\) is none of these"):
        build_step_model(model)


@pytest.mark.parametrize("kind, form", [("key_value", "parallel"), ("ngram", "cell")])
def test_exported_and_converted_step_models_generate_the_same_tokens(kind, form, tmp_path):
    step_model = build_step_model(_language_model(kind, form))
    step_model.export(str(tmp_path / "saved"), verbose=False)
    saved = tf.saved_model.load(str(tmp_path / "saved"))
    tokens = np.array([[4], [9]], "int32")
    state = initial_step_state(step_model, 2)
    for keras_out, served_out in zip(step_model([tokens, *state]), saved.serve([tokens, *state])):
        np.testing.assert_allclose(
            np.asarray(served_out), keras.ops.convert_to_numpy(keras_out), rtol=0, atol=1e-6
        )

    interpreter_module = pytest.importorskip(
        "ai_edge_litert.interpreter", reason="the TFLite check needs ai-edge-litert"
    )
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved"))
    interpreter = interpreter_module.Interpreter(model_content=converter.convert())
    runner = interpreter.get_signature_runner()
    names = [spec.name for spec in step_model.inputs]
    output_names = sorted(runner.get_output_details())

    def lite_step(tokens, state):
        outputs = runner(**dict(zip(names, [tokens, *state])))
        # Keras names the outputs output_0, output_1, ... in the model's order.
        values = [
            outputs[name] for name in sorted(output_names, key=lambda n: int(n.split("_")[-1]))
        ]
        return values[0], values[1:]

    prompt = np.array([[3, 5], [7, 1]], "int32")
    expected = generate(step_model, prompt, 5, temperature=0)
    state = initial_step_state(step_model, 2)
    for position in range(prompt.shape[1]):
        logits, state = lite_step(prompt[:, position : position + 1], state)
    generated = []
    for _ in range(5):
        token = np.argmax(logits[:, -1], axis=-1).astype("int32")
        generated.append(token)
        logits, state = lite_step(token[:, None], state)
    np.testing.assert_array_equal(np.stack(generated, axis=1), expected)


def _log_softmax(logits):
    logits = np.asarray(logits, np.float64)
    top = logits.max(-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


def _beam_search(model, prompt, num_tokens, num_beams, end=None):
    """Beam search over the full model's logits, row by row: every beam extended by every
    token, the ``num_beams`` most likely kept; the most likely beam at the end. A beam that
    generated ``end`` has ended: it goes on with ``end`` alone, at no cost."""
    best = []
    for row in prompt:
        beams = [(0.0, list(row))]
        for _ in range(num_tokens):
            texts = np.array([text for _, text in beams])
            scores = _log_softmax(_full(model, texts)[:, -1])
            candidates = []
            for b, (score, text) in enumerate(beams):
                if end is not None and end in text[len(row) :]:
                    candidates.append((score, text + [end]))
                    continue
                candidates += [
                    (score + scores[b, token], text + [token]) for token in range(scores.shape[-1])
                ]
            beams = sorted(candidates, key=lambda c: -c[0])[:num_beams]
        best.append(beams[0][1][len(row) :])
    return np.array(best)


@pytest.mark.parametrize("prompt_length", [1, 3])
def test_keras_hub_samplers_drive_generation(prompt_length):
    keras_hub = pytest.importorskip("keras_hub", reason="the samplers come from keras-hub")
    model = _language_model("key_value_predict")
    step_model = build_step_model(model)
    prompt = np.array([[3, 5, 7], [2, 2, 9]])[:, :prompt_length]
    greedy = generate(step_model, prompt, 5, temperature=0)
    for sampler in (
        "greedy",
        keras_hub.samplers.TopKSampler(k=1, seed=0),
        keras_hub.samplers.BeamSampler(num_beams=1),
    ):
        np.testing.assert_array_equal(generate(step_model, prompt, 5, sampler=sampler), greedy)
    # Beam search carries the step model's state as its cache, one copy per beam, and
    # reorders it as the beams are chosen: the same tokens as a beam search over the full
    # model's logits.
    beams = generate(step_model, prompt, 4, sampler=keras_hub.samplers.BeamSampler(num_beams=3))
    np.testing.assert_array_equal(beams, _beam_search(model, prompt, 4, num_beams=3))
    if prompt_length == 3:  # here the beams find a likelier continuation than greedy's
        assert not np.array_equal(beams, greedy[:, :4])
    # Random samplers draw from their own seed generators.
    drawn = {
        tuple(
            generate(
                step_model, prompt, 6, sampler=keras_hub.samplers.TopPSampler(p=0.9, seed=seed)
            ).ravel()
        )
        for seed in range(4)
    }
    assert len(drawn) > 1
    assert all(0 <= token < VOCAB for draw in drawn for token in draw)


def test_an_end_token_ends_a_row_for_every_way_of_choosing():
    model = _language_model("key_value_predict")
    step_model = build_step_model(model)
    prompt = np.array([[3, 5, 7], [2, 2, 9]])
    greedy = generate(step_model, prompt, 6, temperature=0)
    end = int(greedy[0, 1])  # a token greedy generation emits early
    ended = generate(step_model, prompt, 6, temperature=0, end_token_id=end)
    for row in range(2):
        first = list(greedy[row]).index(end) if end in greedy[row] else 6
        np.testing.assert_array_equal(ended[row, : first + 1], greedy[row, : first + 1])
        assert (ended[row, first:] == end).all()
    with pytest.raises(ValueError, match=r"`end_token_id` must be a token id in \[0, 17\)"):
        generate(step_model, prompt, 2, end_token_id=17)
    keras_hub = pytest.importorskip("keras_hub", reason="the samplers come from keras-hub")
    np.testing.assert_array_equal(
        generate(step_model, prompt, 6, sampler="greedy", end_token_id=end), ended
    )
    # A beam search ranks an ended beam by its text up to the end token (here row 1 ends at
    # once, where a search scoring the tokens after the end would not).
    beams = generate(
        step_model, prompt, 4, end_token_id=end, sampler=keras_hub.samplers.BeamSampler(num_beams=3)
    )
    np.testing.assert_array_equal(beams, _beam_search(model, prompt, 4, 3, end=end))
    unended = _beam_search(model, prompt, 4, 3)
    assert not np.array_equal(beams, np.where(np.cumsum(unended == end, 1) > 0, end, unended))


def test_a_bad_sampler_is_named(monkeypatch):
    step_model = build_step_model(_language_model("lstm"))
    prompt = np.array([[1, 2]])
    with pytest.raises(TypeError, match="`sampler` must be a keras-hub sampler.*int"):
        generate(step_model, prompt, 2, sampler=3)
    with pytest.raises(ValueError, match="`temperature` and `seed` do not apply"):
        generate(step_model, prompt, 2, temperature=0, sampler=lambda *a, **k: None)
    keras_hub = pytest.importorskip("keras_hub", reason="the samplers come from keras-hub")
    with pytest.raises(ValueError, match="ContrastiveSampler reads the model's hidden states"):
        generate(step_model, prompt, 2, sampler=keras_hub.samplers.ContrastiveSampler())
    monkeypatch.setitem(__import__("sys").modules, "keras_hub", None)  # not installed
    with pytest.raises(ImportError, match=r'pip install "tf-memlayers\[keras-hub\]"'):
        generate(step_model, prompt, 2, sampler="top_k")


def test_generation_from_a_given_state():
    model = _language_model("key_value")
    step_model = build_step_model(model)
    prompt = np.array([[3, 5], [7, 1]])
    # The state after reading [4, 9] first: generating from it continues [4, 9, 3, 5].
    state = initial_step_state(step_model, 2)
    for token in (4, 9):
        _, *state = step_model([np.full((2, 1), token, "int32"), *state])
        state = [keras.ops.convert_to_numpy(s) for s in state]
    longer = np.concatenate([np.array([[4, 9], [4, 9]]), prompt], axis=1)
    from_state = generate(step_model, prompt, 3, temperature=0, initial_state=state)
    np.testing.assert_array_equal(from_state, generate(step_model, longer, 3, temperature=0))
    zeros = initial_step_state(step_model, 2)
    np.testing.assert_array_equal(
        generate(step_model, prompt, 3, temperature=0, initial_state=zeros),
        generate(step_model, prompt, 3, temperature=0),
    )
    with pytest.raises(ValueError, match=r"`initial_state` must be \d+ arrays of shapes"):
        generate(step_model, prompt, 3, initial_state=state[:-1])
    with pytest.raises(ValueError, match="2 rows as `prompt`"):
        generate(step_model, prompt, 3, initial_state=[s[:1] for s in state])
