"""`AssociativeGRU` (and `DualAssociativeGRU`) against its cell form, in Keras's loop and the
fused one."""

import contextlib
import re

import keras
import numpy as np
import pytest
from keras import ops

from tests.am_gru_reference import permutations, random_weights, reference_run, reference_step
from tests.layer_test_case import ALL_RNN_FLAGS, LayerTestCase, masking_checks
from tests.layers.associative_memory.test_associative_gru_cell import (
    AM_GRU_CONFIG,
    set_cell_weights,
)
from tests.support import (
    BACKEND,
    FUSED_LOOP,
    all_pairs,
    as_numpy,
    assert_close,
    gradients,
    masked_rnn,
    split_rows,
    tensorflow_only,
)
from tf_memlayers.layers import (
    AssociativeGRU,
    AssociativeGRUCell,
    DualAssociativeEncoder,
    DualAssociativeGRU,
)
from tf_memlayers.models._compiling import compile_and_build_optimizer

# The fused loop of TensorFlow or of JAX (the Pallas kernels: interpreted on a CPU).
FUSED_ON_JAX_TOO = pytest.mark.skipif(BACKEND not in ("tensorflow", "jax"), reason="no fused loop")


def _both_loops(fused_mark):
    """Keras's time loop (autodiff backward) and the fused one, which carries ``fused_mark``."""
    loops = [False, pytest.param(True, marks=fused_mark)]
    return pytest.mark.parametrize("fused_loop", loops, ids=["keras_loop", "fused_loop"])


FUSED, FUSED_OR_KERNELS = _both_loops(tensorflow_only(FUSED_LOOP)), _both_loops(FUSED_ON_JAX_TOO)


def _am_gru(units=4, copies=2, **kwargs):
    return AssociativeGRU(units, num_copies=copies, **kwargs)


class AssociativeGRUTest(LayerTestCase):
    layer_cls = AssociativeGRU

    @FUSED_OR_KERNELS
    def test_layer_behaviors_and_nan_padding(self, fused_loop):
        options = {"units": 4, "num_copies": 2, "return_sequences": True, "fused_loop": fused_loop}
        checks = masking_checks((2, 3, 4), 5, expected_num_seed_generators=1)  # the dropout's
        self.run_layer_test(AssociativeGRU, dict(options, dropout=0.1), **checks)
        self.run_nan_padding_test(lambda: AssociativeGRU(**options, zero_output_for_mask=True))

    def test_journey(self, tmp_path):
        # fused_loop="auto": the fused loop on TensorFlow, Keras's on JAX.
        make = lambda e: _am_gru(8, return_sequences=True, dropout=0.2)(e)  # noqa: E731
        self.run_journey_test("step", make, tmp_path)

    def test_config_arguments_and_resets(self):
        config = dict(**AM_GRU_CONFIG, **ALL_RNN_FLAGS, return_retrievals=True, name="am_gru")
        self.run_config_test(AssociativeGRU, **config, fused_loop=False, recurrent_dropout=0.1)
        self.run_flags_test(lambda **kw: AssociativeGRU(4, **kw))
        self.run_reset_tests(lambda **kw: _am_gru(8, 3, **kw))

    @pytest.mark.parametrize(
        "kwargs",
        [
            dict(return_sequences=True, return_state=True),
            pytest.param(dict(num_copies=3, fused_loop=True), marks=FUSED_ON_JAX_TOO),
            dict(num_copies=1, return_retrievals=True, return_sequences=True),
        ],
        ids=["states", "fused_last", "retrievals"],
    )
    def test_output_spec(self, kwargs):
        self.run_output_spec_test(lambda dtype: AssociativeGRU(4, dtype=dtype, **kwargs), (2, 5, 4))

    @FUSED_OR_KERNELS
    @pytest.mark.parametrize("policy, atol", [("mixed_float16", 5e-3), ("mixed_bfloat16", 3e-2)])
    def test_mixed_precision_matches_float32(self, policy, atol, fused_loop):
        inputs = np.random.default_rng(26).normal(size=(4, 6, 5)).astype("float32")
        make = lambda: _am_gru(8, 4, return_sequences=True, fused_loop=fused_loop)  # noqa: E731
        self.run_mixed_precision_test(make, inputs, atol=atol, policy=policy)


