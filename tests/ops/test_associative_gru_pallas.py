"""The Pallas kernels of the AM-GRU (JAX) against the original step in NumPy, with masks and
resets, and their lowering for a GPU on this machine. The layer's tests compare their
gradients with Keras's loop (tests/layers/associative_memory/test_associative_gru.py)."""

import numpy as np
import pytest

from tests.am_gru_reference import permutations, random_weights, reference_step
from tests.layers.associative_memory.test_associative_gru_cell import set_cell_weights
from tests.support import BACKEND
from tf_memlayers.layers import AssociativeGRUCell

pytestmark = pytest.mark.skipif(BACKEND != "jax", reason="Pallas kernels run on JAX")

if BACKEND == "jax":
    import jax
    import jax.numpy as jnp

    from tf_memlayers.ops.associative_gru_pallas import associative_gru_pallas, default_num_warps


def _reference(xs, memory, previous, w, perms, mask, reset, zero_output_for_mask, dual=None):
    """`reference_step` over time; a masked step keeps the states and emits the previous
    emitted output (or zeros), a reset at a kept step zeroes the states before it (not the
    source memory of ``dual``)."""
    emitted, outputs = np.zeros_like(previous), []
    for t in range(xs.shape[1]):
        keep, start = mask[:, t, None], (mask[:, t] & reset[:, t])[:, None]
        memory, previous = np.where(start, 0, memory), np.where(start, 0, previous)
        output, written = reference_step(xs[:, t], memory, previous, w, perms, dual)
        memory, previous = np.where(keep, written, memory), np.where(keep, output, previous)
        emitted = np.where(keep, output, 0 if zero_output_for_mask else emitted)
        outputs.append(emitted)
    return np.stack(outputs, 1), memory, previous


