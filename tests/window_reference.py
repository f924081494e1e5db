"""NumPy float64 references of Daniluk et al. (2017) eqs (1)-(13) (SPEC §3): step by step, one
row at a time, with an explicit history of the valid steps, the most literal reading."""

import numpy as np


def masked_softmax(scores, valid=None):
    """Eq. (3): the softmax over the last axis of ``scores`` at the ``valid`` positions (all
    by default), no weight elsewhere, and all zeros in a row without a valid position."""
    valid = np.broadcast_to(True if valid is None else np.asarray(valid) > 0.5, scores.shape)
    top = np.where(valid, scores, -np.inf).max(axis=-1, keepdims=True)
    e = np.exp(np.where(valid, scores - np.where(np.isfinite(top), top, 0.0), -np.inf))
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def split_reference(h, mode, sizes):
    """(key, value, predict) of one output vector: the whole, or its pieces of ``sizes``."""
    if mode == "attention":
        return h, h, h
    pieces = np.split(h, np.cumsum(sizes))
    return pieces[0], pieces[1], pieces[1 if mode == "key_value" else 2]


def window_attention_reference(
    h, weights, mode, sizes, window, pad="mask", mask=None, memory=None, reset=None, score=None
):
    """Outputs ``[B, T, units]``, attention ``[B, T, L]`` and each row's final history of the
    RNN outputs ``h`` ``[B, T, W]``, from ``memory`` (per row L ``(key, value, valid)``, oldest
    first); at a valid step where ``reset`` ``[B, T]`` is true the history starts empty.
    ``score(keys W^Y, k W^h)`` replaces eq. (2)'s logits where given."""
    B, T, _ = h.shape
    WY, Wh, w = weights["memory_kernel"], weights["query_kernel"], weights.get("score_vector")
    Wr, Wx = weights["context_kernel"], weights["predict_kernel"]
    b_m, b_o = weights.get("memory_bias", 0.0), weights.get("output_bias", 0.0)
    empty = [(np.zeros(WY.shape[0]), np.zeros(Wr.shape[0]), 0.0)] * window  # (key, value, valid)
    outputs, attention = np.zeros((B, T, Wr.shape[1])), np.zeros((B, T, window))
    histories = []
    for b in range(B):
        history = list(empty) if memory is None else list(memory[b])
        for t in range(T):
            if mask is not None and not mask[b, t]:
                continue
            if reset is not None and reset[b, t]:
                history = list(empty)
            k, v, p = split_reference(h[b, t], mode, sizes)
            recent = history[-window:]
            keys = np.stack([item[0] for item in recent])
            values = np.stack([item[1] for item in recent])
            valid = np.array([item[2] for item in recent]) > 0.5
            if score is None:
                logits = np.tanh(keys @ WY + k @ Wh + b_m) @ w  # eq. (2), a row per position
            else:
                logits = score(keys @ WY, k @ Wh)
            alpha = masked_softmax(logits, valid if pad == "mask" else None)
            r = alpha @ values  # eq. (4)
            outputs[b, t] = np.tanh(r @ Wr + p @ Wx + b_o)  # eq. (5)
            attention[b, t] = alpha
            history.append((k, v, 1.0))
        histories.append(history[-window:])
    return outputs, attention, histories


def ngram_reference(h, kernel, n, sizes, bias=0.0, mask=None, memory=None, reset=None):
    """Eq. (13): outputs and each row's last N-2 valid outputs; a ``reset`` zeroes the earlier."""
    B, T, W = h.shape
    bounds, outputs = np.cumsum([0, *sizes]), np.zeros((B, T, kernel.shape[1]))
    histories = []
    for b in range(B):
        history = [np.zeros(W)] * (n - 2) if memory is None else list(memory[b])
        for t in range(T):
            if mask is not None and not mask[b, t]:
                continue
            if reset is not None and reset[b, t]:
                history = [np.zeros(W)] * (n - 2)
            sequence = history + [h[b, t]]  # ..., h_{t-1}, h_t
            feature = np.concatenate([sequence[-i][bounds[i - 1] : bounds[i]] for i in range(1, n)])
            outputs[b, t] = np.tanh(feature @ kernel + bias)
            history.append(h[b, t])
        histories.append(history[len(history) - (n - 2) :] if n > 2 else [])
    return outputs, histories
