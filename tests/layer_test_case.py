"""`LayerTestCase`: the suites each layer's test class calls with its layer's arguments, as
keras-hub's layer tests call ``run_layer_test`` (which apply: tests/test_layer_test_case.py).
Each suite checks that what it ran holds ``layer_cls``."""

import contextlib
import inspect
import json
import re

import keras
import numpy as np
import pytest
from keras import ops
from keras.src import testing  # Keras's layer test harness (tests only)

from tests.support import BACKEND, as_numpy, assert_close, compiled, gradients
from tf_memlayers.layers.resettable_rnn import RNN_FLAGS
from tf_memlayers.models._compiling import compile_and_build_optimizer

# The width of the suites' inputs: ``[batch, time, INPUT_DIM]`` sequences.
INPUT_DIM = 4
# Every flag of an RNN layer set, for `run_config_test`.
ALL_RNN_FLAGS = dict.fromkeys(RNN_FLAGS, True)


def user_rnn(cell, **kwargs):
    """``keras.layers.RNN`` over ``cell``, on JAX with ``zero_output_for_mask=True``."""
    return keras.layers.RNN(cell, zero_output_for_mask=BACKEND != "tensorflow", **kwargs)


def rnn_over(make_cell, **rnn_kwargs):
    """A factory of ``keras.layers.RNN(make_cell(dtype), return_sequences=True)``."""

    def make(**kwargs):
        cell = make_cell(dtype=kwargs.get("dtype"))
        return keras.layers.RNN(cell, return_sequences=True, **rnn_kwargs, **kwargs)

    return make


def masking_checks(output_shape, weights, input_shape=(2, 3, INPUT_DIM), **checks):
    """`run_layer_test`'s arguments for a layer that supports masking: ``input_shape`` in,
    ``output_shape`` out, ``weights`` trainable weights, and any other ``checks``."""
    shapes = dict(input_shape=input_shape, expected_output_shape=output_shape)
    return dict(**shapes, expected_num_trainable_weights=weights, supports_masking=True, **checks)


def read_premise_memory(premise_layer, hypothesis_layer, premise, hypothesis):
    """A Dual AM-GRU ``hypothesis_layer`` reads the hypothesis from the premise's memory."""
    _, memory, last = premise_layer(premise)
    return hypothesis_layer(hypothesis, initial_state=[ops.zeros_like(memory), last, memory])


def takes(method, name):
    """Whether ``method`` takes an argument ``name``."""
    return name in inspect.signature(method).parameters


def flags_of(layer_cls):
    """The bool-default arguments of ``layer_cls``'s own ``__init__``, and an RNN's flags."""
    own = vars(layer_cls).get("__init__")
    parameters = inspect.signature(own).parameters.values() if own else []
    flags = [p.name for p in parameters if isinstance(p.default, bool)]
    if issubclass(layer_cls, keras.layers.RNN):
        flags += [flag for flag in RNN_FLAGS if flag not in flags]
    return flags


def _shape_list(shapes):
    """A `compute_output_shape` result as a list of tuples."""
    one = isinstance(shapes[0], (int, type(None)))
    return [tuple(shapes)] if one else [tuple(shape) for shape in shapes]


def _shapes_and_dtypes(outputs):
    dtype = keras.backend.standardize_dtype
    return [(tuple(t.shape), dtype(t.dtype)) for t in keras.tree.flatten(outputs)]


def _keras_spec_loses_autocast():
    """Whether Keras's shape inference reads a variable in its own dtype, not the autocast one:
    on torch its meta-tensor stub of a variable (``Variable.value``) is built from the variable's
    dtype, so Keras's own cells (`keras.layers.LSTMCell`) report float32 outputs under
    ``mixed_float16`` where they compute float16. Measured, so the check returns when Keras
    fixes it."""

    class Outer(keras.layers.Layer):
        def __init__(self):
            super().__init__(dtype="mixed_float16")
            self.inner = keras.layers.SimpleRNNCell(2, dtype="mixed_float16")

        def call(self, inputs):
            return self.inner(inputs, [inputs[:, :2]])[0]

    outer = Outer()
    outer(np.ones((1, 3), "float16"))
    return outer.compute_output_spec(keras.KerasTensor((1, 3), "float16")).dtype != "float16"


