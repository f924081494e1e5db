"""NumPy float64 restatement of the original AM-GRU / Dual AM-GRU step (ORIGINAL_CODE.md
§3.3-3.4), in complex128. NumPy and `random` only: nothing from tf_memlayers."""

import random

import numpy as np


def permutations(m, copies, seed=123):
    """The original's copies' permutations: copy 0 is the identity, then ``rng.shuffle`` of
    ``range(m)`` for each further copy, in order, with one ``random.Random(seed)``."""
    rng, perms = random.Random(seed), [list(range(m))]
    for _ in range(copies - 1):
        perm = list(range(m))
        rng.shuffle(perm)
        perms.append(perm)
    return perms


def bound(z):
    return z / np.maximum(1.0, np.abs(z))


def as_complex(v):
    m = v.shape[-1] // 2
    return v[:, :m] + 1j * v[:, m:]


def as_real(z):
    return np.concatenate([z.real, z.imag], axis=1)


def _memory_to_complex(memory, copies):
    m = memory.shape[1] // (2 * copies)
    re = memory[:, : copies * m].reshape(-1, copies, m)
    return re + 1j * memory[:, copies * m :].reshape(-1, copies, m)


def memory_to_real(memory):
    batch = memory.shape[0]
    return np.concatenate([memory.real.reshape(batch, -1), memory.imag.reshape(batch, -1)], 1)


def key_copies(key, perms):
    return np.stack([key[:, perm] for perm in perms], axis=1)


def gates_and_candidate(w, x, h, h2=None):
    """The gates ``[r, u]`` and the candidate ``c`` of an AM-GRU step from the controller
    input ``x = [x_t, h_{t-1}]``, the retrieval ``h`` and, for the Dual AM-GRU, the source
    retrieval ``h2``."""
    gate_pre = np.concatenate([x, h], 1) @ w["gate"] + w["gate_bias"]
    if h2 is not None:
        gate_pre = gate_pre + h2 @ w["dual_gate"]
    gates = 1.0 / (1.0 + np.exp(-gate_pre))
    r = gates[:, : h.shape[1]]
    cand_pre = np.concatenate([x, r * h], 1) @ w["candidate"] + w["candidate_bias"]
    if h2 is not None:
        cand_pre = cand_pre + h2 @ w["dual_candidate"]
    return gates, np.tanh(cand_pre)


def reference_step(x_t, memory, previous, w, perms, dual=None, record=None):
    """One AM-GRU (``dual=None``) or Dual AM-GRU step (``dual = (mode, source_memory)``); appends
    to ``record`` ``written``, ``read``, ``source_read`` (Dual) and ``key_modulus``."""
    copies, x = len(perms), np.concatenate([x_t, previous], axis=1)
    a = x @ w["key"]
    m = a.shape[1] // 2
    if dual is not None and dual[0] == "released":
        b = x @ w["dual_key"]
        raw_key = a[:, :m] + 1j * b[:, :m]
        read_key, write_key = bound(a[:, m:] + 1j * b[:, m:]), bound(raw_key)
    else:
        raw_key = as_complex(a)
        write_key = bound(raw_key)
        read_key = np.conj(write_key)
    K, S = key_copies(write_key, perms), _memory_to_complex(memory, copies)
    h, h2 = as_real((np.conj(K) * S).mean(axis=1)), None
    if dual is not None:
        source = _memory_to_complex(dual[1], copies)
        h2 = as_real((key_copies(read_key, perms) * source).mean(axis=1))
    gates, c = gates_and_candidate(w, x, h, h2)
    delta = gates[:, h.shape[1] :] * (c - h)
    output, S = h + delta, S + K * as_complex(delta)[:, None, :]
    if record is not None:
        step = dict(written=delta, read=h, source_read=h2, key=as_real(write_key))
        record.append(dict(step, key_modulus=np.abs(raw_key)))
    return output, memory_to_real(S)


def reference_run(xs, memory, previous, w, perms, dual=None, record=None):
    outputs = []
    for t in range(xs.shape[1]):
        previous, memory = reference_step(xs[:, t], memory, previous, w, perms, dual, record)
        outputs.append(previous)
    return np.stack(outputs, 1), memory


def recorded(record, name):
    """``name`` of every recorded step, stacked on axis 1: ``[batch, time, ...]``."""
    return np.stack([step[name] for step in record], axis=1)


def random_weights(rng, input_dim, n, scale=0.6):
    d = input_dim + n
    u = lambda *shape: rng.uniform(-scale, scale, size=shape)  # noqa: E731
    return {
        "key": u(d, n) * 3.0,  # large enough that bound() clips some entries
        "gate": u(d + n, 2 * n),
        "gate_bias": u(2 * n) + 1.0,
        "candidate": u(d + n, n),
        "candidate_bias": u(n),
        "dual_key": u(d, n) * 3.0,
        "dual_gate": u(n, 2 * n),
        "dual_candidate": u(n, n),
    }


def conditional_encoding_retrievals(premise, hypothesis, w, units, copies, seed=123, dual_key=None):
    """What conditional encoding writes and reads over ONE pair (``[Tp, dim]``, ``[Th, dim]``):
    the premise pass from an empty memory, then the hypothesis pass from the premise's final
    memory (an AM-GRU: ``dual_key=None``) or from an empty memory reading the premise's (a Dual
    AM-GRU with ``dual_key``). Returns ``premise_written`` ``[Tp, units]`` and
    ``hypothesis_read`` ``[Th, units]``."""
    perms, empty = permutations(units // 2, copies, seed), np.zeros((1, units * copies))
    written, read = [], []
    outputs, memory = reference_run(
        np.asarray(premise, np.float64)[None], empty, np.zeros((1, units)), w, perms, record=written
    )
    hypothesis = np.asarray(hypothesis, np.float64)[None]
    if dual_key is None:
        reference_run(hypothesis, memory, outputs[:, -1], w, perms, record=read)
    else:
        dual = (dual_key, memory)
        reference_run(hypothesis, empty, outputs[:, -1], w, perms, dual=dual, record=read)
    return {
        "premise_written": recorded(written, "written")[0],
        "hypothesis_read": recorded(read, "read" if dual_key is None else "source_read")[0],
    }
