"""The auto-encoders of the sequence-to-sequence example (Weissenborn 2016, §5.3), and their
decoding through step models.

Each ``--model`` is an encoder over the source's word vectors and a decoder over the target's,
with a softmax over the vocabulary; the encoder and the decoder have their own weights and
their own word vectors:

* ``"dual_am_gru"``: the paper's. An `AssociativeGRU` encoder; a `DualAssociativeGRU` decoder
  that starts from an empty memory and the encoder's last output and, at every step, reads the
  encoder's final memory (as the hypothesis reads the premise's in the SNLI model, without
  shared weights). ``dual_key="released"`` is the layout of the paper's auto-encoding code
  (``share_key=False``).
* ``"attention"``: a GRU encoder; a GRU decoder in `AttentionWrapper` (Luong's general score,
  input feeding) attending over the encoder's outputs, from the encoder's final state.
* ``"gru"``: a GRU encoder and a GRU decoder from its final state, the plain encoder-decoder
  the paper found the Dual AM-GRU to behave like.

`build_autoencoder` returns the teacher-forced training model and the two models decoding
uses: the encoder model (source ids -> the decoder's start state) and the decoder's step
model ``(token [batch, 1], *state) -> (logits [batch, 1, vocabulary], *new state)``, which
`tf_memlayers.models.generate` runs (greedily or with a keras-hub sampler).
"""

import keras
import numpy as np
from keras import ops

from tf_memlayers.layers import AssociativeGRU, AttentionRNN, AttentionWrapper, DualAssociativeGRU
from tf_memlayers.models import generate

MODELS = ("dual_am_gru", "attention", "gru")


class AutoEncoder:
    """The models of one auto-encoder, sharing their layers.

    Attributes:
        kind: One of `MODELS`.
        model: The training model ``[source [batch, S], decoder input [batch, T]] -> logits
            [batch, T, vocabulary]`` (teacher forcing). Its layers are named
            ``"source_embedding"``, ``"target_embedding"``, ``"encoder"``, ``"decoder"`` and
            ``"logits"``.
        encoder_model: ``source -> [*the decoder's start state]``.
        step_model: The decoder one token at a time (`tf_memlayers.models.generate`'s step
            model).
    """

    def __init__(self, kind, model, encoder_model, step_model):
        self.kind = kind
        self.model = model
        self.encoder_model = encoder_model
        self.step_model = step_model

    def memory_probe(self, source, decoder_input):
        """What the decoder read over ONE sentence, teacher-forced (the probes of the paper's
        Figure 3).

        Args:
            source: Int array ``[S]``, the source's ids (no padding).
            decoder_input: Int array ``[T]``, ``<s>`` and the words.

        Returns:
            Dict of float64 arrays. ``"dual_am_gru"``: ``"written"`` ``[S, units]`` (what the
            encoder wrote at each step), ``"keys"`` ``[S, units]`` (the keys it wrote under)
            and ``"read"`` ``[T, units]`` (what the decoder read from the encoder's memory at
            each step). ``"attention"``: ``"alignments"`` ``[T, S]``. ``"gru"``: empty.
        """
        layer = self.model.get_layer
        source = layer("source_embedding")(np.asarray(source, np.int32)[None])
        target = layer("target_embedding")(np.asarray(decoder_input, np.int32)[None])
        encoder, decoder = layer("encoder"), layer("decoder")
        if self.kind == "dual_am_gru":
            return _associative_probe(encoder.cell, decoder.cell, source[0], target[0])
        if self.kind == "attention":
            encoded, state = encoder(source)
            feed = ops.zeros((1, decoder.cell.feedback_size), encoded.dtype)
            alignments = decoder.attention_scores(target, encoded, initial_state=[state, feed])
            return {"alignments": np.asarray(ops.convert_to_numpy(alignments[0]), np.float64)}
        return {}

    def decode(self, source, max_steps, bos_id, eos_id, sampler=None):
        """Decodes each row of ``source`` (ids ``[batch, S]``, padded with 0) into at most
        ``max_steps`` ids, greedily or with ``sampler`` (a keras-hub sampler or its name),
        each row ended by its first ``eos_id`` (`generate`'s ``end_token_id``); every id after
        it is set to 0.

        Returns:
            int NumPy array ``[batch, max_steps]``.
        """
        state = predict(self.encoder_model, np.asarray(source, np.int32))
        state = list(state) if isinstance(state, (list, tuple)) else [state]
        prompt = np.full((len(source), 1), bos_id)
        tokens = generate(
            self.step_model,
            prompt,
            max_steps,
            initial_state=state,
            end_token_id=eos_id,
            sampler=sampler,
            **({} if sampler else {"temperature": 0}),
        )
        ended = np.cumsum(tokens == eos_id, axis=1) - (tokens == eos_id) > 0
        return np.where(ended, 0, tokens)