def mask_with_holes(batch, steps):
    mask = np.ones((batch, steps), bool)
    mask[1, steps - 2 :] = False  # right padding
    mask[2, 1] = False  # a hole
    return mask


# (The Pallas kernels against the original step, on JAX: tests/ops/test_associative_gru_pallas.py.)
# With dropout, which a training call applies: the step reads the masked x_t and o_{t-1}.
@pytest.mark.parametrize(
    "layer_cls, fused_loop, copies",
    [(AssociativeGRU, False, c) for c in (1, 3, 8)]
    + [pytest.param(AssociativeGRU, True, c, marks=tensorflow_only(FUSED_LOOP)) for c in (1, 3, 8)]
    + [(DualAssociativeGRU, "auto", 3)],
)
def test_layer_matches_the_original_step_in_float64(float64_policy, layer_cls, fused_loop, copies):
    rng, dual = np.random.default_rng(copies), layer_cls is DualAssociativeGRU
    rates = (0.4, 0.0 if fused_loop is True else 0.3)  # True refuses recurrent_dropout
    options = dict(dropout=rates[0], recurrent_dropout=rates[1], return_state=True, dropout_seed=7)
    layer = layer_cls(12, copies, fused_loop=fused_loop, return_sequences=True, **options)
    xs, w, source = rng.normal(size=(3, 5, 4)), random_weights(rng, 4, 12), rng.normal(size=(3, 36))
    layer.build((None, None, 4))
    set_cell_weights(layer.cell, w)
    states = [np.zeros((3, 12 * copies)), np.zeros((3, 12))] + [source] * dual
    perms, mode = permutations(6, copies), ("paper", source) if dual else None
    outputs, memory = reference_run(xs, *states[:2], w, perms, mode)  # inference: no dropout
    assert_close(layer(xs, initial_state=states)[:3], [outputs, memory, outputs[:, -1]], 1e-10)
    # Keras's masks: ones dropped, the inputs' then the fed-back output's, from the seed.
    seeds = keras.random.SeedGenerator(7)
    drop = lambda k, r: keras.random.dropout(ops.ones((3, k), "float64"), r, seed=seeds)  # noqa: E731
    inputs, fed = [as_numpy(drop(k, r)) if r else 1.0 for k, r in zip((4, 12), rates)]
    memory, last = states[:2]
    for t in range(5):
        last, memory = reference_step(xs[:, t] * inputs, memory, last * fed, w, perms, mode)
    assert_close(layer(xs, initial_state=states, training=True)[1:3], [memory, last], 1e-10)


# (layer, dual_key, fused_loop, go_backwards, zero_output_for_mask): the AM-GRU's loops and
# flags by pairs (`all_pairs`), the Dual AM-GRU's keys and loops forwards and backwards.
CELL_FORMS = [
    pytest.param(layer_cls, key, *flags, marks=FUSED_ON_JAX_TOO if flags[0] else ())
    for layer_cls, key, *flags in [
        *((AssociativeGRU, None, *row.values) for row in all_pairs(*[[False, True]] * 3)),
        (DualAssociativeGRU, "paper", False, False, False),
        (DualAssociativeGRU, "released", False, True, True),
        (DualAssociativeGRU, "paper", True, False, False),
        (DualAssociativeGRU, "paper", True, True, True),
    ]
]


