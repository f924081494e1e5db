"""The step model of a language model: the full model's logits at every position, generation
(with keras-hub's samplers too), export to SavedModel and TFLite, bad arguments."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.language_models import FORMS, KINDS, language_model
from tests.support import all_pairs, assert_close, tflite_runner
from tf_memlayers import AssociativeGRU
from tf_memlayers.models import build_language_model, build_step_model, generate, initial_step_state

VOCAB, STEPS, BATCH = 17, 6, 2


def _language_model(kind, form="parallel", stateful=False, **options):
    batch_size, sequence_length = (BATCH, STEPS) if stateful else (None, None)
    options.update(batch_size=batch_size, sequence_length=sequence_length, stateful=stateful)
    sizes = dict(units=6, embedding_dim=4, window=2, ngram=3)
    model, rng = language_model(VOCAB, kind, form, **(sizes | options)), np.random.default_rng(3)
    for weight in model.trainable_weights:  # weights far from their initial values
        weight.assign(rng.normal(scale=0.3, size=weight.shape).astype("float32"))
    return model


def _step_by_step(step_model, tokens):
    """The step model's logits at every position of ``tokens``, and its state after them."""
    state, logits = initial_step_state(step_model, tokens.shape[0]), []
    for position in range(tokens.shape[1]):
        step_logits, *state = step_model([tokens[:, position : position + 1], *state])
        state = [keras.ops.convert_to_numpy(s) for s in state]
        logits.append(keras.ops.convert_to_numpy(step_logits))
    return np.concatenate(logits, axis=1), state


def _full(model, tokens):
    logits = model(tokens, training=False)
    return keras.ops.convert_to_numpy(logits[0] if isinstance(logits, list) else logits)


# Every memory layer in both forms, each stateful and not, by pairs (`all_pairs`); the LSTM
# alone; and models with tied weights, attention scores as a second output, or frozen.
CASES = [pytest.param(*r.values, {}, id=r.id) for r in all_pairs(KINDS[1:], FORMS, [False, True])]
CASES += [("lstm", "parallel", False, {}), ("lstm", "parallel", True, {})]
CASES += [
    pytest.param("key_value", "parallel", False, {"tie_weights": True}, id="tied_weights"),
    pytest.param("attention", "cell", False, {"return_attention_scores": True}, id="scores"),
    pytest.param("key_value", "parallel", True, {"frozen": True}, id="frozen"),
]


@pytest.mark.parametrize("kind, form, stateful, options", CASES)
def test_step_model_gives_the_full_models_logits_at_every_position(kind, form, stateful, options):
    options = dict(options)
    frozen = options.pop("frozen", False)
    model = _language_model(kind, form, stateful, num_layers=2, dropout=0.3, **options)
    model.trainable = not frozen
    tokens = np.random.default_rng(0).integers(0, VOCAB, size=(BATCH, STEPS))
    steps, _ = _step_by_step(build_step_model(model), tokens)
    np.testing.assert_allclose(steps, _full(model, tokens), rtol=0, atol=1e-5)


def test_step_model_names_its_state_and_generates_from_a_seed_or_a_given_state():
    step_model = build_step_model(_language_model("ngram", form="cell"))
    names = [spec.name for spec in step_model.inputs]
    # The N-gram cell wraps the top LSTM cell: its states are the LSTM's h and c and the memory.
    assert names == ["tokens", "memory_rnn_state_0", "memory_rnn_state_1", "memory_rnn_state_2"]
    zeros = initial_step_state(step_model, 2)
    assert [s.shape for s in zeros] == [(2, 6)] * 3 and not any(s.any() for s in zeros)
    prompt = np.array([[3, 5], [7, 1]])
    assert len({generate(step_model, prompt, 8, seed=s).tobytes() for s in range(6)}) > 1
    assert generate(step_model, prompt, 0).shape == (2, 0)
    # The state after reading [4, 9] first: generating from it continues [4, 9, 3, 5].
    first = np.full((2, 2), [4, 9])
    _, state = _step_by_step(step_model, first)
    longer = np.concatenate([first, prompt], axis=1)
    from_state = generate(step_model, prompt, 3, temperature=0, initial_state=state)
    np.testing.assert_array_equal(from_state, generate(step_model, longer, 3, temperature=0))
    from_zeros = generate(step_model, prompt, 3, temperature=0, initial_state=zeros)
    np.testing.assert_array_equal(from_zeros, generate(step_model, prompt, 3, temperature=0))
    np.testing.assert_array_equal(generate(step_model, prompt, 3, temperature=1e-4), from_zeros)


