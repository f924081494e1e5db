"""NumPy float64 references of `AttentionWrapper` (Bahdanau et al. 2015, Luong et al. 2015) and
`WordByWordAttention` (Rocktäschel et al. 2016) around a SimpleRNN cell, step by step, and the
checks their test modules share."""

import keras
import numpy as np

from tests.support import as_numpy, assert_close, gradients


def masked_softmax(scores, mask):
    """Softmax over the last axis where ``mask`` is true; a row with none gets zeros."""
    scores = np.where(mask, scores, -np.inf)
    top = np.max(np.where(mask, scores, -1e300), axis=-1, keepdims=True)
    weights = np.where(mask, np.exp(np.where(mask, scores - top, 0.0)), 0.0)
    total = weights.sum(-1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), 0.0)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def monotonic_reference(p, previous, mode):
    """Raffel et al. (2017): the alignments of a step from its stopping probabilities ``p``
    ``[batch, length]`` and the previous step's alignments: the expectation (eq. 9,
    ``alpha_j = p_j sum_{k <= j} alpha'_k prod_{k <= l < j} (1 - p_l)``, for the ``parallel``
    and ``recursive`` modes), or (``hard``) one-hot at the first j at or after the previous
    position with p_j > 1/2, zeros where none is. Written for complex ``p`` too."""
    alpha = np.zeros(
        np.broadcast_shapes(np.shape(p), np.shape(previous)), np.result_type(p, previous)
    )
    for b, j in np.ndindex(*alpha.shape):
        if mode != "hard":
            alpha[b, j] = p[b, j] * sum(
                previous[b, k] * np.prod(1 - p[b, k:j]) for k in range(j + 1)
            )
    for b in range(alpha.shape[0] if mode == "hard" else 0):
        start = np.flatnonzero(previous[b] != 0)
        chosen = [
            j for j in range(start[0] if start.size else p.shape[1], p.shape[1]) if p[b, j] > 0.5
        ]
        alpha[b, chosen[:1]] = 1.0
    return alpha


def attention_reference(
    query, memory, mask, w, score, normalize, scale, monotonic_mode, probability_fn, before
):
    """One step's context and weights over ``memory`` (``mask`` false at padding) from
    ``query``, with the weights ``w`` and the options of `AttentionMechanism`; ``before``: the
    previous alignments of monotonic attention."""
    if score == "additive":
        hidden = (memory @ w["memory_kernel"]) + (query @ w["query_kernel"])[:, None]
        vector = w["score_vector"]
        if normalize:
            hidden = hidden + w["score_bias"]
            vector = w["score_norm"] * vector / np.sqrt(np.sum(vector**2))
        e = np.tanh(hidden) @ vector
    elif score == "dot":
        e = np.einsum("bld,bd->bl", memory, query)
    else:
        e = np.einsum("bld,bd->bl", memory @ w["memory_kernel"], query)
    if scale:
        e = w["score_scale"] * e
    if monotonic_mode:
        p = np.where(mask, sigmoid(e + w["sigmoid_bias"]), 0.0)
        alpha = monotonic_reference(p, before, monotonic_mode)
    elif probability_fn == "hardmax":
        top = np.where(mask, e, -np.inf).argmax(-1)
        alpha = np.where(mask.any(-1, keepdims=True), np.eye(e.shape[-1])[top], 0.0)
    else:
        alpha = (masked_softmax if probability_fn == "softmax" else probability_fn)(e, mask)
    return np.einsum("bl,bld->bd", alpha, memory), alpha


def attention_wrapper_reference(
    x,
    memory,
    mask,
    cell_weights,
    w,
    score,
    position,
    output_attention,
    normalize=False,
    scale=False,
    sequence_mask=None,
    input_feeding=True,
    monotonic_mode=None,
    probability_fn="softmax",
    attention_layer="luong",
):
    """The wrapper around a SimpleRNN cell (h = tanh(x W + h U + b)): outputs and weights;
    with ``monotonic_mode``, Raffel et al.'s (2017) attention, which starts one-hot at the
    memory's first vector (written for complex weights too: no softmax then).
    ``probability_fn``: ``"softmax"``, ``"hardmax"`` or a NumPy ``f(scores, mask)``;
    ``attention_layer``: ``"luong"``, ``"context"`` or a NumPy ``f([c; h], weights)``.
    One mechanism of `several_mechanisms_reference`."""

    def attention_of(contexts, h):
        if attention_layer == "context":
            return contexts[0]
        joined = np.concatenate([contexts[0], h], -1)
        if attention_layer == "luong":
            return np.tanh(joined @ w["attention_kernel"])
        return attention_layer(joined, w)

    options = (score, normalize, scale, monotonic_mode, probability_fn)
    outputs, (alignments,) = several_mechanisms_reference(
        x,
        [memory],
        [mask],
        cell_weights,
        [(w, options)],
        attention_of,
        position,
        output_attention,
        input_feeding,
        sequence_mask,
    )
    return outputs, alignments