@pytest.mark.parametrize(
    "layer_cls, dual_key, fused_loop, go_backwards, zero_output_for_mask",
    split_rows(CELL_FORMS),
    ids=lambda value: getattr(value, "__name__", None),
)
def test_layer_equals_the_cell_form_forward_and_gradients(
    float64_policy, layer_cls, dual_key, fused_loop, go_backwards, zero_output_for_mask
):
    """Masked, with and without an initial state: outputs, states and every gradient."""
    rng = np.random.default_rng(20)
    units, copies, batch, steps = 8, 3, 3, 6
    flags = dict(go_backwards=go_backwards, zero_output_for_mask=zero_output_for_mask)
    kwargs = dict(return_sequences=True, return_state=True, **flags)
    dual = {} if dual_key is None else {"dual_key": dual_key}
    layer = layer_cls(units, num_copies=copies, fused_loop=fused_loop, **dual, **kwargs)
    cell_form = keras.layers.RNN(type(layer.cell)(units, num_copies=copies, **dual), **kwargs)
    for rnn in (cell_form, layer):
        rnn.build((None, None, 5))
    set_cell_weights(cell_form.cell, random_weights(rng, 5, units))
    layer.cell.set_weights(cell_form.cell.get_weights())
    xs, mask = rng.normal(size=(batch, steps, 5)), mask_with_holes(batch, steps)
    initial = [0.5 * rng.normal(size=(batch, size)) for size in layer.cell.state_size]
    for init in (None, initial):
        expected = masked_rnn(cell_form, xs, mask, initial_state=init)
        got = layer(xs, mask=mask, initial_state=init)
        assert_close(got, expected, atol=1e-12)
    if dual:  # the source memory passes through unchanged
        np.testing.assert_array_equal(as_numpy(got[3]), initial[2])
    # The gradients, with zeros at masked steps on JAX (KERAS_MASKED_OUTPUT).
    cell_form.zero_output_for_mask = layer.zero_output_for_mask = (
        zero_output_for_mask or BACKEND != "tensorflow"
    )
    grads = []
    for rnn in (cell_form, layer):

        def loss(xs, *initial, rnn=rnn):
            outputs, memory, last, *_ = rnn(xs, mask=mask, initial_state=list(initial))
            return ops.sum(ops.sin(outputs)) + ops.sum(ops.square(memory)) + ops.sum(ops.cos(last))

        _, weight_grads, input_grads = gradients(loss, rnn.cell.trainable_weights, [xs, *initial])
        grads.append(input_grads + weight_grads)
    # The inputs, each state and each weight (the Dual's two or three of its own).
    assert len(grads[1]) == 1 + len(initial) + 5 + len(dual) * (2 + (dual_key == "released"))
    assert all(np.abs(e).max() > 0 for e in grads[0])
    assert_close(grads[1], grads[0], atol=1e-11, rtol=1e-11)


@pytest.mark.skipif(
    BACKEND != "jax", reason="the Pallas kernels (TensorFlow's fused loop has no resets)"
)
@pytest.mark.parametrize("units, copies", [(8, 3), (100, 2)])  # on a GPU 4 and 16 warps
def test_the_pallas_kernels_equal_keras_loop_with_masks_and_resets(units, copies):
    """float32, outputs, states and every gradient; 17 rows: two programs of 16 rows."""
    rng, batch, steps = np.random.default_rng(28), 17, 6
    xs = rng.normal(size=(batch, steps, 5)).astype("float32")
    mask, reset = mask_with_holes(batch, steps), rng.random((batch, steps)) > 0.7
    sizes = (units * copies, units)
    initial = [0.5 * rng.normal(size=(batch, size)).astype("float32") for size in sizes]
    options = dict(return_sequences=True, return_state=True)
    layers, results = [_am_gru(units, copies, fused_loop=f, **options) for f in (False, True)], []
    for layer in layers:
        layer.build(xs.shape)
        layer.set_weights(layers[0].get_weights())

        def loss(xs, *initial, layer=layer):
            outputs, memory, last = layer(xs, mask=mask, reset=reset, initial_state=list(initial))
            return ops.sum(ops.sin(outputs)) + ops.sum(ops.square(memory)) + ops.sum(ops.cos(last))

        _, weight_grads, input_grads = gradients(loss, layer.cell.trainable_weights, [xs, *initial])
        values = layer(xs, mask=mask, reset=reset, initial_state=initial)
        results.append([as_numpy(x) for x in values] + input_grads + weight_grads)
    assert len(results[1]) == 3 + 3 + 5
    for e, g in zip(*results):
        np.testing.assert_allclose(g, e, atol=1e-5 * max(1.0, np.abs(e).max()), rtol=0)


