"""`associative_gru_step` against the NumPy restatement of the original code
(`am_gru_reference`) in float64, every intermediate of its `StepResult` included."""

import numpy as np
import pytest
from keras import ops

from tests import am_gru_reference as ref
from tests.support import as_numpy
from tf_memlayers.ops.associative_gru_step import SourceMemory, StepResult, associative_gru_step

N, INPUT_DIM, BATCH = 6, 4, 5
M = N // 2


def _parts(memory, copies):
    """``[B, n * C]`` laid out ``[Re copy0 | ... | Im copy0 | ...]`` -> ``(re, im)`` tensors
    ``[B, C, m]``."""
    halves = memory.reshape(len(memory), 2, copies, M)
    return ops.convert_to_tensor(halves[:, 0]), ops.convert_to_tensor(halves[:, 1])


def _joined(parts):
    """Inverse of `_parts`, as NumPy."""
    re, im = (as_numpy(p) for p in parts)
    return np.stack([re, im], axis=1).reshape(len(re), -1)


def _permutation_matrix(perms):
    """``P`` ``[m, C * m]`` with ``(k @ P)[:, c * m + j] = k[:, perm_c[j]]``."""
    matrix = np.zeros((M, len(perms) * M))
    for c, perm in enumerate(perms):
        matrix[perm, c * M + np.arange(M)] = 1.0
    return matrix


def _bounded_copies(key, perms):
    """The bounded, permuted copies of a ``[re | im]`` key, complex ``[B, C, m]``."""
    z = key[:, :M] + 1j * key[:, M:]
    z = z / np.maximum(1.0, np.abs(z))
    return np.stack([z[:, perm] for perm in perms], axis=1)


def _real(z):
    return np.concatenate([z.real, z.imag], axis=-1)


def _numpy(x):
    return None if x is None else as_numpy(x)


def _close(got, expected):
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def _case(seed, copies):
    rng = np.random.default_rng(seed)
    w = ref.random_weights(rng, INPUT_DIM, N)
    w["key"] *= 0.3  # keys of modulus about 1: the bound clips some entries, not all
    x_t, previous = rng.normal(size=(BATCH, INPUT_DIM)), rng.normal(size=(BATCH, N))
    memory = rng.normal(scale=0.5, size=(BATCH, N * copies))
    source = rng.normal(scale=0.5, size=(BATCH, N * copies))
    return w, x_t, previous, memory, source, ref.permutations(M, copies, seed)


def _run_step(w, x, key, memory, perms, source=None):
    """The step with the reference's pre-activations, ``[x, h] W + b``, as its callables."""
    tensor = ops.convert_to_tensor
    return associative_gru_step(
        tensor(key),
        _parts(memory, len(perms)),
        lambda h: ops.matmul(ops.concatenate([tensor(x), h], axis=1), w["gate"]) + w["gate_bias"],
        lambda rh: (
            ops.matmul(ops.concatenate([tensor(x), rh], axis=1), w["candidate"])
            + w["candidate_bias"]
        ),
        _permutation_matrix(perms),
        len(perms),
        source=source,
    )


def _check_against_reference(result, w, x, expected_output, expected_memory, record, perms):
    step = record[-1]
    _close(_numpy(result.output), expected_output)
    _close(_joined(result.memory), expected_memory)
    _close(_numpy(result.retrieved), step["read"])
    _close(_numpy(result.delta), step["written"])
    gates, candidate = ref.gates_and_candidate(w, x, step["read"], step["source_read"])
    _close(_numpy(result.gates), gates)
    _close(_numpy(result.candidate), candidate)
    # The write key's copies: the recorded bounded key, permuted copy by copy.
    bounded = step["key"]
    for got, half in zip(result.copies, (bounded[:, :M], bounded[:, M:])):
        expected = np.stack([half[:, perm] for perm in perms], axis=1)
        _close(_numpy(got), expected)
    if step["source_read"] is None:
        assert result.source_read is None
    else:
        _close(_numpy(result.source_read), step["source_read"])