def word_by_word_reference(
    x, Y, mask, cell_weights, w, output_attention=True, sequence_mask=None, initial_h=None
):
    """Rocktäschel et al. (2016), §2.4, around a SimpleRNN cell (h = tanh(x W + h U + b)),
    step by step in float64, in the paper's column-vector form (each matrix below is the
    transpose of the layer's kernel: ``W^y = memory_kernel^T`` and so on)::

        M_t = tanh(W^y Y + (W^h h_t + W^r r_{t-1}) e_L^T)
        alpha_t = softmax(w^T M_t)
        r_t = Y alpha_t^T + tanh(W^t r_{t-1})
        h*_t = tanh(W^p r_t + W^x h_t)

    ``Y`` is the memory ``[batch, L, k]`` (each row's premise as columns ``y_j``); the cell
    starts from ``initial_h`` (default zeros) and r_0 = 0. Returns the outputs ``[batch,
    time, ...]`` and the weights ``[batch, time, L]``."""
    kernel, recurrent, bias = cell_weights
    units, k = recurrent.shape[0], Y.shape[-1]
    W_y = w["memory_kernel"].T
    W_h, W_r = w["query_kernel"][:units].T, w["query_kernel"][units:].T
    W_t = w["transition_kernel"].T
    vector = w["score_vector"]
    batch, steps = x.shape[:2]
    h = np.zeros((batch, units)) if initial_h is None else initial_h
    r = np.zeros((batch, k))
    if sequence_mask is None:
        sequence_mask = np.ones((batch, steps), bool)
    outputs, alignments, previous = [], [], None
    for t in range(steps):
        new_h = np.tanh(x[:, t] @ kernel + h @ recurrent + bias)
        new_r, out = np.zeros_like(r), []
        alphas = []
        for b in range(batch):
            Y_b = Y[b].T  # [k, L]
            M = np.tanh(W_y @ Y_b + np.outer(W_h @ new_h[b] + W_r @ r[b], np.ones(Y_b.shape[1])))
            alpha = masked_softmax(vector @ M, mask[b])
            new_r[b] = Y_b @ alpha + np.tanh(W_t @ r[b])
            if output_attention:
                W_p = w["attention_kernel"][:k].T
                W_x = w["attention_kernel"][k:].T
                out.append(np.tanh(W_p @ new_r[b] + W_x @ new_h[b]))
            else:
                out.append(new_h[b])
            alphas.append(alpha)
        out = np.stack(out)
        keep = sequence_mask[:, t][:, None]
        h, r = np.where(keep, new_h, h), np.where(keep, new_r, r)
        previous = out if previous is None else np.where(keep, out, previous)
        outputs.append(np.where(keep, out, previous))
        alpha = np.stack(alphas)
        alignments.append(np.where(keep, alpha, alignments[-1]) if alignments else alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


def data(rng, shapes, dtype="float64"):
    """``(x, memory, memory_mask)`` of ``shapes = (batch, steps, length, memory_dim,
    input_dim)``, the second row's memory padded from position 4, the third row's all padding
    (nothing to attend to)."""
    batch, steps, length, memory_dim, input_dim = shapes
    x = rng.normal(size=(batch, steps, input_dim)).astype(dtype)
    memory = rng.normal(size=(batch, length, memory_dim)).astype(dtype)
    mask = np.ones((batch, length), bool)
    mask[1, 4:] = False  # padding
    mask[2] = False
    return x, memory, mask


def declared_memory(batch):
    """The suites' memory of the attention cells: ``{"memory": [batch, 4, 6]}``."""
    return {"memory": np.random.default_rng(batch).normal(size=(batch, 4, 6)).astype("float32")}


def randomize(layer, rng, *data, scale=0.7):
    """Every weight of ``layer`` (built first by a call on ``data``: x, memory, memory_mask)
    drawn from U(-scale, scale)."""
    if data:
        layer(data[0], memory=data[1], memory_mask=data[2])
    layer.set_weights([rng.uniform(-scale, scale, np.shape(v)) for v in layer.get_weights()])


def wrapper_weights(layer):
    """``((kernel, recurrent_kernel, bias) of the wrapped SimpleRNN cell, {name: weight} of
    the wrapper's own})`` of an `AttentionRNN`, in float64."""
    wrapper, cell = layer.cell, layer.cell.cell
    cell_weights = tuple(as_numpy(v).astype(np.float64) for v in cell.weights)
    own = {
        v.path.split("/")[-1]: as_numpy(v).astype(np.float64)
        for v in wrapper.weights
        if all(v is not c for c in cell.weights)
    }
    return cell_weights, own


def check_cell_loop_matches_layer(layer, x, memory, mask):
    """The built `AttentionRNN` ``layer``'s cell called step by step gives the layer's
    outputs and gradients (weights, inputs and memory); the memory gets a gradient."""
    wrapper, steps = layer.cell, x.shape[1]

    def by_cell(x, memory):
        states = [keras.ops.zeros((x.shape[0], s)) for s in wrapper.state_size]
        outputs = []
        for t in range(steps):
            out, states = wrapper(x[:, t], states, memory=memory, memory_mask=mask)
            outputs.append(out)
        return keras.ops.sum(keras.ops.stack(outputs, 1) ** 2)

    def by_layer(x, memory):
        return keras.ops.sum(layer(x, memory=memory, memory_mask=mask) ** 2)

    loss_cell, grads_cell, input_grads_cell = gradients(by_cell, layer.weights, [x, memory])
    loss_layer, grads_layer, input_grads_layer = gradients(by_layer, layer.weights, [x, memory])
    np.testing.assert_allclose(loss_cell, loss_layer, rtol=1e-5)
    for a, b in zip(grads_cell + input_grads_cell, grads_layer + input_grads_layer):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-4)
    assert np.abs(input_grads_layer[1]).max() > 1e-3  # the memory gets a gradient
    return grads_layer