def test_weights_are_the_cell_weights_and_retrievals_match_the_cell_form():
    # Named as the cell's, which `load_original_weights` maps to the original names.
    layer = AssociativeGRU(8, num_copies=2, return_retrievals=True, return_sequences=True)
    layer.build((None, None, 5))
    names = [v.path.split("/")[-1] for v in layer.weights]
    assert names == ["key_kernel", "gate_kernel", "gate_bias", "candidate_kernel", "candidate_bias"]
    assert [id(v) for v in layer.weights] == [id(v) for v in layer.cell.weights]
    gates, candidate = as_numpy(layer.cell.gate_bias), as_numpy(layer.cell.candidate_bias)
    assert gates.shape == (16,) and (gates == 1).all() and not candidate.any()  # the original's
    xs = np.random.default_rng(22).normal(size=(2, 4, 5)).astype("float32")
    cell = AssociativeGRUCell(8, num_copies=2, return_retrievals=True)
    cell_form = keras.layers.RNN(cell, return_sequences=True)
    cell_form.build(xs.shape)
    layer.cell.set_weights(cell_form.cell.get_weights())
    got = as_numpy(layer(xs))
    assert got.shape == (2, 4, 24)
    np.testing.assert_allclose(got, as_numpy(cell_form(xs)), atol=1e-6)


@FUSED
@pytest.mark.skipif(BACKEND == "torch", reason="torch.compile: minutes on a CPU; see the next")
def test_jit_compiled_training_step_matches_eager(fused_loop):
    rng = np.random.default_rng(25)
    xs, ys = rng.normal(size=(4, 3, 5)).astype("float32"), rng.normal(size=(4, 8)).astype("float32")

    def build():  # (three steps: torch.compile traces each one)
        keras.utils.set_random_seed(5)
        inputs = keras.Input((3, 5))
        return keras.Model(inputs, AssociativeGRU(8, num_copies=4, fused_loop=fused_loop)(inputs))

    results = []
    for jit in (False, True):
        model = build()
        compile_and_build_optimizer(model, keras.optimizers.SGD(0.1), "mse", jit_compile=jit)
        model.train_on_batch(xs, ys)
        results.append(model.predict_on_batch(xs))
    np.testing.assert_allclose(results[0], results[1], atol=1e-5)


@pytest.mark.skipif(BACKEND != "torch", reason="torch.compile: jit_compile on torch")
def test_torch_compile_traces_the_steps_without_a_graph_break_at_each():
    import torch

    layer = AssociativeGRU(8, num_copies=2, fused_loop=False, return_sequences=True)
    x = ops.convert_to_tensor(np.random.default_rng(3).normal(size=(3, 6, 8)).astype("float32"))
    layer.build(x.shape)
    # A graph a step (a constant converted there, a tensor step counter) runs far slower.
    explained = torch._dynamo.explain(lambda x: layer(x))(x)
    assert 0 < explained.graph_count and explained.graph_break_count < x.shape[1]


@pytest.mark.parametrize("make", [AssociativeGRU, DualAssociativeGRU, DualAssociativeEncoder])
def test_fused_loop_must_be_a_bool_or_auto(make):
    # `units` and `num_copies` are the cell's (test_associative_gru_cell.py).
    for value in ("yes", "Auto", 1, None):
        message = f"{make.__name__}: `fused_loop` must be a bool or 'auto', got {value!r}."
        pytest.raises(TypeError, make, 4, fused_loop=value).match(re.escape(message))
    assert make(4, fused_loop=np.bool_(False)).fused_loop is False and make(4).fused_loop == "auto"