def predict(model, inputs):
    """``model.predict_on_batch(inputs)``, or under several workers, where Keras's ``predict``
    fails as its ``fit`` does (keras-team/keras#20585), the model called on this worker."""
    import tensorflow as tf

    if isinstance(model.distribute_strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return keras.tree.map_structure(ops.convert_to_numpy, model(inputs, training=False))
    return model.predict_on_batch(inputs)


def build_autoencoder(
    kind,
    vocabulary_size,
    units=64,
    embedding_dim=32,
    num_copies=8,
    dual_key="released",
    seed=123,
    init_scale=0.1,
):
    """The auto-encoder ``kind`` names (see the module docstring).

    Args:
        kind: One of `MODELS`.
        vocabulary_size: Integer, the number of word ids (id 0: padding).
        units: Integer (even for ``"dual_am_gru"``), the width of the encoder and the decoder.
        embedding_dim: Integer, the word vectors' width.
        num_copies, dual_key: The AM-GRU layers' (each argument is checked by its layer).
        seed: Integer, the seed of the weights and of the AM-GRU's permutations.
        init_scale: Positive float, every kernel starts U(-init_scale, init_scale).

    Returns:
        An `AutoEncoder`, its training model not compiled.
    """
    if kind not in MODELS:
        raise ValueError(f"`kind` must be one of {MODELS}; got {kind!r}.")
    init = keras.initializers.RandomUniform(
        -init_scale, init_scale, seed=keras.random.SeedGenerator(seed)
    )
    source = keras.Input((None,), dtype="int32", name="source")
    decoder_input = keras.Input((None,), dtype="int32", name="decoder_input")
    token = keras.Input((1,), dtype="int32", name="token")
    source_embedding = keras.layers.Embedding(
        vocabulary_size,
        embedding_dim,
        mask_zero=True,
        embeddings_initializer=init,
        name="source_embedding",
    )
    target_embedding = keras.layers.Embedding(
        vocabulary_size,
        embedding_dim,
        mask_zero=True,
        embeddings_initializer=init,
        name="target_embedding",
    )
    # The logits in float32 under a mixed-precision policy too: a softmax over the vocabulary.
    logits = keras.layers.Dense(
        vocabulary_size, kernel_initializer=init, dtype="float32", name="logits"
    )
    recurrent = dict(kernel_initializer=init, return_state=True)
    embedded_source = source_embedding(source)
    if kind == "dual_am_gru":
        encoder = AssociativeGRU(
            units, num_copies=num_copies, seed=seed, name="encoder", **recurrent
        )
        decoder = DualAssociativeGRU(
            units,
            num_copies=num_copies,
            dual_key=dual_key,
            seed=seed,
            return_sequences=True,
            name="decoder",
            **recurrent,
        )
        _, memory, last = encoder(embedded_source)
        # An empty memory, the encoder's last output, and its final memory to read.
        start = [ops.zeros_like(memory), last, memory]
    else:
        encoder = keras.layers.GRU(
            units,
            recurrent_initializer=init,
            name="encoder",
            return_sequences=kind == "attention",
            **recurrent,
        )
        encoded, state = encoder(embedded_source)
        if kind == "gru":
            decoder = keras.layers.GRU(
                units,
                recurrent_initializer=init,
                return_sequences=True,
                name="decoder",
                **recurrent,
            )
            start = [state]
        else:
            cell = AttentionWrapper(
                keras.layers.GRUCell(units, kernel_initializer=init, recurrent_initializer=init),
                score="general",
                kernel_initializer=init,
            )
            decoder = AttentionRNN(cell, return_sequences=True, return_state=True, name="decoder")
            # The GRU's final state, and a zero attention vector to feed the first step.
            feed = ops.repeat(ops.zeros_like(state[:, :1]), cell.feedback_size, axis=1)
            memory_mask = ops.not_equal(source, 0)
            start = [state, feed, encoded, ops.cast(memory_mask, encoded.dtype)]

    def run_decoder(embedded, state):
        """The decoder from ``state`` (the start state's layout); returns its outputs and the
        next state in the same layout."""
        if kind != "attention":
            outputs, *new_state = decoder(embedded, initial_state=state)
            return outputs, new_state
        cell_state, feed, encoded, memory_mask = state
        outputs, *new_state = decoder(
            embedded,
            memory=encoded,
            memory_mask=ops.cast(memory_mask, "bool"),
            initial_state=[cell_state, feed],
        )
        return outputs, [*new_state, encoded, memory_mask]

    outputs, _ = run_decoder(target_embedding(decoder_input), start)
    model = keras.Model([source, decoder_input], logits(outputs), name=f"autoencoder_{kind}")
    encoder_model = keras.Model(source, start, name=f"encoder_{kind}")

    # The decoder one token at a time: the same layers, the state in the open.
    state_inputs = [
        keras.Input(tuple(tensor.shape)[1:], dtype=tensor.dtype, name=f"state_{i}")
        for i, tensor in enumerate(start)
    ]
    step_outputs, new_state = run_decoder(target_embedding(token), state_inputs)
    # What passes through unchanged (the memory the decoder reads) goes out as a copy: a
    # model's outputs are layer outputs.
    new_state = [
        keras.layers.Identity()(s) if s is i else s for s, i in zip(new_state, state_inputs)
    ]
    step_model = keras.Model(
        [token, *state_inputs], [logits(step_outputs), *new_state], name=f"decoder_step_{kind}"
    )
    return AutoEncoder(kind, model, encoder_model, step_model)


def _associative_probe(encoder_cell, decoder_cell, source, target):
    """The AM-GRU encoder cell stepped over ``source`` ``[S, dim]`` from an empty memory, then
    the Dual AM-GRU decoder cell over ``target`` ``[T, dim]`` from an empty memory, the
    encoder's last output and its final memory (as `build_autoencoder` starts it)."""
    dtype = encoder_cell.variable_dtype
    states = [ops.zeros((1, size), dtype) for size in encoder_cell.state_size]
    written, keys, read = [], [], []
    for t in range(source.shape[0]):
        _, states, retrievals = encoder_cell.call_with_retrievals(
            ops.cast(source[None, t], dtype), states
        )
        written.append(retrievals["written"][0])
        keys.append(retrievals["key"][0])
    memory, last = states
    states = [ops.zeros_like(memory), last, memory]
    for t in range(target.shape[0]):
        _, states, retrievals = decoder_cell.call_with_retrievals(
            ops.cast(target[None, t], dtype), states
        )
        read.append(retrievals["source_read"][0])

    def as_array(rows):
        return np.stack([ops.convert_to_numpy(row) for row in rows]).astype(np.float64)

    return {"written": as_array(written), "keys": as_array(keys), "read": as_array(read)}


def compile_autoencoder(model, learning_rate=3e-3, clip_norm=5.0, jit_compile=False):
    """Adam with global-norm clipping. The logits carry the decoder input's mask, so the loss
    is the mean cross-entropy of the target's words and ``<eos>`` (the padding left out), and
    the accuracy theirs."""
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate, global_clipnorm=clip_norm or None),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # An object, not "accuracy": its variables exist before the train step is traced.
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
    )
    return model