def check_state_carries_over(layer, x, memory, mask):
    """Two calls of ``layer`` (``return_sequences`` and ``return_state``), the second from
    the first's states, give one call's outputs; returns the states between them."""
    whole, *_ = layer(x, memory=memory, memory_mask=mask)
    first, *states = layer(x[:, :2], memory=memory, memory_mask=mask)
    second, *_ = layer(x[:, 2:], memory=memory, memory_mask=mask, initial_state=states)
    assert_close(
        np.concatenate([as_numpy(first), as_numpy(second)], 1), whole, atol=1e-6, rtol=1e-7
    )
    return states


def several_mechanisms_reference(
    x,
    memories,
    masks,
    cell_weights,
    mechanisms,
    attention_of,
    position,
    output_attention,
    input_feeding=True,
    sequence_mask=None,
):
    """The wrapper with several mechanisms around a SimpleRNN cell: each mechanism ``(w,
    options)`` (its weights, and `attention_reference`'s score, normalize, scale,
    monotonic_mode and probability_fn) attends over its memory with the same query, and
    ``attention_of(contexts, h)`` joins them into the attention vector. Returns the outputs
    and each mechanism's weights ``[batch, time, length]``."""
    kernel, recurrent, bias = cell_weights
    batch, steps = x.shape[:2]
    h = np.zeros((batch, recurrent.shape[0]))
    if position == "after":
        fed = np.zeros_like(attention_of([m[:, 0] for m in memories], h))
    else:
        fed = np.zeros_like(h)
    if sequence_mask is None:
        sequence_mask = np.ones((batch, steps), bool)
    before = [np.eye(m.shape[1])[np.zeros(batch, int)] for m in memories]

    def attend(query):
        found = [
            attention_reference(query, m, k, w, *options, b)
            for m, k, (w, options), b in zip(memories, masks, mechanisms, before)
        ]
        return [c for c, _ in found], [a for _, a in found]

    outputs, alignments = [], []
    for t in range(steps):
        if position == "after":
            cell_input = np.concatenate([x[:, t], fed], -1) if input_feeding else x[:, t]
            new_h = np.tanh(cell_input @ kernel + h @ recurrent + bias)
            contexts, alphas = attend(new_h)
            new_fed = attention = attention_of(contexts, new_h)
        else:
            contexts, alphas = attend(fed)
            joined = np.concatenate([x[:, t], *contexts], -1)
            new_h = np.tanh(joined @ kernel + h @ recurrent + bias)
            attention = attention_of(contexts, new_h) if output_attention else None
            new_fed = new_h
        out = attention if output_attention else new_h
        keep = sequence_mask[:, t][:, None]
        h, fed = np.where(keep, new_h, h), np.where(keep, new_fed, fed)
        before = [np.where(keep, a, b) for a, b in zip(alphas, before)]
        outputs.append(np.where(keep, out, outputs[-1]) if outputs else out)
        alignments.append(
            [np.where(keep, a, p) for a, p in zip(alphas, alignments[-1])] if alignments else alphas
        )
    return np.stack(outputs, 1), [np.stack(a, 1) for a in zip(*alignments)]
