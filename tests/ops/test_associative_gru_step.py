"""`associative_gru_step` against the NumPy restatement of the original code
(`am_gru_reference`) in float64, every intermediate of its `StepResult` included."""

import numpy as np
import pytest
from keras import ops

from tests import am_gru_reference as ref
from tests.support import as_numpy
from tf_memlayers.ops.associative_gru_step import SourceMemory, StepResult, associative_gru_step
from tf_memlayers.ops.holographic import permutation_matrix

N, INPUT_DIM, BATCH = 6, 4, 5
M, tensor = N // 2, ops.convert_to_tensor


def _parts(memory, copies):
    """``[B, n * C]`` laid out ``[Re copy0 | ... | Im copy0 | ...]`` -> ``(re, im)`` tensors
    ``[B, C, m]``."""
    halves = memory.reshape(len(memory), 2, copies, M)
    return tensor(halves[:, 0]), tensor(halves[:, 1])


def _close(got, expected):
    np.testing.assert_allclose(as_numpy(got), expected, rtol=0, atol=1e-12)


# The AM-GRU with 1 or 3 copies; the Dual AM-GRU with the paper's key, the released code's keys
# (write key [Re a | Re b], read key [Im a | Im b], not conjugated) and a separate read key
# conjugated by default: [Im a | -Im b] conjugated reads as the released read key does.
@pytest.mark.parametrize(
    "seed, copies, dual_key",
    [(1, 1, None), (3, 3, None), (7, 3, "paper"), (7, 3, "released"), (11, 3, "conjugated")],
)
def test_step_matches_the_reference_in_float64(float64_policy, seed, copies, dual_key):
    rng = np.random.default_rng(seed)
    w = ref.random_weights(rng, INPUT_DIM, N)
    w["key"] *= 0.3  # keys of modulus about 1: the bound clips some entries, not all
    x_t, previous = rng.normal(size=(BATCH, INPUT_DIM)), rng.normal(size=(BATCH, N))
    memory, source_memory = rng.normal(scale=0.5, size=(2, BATCH, N * copies))
    perms = ref.permutations(M, copies, seed)
    dual = None if dual_key is None else (dual_key.replace("conjugated", "released"), source_memory)
    record = []
    want_output, want_memory = ref.reference_step(x_t, memory, previous, w, perms, dual, record)
    x = np.concatenate([x_t, previous], axis=1)
    key = a = x @ w["key"]
    source = None
    if dual_key is not None:
        options = {}
        if dual_key != "paper":
            b = x @ w["dual_key"]
            key = np.concatenate([a[:, :M], b[:, :M]], axis=1)
            sign = -1.0 if dual_key == "conjugated" else 1.0
            options = dict(key=tensor(np.concatenate([a[:, M:], sign * b[:, M:]], axis=1)))
            if dual_key == "released":
                options["conjugate"] = False
        kernels = tensor(w["dual_gate"]), tensor(w["dual_candidate"])
        source = SourceMemory(_parts(source_memory, copies), *kernels, **options)

    # The step with the reference's pre-activations, ``[x, h] W + b``, as its callables.
    def affine(name):
        kernel, bias = w[name], w[f"{name}_bias"]
        return lambda h: ops.matmul(ops.concatenate([tensor(x), h], axis=1), kernel) + bias

    parts, matrix = _parts(memory, copies), permutation_matrix(perms)
    result = associative_gru_step(
        tensor(key), parts, affine("gate"), affine("candidate"), matrix, copies, source=source
    )
    assert isinstance(result, StepResult)
    step = record[-1]
    _close(result.output, want_output)
    re, im = (as_numpy(p) for p in result.memory)
    _close(np.stack([re, im], axis=1).reshape(BATCH, -1), want_memory)
    _close(result.retrieved, step["read"])
    _close(result.delta, step["written"])
    gates, candidate = ref.gates_and_candidate(w, x, step["read"], step["source_read"])
    _close(result.gates, gates)
    _close(result.candidate, candidate)
    # The write key's copies: the recorded bounded key, permuted copy by copy.
    for got, half in zip(result.copies, (step["key"][:, :M], step["key"][:, M:])):
        _close(got, np.stack([half[:, perm] for perm in perms], axis=1))
    # Not vacuous: the key's bound clips some entries, the step writes, the source is read.
    assert (step["key_modulus"] > 1).any() and (step["key_modulus"] < 1).any()
    assert np.abs(want_memory - memory).max() > 1e-2
    if dual_key is None:
        assert result.source_read is None
    else:
        _close(result.source_read, step["source_read"])
        assert np.abs(step["source_read"]).max() > 1e-2