@pytest.fixture(scope="module")
def lstm_step_model():
    return build_step_model(_language_model("lstm"))


def _not_a_language_model():
    inputs = keras.Input((3,))
    return keras.Model(inputs, keras.layers.Dense(2)(inputs))


def _projection_model():
    projection = keras.layers.Dense(4, name="projection")
    return build_language_model(VOCAB, projection, 6, 4, stateful=False, sequence_length=None)


P = [[1, 2]]  # a prompt
# The bad call of the LSTM's step model ``s``, "<its exception's type>: <part of its message>".
g = lambda *args, **kwargs: lambda s: generate(s, *args, **kwargs)  # noqa: E731
state = lambda *args: lambda s: initial_step_state(s, *args)  # noqa: E731
G, STATE = generate, initial_step_state
ALL_BEAMS = type("BeamSampler", (), {"return_all_beams": True, "__call__": print})()
BAD_CALLS = [
    (g(np.zeros((2, 0), int), 2), "ValueError: `prompt` must be a non-empty"),
    (g([1.5, 2.5], 2), "ValueError: `prompt` must be a non-empty integer"),
    (g([[1, -3]], 2), "ValueError: outside [0, 17), the step model's vocabulary: [-3]"),
    (g([[1, 17, 40]], 2), "ValueError: [0, 17), the step model's vocabulary: [17, 40]"),
    (g(P, -1), "ValueError: `num_tokens` must be >= 0, got -1"),
    (g(P, 2, temperature=-0.5), "ValueError: `temperature` must be a finite number >="),
    (g(P, 2, temperature=float("nan")), "ValueError: `temperature` must be a finite"),
    (g(P, 2, seed=1.5), "TypeError: `seed` must be an integer, got 1.5 of type float"),
    (g(P, 2, seed=-1), "ValueError: `seed` must be >= 0, got -1"),
    (g(P, 2, end_token_id=17), "ValueError: `end_token_id` must be a token id in [0, 17)"),
    (g(P, 2, sampler=3), "TypeError: `sampler` must be a keras-hub sampler"),
    (g(P, 2, sampler="nosuch"), "ValueError: `sampler='nosuch'` names no keras-hub sampler"),
    (g(P, 2, sampler="Greedy"), "ValueError: `sampler='Greedy'` names no keras-hub sampler"),
    (g(P, 2, sampler=ALL_BEAMS), "ValueError: `generate` returns one text per row: use return"),
    (g(P, 2, temperature=0, sampler=print), "ValueError: `temperature` and `seed` do not"),
    (g(P, 2, initial_state=[np.zeros((1, 6))]), "ValueError: must be 2 arrays of shapes"),
    (g(P * 2, 2, initial_state=[np.zeros((1, 6))] * 2), "ValueError: 2 rows as `prompt`"),
    (g(P, 2, padding_mask=[[1, 1]]), "ValueError: got shape (1, 2) and dtype int64"),
    (g(P, 2, padding_mask=[[False, True]]), "ValueError: got a row with a padding position before"),
    (g(P, 2, padding_mask=[[False, False]]), "ValueError: got no token in rows [0]"),
    (state(0), "ValueError: `batch_size` must be >= 1, got 0"),
    (state(2.5), "TypeError: `batch_size` must be an integer, got 2.5"),
    # A language model is not its step model (one output, and one input or tokens and resets).
    (lambda s: STATE(_language_model("lstm"), 2), "ValueError: `step_model` must be a step model"),
    (lambda s: G(_language_model("key_value"), P, 2), "ValueError: Call `build_step_model(model)`"),
    (lambda s: G(_language_model("ngram"), P, 2), "ValueError: own returns every state it takes"),
    (lambda s: G(_language_model("lstm", resets=True), P * 2, 2), "ValueError: `step_model` must"),
    (lambda s: build_step_model(_not_a_language_model()), "ValueError: build_language_model"),
    (lambda s: build_step_model("x"), "TypeError: `model` must be a keras.Model"),
    (lambda s: build_step_model(_projection_model()), "ValueError: 'projection' (Dense) is none"),
    (lambda s: build_step_model(_projection_model()), "ValueError: build its step model from"),
]