# (copies, units, batch, zero_output_for_mask, Dual): 1 or 2 programs (17 rows), n/2 = 4 or 6.
@pytest.mark.parametrize(
    "copies, units, batch, zero, dual", [(1, 8, 3, False, False), (3, 12, 17, True, True)]
)
def test_the_kernels_equal_the_original_step_with_masks_and_resets(
    copies, units, batch, zero, dual
):
    rng, steps, input_dim = np.random.default_rng(copies), 5, 4
    w, cell = random_weights(rng, input_dim, units), AssociativeGRUCell(units, num_copies=copies)
    cell.build((None, input_dim))
    set_cell_weights(cell, w)
    input_kernel, input_bias, *kernels = (np.asarray(k) for k in cell._projection_kernels())
    xs = rng.normal(size=(batch, steps, input_dim)).astype("float32")
    sizes = [*cell.state_size, units * copies]
    states = [0.5 * rng.normal(size=(batch, size)).astype("float32") for size in sizes]
    source, dual_kernels = states.pop(), [w["dual_gate"], w["dual_candidate"]]
    if not dual:
        source = dual_kernels = None
    mask, reset = rng.random((2, batch, steps)) > [[[0.3]], [[0.7]]]
    mask[0, :2] = False  # emitted zeros before the first kept step
    options = dict(mask=jnp.asarray(mask), reset=jnp.asarray(reset), zero_output_for_mask=zero)
    options.update(source=source, dual_kernels=dual_kernels)
    projected = jnp.asarray(xs @ input_kernel + input_bias)
    got = associative_gru_pallas(projected, *states, kernels, cell.permutations, **options)
    perms = permutations(units // 2, copies)
    want = _reference(xs, *states, w, perms, mask, reset, zero, ("paper", source) if dual else None)
    for e, g in zip(want, got):
        assert g.dtype == jnp.float32 and np.abs(e).max() > 0.1
        np.testing.assert_allclose(np.asarray(g), e, atol=1e-5, rtol=0)


def _equations(jaxpr, name):
    """The equations of primitive ``name`` in ``jaxpr`` and every jaxpr inside it."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == name:
            yield eqn
        for value in eqn.params.values():
            for inner in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    yield from _equations(inner, name)


def test_the_kernels_lower_for_a_gpu_on_this_machine():
    """Triton's lowering of both kernels for CUDA, in float32 and bfloat16, without a GPU (where
    the default interprets them, unless lowered for CUDA); compiling them needs one. Triton's
    compiler refuses a product under 16 on a side: checked here on the traced kernels."""
    batch, steps, units, copies = 5, 3, 20, 3
    shapes = [(batch, steps, 4 * units), (batch, units * copies), (batch, units)]
    shapes += [(units, 4 * units), (units, 2 * units), (units, units)]
    shapes += [(batch, units * copies), (units, 2 * units), (units, units)]  # the Dual's
    perms = permutations(units // 2, copies)

    def loss(projected, memory, output, *kernels, flags):
        kernels, dual = kernels[:3], kernels[3:]
        options = dict(mask=flags, reset=flags)  # `interpret` by default: as the layers run
        options.update(dict(source=dual[0], dual_kernels=dual[1:]) if dual else {})
        run = associative_gru_pallas(projected, memory, output, kernels, perms, **options)
        return sum(jnp.sum(x.astype(jnp.float32)) for x in run)

    # The AM-GRU in float32, the Dual AM-GRU in bfloat16.
    for dtype, count in ((jnp.float32, 6), (jnp.bfloat16, 9)):
        arguments = [jax.ShapeDtypeStruct(shape, dtype) for shape in shapes[:count]]
        flags = jax.ShapeDtypeStruct((batch, steps), jnp.bool_)
        gradient = jax.jit(jax.grad(loss, argnums=tuple(range(count))))
        lowered = gradient.trace(*arguments, flags=flags).lower(lowering_platforms=("cuda",))
        # The forward kernel and the backward kernel, each a Triton call of 4 warps (mp 16).
        assert lowered.as_text().count("custom_call @__gpu$xla.gpu.triton") == 2
        assert lowered.as_text().count("num_warps = 4 : i32") == 2
    traced = _equations(jax.make_jaxpr(gradient)(*arguments, flags=flags), "pallas_call")
    kernels = [k for k in traced if not k.params["interpret"]]  # off a GPU: both branches
    products = [list(_equations(k.params["jaxpr"], "dot_general")) for k in kernels]
    sides = [min(v.aval.shape) for eqn in sum(products, []) for v in eqn.invars]
    assert len(kernels) == 2 and len(sides) > 100 and min(sides) == 16
    assert len(products[1]) == len(products[0]), "the backward kernel computes only adjoints"


def test_bad_kernel_arguments():
    zeros = [jnp.zeros(shape) for shape in ((2, 3, 32), (2, 16), (2, 8))]
    kernels = [jnp.zeros(shape) for shape in ((8, 32), (8, 16), (8, 8))]
    with pytest.raises(ValueError, match=r"block_rows.*power of two >= 16, got 24"):
        associative_gru_pallas(*zeros, kernels, permutations(4, 2), block_rows=24)
    with pytest.raises(ValueError, match=r"4n = 24 columns for .* n/2 = 3 entries, got 32"):
        associative_gru_pallas(*zeros, kernels, permutations(3, 2))
    wide = jnp.zeros((2, 3, 4 * 258))  # refused before the other arguments are read
    with pytest.raises(ValueError, match=r"n = 258 units .* mp = 256 .* at most mp = 128 \(256"):
        associative_gru_pallas(wide, *zeros[1:], kernels, permutations(129, 1), interpret=False)
    for warps, error in ((3, ValueError), (64, ValueError), (True, TypeError), (4.0, TypeError)):
        with pytest.raises(error, match=rf"`num_warps` must be .*, got {warps!r}\.$"):
            associative_gru_pallas(*zeros, kernels, permutations(4, 2), num_warps=warps)


def test_a_program_has_warps_for_two_entries_of_a_block_a_thread():
    """Triton's compile time grows with each thread's share of the code (CHANGELOG)."""
    assert [default_num_warps(16, mp) for mp in (16, 32, 64, 128)] == [4, 8, 16, 16]
