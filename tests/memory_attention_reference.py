"""NumPy float64 references of `AttentionWrapper` (Bahdanau et al. 2015, Luong et al. 2015) and
`WordByWordAttention` (Rocktäschel et al. 2016) around a SimpleRNN cell, step by step, and the
data and weights their test modules share."""

import numpy as np

from tests.support import as_numpy
from tests.window_reference import masked_softmax  # (a row of padding only gets zeros)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def monotonic_reference(p, before, mode):
    """Raffel et al. (2017): the alignments of a step from its stopping probabilities ``p``
    ``[batch, length]`` and the previous step's alignments: the expectation (eq. 9,
    ``alpha_j = p_j sum_{k <= j} alpha'_k prod_{k <= l < j} (1 - p_l)``, for the ``parallel``
    and ``recursive`` modes), or (``hard``) one-hot at the first j at or after the previous
    position with p_j > 1/2, zeros where none is. Written for complex ``p`` too."""
    alpha = np.zeros(np.broadcast(p, before).shape, np.result_type(p, before))
    for b, j in np.ndindex(alpha.shape if mode != "hard" else (0, 0)):
        alpha[b, j] = p[b, j] * sum(before[b, k] * np.prod(1 - p[b, k:j]) for k in range(j + 1))
    for b in range(alpha.shape[0] if mode == "hard" else 0):
        start = np.flatnonzero(before[b] != 0)
        first = start[0] if start.size else p.shape[1]
        chosen = [j for j in range(first, p.shape[1]) if p[b, j] > 0.5]
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
    """The wrapper around a SimpleRNN cell (h = tanh(x W + h U + b)): outputs and weights; with
    ``monotonic_mode``, Raffel et al.'s (2017) attention, which starts one-hot at the memory's first
    vector (written for complex weights too: no softmax then). ``probability_fn``: ``"softmax"``,
    ``"hardmax"`` or a NumPy ``f(scores, mask)``; ``attention_layer``: ``"luong"``, ``"context"`` or
    a NumPy ``f([c; h], weights)``. One mechanism of `several_mechanisms_reference`."""

    def attention_of(contexts, h):
        if attention_layer == "context":
            return contexts[0]
        joined, luong = np.concatenate([contexts[0], h], -1), attention_layer == "luong"
        return np.tanh(joined @ w["attention_kernel"]) if luong else attention_layer(joined, w)

    options = (score, normalize, scale, monotonic_mode, probability_fn)
    args = (x, [memory], [mask], cell_weights, [(w, options)], attention_of, position)
    outputs, (alignments,) = several_mechanisms_reference(
        *args, output_attention, input_feeding, sequence_mask
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
    units = recurrent.shape[0]
    W_y, W_t = w["memory_kernel"].T, w["transition_kernel"].T
    W_h, W_r = np.split(w["query_kernel"].T, [units], axis=1)
    batch, steps = x.shape[:2]
    h = np.zeros((batch, units)) if initial_h is None else initial_h
    r = np.zeros((batch, Y.shape[-1]))
    if sequence_mask is None:
        sequence_mask = np.ones((batch, steps), bool)
    outputs, alignments = [], []
    for t in range(steps):  # (the einsums: each row b, its Y = Y[b]^T [k, L], h_t = new_h[b])
        new_h = np.tanh(x[:, t] @ kernel + h @ recurrent + bias)
        query = np.einsum("ij,bj->bi", W_h, new_h) + np.einsum("ij,bj->bi", W_r, r)
        M = np.tanh(np.einsum("ij,blj->bil", W_y, Y) + query[:, :, None])
        alpha = masked_softmax(np.einsum("i,bil->bl", w["score_vector"], M), mask)
        new_r = np.einsum("blk,bl->bk", Y, alpha) + np.tanh(np.einsum("ij,bj->bi", W_t, r))
        out = new_h
        if output_attention:
            W_p, W_x = np.split(w["attention_kernel"].T, [r.shape[-1]], axis=1)
            out = np.tanh(np.einsum("ij,bj->bi", W_p, new_r) + np.einsum("ij,bj->bi", W_x, new_h))
        keep = sequence_mask[:, t][:, None]
        h, r = np.where(keep, new_h, h), np.where(keep, new_r, r)
        outputs.append(np.where(keep, out, outputs[-1]) if outputs else out)
        alignments.append(np.where(keep, alpha, alignments[-1]) if alignments else alpha)
    return np.stack(outputs, 1), np.stack(alignments, 1)


def data(rng, dtype="float64", memory_dim=8):
    """``(x, memory, memory_mask)`` of the suites' shapes (batch 3, 5 steps of width 4, a memory
    of length 6), the second row's memory padded from position 4, the third row's all padding
    (nothing to attend to)."""
    batch, steps, length, input_dim = 3, 5, 6, 4
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
    own = [v for v in wrapper.weights if all(v is not c for c in cell.weights)]
    return cell_weights, named_weights(own)


def named_weights(variables):
    """``{name: value}`` of ``variables``, in float64."""
    return {v.path.split("/")[-1]: as_numpy(v).astype(np.float64) for v in variables}


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
    fed = np.zeros_like(attention_of([m[:, 0] for m in memories], h) if position == "after" else h)
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
        out, keep = attention if output_attention else new_h, sequence_mask[:, t][:, None]
        h, fed = np.where(keep, new_h, h), np.where(keep, new_fed, fed)
        before = [np.where(keep, a, b) for a, b in zip(alphas, before)]
        outputs.append(np.where(keep, out, outputs[-1]) if outputs else out)
        alignments.append(
            [np.where(keep, a, p) for a, p in zip(alphas, alignments[-1])] if alignments else alphas
        )
    return np.stack(outputs, 1), [np.stack(a, 1) for a in zip(*alignments)]