@pytest.mark.parametrize("copies", [1, 3])
def test_am_gru_step_matches_the_reference_in_float64(float64_policy, copies):
    w, x_t, previous, memory, _, perms = _case(copies, copies)
    x = np.concatenate([x_t, previous], axis=1)
    record = []
    expected_output, expected_memory = ref.reference_step(
        x_t, memory, previous, w, perms, record=record
    )
    result = _run_step(w, x, x @ w["key"], memory, perms)
    assert isinstance(result, StepResult)
    _check_against_reference(result, w, x, expected_output, expected_memory, record, perms)
    # Not vacuous: the key's bound clips some entries, and the step writes to the memory.
    assert (record[-1]["key_modulus"] > 1).any() and (record[-1]["key_modulus"] < 1).any()
    assert np.abs(expected_memory - memory).max() > 1e-2


@pytest.mark.parametrize("dual_key", ["paper", "released"])
def test_dual_step_matches_the_reference_in_float64(float64_policy, dual_key):
    w, x_t, previous, memory, source_memory, perms = _case(7, 3)
    x = np.concatenate([x_t, previous], axis=1)
    record = []
    expected_output, expected_memory = ref.reference_step(
        x_t, memory, previous, w, perms, dual=(dual_key, source_memory), record=record
    )
    a = x @ w["key"]
    key, options = a, {}
    if dual_key == "released":
        # The released code's keys: write key [Re a | Re b], read key [Im a | Im b], where
        # the read is not conjugated.
        b = x @ w["dual_key"]
        key = np.concatenate([a[:, :M], b[:, :M]], axis=1)
        read_key = np.concatenate([a[:, M:], b[:, M:]], axis=1)
        options = dict(key=ops.convert_to_tensor(read_key), conjugate=False)
    source = SourceMemory(
        _parts(source_memory, 3),
        ops.convert_to_tensor(w["dual_gate"]),
        ops.convert_to_tensor(w["dual_candidate"]),
        **options,
    )
    result = _run_step(w, x, key, memory, perms, source)
    _check_against_reference(result, w, x, expected_output, expected_memory, record, perms)
    # The source is read, never written.
    assert np.abs(record[-1]["source_read"]).max() > 1e-2


def test_a_separate_read_key_is_conjugated_by_default(float64_policy):
    w, x_t, previous, memory, source_memory, perms = _case(11, 3)
    x = np.concatenate([x_t, previous], axis=1)
    rng = np.random.default_rng(12)
    read_key = rng.normal(scale=1.5, size=(BATCH, N))
    source = SourceMemory(
        _parts(source_memory, 3),
        ops.convert_to_tensor(w["dual_gate"]),
        ops.convert_to_tensor(w["dual_candidate"]),
        key=ops.convert_to_tensor(read_key),
    )
    assert source.conjugate is True
    result = _run_step(w, x, x @ w["key"], memory, perms, source)
    # h2 = mean_c conj(K'_c) (*) S'_c with the read key's own bounded copies K'_c.
    stored = source_memory.reshape(BATCH, 2, 3, M)
    read = np.mean(
        np.conj(_bounded_copies(read_key, perms)) * (stored[:, 0] + 1j * stored[:, 1]), axis=1
    )
    _close(_numpy(result.source_read), _real(read))
    # The write (and its retrieval h) still uses the write key.
    copies = _bounded_copies(x @ w["key"], perms)
    state = memory.reshape(BATCH, 2, 3, M)
    h = _real(np.mean(np.conj(copies) * (state[:, 0] + 1j * state[:, 1]), axis=1))
    _close(_numpy(result.retrieved), h)
    gates, candidate = ref.gates_and_candidate(w, x, h, _real(read))
    delta = gates[:, N:] * (candidate - h)
    _close(_numpy(result.output), h + delta)
    written = state[:, 0] + 1j * state[:, 1] + copies * (delta[:, :M] + 1j * delta[:, M:])[:, None]
    _close(_joined(result.memory), np.stack([written.real, written.imag], 1).reshape(BATCH, -1))
