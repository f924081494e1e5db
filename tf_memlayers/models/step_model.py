"""A language model one token at a time, with its state in the open: for generation and serving.

A model from `build_language_model` keeps its recurrent state inside (a stateful model) or
starts every call from zeros. `build_step_model` turns it, whatever its memory and form, into a
model that reads one token per row and the state, and returns the logits and the new state::

    (tokens [batch, 1], *state) -> (logits [batch, 1, vocabulary], *new_state)

with the same weights. Running it token by token from `initial_step_state` gives, at every
position, the logits the full model gives on the whole sequence. The state is plain tensors,
so the step model generates text in a Python loop, and exports (``model.export``) and converts
(``tf.lite.TFLiteConverter``) as an ordinary stateless model.
"""

import contextlib
import functools

import keras
import numpy as np

from tf_memlayers._validation import check_int, check_number, check_optional_int, errors_named
from tf_memlayers.layers.philox_dropout import PhiloxDropout
from tf_memlayers.layers.window_attention.memory_sequence_layer import MemorySequenceLayer


def _stateless_copy(layer, **overrides):
    """A new layer of ``layer``'s class and config, with ``overrides`` and ``stateful=False``
    (and Keras's loop where the layer has a fused one, which runs whole sequences)."""
    config = dict(layer.get_config(), stateful=False, **overrides)
    if "fused_loop" in config:
        config["fused_loop"] = False
    return type(layer).from_config(config)


def _copy_weights(source, target):
    """Assigns ``target``'s weights from ``source`` (a layer of the same class and config, made
    in the same order): trainable or frozen alike; the memory a stateful sequence layer
    carries between calls, which the step layer does not have, is left out."""
    carried = getattr(source, "stateful", False) and not isinstance(source, keras.layers.RNN)
    weights = [w for w in source.weights if not (carried and w.name == "memory")]
    if [tuple(w.shape) for w in weights] != [tuple(w.shape) for w in target.weights]:
        raise ValueError(f"the weights of layer {source.name!r} do not match its step copy")
    for weight, value in zip(target.weights, weights):
        # A copy of the value: on JAX, assigning the variable itself would share its buffer,
        # which the source model's compiled steps (`fit`, `predict`) donate and delete.
        weight.assign(keras.ops.convert_to_numpy(value))


def _state_inputs(name, sizes, dtype):
    return [
        keras.Input((size,), dtype=dtype, name=f"{name}_state_{i}") for i, size in enumerate(sizes)
    ]


_RECURRENT = (keras.layers.RNN, MemorySequenceLayer)
# The layers a step model leaves out: the inputs and dropout (the step model is for inference).
_LEFT_OUT = (keras.layers.InputLayer, keras.layers.Dropout, PhiloxDropout)


def _recurrent_layers(model):
    """The model's recurrent layers in order: its LSTM layers, then its memory (a sequence
    layer with a carried memory, or the RNN over a memory cell). A layer it cannot step (a
    memory of another kind) is a `ValueError` naming it."""
    for layer in model.layers:
        if not isinstance(layer, (*_RECURRENT, *_LEFT_OUT)) and layer.name not in (
            "embedding",
            "softmax",
        ):
            raise ValueError(
                "build_step_model steps a language model as `build_language_model` builds "
                "it: its layer named 'embedding', its recurrent layers (keras.layers.RNN, or "
                "a sequence layer with a carried memory such as SlidingWindowAttention and "
                "NGramConcat) and its layer named 'softmax'; layer "
                f"{layer.name!r} ({type(layer).__name__}) is none of these. For a model of "
                "another shape (an encoder-decoder, say), build its step model from its own "
                "layers: `generate`'s docstring says what it takes and returns."
            )
    layers = [layer for layer in model.layers if isinstance(layer, _RECURRENT)]
    for layer in layers:
        if getattr(layer, "go_backwards", False):
            raise ValueError(
                f"build_step_model steps a language model forward, token by token; layer "
                f"{layer.name!r} ({type(layer).__name__}) runs backwards (go_backwards=True), "
                "each output reading the tokens after it."
            )
    return layers