@pytest.mark.parametrize(
    "layer_cls, fused_loop",
    [
        (AssociativeGRU, False),
        pytest.param(AssociativeGRU, True, marks=tensorflow_only(FUSED_LOOP)),
        (DualAssociativeGRU, "auto"),
    ],
    ids=["am_gru_keras_loop", "am_gru_fused_loop", "dual_auto"],
)
def test_stateful_segments_equal_one_pass(layer_cls, fused_loop):
    """From given states (the Dual's source memory among them), then from zeros after a reset."""
    rng = np.random.default_rng(27)
    xs = rng.normal(size=(3, 9, 5)).astype("float32")
    options = dict(num_copies=3, return_sequences=True, fused_loop=fused_loop)
    whole, stateful = layer_cls(8, **options), layer_cls(8, stateful=True, **options)
    whole.build((3, 9, 5))
    stateful.build((3, None, 5))
    stateful.cell.set_weights(whole.cell.get_weights())
    initial = [rng.normal(size=(3, size)).astype("float32") for size in whole.cell.state_size]
    pieces = [stateful(xs[:, :3], initial_state=initial)]
    pieces += [stateful(xs[:, i : i + 3]) for i in (3, 6)]
    expected = whole(xs, initial_state=initial)
    assert_close(np.concatenate([as_numpy(p) for p in pieces], axis=1), expected, atol=1e-5)
    stateful.reset_states()
    assert_close(stateful(xs[:, :3]), whole(xs[:, :3]), atol=1e-5)


# (the layer, its options, why fused_loop=True refuses them or None)
@pytest.mark.parametrize(
    "layer_cls, options, refusal",
    [
        (AssociativeGRU, {}, None),
        (AssociativeGRU, {"return_retrievals": True}, "with return_retrievals=True: the"),
        (AssociativeGRU, {"unroll": True}, "with unroll=True: the fused loop always"),
        (DualAssociativeGRU, {}, None),
        (DualAssociativeGRU, {"dual_key": "released"}, "'paper' only; got dual_key='released'"),
        (DualAssociativeGRU, {"return_retrievals": True}, "return_retrievals=True"),
    ],
)
def test_auto_runs_the_fused_loop_wherever_it_supports_the_layer(layer_cls, options, refusal):
    layer = layer_cls(4, num_copies=2, **options)
    assert layer.fused_loop == "auto"
    # On JAX the Pallas kernels run when asked (fused_loop=True).
    assert layer.uses_fused_loop is (refusal is None and BACKEND == "tensorflow")
    # The saved config keeps "auto", so a model saved on TensorFlow loads on any backend.
    rebuilt = layer_cls.from_config(layer.get_config())
    assert rebuilt.fused_loop == "auto" and rebuilt.uses_fused_loop is layer.uses_fused_loop
    # False always runs Keras's loop.
    assert layer_cls(4, num_copies=2, fused_loop=False, **options).uses_fused_loop is False
    # True says why it cannot: on another backend the backend first, after the Dual's key.
    if BACKEND not in ("tensorflow", "jax") and "dual_key" not in options:
        refusal = "needs the TensorFlow backend .* or JAX"
    if refusal:
        match = f"^{layer_cls.__name__}: `fused_loop=True` .*{refusal}"
        with pytest.raises(ValueError, match=match):
            layer_cls(4, num_copies=2, fused_loop=True, **options)
    if layer_cls is AssociativeGRU and not options:  # saved with True on TensorFlow: loads anywhere
        torch = BACKEND == "torch"
        for cls in (AssociativeGRU, DualAssociativeGRU, DualAssociativeEncoder):
            saved = {**cls(4, num_copies=2).get_config(), "fused_loop": True}
            with pytest.warns(UserWarning, match="'auto'") if torch else contextlib.nullcontext():
                assert cls.from_config(saved).fused_loop == ("auto" if torch else True)