def _per_input(shape, make):
    """``make(shape)``, or the list of ``make`` of each of a list of shapes."""
    return [make(one) for one in shape] if isinstance(shape, list) else make(shape)


@contextlib.contextmanager
def dtype_policy(name):
    """Keras's global dtype policy ``name`` within the block (float32 after it)."""
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy("float32")


# The journeys' data: 5 samples in batches of 2, so that the last batch has 1.
VOCAB, STEPS, SAMPLES, BATCH, CLASSES = 11, 6, 5, 2, 3


def _tokens(rng, masked, steps=STEPS):
    """``[SAMPLES, steps]`` token ids; with ``masked`` some 0 (padding and a hole)."""
    tokens = rng.integers(1, VOCAB, size=(SAMPLES, steps)).astype("int32")
    if masked:
        tokens[1, steps - 2 :] = tokens[3, 1] = tokens[4, steps - 1 :] = 0
    return tokens


def journey_model(role, build, masked, rng):
    """``(model, inputs, targets)`` around ``build``: ``"step"`` (embedded tokens -> a feature
    per step), ``"pooled"`` (-> one vector), ``"pair"`` (two sentences) or ``"token"``."""
    if role == "pair":
        premise = keras.Input((STEPS,), dtype="int32")
        hypothesis = keras.Input((STEPS - 2,), dtype="int32")
        embedding = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)
        encoded = build(embedding(premise), embedding(hypothesis))
        logits = keras.layers.Dense(CLASSES, dtype="float32")(encoded)
        inputs = [_tokens(rng, masked), _tokens(rng, masked, STEPS - 2)]
        model = keras.Model([premise, hypothesis], logits)
        return model, inputs, rng.integers(0, CLASSES, size=SAMPLES)
    if role not in ("step", "pooled", "token"):
        raise ValueError(f"a journey's role must be step, pooled, pair or token, got {role!r}")
    tokens = keras.Input((STEPS,), dtype="int32")
    if role == "token":
        logits = build(tokens, masked, VOCAB)
    else:
        embedded = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)(tokens)
        width = CLASSES if role == "pooled" else VOCAB
        logits = keras.layers.Dense(width, dtype="float32")(build(embedded))
    size = SAMPLES if role == "pooled" else (SAMPLES, STEPS)
    targets = rng.integers(0, CLASSES if role == "pooled" else VOCAB, size=size)
    return keras.Model(tokens, logits), _tokens(rng, masked), targets


# The packed documents of the reset suites: B rows of T steps of W features.
B, T, W = 3, 11, 12


def packed_resets():
    """``[B, T]`` resets: row 0 two, row 1 at the first and last steps, row 2 none."""
    reset = np.zeros((B, T), bool)
    reset[0, [3, 8]] = reset[1, [0, T - 1]] = True
    return reset


def documents(reset, mask=None):
    """Per row, ``(start, stop, fresh)`` of its documents: each starts at step 0 or at a reset
    of a valid step (``fresh``: at a reset)."""
    kept, rows = np.ones_like(reset) if mask is None else mask, []
    for row, keep in zip(reset, kept):
        starts = [t for t in range(1, len(row)) if row[t] and keep[t]]
        bounds, fresh = [0, *starts, len(row)], [bool(row[0] and keep[0])] + [True] * len(starts)
        rows.append(list(zip(bounds, bounds[1:], fresh)))
    return rows


X = np.random.default_rng(0).normal(size=(2, 5, INPUT_DIM)).astype("float32")


def called_twice(layer, first, second, **kwargs):
    """Builds ``layer`` on ``first``, then calls it on ``second``."""
    layer(first)
    return layer(second, **kwargs)


def zeros(*shape):
    return np.zeros(shape, "float32")