@errors_named("build_step_model")
def build_step_model(model, name=None):
    """The step model of a language model from `build_language_model`.

    Args:
        model: A `keras.Model` from `tf_memlayers.models.build_language_model`, with any
            memory (a sequence layer with a carried memory, such as `SlidingWindowAttention`
            and `NGramConcat`, or a memory cell), stateful or not, trained or not (of a
            memory that returns attention scores, only the logits are kept).
        name: Optional string, the step model's name. Default: `None`
            (``"<model name>_step"``).

    Returns:
        A `keras.Model` with inputs ``[tokens, *state]`` (``tokens`` int32 ``[batch, 1]``;
        the state: each LSTM layer's ``h`` and ``c``, then the memory: the window or N-gram
        memory ``[batch, memory_size]``, or the states of the RNN over a memory cell) and
        outputs ``[logits, *new_state]`` in the same order. Each state input is named
        ``<layer>_state_<i>``. Dropout is left out (the step model is for inference). The
        embedding and output layers are ``model``'s own (so, as for any Keras layer called in
        two models, ``model.summary()`` then shows their shapes in the step model); the
        recurrent layers' weights are copies of ``model``'s at the time of the call.

    Raises:
        ValueError: If ``model`` is not a language model from `build_language_model`, or
            its memory is a layer the step model cannot step (neither a `keras.layers.RNN`
            nor a sequence layer with a carried memory, or one with ``go_backwards=True``);
            the message names it.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers.models import build_language_model
    >>> from tf_memlayers import SlidingWindowAttention
    >>> from tf_memlayers.models import build_step_model, initial_step_state
    >>> memory = SlidingWindowAttention(window=3, mode="key_value")
    >>> lm = build_language_model(30, memory, units=8, embedding_dim=6, stateful=False,
    ...                           sequence_length=None)
    >>> step = build_step_model(lm)
    >>> state = initial_step_state(step, batch_size=2)
    >>> logits, *state = step([np.array([[3], [4]]), *state])
    >>> tuple(logits.shape)
    (2, 1, 30)
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "`model` must be a keras.Model from tf_memlayers.models.build_language_model; got "
            f"{model!r} of type {type(model).__name__}."
        )
    layer_names = {layer.name for layer in model.layers}
    if "embedding" not in layer_names or not _recurrent_layers(model):
        raise ValueError(
            "`model` must be a language model from tf_memlayers.models.build_language_model "
            f"(an 'embedding' layer and recurrent layers); got layers {sorted(layer_names)}."
        )
    embedding = model.get_layer("embedding")
    dtype = keras.backend.standardize_dtype(embedding.compute_dtype)
    tokens = keras.Input((1,), dtype="int32", name="tokens")
    x = embedding(tokens)
    state_inputs, state_outputs = [], []
    for layer in _recurrent_layers(model):
        if isinstance(layer, keras.layers.RNN):
            # One step: unrolled, without a loop op (which TFLite cannot convert).
            step_layer = _stateless_copy(
                layer, return_sequences=True, return_state=True, unroll=True
            )
            sizes = keras.tree.flatten(layer.cell.state_size)
            states = _state_inputs(layer.name, sizes, dtype)
            x, *new_states = step_layer(x, initial_state=states)
        else:
            # Only the output and the memory: a layer's other outputs (attention scores) are
            # left out.
            step_layer = _stateless_copy(
                layer,
                return_memory=True,
                **(
                    {"return_attention_scores": False}
                    if "return_attention_scores" in layer.get_config()
                    else {}
                ),
            )
            states = _state_inputs(layer.name, [layer.memory_size], dtype)
            x, memory = step_layer(x, initial_memory=states[0])
            new_states = [memory]
        _copy_weights(layer, step_layer)
        state_inputs += states
        state_outputs += new_states
    if "softmax" in layer_names:
        logits = model.get_layer("softmax")(x)
    else:  # tied weights: the embedding's transpose is the output layer
        logits = embedding(x, reverse=True)
    return keras.Model(
        [tokens, *state_inputs], [logits, *state_outputs], name=name or f"{model.name}_step"
    )


@errors_named("initial_step_state")
def initial_step_state(step_model, batch_size):
    """The zero state of ``step_model`` (from `build_step_model`) for ``batch_size`` rows: the
    state a full model starts a sequence from.

    Args:
        step_model: A `keras.Model` from `build_step_model`.
        batch_size: Positive integer, the number of rows.

    Returns:
        A list of NumPy arrays, one per state input, in the order of the model's inputs.

    Example:

    >>> from tf_memlayers import SlidingWindowAttention
    >>> from tf_memlayers.models import build_language_model, build_step_model
    >>> from tf_memlayers.models import initial_step_state
    >>> lm = build_language_model(20, SlidingWindowAttention(window=2), units=8,
    ...                           embedding_dim=4, stateful=False, sequence_length=None)
    >>> [state.shape for state in initial_step_state(build_step_model(lm), 3)]
    [(3, 8), (3, 8), (3, 18)]
    """
    _check_step_model(step_model)
    return _zero_state(step_model, check_int("batch_size", batch_size, 1))


def _zero_state(step_model, batch_size):
    return [
        np.zeros((batch_size, *tuple(spec.shape)[1:]), keras.backend.standardize_dtype(spec.dtype))
        for spec in step_model.inputs[1:]
    ]


def _check_step_model(step_model):
    """Refuses a model that is not a step model: a step model takes ``[tokens [batch, 1],
    *state]`` and returns ``[logits, *new_state]``, one state output per state input."""
    inputs = getattr(step_model, "inputs", None) or []
    outputs = getattr(step_model, "outputs", None) or []
    if not (
        len(inputs) >= 2 and len(outputs) == len(inputs) and tuple(inputs[0].shape)[1:] == (1,)
    ):
        shapes = [tuple(x.shape) for x in inputs]
        raise ValueError(
            "`step_model` must be a step model from `build_step_model` (inputs: the tokens "
            f"[batch, 1] and the state; outputs: the logits and the new state); got "
            f"{getattr(step_model, 'name', step_model)!r} with inputs of shapes {shapes} and "
            f"{len(outputs)} output(s). Call `build_step_model(model)` on the language model "
            "first; a step model of your own returns every state it takes, in the same order "
            "(a memory it only reads, such as an encoder's outputs, unchanged)."
        )


@errors_named("generate")
def generate(
    step_model,
    prompt,
    num_tokens,
    temperature=1.0,
    seed=None,
    sampler=None,
    initial_state=None,
    end_token_id=None,
    padding_mask=None,
):
    """Continues each row of ``prompt`` by ``num_tokens`` tokens, one step at a time.

    The prompt is read token by token from the zero state (or from ``initial_state``, such as
    the states a decoder starts from after its encoder); then each new token is drawn from
    the softmax of the last logits divided by ``temperature`` (the most likely token with
    ``temperature=0``) and fed back. With a ``sampler``, keras-hub's samplers choose the
    tokens instead (greedy, random, top-k, top-p, beam search; keras-hub is the optional extra
    ``pip install "tf-memlayers[keras-hub]"``): the step model's state is the sampler's cache,
    a list of batch-major tensors, and its ``next(prompt, cache, index)`` reads the token
    before ``index`` with the step model. Each step runs the step model compiled, as Keras's
    ``predict`` runs a model (a `tf.function` on TensorFlow, ``jax.jit`` on JAX, compiled
    once per step model, on JAX again for each new batch size; weights set in between are
    read at each step), on the whole batch at once, also for a step model built under a
    distribution strategy (not split among its replicas). A sampler's loop is compiled whole,
    as keras-hub's language models compile theirs (a `tf.function` on TensorFlow, ``jax.jit``
    of the step model's and the sampler's variables on JAX: see ``sampler``), and kept for the
    next calls; on torch it runs eagerly, without autograd.

    Prompts of different lengths go in one batch right-padded, with a ``padding_mask`` that
    marks each row's tokens (as keras-hub's language models take them): each row draws its
    ``num_tokens`` new tokens after its own last one, greedily or by beam search the tokens it
    draws alone (a sampler draws for the rows of each length together, apart from the others).

    Args:
        step_model: A `keras.Model` from `build_step_model`, or one of your own with its
            layout: ``(tokens [batch, 1], *state) -> (logits [batch, 1, vocabulary],
            *new_state)``, one new state per state, in the same order. A decoder over an
            encoder's outputs takes them as states and returns them unchanged (through
            ``keras.layers.Identity``, as a model's outputs are layer outputs), with
            ``initial_state`` the encoder's; a beam search then copies them for each beam
            (the memory attention page, "Decoding", builds one).
        prompt: Integer array ``[batch, length]`` (``length >= 1``) of token ids.
        num_tokens: Non-negative integer, how many tokens to add.
        temperature: Float >= 0; 0 picks the most likely token. Default: `1.0`. Not with a
            ``sampler``, which has its own.
        seed: Optional integer, the seed of the draws. Default: `None`. Not with a
            ``sampler`` (a keras-hub sampler takes its own ``seed``).
        sampler: Optional keras-hub sampler: an instance (such as
            ``keras_hub.samplers.TopKSampler(k=5, seed=1)`` or ``BeamSampler(num_beams=4)``), a
            name ``keras_hub.samplers.get`` knows (``"greedy"``, ``"top_k"``, ...), or any
            callable with the samplers' call signature ``sampler(next, prompt, cache=...,
            index=..., mask=..., model=...)`` (and ``stop_token_ids=[end_token_id]`` with an
            ``end_token_id``) that returns the filled ``prompt``; on TensorFlow it is traced
            into one `tf.function` (write it with ``keras.ops``, not NumPy), once per
            sampler object, step model, prompt length and ``num_tokens`` (a name makes a new
            sampler at every call, seeded by Keras's seed; pass one instance to reuse its
            trace); on JAX so is one with a ``variables`` list (keras-hub's samplers: their
            seed generators' state), by ``jax.jit``, and one without runs as it is.
            Samplers that read the model's hidden states (contrastive search) and a beam
            search returning all its beams are refused: a step model returns no hidden
            states, and each row one text.
            Default: `None`.
        initial_state: Optional list of arrays, one per state input of ``step_model``, each
            with ``batch`` rows: the state the prompt is read from. Default: `None`
            (`initial_step_state`'s zeros).
        end_token_id: Optional integer, the token that ends a text: once a row has generated
            it, every later token of the row is it, and a sampler scores the row as ended
            there (a beam search ranks finished beams by their text up to the end token; the
            loop stops once every row has ended). Default: `None` (no end token).
        padding_mask: Optional boolean array ``[batch, length]``, true at each row's prompt
            tokens, which come first (right padding), at least one a row. Default: `None`
            (every token of ``prompt``).

    Returns:
        Integer NumPy array ``[batch, num_tokens]``: the generated tokens, each row's after
        its own prompt.

    Raises:
        ValueError: If ``step_model`` is not a step model (e.g. the language model itself),
            ``prompt`` is not a non-empty ``[batch, length]`` array of integers or holds ids
            outside the vocabulary, ``num_tokens`` is negative, ``temperature`` is negative
            or not finite, ``temperature``/``seed`` come with a ``sampler``,
            ``initial_state`` does not match the step model's state inputs,
            ``end_token_id`` is outside the vocabulary, or ``padding_mask`` is not of the
            prompt's shape, true at each row's first tokens only and at one at least.
        TypeError: If ``num_tokens`` is not an integer, ``temperature`` not a number, or
            ``sampler`` neither a sampler's name nor callable.
        ImportError: If ``sampler`` is a name and keras-hub is not installed.

    Example:

    >>> import numpy as np
    >>> from tf_memlayers import SlidingWindowAttention
    >>> from tf_memlayers.models import build_language_model, build_step_model
    >>> from tf_memlayers.models import generate
    >>> lm = build_language_model(20, SlidingWindowAttention(window=2), units=8,
    ...                           embedding_dim=4, stateful=False, sequence_length=None)
    >>> step = build_step_model(lm)
    >>> generate(step, np.array([[3, 4], [5, 6]]), 3, temperature=0).shape
    (2, 3)
    """
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or 0 in prompt.shape or not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(
            "`prompt` must be a non-empty integer array [batch, length]; got shape "
            f"{prompt.shape} and dtype {prompt.dtype}."
        )
    num_tokens = check_int("num_tokens", num_tokens, 0)
    temperature = check_number("temperature", temperature, 0.0)
    seed = check_optional_int("seed", seed, 0)
    if sampler is not None:
        sampler = _resolve_sampler(sampler)
        if temperature != 1.0 or seed is not None:
            raise ValueError(
                "`temperature` and `seed` do not apply with a `sampler`: give them to the "
                f"sampler (got temperature={temperature!r}, seed={seed!r})."
            )
    _check_step_model(step_model)
    lengths = _prompt_lengths(padding_mask, prompt)
    prompt = prompt[:, : lengths.max()]  # columns of padding alone: never read
    vocabulary_size = step_model.outputs[0].shape[-1]
    tokens = prompt[np.arange(prompt.shape[1]) < lengths[:, None]]
    outside = tokens[(tokens < 0) | (tokens >= vocabulary_size)]
    if outside.size:
        raise ValueError(
            f"`prompt` holds token ids outside [0, {vocabulary_size}), the step model's "
            f"vocabulary: {sorted(set(outside.tolist()))[:10]}."
        )
    if end_token_id is not None:
        end_token_id = check_int("end_token_id", end_token_id, 0)
        if end_token_id >= vocabulary_size:
            raise ValueError(
                f"`end_token_id` must be a token id in [0, {vocabulary_size}), the step "
                f"model's vocabulary; got {end_token_id}."
            )
    state = _start_state(step_model, initial_state, prompt.shape[0])
    state = [keras.ops.convert_to_tensor(s) for s in state]
    if num_tokens == 0:
        return np.zeros((prompt.shape[0], 0), int)

    run = _compiled_step(step_model)

    def step(tokens, state):
        logits, *state = run([keras.ops.convert_to_tensor(tokens, "int32"), *state])
        return np.asarray(keras.ops.convert_to_numpy(logits), "float64")[:, -1], state

    if sampler is not None:
        # The rows of each prompt length apart: a sampler starts every row at one position (a
        # beam search's scores would count the prompt tokens of a longer row as drawn).
        generated = np.zeros((len(prompt), num_tokens), int)
        keep = max(4, len(np.unique(lengths)))  # each length's compiled loop, kept
        for length in np.unique(lengths):
            rows = np.flatnonzero(lengths == length)
            part = [keras.ops.take(s, rows, axis=0) for s in state]
            # The sampler feeds the prompt's last token itself (its first `next`).
            for position in range(length - 1):
                _, part = step(prompt[rows, position : position + 1], part)
            part_prompt = prompt[rows, :length]
            generated[rows] = _sample(
                step_model, sampler, part_prompt, num_tokens, part, end_token_id, keep
            )
        return _after_the_end(generated, end_token_id)
    # The text so far: the prompt, then the tokens drawn; each row's draws start after its
    # own prompt, a shorter row drawing while a longer one still reads.
    # (int64: any token id, whatever the prompt's integer type)
    buffer = np.zeros((len(prompt), prompt.shape[1] + num_tokens), np.int64)
    buffer[:, : prompt.shape[1]] = prompt
    rows = np.arange(len(prompt))[:, None]
    own = lengths[:, None] + np.arange(num_tokens)  # each row's positions of its new tokens
    rng = np.random.default_rng(seed)
    for position in range(lengths.min() - 1):  # what every row reads before its first draw
        _, state = step(buffer[:, position : position + 1], state)
    for position in range(lengths.min() - 1, buffer.shape[1] - 1):
        logits, state = step(buffer[:, position : position + 1], state)
        if temperature == 0:
            tokens = np.argmax(logits, axis=-1)
        else:
            scaled = logits / temperature
            probabilities = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            tokens = np.array([rng.choice(len(p), p=p) for p in probabilities])
        drawn = position + 1 >= lengths
        buffer[:, position + 1] = np.where(drawn, tokens, buffer[:, position + 1])
    return _after_the_end(buffer[rows, own], end_token_id)


def _prompt_lengths(padding_mask, prompt):
    """Each row's prompt length from ``padding_mask`` (checked), or the prompt's width."""
    if padding_mask is None:
        return np.full(len(prompt), prompt.shape[1])
    mask = np.asarray(keras.ops.convert_to_numpy(padding_mask))
    lengths = mask.sum(axis=1) if mask.ndim == 2 else None
    if mask.shape != prompt.shape or mask.dtype != bool:
        problem = f"shape {mask.shape} and dtype {mask.dtype}"
    elif not np.array_equal(mask, np.arange(mask.shape[1]) < lengths[:, None]):
        problem = "a row with a padding position before a token (right padding only)"
    elif not lengths.all():
        problem = f"no token in rows {np.flatnonzero(lengths == 0).tolist()[:10]}"
    else:
        return lengths
    raise ValueError(
        f"`padding_mask` must be a boolean array of the prompt's shape {prompt.shape}, true "
        f"at each row's tokens, which come first, at least one a row; got {problem}."
    )


# The compiled steps of the latest step models, and the latest compiled sampler loops
# (TensorFlow and JAX), by `_latest`.
_STEPS, _TRACED = {}, {}


def _latest(kept, key, make, size=4):
    """``kept[key]`` (made by ``make()`` where missing), now the latest of the ``size``
    entries ``kept`` keeps. Each entry holds the objects whose ids its key names, so that
    those ids stay theirs."""
    value = kept.pop(key, None)
    kept[key] = make() if value is None else value
    for stale in list(kept)[:-size]:
        del kept[stale]
    return kept[key]


def _compiled_step(step_model):
    """``step_model``'s inference on ``[tokens, *state]``, compiled once per step model (and
    set of its variables) as Keras's ``predict`` compiles a model, and run on the whole batch
    at once (Keras's ``predict_on_batch`` splits it among a strategy's replicas)."""
    key = (id(step_model), _variable_ids(step_model))
    return _latest(_STEPS, key, lambda: _compile_step(step_model))


def _variable_ids(step_model):
    """The ids of ``step_model``'s variables: a step compiled on TensorFlow captures them, and
    `keras.Model.quantize` (or ``enable_lora``) puts others in their place."""
    return tuple(id(variable) for variable in step_model.weights)


def _compile_step(step_model):
    """A `tf.function` on TensorFlow, `jax.jit` of its stateless call on JAX (the weights
    passed at each step, so that training between calls shows), and eager without autograd
    on torch."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(lambda inputs: step_model(inputs, training=False), reduce_retracing=True)
    if backend == "jax":
        import jax

        def stateless(trainable, non_trainable, inputs):
            outputs, _ = step_model.stateless_call(trainable, non_trainable, inputs, training=False)
            return outputs

        compiled = jax.jit(stateless)

        def run(inputs):
            return compiled(
                [v.value for v in step_model.trainable_variables],
                [v.value for v in step_model.non_trainable_variables],
                inputs,
            )

        return run
    if backend == "torch":
        import torch

        def run(inputs):
            with torch.no_grad():
                return step_model(inputs, training=False)

        return run
    return lambda inputs: step_model(inputs, training=False)


def _after_the_end(tokens, end_token_id):
    """``tokens`` ``[batch, n]`` with every token after a row's first ``end_token_id`` set to
    it (unchanged without an end token)."""
    if end_token_id is None:
        return tokens
    ended = np.cumsum(tokens == end_token_id, axis=1) > 0
    return np.where(ended, end_token_id, tokens)


def _start_state(step_model, initial_state, batch_size):
    """``initial_state`` as NumPy arrays, checked against the step model's state inputs
    (their number, and each one's shape after the batch); the zero state when `None`."""
    if initial_state is None:
        return _zero_state(step_model, batch_size)
    specs = step_model.inputs[1:]
    state = [np.asarray(keras.ops.convert_to_numpy(s)) for s in initial_state]
    shapes = [tuple(s.shape) for s in state]
    fits = len(state) == len(specs) and all(
        shape[0] == batch_size
        and len(shape) == len(spec.shape)
        and all(want in (None, got) for want, got in zip(tuple(spec.shape)[1:], shape[1:]))
        for shape, spec in zip(shapes, specs)
    )
    if not fits:
        wanted = [(batch_size, *tuple(spec.shape)[1:]) for spec in specs]
        raise ValueError(
            f"`initial_state` must be {len(specs)} arrays of shapes {wanted} (the step "
            f"model's state inputs, {batch_size} rows as `prompt`); got shapes {shapes}."
        )
    return state


def _resolve_sampler(sampler):
    """``sampler`` as a callable sampler: a keras-hub sampler's name is looked up in
    keras-hub; a sampler that needs hidden states is refused."""
    if isinstance(sampler, str):
        try:
            import keras_hub
        except ImportError as error:
            raise ImportError(
                f"`sampler={sampler!r}` names a keras-hub sampler, and keras-hub is not "
                'installed: pip install "tf-memlayers[keras-hub]" (or pass a sampler instance).'
            ) from error
        name = sampler
        try:
            sampler = keras_hub.samplers.get(name)  # a new one, seeded by Keras's seed
        except KeyError:  # keras-hub's refusal of a name not in lowercase
            pass
        if isinstance(sampler, str):  # keras-hub hands back a name it does not know
            raise ValueError(
                f"`sampler={name!r}` names no keras-hub sampler: give one of keras-hub's "
                "names ('greedy', 'top_k', 'top_p', 'beam', ...) or an instance."
            )
    if not callable(sampler):
        raise TypeError(
            "`sampler` must be a keras-hub sampler (an instance or its name) or a callable "
            f"with the samplers' call signature; got {sampler!r} of type "
            f"{type(sampler).__name__}."
        )
    if "Contrastive" in type(sampler).__name__:
        raise ValueError(
            f"`sampler`: {type(sampler).__name__} reads the model's hidden states, and a step "
            "model returns only the logits and its state; use a greedy, random, top-k, top-p "
            "or beam sampler."
        )
    if getattr(sampler, "return_all_beams", False):
        raise ValueError(
            "`sampler`: a beam search with return_all_beams=True returns every beam and its "
            "score; `generate` returns one text per row: use return_all_beams=False."
        )
    return sampler


def _jax_compiled(run, step_model, sampler):
    """``run`` compiled by `jax.jit` with the step model's and the sampler's variables as its
    arguments (a `keras.StatelessScope` maps them), so that weights set between calls are read;
    the sampler's new variables (its seed generator's state) are assigned after each call."""
    import jax

    model_variables = list(step_model.variables)
    sampler_variables = list(sampler.variables)

    @jax.jit
    def compiled(model_values, sampler_values, buffer, cache, mask):
        mapping = [*zip(model_variables, model_values), *zip(sampler_variables, sampler_values)]
        with keras.StatelessScope(state_mapping=mapping) as scope:
            tokens = run(buffer, cache, mask)
        new = [scope.get_current_value(v) for v in sampler_variables]
        return tokens, [v if n is None else n for v, n in zip(sampler_values, new)]

    def call(buffer, cache, mask):
        model_values = [v.value for v in model_variables]
        sampler_values = [v.value for v in sampler_variables]
        tokens, new = compiled(model_values, sampler_values, buffer, cache, mask)
        for variable, value in zip(sampler_variables, new):
            variable.assign(value)
        return tokens

    return call


def _sample(step_model, sampler, prompt, num_tokens, state, end_token_id=None, keep=4):
    """Runs ``sampler`` over the buffer ``[prompt | num_tokens zeros]`` from ``state`` (the
    state after all but the prompt's last token); returns the tokens it wrote. The latest
    ``keep`` compiled loops are kept."""
    ops = keras.ops
    length = prompt.shape[1]
    buffer = np.concatenate([prompt, np.zeros((prompt.shape[0], num_tokens), prompt.dtype)], 1)
    mask = np.broadcast_to(np.arange(buffer.shape[1]) < length, buffer.shape)

    def next(prompt, cache, index):
        tokens = ops.take(prompt, ops.expand_dims(index - 1, 0), axis=1)
        logits, *cache = step_model([ops.cast(tokens, "int32"), *cache], training=False)
        logits = logits[:, -1]
        if end_token_id is not None:
            # A row that generated the end token has ended: all its mass stays on the end
            # token, so its score is that of its text up to the end.
            ended = ops.logical_and(ops.equal(tokens, end_token_id), index - 1 >= length)
            ended_logits = ops.where(
                ops.equal(ops.arange(ops.shape(logits)[-1]), end_token_id), 0.0, -1e9
            )
            logits = ops.where(ended, ops.cast(ended_logits, logits.dtype), logits)
        return logits, None, tuple(cache)

    extra = {} if end_token_id is None else {"stop_token_ids": [end_token_id]}

    def run(buffer, cache, mask):
        return sampler(
            next, buffer, cache=cache, index=length, mask=mask, model=step_model, **extra
        )

    # As keras-hub's models generate: the sampler's loop compiled once per step model, sampler
    # and prompt length (and per length of the buffer, num_tokens), not traced again at each
    # call: the latest few are kept (each holds its step model, the variables it reads and its
    # sampler, whose ids therefore stay theirs). On JAX only a sampler that lists its variables
    # (keras-hub's: its seed generator's state), which the compiled loop carries in and out.
    key = (id(step_model), _variable_ids(step_model), id(sampler), length, end_token_id)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        run = _latest(_TRACED, key, functools.partial(tf.function, run), keep)
    elif keras.backend.backend() == "jax" and hasattr(sampler, "variables"):
        compiled = functools.partial(_jax_compiled, run, step_model, sampler)
        run = _latest(_TRACED, key, compiled, keep)
    # On torch the sampler's steps run eagerly: without autograd, as `_compile_step`'s do (each
    # step's graph would otherwise be kept, memory growing with every token).
    no_grad = contextlib.nullcontext
    if keras.backend.backend() == "torch":
        import torch

        no_grad = torch.no_grad
    with no_grad():
        tokens = run(
            ops.convert_to_tensor(buffer.astype("int32")),
            tuple(ops.convert_to_tensor(s) for s in state),
            ops.convert_to_tensor(mask),
        )
    return np.asarray(keras.ops.convert_to_numpy(tokens))[:, length:].astype(int)
