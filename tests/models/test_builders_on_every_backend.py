"""The model builders on the backend that runs the tests: a training step and a ``.keras``
round trip of each model, and generation by the step model."""

import keras
import numpy as np
import pytest

from tests.language_models import FORMS, KINDS, language_model
from tests.layer_test_case import dtype_policy
from tests.pair_encoders import snli_model
from tests.support import BACKEND, as_numpy, assert_close, count_train_step_traces
from tf_memlayers import SlidingWindowAttention
from tf_memlayers.layers import AttentionPooling, ConditionalEncoder, HeapCacheAttention
from tf_memlayers.models import (
    HeapCacheModel,
    build_fill_last_word_model,
    build_fixed_length_snli_model,
    build_language_model,
    build_snli_model,
    build_step_model,
    compile_fill_last_word_model,
    compile_language_model,
    compile_snli_model,
    generate,
    initial_step_state,
)

VOCAB, SMALL = 23, dict(units=12, embedding_dim=6, window=3, ngram=4)
TRACKED = []  # whether each step's logits of `_greedy_sampler` carried an autograd graph
# The training step (the SNLI and last-word models' by default): compiled by XLA on JAX
# (several times faster there), a TensorFlow graph on TensorFlow (which traces faster than XLA
# compiles), eager on torch (Keras's default there; torch.compile takes minutes per model).
JIT = BACKEND == "jax"


def _outputs(model, inputs):
    """``model``'s inference outputs as NumPy: on JAX by `predict_on_batch`, one compiled
    program (a direct call there compiles each operation on its own)."""
    direct = BACKEND == "tensorflow"
    outputs = model(inputs, training=False) if direct else model.predict_on_batch(inputs)
    return keras.tree.map_structure(as_numpy, outputs)


def _train(model, train):
    """``train()``'s logs, after checking that it traced the step once where it is traced
    (the compile helper built the optimizer: Keras on TensorFlow would otherwise make its
    variables inside the first trace, and trace again) and moved every trainable weight."""
    before = [as_numpy(weight).copy() for weight in model.trainable_weights]
    traces, logs = count_train_step_traces(model), train()
    assert len(traces) == 1 or BACKEND == "torch"  # eager there: one call per batch
    pairs = zip(model.trainable_weights, before)
    unchanged = [weight.path for weight, value in pairs if np.array_equal(as_numpy(weight), value)]
    assert not unchanged, f"weights the training step left unchanged: {unchanged}"
    return logs


def _round_trip(model, tmp_path):
    path = tmp_path / f"{model.name}.keras"
    model.save(path)
    return keras.saving.load_model(path)


def _reset_states(*models):
    for layer in [layer for model in models for layer in model.layers]:
        if getattr(layer, "stateful", False):
            layer.reset_state()


def _tokens(rng, shape, low=0, high=VOCAB):
    return rng.integers(low, high, shape).astype("int32")


# Every memory kind, and both forms, with the builder's options spread over the cases: stacked
# LSTMs with variational dropout, in-graph resets (dict inputs, `ResettableRNN`), tied
# embeddings, zero padding of the window, a stateless model, and the other optimizer and loss
# reduction of `compile_language_model`.
SGD_SUM = dict(optimizer="sgd", learning_rate=1.0, loss_reduction="sum_over_time")
CELL_DROPOUT = dict(stateful=False, recurrent_dropout=0.2)  # masks drawn by ResettableRNN
VARIATIONAL = dict(num_layers=2, dropout=0.2, variational_dropout=True)
LANGUAGE_MODELS = {
    "lstm-parallel": ("lstm", "parallel", VARIATIONAL),
    "attention-cell": ("attention", "cell", dict(resets=True, pad="zeros")),
    "key_value-parallel": ("key_value", "parallel", dict(tie_weights=True, resets=True)),
    "key_value_predict-cell": ("key_value_predict", "cell", CELL_DROPOUT),
    "ngram-parallel": ("ngram", "parallel", dict(compile=SGD_SUM)),
}


def language_model_case(case):
    """The model of ``LANGUAGE_MODELS[case]`` (5 steps, 2 rows if stateful), its options and
    its compile options."""
    kind, form, options = LANGUAGE_MODELS[case]
    options = dict(options)
    compile_options, stateful = options.pop("compile", {}), options.setdefault("stateful", True)
    options.update(batch_size=2 if stateful else None, sequence_length=5)
    return language_model(VOCAB, kind, form, **SMALL, **options), options, compile_options