# (a bad call of ``make(**kwargs)``, fragments of its ValueError): a layer runs the checks of
# `MemorySequenceLayer` (test_memory_sequence_layer.py), eagerly, symbolically and stateful.
BAD_MEMORY_CALLS = [
    (lambda make: make()(X, mask=np.ones((2, 6), bool)), ["`mask`", "(2, 6)", "(2, 5, 4)"]),
    (
        lambda make: make()(keras.Input((5, INPUT_DIM)), mask=keras.Input((6,), dtype="bool")),
        ["`mask`", "(None, 6)", "(None, 5, 4)"],
    ),
    (
        lambda make: make()(X, initial_memory=zeros(3, make().memory_size_for(4))),
        ["`initial_memory`", "(3, ", "(2, 5, 4)"],
    ),
    (
        lambda make: called_twice(make(stateful=True), X, X[:1]),
        ["`inputs`", "(1, 5, 4)", "memory of shape (2, "],
    ),
]

BAD_RESETS = [(np.zeros((B, T), dtype), "must be a bool tensor") for dtype in ("float32", "int32")]
BAD_RESETS += [
    (np.zeros(shape, bool), r"must have shape \(batch, time\)")
    for shape in [(B, T + 1), (B,), (B + 1, T)]
]
BAD_STEP_RESETS = [np.zeros((B,), "float32"), *(np.zeros(s, bool) for s in [B + 1, (B, 1), (B, 5)])]


def _pieces(make):
    """The one number of sizes (1 to 6) that ``make`` accepts."""
    accepted = []
    for count in range(1, 7):
        try:
            make(sizes=[1] * count)
        except ValueError as error:
            if "`sizes` must list" in str(error):
                continue
        accepted.append(count)
    assert len(accepted) == 1, accepted
    return accepted[0]


def _plain(value):
    """Whether ``value`` is a number, string or bool, or a list of them."""
    if isinstance(value, (tuple, list)):
        return all(_plain(item) for item in value)
    return isinstance(value, (bool, int, float, str))