def test_a_fused_loop_memory_steps_with_keras_loop_and_a_backward_one_is_refused():
    options = dict(units=6, embedding_dim=4, stateful=False, sequence_length=None)
    memory = AssociativeGRU(6, 2, return_sequences=True, fused_loop=True)
    model = build_language_model(VOCAB, memory, **options)
    tokens = np.random.default_rng(0).integers(0, VOCAB, size=(BATCH, STEPS))
    steps, _ = _step_by_step(build_step_model(model), tokens)
    np.testing.assert_allclose(steps, _full(model, tokens), rtol=0, atol=1e-5)
    backward = keras.layers.GRU(6, return_sequences=True, go_backwards=True, name="gru")
    with pytest.raises(ValueError, match="layer 'gru' .GRU. runs backwards"):
        build_step_model(build_language_model(VOCAB, backward, **options))


@pytest.mark.parametrize("call, expected", BAD_CALLS, ids=[expected for _, expected in BAD_CALLS])
def test_a_bad_argument_is_named(call, expected, lstm_step_model):
    error, _, fragment = expected.partition(": ")
    info = pytest.raises((TypeError, ValueError), call, lstm_step_model)
    assert type(info.value).__name__ == error and fragment in str(info.value), str(info.value)


def test_a_token_id_wider_than_the_prompts_integer_type_is_drawn_as_it_is():
    tokens, state = keras.Input((1,), dtype="int32"), keras.Input((2,))
    bias = keras.initializers.Constant(np.where(np.arange(300) == 299, 1e4, 0.0))  # draws 299
    logits = keras.layers.Dense(300, bias_initializer=bias)(keras.layers.Embedding(300, 2)(tokens))
    step = keras.Model([tokens, state], [logits, keras.layers.Identity()(state)])
    assert (generate(step, np.ones((1, 2), np.int8), 3, temperature=0) == 299).all()


# N = 2: no earlier pieces to carry (an empty window, which TFLite must size).
CONVERTED = [("key_value", "parallel", 3), ("ngram", "cell", 3), ("ngram", "parallel", 2)]


@pytest.mark.parametrize("kind, form, n", CONVERTED)
def test_exported_and_converted_step_models_generate_the_same_tokens(kind, form, n, tmp_path):
    step_model = build_step_model(_language_model(kind, form, ngram=n))
    step_model.export(str(tmp_path / "saved"), verbose=False)
    saved = tf.saved_model.load(str(tmp_path / "saved"))
    tokens, state = np.array([[4], [9]], "int32"), initial_step_state(step_model, 2)
    assert_close(saved.serve([tokens, *state]), step_model([tokens, *state]), atol=1e-6)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "saved"))
    runner, names = tflite_runner(converter.convert()), [spec.name for spec in step_model.inputs]

    def lite_step(tokens, state):
        outputs = runner(**dict(zip(names, [tokens, *state])))
        # Keras names the outputs output_0, output_1, ... in the model's order.
        logits, *state = (outputs[f"output_{i}"] for i in range(len(outputs)))
        return logits, state

    prompt = np.array([[3, 5], [7, 1]], "int32")
    expected = generate(step_model, prompt, 5, temperature=0)
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
            scores, candidates = _log_softmax(_full(model, texts)[:, -1]), []
            for b, (score, text) in enumerate(beams):
                if end is not None and end in text[len(row) :]:
                    candidates.append((score, text + [end]))
                    continue
                candidates += [(score + s, text + [token]) for token, s in enumerate(scores[b])]
            beams = sorted(candidates, key=lambda c: -c[0])[:num_beams]
        best.append(beams[0][1][len(row) :])
    return np.array(best)