def test_the_language_model_step_is_compiled_where_the_backend_compiles_by_default():
    """On torch ``jit_compile=True`` is `torch.compile`: minutes a model on a CPU."""
    model = language_model_case("attention-cell")[0]
    assert compile_language_model(model).jit_compile is (BACKEND != "torch")


@pytest.mark.parametrize("case", list(LANGUAGE_MODELS))
def test_language_model_trains_a_step_and_round_trips(case, tmp_path):
    # The cases cover every memory kind and form.
    assert {kind for kind, _, _ in LANGUAGE_MODELS.values()} == set(KINDS)
    assert {form for _, form, _ in LANGUAGE_MODELS.values()} == set(FORMS)
    model, options, compile_options = language_model_case(case)
    compile_language_model(model, jit_compile=JIT, **compile_options)
    rng = np.random.default_rng(0)
    tokens, targets, reset = _tokens(rng, (2, 5)), _tokens(rng, (2, 5)), np.zeros((2, 5), bool)
    reset[1, 3] = True  # a new document in the second row
    inputs = {"tokens": tokens, "reset": reset} if options.get("resets") else tokens

    # Weights well away from the small initial values, where the attention scores are nearly
    # flat and some gradients too small to move a float32 weight: every weight takes part.
    for weight in model.trainable_weights:
        weight.assign(rng.uniform(-0.5, 0.5, weight.shape).astype("float32"))
    logs = _train(model, lambda: model.train_on_batch(inputs, targets, return_dict=True))
    assert np.isfinite(logs["loss"]) and np.isfinite(logs["perplexity"])
    if compile_options.get("loss_reduction", "token_mean") == "token_mean":
        # One batch, every weight 1: the perplexity is exp(mean NLL), the loss that mean.
        np.testing.assert_allclose(logs["perplexity"], np.exp(logs["loss"]), rtol=1e-5)
    loaded = _round_trip(model, tmp_path)
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    assert int(as_numpy(loaded.optimizer.iterations)) == 1
    _reset_states(model, loaded)
    expected = _outputs(model, inputs)
    assert expected.shape == (2, 5, VOCAB)
    np.testing.assert_allclose(_outputs(loaded, inputs), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("tie_weights", [False, True])
def test_language_model_and_step_model_logits_are_float32_under_a_mixed_policy(tie_weights):
    with dtype_policy("mixed_float16"):
        lm = build_language_model(VOCAB, None, units=6, embedding_dim=6, stateful=False,
                                  sequence_length=None, tie_weights=tie_weights)  # fmt: skip
    step = build_step_model(lm)
    logits, *state = step([np.ones((2, 1), "int32"), *initial_step_state(step, 2)])
    dtypes = [keras.backend.standardize_dtype(x.dtype) for x in (logits, *state)]
    assert dtypes == ["float32", "float16", "float16"] and lm.output.dtype == "float32"
    assert keras.backend.standardize_dtype(lm(np.ones((2, 3), "int32")).dtype) == "float32"


# Keras creates a stateful `keras.layers.RNN`'s states outside its tracked variables
# (keras/src/layers/rnn/rnn.py), the only ones its JAX trainer threads through its steps.
KERAS_JAX_RNN_STATES = (
    "Keras's JAX trainer does not carry the states of a stateful keras.layers.RNN from one "
    "batch of fit or predict to the next (they are not among the variables it threads)"
)


@pytest.mark.xfail(BACKEND == "jax", reason=KERAS_JAX_RNN_STATES, strict=True)
def test_stateful_language_model_carries_its_state_in_fit_and_predict(tmp_path):
    model = build_language_model(VOCAB, units=12, embedding_dim=6, batch_size=2, sequence_length=5)
    compile_language_model(model, jit_compile=JIT)
    rng = np.random.default_rng(0)
    tokens, targets = _tokens(rng, (2, 5)), _tokens(rng, (2, 5))
    model.train_on_batch(tokens, targets)
    # The LSTM keeps its last states for the next segment.
    assert all(np.abs(as_numpy(state)).max() > 0 for state in model.get_layer("lstm_0").states)
    loaded = _round_trip(model, tmp_path)
    _reset_states(model, loaded)
    first = as_numpy(model.predict_on_batch(tokens))
    np.testing.assert_allclose(as_numpy(loaded.predict_on_batch(tokens)), first, atol=1e-6)
    # The next segment starts from the first one's states, in the loaded model too.
    second = as_numpy(model.predict_on_batch(tokens))
    assert np.abs(second - first).max() > 1e-6
    np.testing.assert_allclose(as_numpy(loaded.predict_on_batch(tokens)), second, atol=1e-6)


def test_language_model_with_attention_scores_trains_on_its_logits_alone():
    memories = [SlidingWindowAttention(window=3, return_attention_scores=s) for s in (True, False)]
    build = dict(stateful=False, sequence_length=5)  # A memory's other outputs are the model's:
    scored, plain = [build_language_model(VOCAB, m, 12, 6, **build) for m in memories]
    assert [tuple(x.shape) for x in scored.outputs] == [(None, 5, VOCAB), (None, 5, 3)]
    plain.set_weights(scored.get_weights())
    tokens, targets = _tokens(np.random.default_rng(0), (2, 2, 5))
    compiled = [compile_language_model(m, jit_compile=JIT) for m in (scored, plain)]
    scored, plain = [m.fit(tokens, y).history for m, y in zip(compiled, ([targets, None], targets))]
    assert list(scored) == ["loss", "softmax_perplexity"]
    np.testing.assert_allclose(list(scored.values()), list(plain.values()), rtol=1e-6)


@pytest.mark.parametrize("kind", ["any_encoder", "am_gru", "dual_am_gru", "word_by_word"])
def test_snli_model_trains_a_step_and_round_trips(kind, tmp_path):
    if kind == "any_encoder":  # an encoder the builder knows nothing of: LSTM, SimpleRNN, GRU
        sequences = dict(return_sequences=True, return_state=True)
        rnns = [keras.layers.LSTM(5, **sequences), keras.layers.SimpleRNN(3, **sequences)]
        encoder = ConditionalEncoder([*rnns, keras.layers.GRU(4, return_state=True)])
        model = build_snli_model(20, encoder, embedding_dim=6, classifier_units=7)
        assert model.get_layer("relu_0").units == 7
    else:
        model = snli_model(20, kind=kind, units=8, embedding_dim=6, num_copies=2)
    assert compile_snli_model(model).jit_compile is JIT
    rng = np.random.default_rng(0)
    premise, hypothesis = _tokens(rng, (4, 7), 2, 20), _tokens(rng, (4, 4), 2, 20)
    premise[1, 5:] = hypothesis[2, 3:] = 0  # padding, masked by the embedding
    inputs, labels = (premise, hypothesis), np.array([0, 1, 2, 0])
    # Weights far from the ±0.05 init, so that every layer shows in the probabilities.
    rng = np.random.default_rng(1)
    model.set_weights([rng.uniform(-0.8, 0.8, np.shape(w)) for w in model.get_weights()])
    logs = _train(model, lambda: model.train_on_batch(inputs, labels, return_dict=True))
    assert np.isfinite(logs["loss"]) and 0 <= logs["accuracy"] <= 1
    loaded = _round_trip(model, tmp_path)
    assert int(as_numpy(loaded.optimizer.iterations)) == 1
    first = loaded.get_layer("encoder").encoder_layers[0]
    if kind in ("am_gru", "dual_am_gru"):
        # fused_loop="auto": the fused loop on TensorFlow, Keras's loop elsewhere.
        looped = first.hypothesis_layer if kind == "dual_am_gru" else first
        assert looped.uses_fused_loop is (BACKEND == "tensorflow")
    if kind == "dual_am_gru":
        # Sharing survives loading: the premise pass runs the Dual cell's own AM-GRU cell.
        assert first.premise_layer.cell is first.hypothesis_layer.cell.premise_cell
    else:
        names = dict(any_encoder="LSTM", am_gru="AssociativeGRU")
        assert type(first).__name__ == names.get(kind, "ConditionalAttentionEncoder")
    expected = _outputs(model, inputs)
    assert expected.shape == (4, 3)
    np.testing.assert_allclose(expected.sum(-1), 1.0, rtol=1e-5)
    assert expected.std(0).max() > 1e-3  # the rows' probabilities differ
    np.testing.assert_allclose(_outputs(loaded, inputs), expected, rtol=1e-6, atol=1e-6)
    if kind in ("dual_am_gru", "word_by_word"):  # the loaded model's fixed-length copy
        fixed = build_fixed_length_snli_model(loaded, premise_length=7, hypothesis_length=4)
        assert fixed.input_shape == [(None, 7), (None, 4)]  # every loop unrolled
        np.testing.assert_allclose(_outputs(fixed, inputs), expected, atol=1e-5)
        # Quantized layers read from a file, and LoRA weights, carry over to the copy.
        loaded.quantize("float8", filters=lambda layer: layer.name != "relu_0")
        loaded = _round_trip(loaded, tmp_path)
        (dense := loaded.get_layer("relu_0")).enable_lora(2, lora_alpha=8)
        dense.lora_kernel_b.assign(np.full(dense.lora_kernel_b.shape, 0.5))
        fixed = build_fixed_length_snli_model(loaded, premise_length=7, hypothesis_length=4)
        np.testing.assert_allclose(_outputs(fixed, inputs), _outputs(loaded, inputs), atol=1e-5)


# Both modes (the paper's, and the reference code's frozen batch norms and sum over time) with
# attention pooling; the cache in the paper's mode.
@pytest.mark.parametrize(
    "cache_size, faithful_to_code", [(None, True), (12, False)], ids=["faithful_to_code", "cache"]
)
def test_last_word_model_trains_a_step_and_round_trips(cache_size, faithful_to_code, tmp_path):
    def build():
        pooling = AttentionPooling(4)
        if faithful_to_code:  # the reference code's attention pooling: a sum over the steps
            summing = [keras.layers.GlobalAveragePooling1D(), keras.layers.Rescaling(10.0)]
            pooling = keras.Sequential(summing)
        cache = HeapCacheAttention(cache_size, 4) if cache_size else None
        options = dict(sequence_length=10, embedding_dim=6, units=8)
        options.update(faithful_to_code=faithful_to_code)
        return build_fill_last_word_model(30, pooling, cache, **options)

    model = build()
    assert isinstance(model, HeapCacheModel) and model.weight_decay == 1e-5
    assert compile_fill_last_word_model(model, faithful_to_code=faithful_to_code).jit_compile is JIT
    rng = np.random.default_rng(0)
    contexts, words = _tokens(rng, (16, 10), 2, 30), _tokens(rng, (16,), 2, 30)
    contexts[:, :3] = 0  # left padding, as in the corpus
    # Two equal batches: one trace.
    logs = _train(model, lambda: model.fit(contexts, words, batch_size=8, verbose=0).history)
    assert np.isfinite(logs["loss"]).all()
    if cache_size:
        assert int(as_numpy(model.get_layer("cache_attention").fill_count())) > 0
    loaded = _round_trip(model, tmp_path)
    assert isinstance(loaded, HeapCacheModel) and loaded.weight_decay == 1e-5
    assert int(as_numpy(loaded.optimizer.iterations)) == 2
    # The weight decay is back on every trainable weight of the loaded model.
    assert len(loaded.losses) == len(loaded.trainable_weights)
    decay = 1e-5 * 0.5 * sum(float(np.sum(as_numpy(w) ** 2)) for w in model.trainable_weights)
    np.testing.assert_allclose(float(as_numpy(sum(loaded.losses))), decay, rtol=1e-5)
    if cache_size:
        caches = [as_numpy(m.get_layer("cache_attention").cache) for m in (loaded, model)]
        np.testing.assert_array_equal(*caches)
    expected = _outputs(model, contexts)
    assert expected.shape == (16, 30)
    np.testing.assert_allclose(_outputs(loaded, contexts), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind, form", [("key_value", "parallel"), ("ngram", "cell")])
def test_step_model_generates_the_same_tokens_after_round_trips(kind, form, tmp_path):
    options = dict(stateful=False, sequence_length=None, name=f"{kind}_{form}", **SMALL)
    model, rng = language_model(VOCAB, kind, form, **options), np.random.default_rng(3)
    for weight in model.trainable_weights:  # weights far from their initial values
        weight.assign(rng.normal(scale=0.5, size=weight.shape).astype("float32"))
    step_model = build_step_model(model)
    state = initial_step_state(step_model, 2)
    assert [s.shape for s in state] == [(2, *spec.shape[1:]) for spec in step_model.inputs[1:]]
    assert not any(s.any() for s in state)
    prompt = np.array([[3, 5], [7, 1]])
    greedy = generate(step_model, prompt, 4, temperature=0)
    assert greedy.shape == (2, 4)
    # Prompts of other lengths in one batch, right-padded, marked by a padding mask: each row
    # draws after its own prompt what it draws alone, with the built-in sampling or a sampler.
    padded, mask = np.array([[3, 5, 2], [7, 0, 0]]), np.array([[1, 1, 1], [1, 0, 0]], bool)
    alone = [generate(step_model, p[None, :n], 4, temperature=0) for p, n in zip(padded, (3, 1))]
    for options in (dict(temperature=0), dict(sampler=_greedy_sampler)):
        got = generate(step_model, padded, 4, padding_mask=mask, **options)
        np.testing.assert_array_equal(got, np.concatenate(alone))
    # Greedy: each token is the full model's most likely next token after the text so far.
    full = as_numpy(model.predict_on_batch(np.concatenate([prompt, greedy[:, :-1]], axis=1)))
    np.testing.assert_array_equal(greedy, np.argmax(full[:, prompt.shape[1] - 1 :], axis=-1))
    # The step model's recurrent weights are its own: the language model's compiled step (on
    # JAX it donates, and so deletes, its variables' buffers) leaves the step model working.
    np.testing.assert_array_equal(generate(step_model, prompt, 4, temperature=0), greedy)
    sampled = generate(step_model, prompt, 6, temperature=1.0, seed=11)

    loaded, loaded_step_model = _round_trip(model, tmp_path), _round_trip(step_model, tmp_path)
    for steps in (build_step_model(loaded), loaded_step_model):
        np.testing.assert_array_equal(generate(steps, prompt, 4, temperature=0), greedy)
        np.testing.assert_array_equal(generate(steps, prompt, 6, temperature=1.0, seed=11), sampled)
    inputs = [np.array([[4], [9]], "int32"), *state]
    assert_close(loaded_step_model(inputs), step_model(inputs), atol=1e-6, rtol=1e-6)
    # A sampler of keras-hub's contract (keras-hub's greedy sampler, restated here: keras-hub
    # is an optional extra) runs the step model inside the backend's while loop.
    TRACKED.clear()
    _greedy_sampler.variables = []  # none to carry: on JAX, compiled as keras-hub's samplers
    np.testing.assert_array_equal(generate(step_model, prompt, 4, sampler=_greedy_sampler), greedy)
    assert TRACKED and not any(TRACKED)  # on torch, no autograd graph kept across the steps
    # The sampler's loop is compiled once (TensorFlow, JAX) and kept: a second call traces
    # nothing; torch runs its steps eagerly.
    traced = len(TRACKED)
    np.testing.assert_array_equal(generate(step_model, prompt, 4, sampler=_greedy_sampler), greedy)
    assert len(TRACKED) == (2 * traced if BACKEND == "torch" else traced)
    # Weights set after the compiled step's first call (as training sets them) show in the next.
    bias = [w for w in step_model.weights if tuple(w.shape) == (VOCAB,)][-1]
    bias.assign(np.where(np.arange(VOCAB) == 2, 1e4, 0.0))
    assert (generate(step_model, prompt, 3, temperature=0) == 2).all()
    # So do the variables `quantize` puts in place (int8 here, zeroed: every logit is 0).
    bias.assign(np.zeros(VOCAB))
    step_model.quantize("int8")
    [w.assign(np.zeros(w.shape, "int8")) for w in step_model.weights if w.dtype == "int8"]
    assert (generate(step_model, prompt, 3, temperature=0) == 0).all()
    assert (generate(step_model, prompt, 4, sampler=_greedy_sampler) == 0).all()


def _greedy_sampler(next, prompt, cache=None, index=0, mask=None, model=None, **kwargs):
    """keras-hub's `Sampler.__call__` with a greedy `get_next_token`: ``next(prompt, cache, index)``
    gives the logits of position ``index``; the prompt buffer is filled where ``mask`` is false."""
    ops = keras.ops

    def body(prompt, cache, index):
        logits, _, cache = next(prompt, cache, index)
        TRACKED.append(getattr(logits, "requires_grad", False))  # torch's autograd
        token = ops.cast(ops.argmax(logits, axis=-1), prompt.dtype)
        token = ops.where(mask[:, index], prompt[:, index], token)
        # Both start indices of the index's dtype (JAX with 64-bit types: a literal 0 is int64).
        start = [ops.zeros_like(index), index]
        return ops.slice_update(prompt, start, token[:, None]), cache, index + 1

    loop_vars = (prompt, cache, ops.convert_to_tensor(index, "int32"))
    steps = ops.shape(prompt)[-1] - index
    prompt, _, _ = ops.while_loop(lambda *_: True, body, loop_vars, maximum_iterations=steps)
    return prompt