class LayerTestCase:
    """The suites of the package's layers (module docstring)."""

    layer_cls = None

    def assert_holds_layer(self, layer):
        """``layer`` (a layer, an RNN over a cell, a model) holds one of ``layer_cls``."""
        held = {type(item) for item in layer._flatten_layers()}  # itself and what it holds
        assert self.layer_cls in held, (self.layer_cls, layer)

    # -- every layer ----------------------------------------------------------------------

    def run_layer_test(self, layer_cls, init_kwargs=None, **arguments):
        """Keras's own layer checks; ``layer_cls`` may be a factory of the layer."""
        init_kwargs = init_kwargs or {}
        self.assert_holds_layer(layer_cls(**init_kwargs))
        arguments.setdefault("expected_num_non_trainable_weights", 0)
        arguments.setdefault("expected_num_seed_generators", 0)
        testing.TestCase().run_layer_test(layer_cls, init_kwargs, **arguments)

    def run_journey_test(self, role, build, tmp_path, before_saving=None, xla_on_tensorflow=True):
        """Under ``mixed_float16``: XLA `fit` (eager on torch) on masked data with a partial last
        batch, `predict`, the `.keras` round trip and (TensorFlow) export agree.
        ``before_saving(model, rng)`` fills a layer before saving. ``xla_on_tensorflow=False``:
        TensorFlow fits without XLA, for a layer whose XLA training step another test compiles
        there."""
        rng = np.random.default_rng(7)
        with dtype_policy("mixed_float16"):
            model, inputs, targets = journey_model(role, build, True, rng)
            self.assert_holds_layer(model)
            data = dict(x=inputs, y=targets, batch_size=BATCH)
            if BACKEND == "tensorflow":
                import tensorflow as tf

                # One batch whose size the traced step does not know, as a partial batch's: XLA
                # compiles the step of a run-time batch size once, not once for each size.
                x = tuple(inputs) if isinstance(inputs, list) else inputs
                batch = tf.data.Dataset.from_tensor_slices((x, targets)).batch(SAMPLES)
                data = dict(x=batch, shuffle=False)  # (a dataset is not shuffled by fit)

            def compile_model(jit):
                loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                compile_and_build_optimizer(
                    model, keras.optimizers.Adam(1e-2), loss, jit_compile=jit
                )

            # On torch, jit_compile is torch.compile, which Keras leaves off there ("auto"),
            # and which takes minutes per model: the step runs eagerly, as users run it.
            compile_model(BACKEND != "torch" and (xla_on_tensorflow or BACKEND != "tensorflow"))
            history = model.fit(**data, epochs=1, verbose=0)
            assert np.isfinite(history.history["loss"]).all()
            if before_saving is not None:
                before_saving(model, rng)
            predictions = as_numpy(compiled(model)(inputs))
            assert np.isfinite(predictions).all()
            compiled_predictions = model.predict(inputs, verbose=0)
            scale = max(1.0, np.abs(predictions).max())
            np.testing.assert_allclose(compiled_predictions, predictions, rtol=0, atol=5e-3 * scale)
            model.save(tmp_path / "model.keras")
            loaded = keras.models.load_model(tmp_path / "model.keras")
            assert_close(compiled(loaded)(inputs), predictions, atol=1e-6)
            for layer in loaded.layers:  # frozen, its layers rebuilt from their configs
                layer.trainable = False
            frozen = keras.models.clone_model(loaded).trainable_weights
            assert not frozen, f"trainable after rebuilding: {[w.path for w in frozen]}"
            if BACKEND == "tensorflow":  # exported as a SavedModel, it serves the same
                model.export(str(tmp_path / "export"), verbose=False)
                archive = tf.saved_model.load(str(tmp_path / "export"))  # held while it serves
                served = archive.serve(keras.tree.map_structure(tf.constant, inputs))
                assert_close(served, predictions, atol=1e-5)

    def run_config_test(self, layer_cls, **init_kwargs):
        """The JSON config holds each argument and rebuilds the same config."""
        layer = layer_cls(**init_kwargs)
        self.assert_holds_layer(layer)
        for size in ("state_size", "output_size"):  # a cell's, unbuilt: a size or a clear error
            with contextlib.suppress(ValueError):
                getattr(layer, size, None)
        config = json.loads(json.dumps(layer.get_config()))
        for name, value in init_kwargs.items():
            if isinstance(value, str) and isinstance(config[name], dict):  # the object named
                revived = type(keras.saving.deserialize_keras_object(config[name])).__name__
                assert revived.lower() == value.replace("_", "").lower(), (name, config[name])
            elif _plain(value):
                assert config[name] == (list(value) if isinstance(value, tuple) else value), name
        assert layer_cls.from_config(config).get_config() == layer.get_config()

    def run_output_spec_test(self, make, shape, input_dtype="float32", **call_kwargs):
        """`compute_output_spec`, a symbolic call of unknown batch and `compute_output_shape`
        give the eager call's shapes and dtypes, in float32 and ``mixed_float16``."""
        rng, floats = np.random.default_rng(2), keras.backend.is_float_dtype(input_dtype)
        draw = rng.normal if floats else lambda size: rng.integers(0, 3, size)
        inputs = _per_input(shape, lambda one: draw(size=one).astype(input_dtype))
        arrays = {k for k, v in call_kwargs.items() if isinstance(v, np.ndarray)}

        def kwargs_as(convert):
            return {k: convert(v) if k in arrays else v for k, v in call_kwargs.items()}

        for policy in ("float32", "mixed_float16"):
            layer = make(policy)
            self.assert_holds_layer(layer)
            eager = _shapes_and_dtypes(layer(inputs, **call_kwargs))
            compute_dtype = keras.DTypePolicy(policy).compute_dtype
            dtype = compute_dtype if floats else input_dtype
            spec = (layer if arrays else make(policy)).compute_output_spec(
                _per_input(shape, lambda one, dtype=dtype: keras.KerasTensor(one, dtype)),
                **kwargs_as(lambda v, dtype=compute_dtype: keras.KerasTensor(v.shape, dtype)),
            )
            assert _shapes_and_dtypes(spec) == eager, policy
            placeholders = _per_input(shape, lambda one: keras.Input(one[1:], dtype=input_dtype))
            outputs = make(policy)(placeholders, **kwargs_as(lambda v: keras.Input(v.shape[1:])))
            symbolic = _shapes_and_dtypes(outputs)
            assert len(symbolic) == len(eager), policy
            for (got, got_dtype), (want, want_dtype) in zip(symbolic, eager):
                assert got[0] in (None, want[0]) and got[1:] == want[1:], (policy, got, want)
                assert got_dtype == want_dtype, policy
            # With memory arrays, the layer the call has built (the memories' lengths), and their
            # shapes, as Keras's ``summary`` passes those of `build` (``memory_shape``).
            shape_method = (layer if arrays else make(policy)).compute_output_shape
            others = {k: v for k, v in call_kwargs.items() if k not in arrays}
            others.update({f"{k}_shape": call_kwargs[k].shape for k in arrays})
            own = shape_method.__func__ is not keras.layers.Layer.compute_output_shape
            assert not own or all(takes(shape_method, f"{k}_shape") for k in arrays), policy
            if own and all(takes(shape_method, name) for name in others):
                computed = shape_method(shape, **others)
                assert _shape_list(computed) == [s for s, _ in eager], policy

    def run_nan_padding_test(self, make, memory_width=None):
        """NaN at padded steps (and, with ``memory_width``, a memory's) reaches no output or
        gradient; padded steps of sequence outputs and the padded memory's gradients are zero."""
        layer = make()
        rng, mask = np.random.default_rng(1), np.ones((3, 5), bool)
        mask[1, 3:] = False  # right padding
        mask[2, :2] = False  # left padding
        inputs = rng.normal(size=(3, 5, INPUT_DIM)).astype("float32")
        inputs[~mask] = np.nan
        memory, memory_mask = [], None
        if memory_width:
            memory_mask = np.ones((3, 4), bool)
            memory_mask[0, 2:] = False
            memory = [rng.normal(size=(3, 4, memory_width)).astype("float32")]
            memory[0][~memory_mask] = np.nan

        def loss(*memory):
            extra = {"memory": memory[0], "memory_mask": memory_mask} if memory else {}
            outputs = layer(inputs, mask=mask, **extra)
            return ops.sum(ops.square(outputs)), outputs

        layer(inputs, mask=mask, **({"memory": memory[0]} if memory else {}))
        self.assert_holds_layer(layer)
        (_, outputs), weight_gradients, memory_gradients = gradients(
            loss, layer.trainable_weights, memory, has_aux=True
        )
        assert np.isfinite(outputs).all()
        if outputs.ndim == 3:
            np.testing.assert_array_equal(outputs[~mask], 0.0)
        for weight, gradient in zip(layer.trainable_weights, weight_gradients):
            assert np.isfinite(gradient).all(), weight.path
        for gradient in memory_gradients:
            assert np.isfinite(gradient).all()
            np.testing.assert_array_equal(gradient[~memory_mask], 0.0)

    def run_flags_test(self, make, flags=None):
        """Each bool argument (default `flags_of`) refuses a non-bool, naming it, and keeps a
        NumPy bool as a Python bool."""
        layer = make()
        self.assert_holds_layer(layer)
        flags = flags_of(type(layer)) if flags is None else flags
        assert flags, f"{type(layer).__name__} has no boolean arguments"
        config = layer.get_config()
        for flag in flags:
            default = config[flag]
            assert isinstance(default, bool), (flag, default)
            for value in ("no", [0], 1):
                message = re.escape(f"`{flag}` must be a bool, got {value!r}")
                try:
                    pytest.raises(TypeError, make, **{flag: value}).match(message)
                except (AssertionError, pytest.fail.Exception) as error:
                    raise AssertionError(f"{flag}={value!r}: {error}") from None
            flipped = make(**{flag: np.bool_(not default)}).get_config()[flag]
            assert flipped is (not default), (flag, flipped)

    def run_mixed_precision_test(self, make, inputs, atol, policy="mixed_float16", **call_kwargs):
        """``make()`` under ``policy`` with a float32 twin's U(-0.8, 0.8) weights outputs the
        policy's dtype within ``atol`` (relative above 1) of the float32 outputs."""
        reference = make()
        reference(inputs, **call_kwargs)
        self.assert_holds_layer(reference)
        rng = np.random.default_rng(0)
        for weight in reference.trainable_weights:
            weight.assign(rng.uniform(-0.8, 0.8, weight.shape))
        want = [as_numpy(t) for t in keras.tree.flatten(reference(inputs, **call_kwargs))]
        with dtype_policy(policy):
            layer = make()
            layer(inputs, **call_kwargs)
        layer.set_weights(reference.get_weights())
        got = keras.tree.flatten(layer(inputs, **call_kwargs))
        assert keras.backend.standardize_dtype(got[0].dtype) == policy.split("_")[1]
        for g, w in zip(got, want):
            g = as_numpy(ops.cast(g, "float32"))
            np.testing.assert_allclose(g, w, rtol=0, atol=atol * max(1.0, np.abs(w).max()))
        assert np.abs(want[0]).max() > 10 * atol  # far larger than the tolerance
        return got

    # -- cells -----------------------------------------------------------------------------

    def run_cell_tests(self, make_cell, direct_spec=True, **call_kwargs):
        """A symbolic step (and `compute_output_spec`, with ``direct_spec``) gives the eager
        step's shapes and dtypes in float32 and ``mixed_float16``; on TensorFlow the new states
        keep static shapes for an unknown batch, as Keras's loop needs."""
        for policy in ("float32", "mixed_float16"):
            dtype = keras.DTypePolicy(policy).compute_dtype
            kwargs, cell = {k: v.astype(dtype) for k, v in call_kwargs.items()}, make_cell(policy)
            self.assert_holds_layer(cell)
            sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
            states = [np.zeros((2, size), dtype) for size in sizes]
            eager = _shapes_and_dtypes(cell(np.ones((2, INPUT_DIM), dtype), states, **kwargs))
            inputs = keras.Input(batch_shape=(2, INPUT_DIM), dtype=dtype)
            states = [keras.Input(batch_shape=(2, size), dtype=dtype) for size in sizes]
            specs = [make_cell(policy)(inputs, states, **kwargs)]
            if direct_spec:
                specs.append(cell.compute_output_spec(inputs, states, **kwargs))
            in_keras = any(type(c).__module__.startswith("keras.") for c in cell._flatten_layers())
            lost = policy != "float32" and in_keras and _keras_spec_loses_autocast()
            for spec in specs:
                got = _shapes_and_dtypes(spec)
                if lost:  # float32 where Keras's own cell reports it
                    got = [(shape, kind.replace("float32", dtype)) for shape, kind in got]
                assert got == eager, policy
        if BACKEND == "tensorflow":
            self._check_static_state_shapes(make_cell(), call_kwargs)

    @staticmethod
    def _check_static_state_shapes(cell, call_kwargs):
        import tensorflow as tf

        sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
        cell(zeros(2, INPUT_DIM), [zeros(2, size) for size in sizes], **call_kwargs)  # built
        shapes = {}

        names = sorted(call_kwargs)  # (a memory: of an unknown batch size too)
        signature = [tf.TensorSpec((None, INPUT_DIM))]
        signature += [tf.TensorSpec((None, *call_kwargs[name].shape[1:])) for name in names]

        @tf.function(input_signature=signature + [tf.TensorSpec((None, s)) for s in sizes])
        def step(inputs, *arrays):
            kwargs = dict(zip(names, arrays))
            output, new_states = cell(inputs, list(arrays[len(names) :]), **kwargs)
            shapes["output"] = tuple(output.shape)
            shapes["states"] = [tuple(s.shape) for s in keras.tree.flatten(new_states)]
            return output

        step.get_concrete_function()
        assert shapes["output"] == (None, cell.output_size)
        assert shapes["states"] == [(None, size) for size in sizes]

    # -- layers over sequences ---------------------------------------------------------------

    def run_empty_input_test(self, make, last_output_is_memory=True):
        """Empty sequences and batches (masked or not) give `compute_output_shape`'s shapes; with
        no step the last output (where ``last_output_is_memory``) is zeros."""
        for shape in ((2, 0, 4), (0, 5, 4)):
            for with_mask in (False, True):
                layer = make()
                self.assert_holds_layer(layer)
                if with_mask and not takes(layer.call, "mask"):
                    continue
                kwargs = {"mask": np.ones(shape[:2], bool)} if with_mask else {}
                outputs = keras.tree.flatten(layer(np.zeros(shape, "float32"), **kwargs))
                want = _shape_list(layer.compute_output_shape(shape))
                assert [tuple(t.shape) for t in outputs] == want, (shape, with_mask)
                if last_output_is_memory and shape[1] == 0:
                    np.testing.assert_array_equal(as_numpy(outputs[-1]), 0.0)

    # -- resets ------------------------------------------------------------------------------

    def run_reset_tests(self, make, **call_kwargs):
        """A bad ``reset`` (dtype, shape, with ``go_backwards``, symbolic) is refused, naming it; a
        cell's reset rows step from zero states (but those it carries unchanged)."""
        layer = make()
        self.assert_holds_layer(layer)
        if hasattr(layer, "state_size") and not isinstance(layer, keras.layers.RNN):  # a cell
            self._check_one_step_reset(make, call_kwargs)
            return
        inputs = np.zeros((B, T, W), "float32")
        for bad, match in BAD_RESETS:
            with pytest.raises(ValueError, match="`reset` " + match):
                make()(inputs, reset=bad, **call_kwargs)
        if "go_backwards" in layer.get_config():
            with pytest.raises(ValueError, match="`reset`.*go_backwards"):
                make(go_backwards=True)(inputs, reset=np.zeros((B, T), bool), **call_kwargs)
        symbolic = {k: keras.Input(v.shape[1:]) for k, v in call_kwargs.items()}
        with pytest.raises(ValueError, match="`reset`"):
            make()(keras.Input((5, W)), reset=keras.Input((4,), dtype="bool"), **symbolic)
        # The inputs' Keras mask reaches the layer beside `reset` (as `<argument>_mask`).
        x = np.random.default_rng(3).normal(size=(B, T, W))
        x[1, 4:], reset, layer = 0.0, np.zeros((B, T), bool), make()

        def run(v, **mask):
            return as_numpy(keras.tree.flatten(layer(v, reset=reset, **call_kwargs, **mask))[0])

        want = run(x, mask=x.any(-1))
        np.testing.assert_allclose(run(keras.layers.Masking()(x)), want, atol=1e-6)
        assert not np.allclose(run(x), want)

    @staticmethod
    def _check_one_step_reset(make, call_kwargs):
        with dtype_policy("float64"):
            rng, cell = np.random.default_rng(7), make()
            x = rng.normal(size=(B, 5))
            states = [rng.normal(size=(B, size)) for size in keras.tree.flatten(cell.state_size)]
            kept_output, kept_states = cell(x, states, **call_kwargs)
            carried = [np.array_equal(as_numpy(new), old) for new, old in zip(kept_states, states)]
            reset = np.array([True, False, True])
            output, new_states = cell(x, states, reset=reset, **call_kwargs)
            zeroed = [old if keep else np.zeros_like(old) for old, keep in zip(states, carried)]
            fresh_output, fresh_states = cell(x, zeroed, **call_kwargs)
            for new, fresh, kept in zip(
                [output, *new_states], [fresh_output, *fresh_states], [kept_output, *kept_states]
            ):
                new = as_numpy(new)
                np.testing.assert_allclose(new[reset], as_numpy(fresh)[reset], atol=1e-12)
                np.testing.assert_allclose(new[~reset], as_numpy(kept)[~reset], atol=1e-12)
            assert np.abs(as_numpy(output)[0] - as_numpy(kept_output)[0]).max() > 1e-3
        states = [s.astype("float32") for s in states]
        for bad in BAD_STEP_RESETS:
            with pytest.raises(ValueError, match="`reset` must"):
                make()(np.zeros((B, 5), "float32"), states, reset=bad, **call_kwargs)

    # -- a carried memory (`MemorySequenceLayer`) -------------------------------------------

    def run_carried_memory_tests(self, make):
        """In float64 packed documents equal separate runs (and the last one's memory), a reset
        forgets the carried memory in its row only, stateful segments equal one run; bad
        shapes raise a `ValueError` naming the argument and the shapes."""
        self.assert_holds_layer(make())
        with dtype_policy("float64"):
            self._check_packed_documents(make)
            self._check_reset_forgets_memory(make)
            self._check_stateful_segments(make)
        for bad_call, fragments in BAD_MEMORY_CALLS:
            info = pytest.raises(ValueError, bad_call, make)
            for fragment in fragments:
                assert fragment in str(info.value), (fragment, str(info.value))

    @staticmethod
    def _check_packed_documents(make):
        x, reset = np.random.default_rng(7).normal(size=(B, T, W)), packed_resets()
        layer = make(return_memory=True)
        layer.build(x.shape)
        call = compiled(lambda x, reset: layer(x, reset=reset))
        outputs, memory = call(x, reset)
        for row in range(B):
            for start, stop, _ in documents(reset)[row]:
                alone, alone_memory = call(x[row : row + 1, start:stop], None)
                assert_close(as_numpy(outputs)[row, start:stop], alone[0], atol=1e-12)
            assert_close(as_numpy(memory)[row], alone_memory[0], atol=1e-12)

    @staticmethod
    def _check_reset_forgets_memory(make):
        rng = np.random.default_rng(7)
        x, layer = rng.normal(size=(B, T, W)), make(return_memory=True)
        layer.build(x.shape)
        call = compiled(lambda x, memory, reset: layer(x, initial_memory=memory, reset=reset))
        _, carried = call(rng.normal(size=(B, 6, W)), None, None)
        reset = np.zeros((B, T), bool)
        reset[0, 0] = True  # row 0 starts a new document: the carried memory is forgotten
        reset[1, 4] = True
        outputs = as_numpy(call(x, carried, reset)[0])
        fresh, continued = as_numpy(call(x, None, None)[0]), as_numpy(call(x, carried, None)[0])
        got = [outputs[0], outputs[1, :4], outputs[1, 4:], outputs[2]]
        want = [fresh[0], continued[1, :4], call(x[1:2, 4:], None, None)[0][0], continued[2]]
        assert_close(got, want, atol=1e-12)
        assert not np.allclose(fresh[2], continued[2])

    @staticmethod
    def _check_stateful_segments(make):
        x, reset = np.random.default_rng(7).normal(size=(B, T, W)), packed_resets()
        whole = make()
        whole.build(x.shape)
        expected = as_numpy(compiled(lambda x, reset: whole(x, reset=reset))(x, reset))
        stateful = make(stateful=True)
        stateful.build((B, None, W))
        trained = whole.get_weights()[: len(stateful.trainable_weights)]
        stateful.set_weights(trained + [np.zeros(stateful.memory.shape)])
        parts = [stateful(x[:, a:b], reset=reset[:, a:b]) for a, b in ((0, 5), (5, 9), (9, T))]
        assert_close(np.concatenate([as_numpy(p) for p in parts], axis=1), expected, atol=1e-12)

    # -- sizes -----------------------------------------------------------------------------

    def run_sizes_test(self, make):
        """Bad ``sizes`` are refused when made, naming it; NumPy sizes give a JSON config."""
        self.assert_holds_layer(make())
        name, count = self.layer_cls.__name__, _pieces(make)
        integers = "integer" if count == 1 else "integers"
        pieces = "piece" if count == 1 else "pieces"
        bad = [
            (5, TypeError, f"{name}: `sizes` must be a list of {count} positive {integers}, got 5"),
            ("23", TypeError, f"`sizes` must be a list of {count} positive {integers}, got '23'"),
            ([1] * (count + 1), ValueError, f"`sizes` must list {count} {pieces}"),
            ([2.5] + [1] * (count - 1), TypeError, "`sizes` must be an integer, got 2.5"),
            ([1] * (count - 1) + [0], ValueError, "`sizes` must be >= 1, got 0"),
        ]
        for sizes, error, fragment in bad:
            pytest.raises(error, make, sizes=sizes).match(re.escape(fragment))
        # A cell's sizes add up to its cell's output; a layer checks the sum when built.
        width, sizes = getattr(make(), "cell_output_size", None) or 12, [1] * (count - 1)
        sizes.append(width - sum(sizes))
        assert json.loads(json.dumps(make(sizes=np.array(sizes)).get_config()))["sizes"] == sizes
