"""The fused AM-GRU's two loops in float64: `forward_loop` against `am_gru_reference`, for what
it returns and every tensor it saves for the backward loop; `backward_loop` against
TensorFlow's gradient of `forward_loop`. (The whole op: test_associative_gru_loop.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from tests import am_gru_reference as ref
from tf_memlayers.ops import associative_gru_passes as passes
from tf_memlayers.ops import holographic

STEPS, BATCH, UNITS, COPIES, INPUT_DIM = 5, 3, 6, 3, 4
M = UNITS // 2


def _problem(seed, dual, masked):
    rng = np.random.default_rng(seed)
    w = ref.random_weights(rng, INPUT_DIM, UNITS)
    w["key"] *= 0.3  # keys of modulus about 1: the bound clips some entries, not all
    mask = None
    if masked:
        mask = rng.random((BATCH, STEPS)) > 0.3
        mask[0, :2] = mask[1, 3] = False  # masked before the row's first real step; a hole
        mask[2, :] = True
    memories = (BATCH, UNITS * COPIES)
    xs, memory = rng.normal(size=(BATCH, STEPS, INPUT_DIM)), rng.normal(scale=0.5, size=memories)
    output = rng.normal(size=(BATCH, UNITS))
    source = rng.normal(scale=0.5, size=memories) if dual else None
    perms = ref.permutations(M, COPIES, seed)
    return dict(w=w, xs=xs, memory=memory, output=output, source=source, mask=mask, perms=perms)


def _loop_arguments(problem):
    """The loops' differentiable arguments as tensors, in the order of their gradients, then the
    copies' permutation matrix and its adjoint's indices (test_holographic.py). The reference's
    ``[x_t, o_{t-1}, h] W`` splits into the input projection ``p_t`` (columns ``[key | gates |
    candidate]``, biases included), the recurrent kernel ``R`` of ``o_{t-1}`` and the kernels
    ``G_h``, ``C_h`` of ``h``; the Dual AM-GRU's source memory and kernels come last."""
    w, d = problem["w"], INPUT_DIM
    input_kernel = np.concatenate([w["key"][:d], w["gate"][:d], w["candidate"][:d]], axis=1)
    bias = np.concatenate([np.zeros(UNITS), w["gate_bias"], w["candidate_bias"]])
    recurrent = np.concatenate([w[k][d : d + UNITS] for k in ("key", "gate", "candidate")], axis=1)
    projected = np.einsum("btd,dk->tbk", problem["xs"], input_kernel) + bias
    arrays = [projected, _parts(problem["memory"]), problem["output"], recurrent]
    arrays += [w[k][d + UNITS :] for k in ("gate", "candidate")]
    if problem["source"] is not None:
        arrays += [_parts(problem["source"]), w["dual_gate"], w["dual_candidate"]]
    matrix = holographic.permutation_matrix(problem["perms"]).astype(np.float64)
    unpermute = holographic.unpermuting_indices(problem["perms"])
    return [tf.constant(a) for a in arrays], tf.constant(matrix), tf.constant(unpermute)


def _parts(memory):
    """``[B, n * C]`` -> the loops' ``[B, 2, C, m]`` (real parts, then imaginary parts)."""
    return None if memory is None else memory.reshape(len(memory), 2, COPIES, M)


def _reference_forward(problem, zero_output_for_mask):
    """Each row alone over its unmasked steps: the emitted outputs, the final states and, per
    step, what the backward loop reads, with a ``taken`` flag per (step, row)."""
    w, mask, perms = problem["w"], problem["mask"], problem["perms"]
    taken = np.ones((STEPS, BATCH), bool) if mask is None else mask.T
    names = ("key", "memory", "previous", "h", "g", "c", "delta", "h2")
    saved = {name: [[None] * BATCH for _ in range(STEPS)] for name in names}
    outputs = np.zeros((STEPS, BATCH, UNITS))
    final_memory, final_output = problem["memory"].copy(), problem["output"].copy()
    for b in range(BATCH):
        memory, previous = problem["memory"][b : b + 1], problem["output"][b : b + 1]
        emitted = np.zeros((1, UNITS))
        dual = None if problem["source"] is None else ("paper", problem["source"][b : b + 1])
        for t in range(STEPS):
            x_t = problem["xs"][b : b + 1, t]
            x = np.concatenate([x_t, previous], axis=1)
            saved["memory"][t][b], saved["previous"][t][b] = memory[0], previous[0]
            if not taken[t, b]:
                emitted = np.zeros((1, UNITS)) if zero_output_for_mask else emitted
                outputs[t, b] = emitted[0]
                continue
            record = []
            new_output, memory = ref.reference_step(x_t, memory, previous, w, perms, dual, record)
            h, h2 = record[0]["read"], record[0]["source_read"]
            g, c = ref.gates_and_candidate(w, x, h, h2)
            step = dict(key=x @ w["key"], h=h, g=g, c=c, delta=record[0]["written"], h2=h2)
            for name, value in step.items():
                saved[name][t][b] = None if value is None else value[0]
            previous = emitted = new_output
            outputs[t, b] = new_output[0]
        final_memory[b], final_output[b] = memory[0], previous[0]
    return outputs, final_memory, final_output, saved, taken