@pytest.mark.parametrize("prompt_length", [1, 3])
def test_keras_hub_samplers_and_an_end_token_drive_generation(prompt_length, monkeypatch):
    keras_hub = pytest.importorskip("keras_hub", reason="the samplers come from keras-hub")
    model = _language_model("key_value_predict")
    step_model = build_step_model(model)
    prompt = np.array([[3, 5, 7], [2, 2, 9]])[:, :prompt_length]
    greedy = generate(step_model, prompt, 6, temperature=0)
    samplers = keras_hub.samplers
    for sampler in ("greedy", samplers.TopKSampler(k=1, seed=0), samplers.BeamSampler(num_beams=1)):
        np.testing.assert_array_equal(generate(step_model, prompt, 6, sampler=sampler), greedy)
    # Beam search carries the step model's state as its cache, one copy per beam, and reorders it as
    # the beams are chosen: the same tokens as a beam search over the full model's logits.
    beam_sampler = keras_hub.samplers.BeamSampler(num_beams=3)
    beams = generate(step_model, prompt, 4, sampler=beam_sampler)
    unended = _beam_search(model, prompt, 4, num_beams=3)
    np.testing.assert_array_equal(beams, unended)
    if prompt_length == 1:
        return
    # Prompts of other lengths in one batch, right-padded: each row's beams as alone.
    padded, mask = np.array([[3, 5, 7], [2, 0, 0]]), np.arange(3) < np.array([[3], [1]])
    alone = [_beam_search(model, padded[i : i + 1, :n], 4, 3) for i, n in enumerate((3, 1))]
    got = generate(step_model, padded, 4, sampler=beam_sampler, padding_mask=mask)
    np.testing.assert_array_equal(got, np.concatenate(alone))
    # Random samplers draw from their own seed generators.
    top_p = [keras_hub.samplers.TopPSampler(p=0.9, seed=seed) for seed in range(3)]
    drawn = [generate(step_model, prompt, 6, sampler=sampler) for sampler in top_p]
    assert len({draw.tobytes() for draw in drawn}) > 1
    assert all(((0 <= draw) & (draw < VOCAB)).all() for draw in drawn)
    # A sampler by name is a new one at every call, seeded by Keras's seed.
    keras.utils.set_random_seed(1)
    seeded = generate(step_model, prompt, 6, sampler="random")
    keras.utils.set_random_seed(1)
    np.testing.assert_array_equal(generate(step_model, prompt, 6, sampler="random"), seeded)
    assert not np.array_equal(beams, greedy[:, :4])  # a likelier continuation than greedy's
    # An end token ends a row for every way of choosing.
    end = int(greedy[0, 1])  # a token greedy generation emits early
    ended = generate(step_model, prompt, 6, temperature=0, end_token_id=end)
    for row in range(2):
        first = list(greedy[row]).index(end) if end in greedy[row] else 6
        np.testing.assert_array_equal(ended[row, : first + 1], greedy[row, : first + 1])
        assert (ended[row, first:] == end).all()
    by_name = generate(step_model, prompt, 6, sampler="greedy", end_token_id=end)
    np.testing.assert_array_equal(by_name, ended)
    # Only a generated end token ends a row, not one that ends the prompt.
    closed, draw = np.c_[prompt, [end, end]], keras_hub.samplers.RandomSampler
    free = generate(step_model, closed, 6, sampler=draw(seed=0))
    got = generate(step_model, closed, 6, sampler=draw(seed=0), end_token_id=end)
    np.testing.assert_array_equal(got, np.where(np.cumsum(free == end, 1) > 0, end, free))
    assert (got != end).any()
    # A beam search ranks an ended beam by its text up to the end token (here row 1 ends at
    # once, where a search scoring the tokens after the end would not).
    beams = generate(step_model, prompt, 4, end_token_id=end, sampler=beam_sampler)
    np.testing.assert_array_equal(beams, _beam_search(model, prompt, 4, 3, end=end))
    assert not np.array_equal(beams, np.where(np.cumsum(unended == end, 1) > 0, end, unended))
    # A sampler that cannot drive a step model, and a sampler by name without keras-hub.
    with pytest.raises(ValueError, match="ContrastiveSampler reads the model's hidden states"):
        generate(step_model, prompt, 2, sampler=keras_hub.samplers.ContrastiveSampler())
    monkeypatch.setitem(__import__("sys").modules, "keras_hub", None)  # not installed
    with pytest.raises(ImportError, match=r'pip install "tf-memlayers\[keras-hub\]"'):
        generate(step_model, prompt, 2, sampler="top_k")