# Both cells, without a mask and with one under both masked-output rules.
@pytest.mark.parametrize("dual", [False, True], ids=["am_gru", "dual"])
@pytest.mark.parametrize(
    "masked, zero_output_for_mask",
    [(False, False), (True, False), (True, True)],
    ids=["no_mask", "mask", "mask_zero_output"],
)
def test_forward_loop_matches_the_reference_and_backward_loop_its_automatic_gradient(
    dual, masked, zero_output_for_mask
):
    """The forward loop's outputs, final states and saved tensors against the reference; the
    backward loop against TensorFlow's gradient of that forward loop."""
    problem = _problem(3 + dual + 2 * masked + zero_output_for_mask, dual, masked)
    sources, matrix, unpermute = _loop_arguments(problem)
    source = sources[6] if dual else None
    loop_kernels = (*sources[4:6], *(sources[7:9] if dual else (None, None)))
    sizes = (COPIES, zero_output_for_mask, UNITS)
    mask = None if problem["mask"] is None else tf.constant(problem["mask"].T)
    rng = np.random.default_rng(1)  # the gradients of the outputs, the memory and the output
    shapes = [(STEPS, BATCH, UNITS), (BATCH, 2, COPIES, M), (BATCH, UNITS)]
    incoming = [tf.constant(rng.normal(size=shape)) for shape in shapes]
    with tf.GradientTape() as tape:
        tape.watch(sources)
        memory, output, saved = passes.forward_loop(
            sources[0], mask, *sources[1:4], loop_kernels, source, matrix, *sizes
        )
        found = (saved["outputs"], memory, output)
        loss = sum(tf.reduce_sum(a * g) for a, g in zip(found, incoming))
    expected_gradients = tape.gradient(loss, sources)
    got = passes.backward_loop(
        saved, mask, *incoming, sources[3], loop_kernels, source, matrix, unpermute, *sizes
    )
    reference = _reference_forward(problem, zero_output_for_mask)
    outputs, final_memory, final_output, expected, taken = reference
    keys = ["outputs", "key", "memory", "previous", "h", "g", "c", "delta"] + ["h2"] * dual
    assert sorted(saved) == sorted(keys)

    def close(got, want, where=""):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=where)

    close(saved["outputs"].numpy(), outputs)
    close(memory.numpy(), _parts(final_memory))
    close(output.numpy(), final_output)
    saved = {name: value.numpy() for name, value in saved.items()}
    for t, b in np.ndindex(STEPS, BATCH):
        where = f"step {t}, row {b}"
        close(saved["memory"][t, b], _parts(expected["memory"][t][b][None])[0], where)
        close(saved["previous"][t, b], expected["previous"][t][b], where)
        if not taken[t, b]:
            # A masked row's key is zero (so its write is zero) and its delta reads zero.
            assert not saved["key"][t, b].any() and not saved["delta"][t, b].any(), where
            continue
        for name in ("key", "h", "g", "c", "delta") + ("h2",) * dual:
            close(saved[name][t, b], expected[name][t][b], f"{name}, {where}")
    names = ["projected", "memory", "output", "R", "G_h", "C_h", "source", "W_dg", "W_dc"]
    assert len(got) == len(expected_gradients)
    for name, g, e in zip(names, got, expected_gradients):
        e = np.zeros(g.shape) if e is None else e.numpy()
        assert np.abs(e).max() > 1e-3, name
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-10, atol=1e-10, err_msg=name)
    if masked:
        # Not vacuous: some masked steps emit an earlier output, unless zeros.
        assert (~taken).any() and (np.abs(outputs[~taken]).max() > 0) != zero_output_for_mask
        # A masked step's input projection gets no gradient.
        assert not got[0].numpy()[~taken].any()
