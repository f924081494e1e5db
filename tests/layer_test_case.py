"""The shared suites of the package's layers, as the methods of one test case.

Every public layer and cell has one test class, in the test module that mirrors the module
defining it (`tf_memlayers/layers/window_attention/sliding_window_attention.py` ->
`tests/layers/window_attention/test_sliding_window_attention.py`), beside its NumPy-reference
and mechanism tests. The class subclasses `LayerTestCase` and says what the suites need to
know about the layer:

* ``layer_cls``: the class under test;
* ``make(**kwargs)``: a small instance (keyword arguments are passed on, so that a suite can
  set a flag or a ``dtype``);
* ``flags``: its boolean constructor arguments, each checked to refuse a non-bool;
* ``reference``: the module of its NumPy reference under ``tests/``, where it has one;
* ``not_in``: the suites of `SUITES` that do not apply to it, each with the reason;
* its cases of each suite, by name (pytest ids; a name with "fused" in it runs the fused
  AM-GRU loop, which is TensorFlow only):

  - ``keras_checks``: ``name -> (layer_cls, init_kwargs, run_layer_test arguments)``;
  - ``journeys``: ``name -> (role, builder)``: ``"step"`` (embedded tokens -> features per
    step), ``"pooled"`` (-> one vector), ``"pair"`` ((embedded premise, embedded hypothesis)
    -> one vector) or ``"token"`` ((tokens, masked, vocabulary) -> logits);
  - ``nan_padding``: ``name -> factory()`` of a layer promising zero (or unread) padded steps;
  - ``output_spec``: ``name -> (factory(dtype), input shape, call keyword arguments)``;
  - ``cells`` (`CellTests`): ``name -> factory(dtype=None)`` of a cell;
  - ``empty`` (`EmptyInputTests`): ``name -> factory()`` of a layer called on empty
    sequences and batches;
  - ``memory_variants`` (`CarriedMemoryTests`): more ``name -> make(**kwargs)`` than ``make``;

* ``call_kwargs(batch)``: what every call needs besides its input (a memory to attend over).

The class inherits one test per suite, parametrized over its own cases, each calling the
suite's method (`run_layer_test`, `run_journey_test`, `run_nan_padding_test`,
`run_output_spec_test`, ...); a layer of a kind adds the suites of that kind as mixins:
`CellTests`, `EmptyInputTests`, `ResetCellTests`, `ResetSequenceTests`, `CarriedMemoryTests`,
`SizesTests`. `tests/test_layer_test_case.py` checks that every exported layer has its class,
where it belongs, with the mixins of what it is and cases of its own layer in every suite.
"""

import contextlib
import functools
import inspect
import json
import re

import keras
import numpy as np
import pytest
from keras import ops
from keras.src import testing  # Keras's layer test harness (tests only)

from tests.support import (
    BACKEND,
    FUSED_LOOP,
    TF_FUNCTION,
    compiled,
    gradients,
    tensorflow_only,
)
from tf_memlayers.models._compiling import compile_and_build_optimizer

# The float32 journey without a mask is TensorFlow's graph (not XLA) path. On JAX, where fit
# always compiles with XLA, the masked mixed_float16 journey (a partial batch, masks, a .keras
# round trip) and Keras's own float32 training step (`test_keras_layer_checks`) cover it for a
# layer whose Keras checks train it; the others keep it.
JAX_FLOAT32_JOURNEY = (
    "on JAX the masked mixed_float16 journey and Keras's float32 training step "
    "(test_keras_layer_checks) cover the float32 journey"
)

# The suites every layer has, by the name `not_in` uses.
SUITES = ("keras_checks", "journeys", "nan_padding", "output_spec", "flags")

# The boolean arguments of the package's `keras.layers.RNN` subclasses.
RNN_LAYER_FLAGS = (
    "return_retrievals",
    "return_sequences",
    "return_state",
    "go_backwards",
    "stateful",
    "unroll",
    "zero_output_for_mask",
)
# Why a cell is not in the suites that take whole sequences.
CELL_SPEC = "a cell: its step spec is checked by test_cell_step_spec_is_exact"
RNN_MASKING = (
    "a cell: keras.layers.RNN handles its masked steps, and promises nothing about NaN there"
)
# Why a recurrent layer is not in the empty-input suite.
REFUSES_EMPTY = (
    "refuses sequences without time steps, with an error naming `sequences` "
    "(test_layer_conformance.py)"
)

# The width of the call inputs of the cases (``[2, 3, INPUT_DIM]`` sequences, unless a case
# says otherwise).
INPUT_DIM = 4


def user_rnn(cell, **kwargs):
    """``keras.layers.RNN`` over one of the package's cells, as a user of the backend writes it:
    on JAX with ``zero_output_for_mask=True``, since Keras's JAX loop emits the cell's first
    state at a masked step (support.KERAS_MASKED_OUTPUT; docs/backends.rst, "Backends")."""
    return keras.layers.RNN(
        cell, zero_output_for_mask=keras.backend.backend() != "tensorflow", **kwargs
    )


def read_premise_memory(premise_layer, hypothesis_layer, premise, hypothesis):
    """A ``"pair"`` journey over two recurrent layers: ``premise_layer`` (returning its states
    ``[memory, last output]``) reads the premise, then ``hypothesis_layer`` reads the
    hypothesis from an empty memory and the premise's last output, reading the premise's
    final memory (the Dual AM-GRU's three states); returns the hypothesis output."""
    _, memory, last = premise_layer(premise)
    return hypothesis_layer(hypothesis, initial_state=[keras.ops.zeros_like(memory), last, memory])


def rnn_case(make_cell, output_width, trainable_weights, seed_generators):
    """A ``keras_checks`` case: ``keras.layers.RNN(return_sequences=True)`` over a fresh cell
    of ``make_cell(dtype=...)`` (made under the RNN's dtype policy) on ``[2, 3, INPUT_DIM]``
    inputs, with its expected output width and numbers of trainable weights and seed
    generators."""

    def make(**kwargs):
        return keras.layers.RNN(
            make_cell(dtype=kwargs.get("dtype")), return_sequences=True, **kwargs
        )

    return (
        make,
        {},
        dict(
            input_shape=(2, 3, INPUT_DIM),
            expected_output_shape=(2, 3, output_width),
            expected_num_trainable_weights=trainable_weights,
            expected_num_seed_generators=seed_generators,
            supports_masking=True,
        ),
    )


def layer_classes(layer):
    """The classes in ``layer``: itself, the cell of an RNN, the layers of a model
    (recursively)."""
    found = set()
    stack = [layer]
    while stack:
        item = stack.pop()
        found.add(type(item))
        if isinstance(item, keras.layers.RNN):
            stack.append(item.cell)
        if isinstance(item, keras.Model):
            stack.extend(item.layers)
    return found


def over(suite):
    """Marks a test method of a suite: `LayerTestCase.pytest_generate_tests` parametrizes its
    ``case`` argument with the test class's cases of ``suite``."""

    def mark(method):
        method.suite = suite
        return method

    return mark


def _shape_list(shapes):
    """A `compute_output_shape` result (one shape, or a tuple of shapes) as a list of tuples."""
    if isinstance(shapes[0], (int, type(None))):
        return [tuple(shapes)]
    return [tuple(shape) for shape in shapes]


def _shapes_and_dtypes(outputs):
    return [
        (tuple(t.shape), keras.backend.standardize_dtype(t.dtype))
        for t in keras.tree.flatten(outputs)
    ]


def _per_input(shape, make):
    """``make(shape)``, or for a layer over several inputs (``shape`` a list of shapes) the
    list of ``make`` of each."""
    return [make(one) for one in shape] if isinstance(shape, list) else make(shape)


# The journeys' data: 5 samples in batches of 2, so that the last batch has 1.
VOCAB, STEPS, SAMPLES, BATCH, CLASSES = 11, 6, 5, 2, 3


def _tokens(rng, masked, steps=STEPS):
    """``[SAMPLES, steps]`` token ids; with ``masked`` some rows are padded with 0 (the
    Embedding's mask value), at the end and in a hole."""
    tokens = rng.integers(1, VOCAB, size=(SAMPLES, steps))
    if masked:
        tokens[1, steps - 2 :] = 0
        tokens[3, 1] = 0
        tokens[4, steps - 1 :] = 0
    return tokens


def _predict(model, inputs):
    """``model``'s outputs for ``inputs`` as NumPy: a call on TensorFlow; on JAX the jitted
    `predict_on_batch`, since a call there runs operation by operation and compiles each at
    the first sight of its shapes (about 2 s over a journey's model, against 0.2 s)."""
    outputs = model.predict_on_batch(inputs) if BACKEND == "jax" else model(inputs)
    return keras.ops.convert_to_numpy(outputs)


def journey_model(role, build, masked, rng):
    """``(model, inputs, targets)`` of a journey: ``build`` in the model of its ``role``."""
    if role == "pair":
        # A sentence pair, both sentences through one embedding (conditional encoding).
        premise = keras.Input((STEPS,), dtype="int32")
        hypothesis = keras.Input((STEPS - 2,), dtype="int32")
        embedding = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)
        encoded = build(embedding(premise), embedding(hypothesis))
        logits = keras.layers.Dense(CLASSES, dtype="float32")(encoded)
        inputs = [_tokens(rng, masked), _tokens(rng, masked, STEPS - 2)]
        model = keras.Model([premise, hypothesis], logits)
        return model, inputs, rng.integers(0, CLASSES, size=SAMPLES)
    tokens = keras.Input((STEPS,), dtype="int32")
    embedded = keras.layers.Embedding(VOCAB, 4, mask_zero=masked)(tokens)
    if role == "token":
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = build(tokens, masked, VOCAB)
    elif role == "step":
        targets = rng.integers(0, VOCAB, size=(SAMPLES, STEPS))
        logits = keras.layers.Dense(VOCAB, dtype="float32")(build(embedded))
    elif role == "pooled":
        targets = rng.integers(0, CLASSES, size=SAMPLES)
        logits = keras.layers.Dense(CLASSES, dtype="float32")(build(embedded))
    else:
        raise ValueError(f"a journey's role must be step, pooled, pair or token, got {role!r}")
    return keras.Model(tokens, logits), _tokens(rng, masked), targets


# The packed documents of the reset suites: B rows of T steps of W features.
B, T, W = 3, 11, 12


def packed_resets():
    """``[B, T]`` resets. Row 0: two resets; row 1: a reset at the first step and one at the
    last; row 2: none."""
    reset = np.zeros((B, T), bool)
    reset[0, [3, 8]] = True
    reset[1, [0, T - 1]] = True
    return reset


def documents(reset, row):
    """``(start, stop)`` of each document of ``row`` (the steps before the first reset form
    the first)."""
    starts = sorted({0, *np.flatnonzero(reset[row])})
    return list(zip(starts, [*starts[1:], reset.shape[1]]))


@contextlib.contextmanager
def dtype_policy(name):
    """Keras's global dtype policy ``name`` within the block (float32 after it)."""
    keras.config.set_dtype_policy(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy("float32")


def in_float64(run):
    """Runs the suite method ``run`` under the float64 policy (its comparisons are to 1e-12)."""

    @functools.wraps(run)
    def wrapped(*args, **kwargs):
        with dtype_policy("float64"):
            return run(*args, **kwargs)

    return wrapped


class LayerTestCase:
    """The suites every public layer has; a layer's test class subclasses it (module
    docstring)."""

    layer_cls = None
    reference = None
    flags = ()
    not_in = {}
    keras_checks = {}
    journeys = {}
    nan_padding = {}
    output_spec = {}

    @staticmethod
    def make(**kwargs):
        raise NotImplementedError("a layer's test class says how to make a small instance")

    @staticmethod
    def call_kwargs(batch):
        """What every call needs besides its input, for a batch of ``batch`` rows."""
        return {}

    # -- parametrization ---------------------------------------------------------------------

    def cases(self, suite):
        """``{name: case}`` of this class's layer in ``suite``."""
        if suite == "flags":
            return {flag: flag for flag in self.flags}
        if suite in ("reset_cell", "reset_sequence", "sizes"):
            return {"make": self.make}
        if suite == "carried_memory":
            return {"make": self.make, **self.memory_variants}
        return dict(getattr(self, suite))

    def pytest_generate_tests(self, metafunc):
        suite = getattr(metafunc.function, "suite", None)
        if suite is None:
            return
        if suite in self.not_in:
            reason = f"{self.layer_cls.__name__} is not in {suite!r}: {self.not_in[suite]}"
            metafunc.parametrize(
                "case",
                [pytest.param(None, marks=pytest.mark.skip(reason=reason))],
                ids=["not_applicable"],
            )
            return
        cases = self.cases(suite)
        metafunc.parametrize(
            "case",
            [
                pytest.param(case, marks=tensorflow_only(FUSED_LOOP)) if "fused" in name else case
                for name, case in sorted(cases.items())
            ],
            ids=sorted(cases),
        )

    # -- the suites ------------------------------------------------------------------------

    def run_layer_test(self, layer_cls, init_kwargs, **arguments):
        """Keras's own layer checks (`keras.src.testing.TestCase.run_layer_test`):
        serialization, build, symbolic and eager calls, a compiled training step, output
        specs under ``mixed_float16``."""
        arguments.setdefault("expected_num_non_trainable_weights", 0)
        arguments.setdefault("expected_num_seed_generators", 0)
        testing.TestCase().run_layer_test(layer_cls, init_kwargs, **arguments)

    def run_journey_test(self, role, build, policy, masked, path):
        """A user's journey: a functional model with the layer trained with `fit` on data
        whose last batch is partial, then saved to ``path`` (``.keras``) and loaded back with
        the same predictions."""
        with dtype_policy(policy):
            rng = np.random.default_rng(7)
            model, inputs, targets = journey_model(role, build, masked, rng)
            compile_and_build_optimizer(
                model,
                optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                # XLA (the default) in the masked variant; on TensorFlow the other skips its
                # compile time. On JAX both compile: there the step run op by op takes longer
                # than its compilation (about 1.6x over these layers). The partial batch retraces
                # `fit` with an unknown batch size either way.
                jit_compile="auto" if masked or BACKEND == "jax" else False,
            )
            history = model.fit(inputs, targets, batch_size=BATCH, epochs=1, verbose=0)
            assert np.isfinite(history.history["loss"]).all()
            self.before_saving(model, rng)
            predictions = _predict(model, inputs)
            assert np.isfinite(predictions).all()
            model.save(path)
            loaded = keras.models.load_model(path)
            np.testing.assert_allclose(_predict(loaded, inputs), predictions, rtol=0, atol=1e-6)

    def before_saving(self, model, rng):
        """What a journey does with its trained model before saving it (nothing, unless a
        layer has something to fill first)."""

    def run_nan_padding_test(self, make):
        """NaN at padded steps never reaches the outputs or the weights' gradients, and padded
        steps of sequence outputs are zero."""
        layer = make()
        mask = np.ones((3, 5), bool)
        mask[1, 3:] = False  # right padding
        mask[2, :2] = False  # left padding
        inputs = np.random.default_rng(1).normal(size=(3, 5, INPUT_DIM)).astype("float32")
        inputs[~mask] = np.nan
        layer.build(inputs.shape)

        def loss():
            outputs = layer(inputs, mask=mask)
            return ops.sum(ops.square(outputs)), outputs

        (_, outputs), weight_gradients, _ = gradients(loss, layer.trainable_weights, has_aux=True)
        assert np.isfinite(outputs).all()
        if outputs.ndim == 3:
            np.testing.assert_array_equal(outputs[~mask], 0.0)
        for weight, gradient in zip(layer.trainable_weights, weight_gradients):
            assert np.isfinite(gradient).all(), weight.path

    def run_output_spec_test(self, make, shape, call_kwargs, policy):
        """`compute_output_spec` before the layer is built, the symbolic call and
        `compute_output_shape` give exactly the eager call's shapes and dtypes."""
        rng = np.random.default_rng(2)
        inputs = _per_input(shape, lambda one: rng.normal(size=one).astype("float32"))
        eager = _shapes_and_dtypes(make(policy)(inputs, **call_kwargs))
        # The spec of a layer that is not built yet (what Keras asks for first) ...
        compute_dtype = keras.DTypePolicy(policy).compute_dtype
        spec = make(policy).compute_output_spec(
            _per_input(shape, lambda one: keras.KerasTensor(one, compute_dtype)), **call_kwargs
        )
        assert _shapes_and_dtypes(spec) == eager
        # ... the symbolic call in a functional model ...
        symbolic = make(policy)(
            _per_input(shape, lambda one: keras.Input(batch_shape=one)), **call_kwargs
        )
        assert _shapes_and_dtypes(symbolic) == eager
        # ... and compute_output_shape, which needs no dtype.
        if not call_kwargs:
            computed = make(policy).compute_output_shape(shape)
            assert _shape_list(computed) == [s for s, _ in eager]

    def run_flag_test(self, flag):
        """The boolean argument ``flag`` refuses a non-bool with an error naming it, and takes
        a NumPy bool, which the config keeps as a Python bool."""
        config = self.make().get_config()
        assert flag in config, f"{self.layer_cls.__name__} has no argument {flag!r}"
        default = config[flag]
        assert isinstance(default, bool), (flag, default)
        for value in ("no", [0], 1):
            message = re.escape(f"`{flag}` must be a bool, got {value!r}")
            with pytest.raises(TypeError, match=message):
                self.make(**{flag: value})
        flipped = self.make(**{flag: np.bool_(not default)}).get_config()[flag]
        assert flipped is (not default), (flag, flipped)

    # -- the tests ---------------------------------------------------------------------------

    @over("keras_checks")
    def test_keras_layer_checks(self, case):
        layer_cls, init_kwargs, arguments = case
        self.run_layer_test(layer_cls, init_kwargs, **dict(arguments))

    def keras_checks_train(self):
        """Whether Keras's layer checks run their training step in some case of this layer."""
        if "keras_checks" in self.not_in:
            return False
        return any(
            dict(arguments).get("run_training_check", True)
            for _, _, arguments in self.cases("keras_checks").values()
        )

    @over("journeys")
    @pytest.mark.parametrize(
        "policy, masked",
        [("float32", False), ("mixed_float16", True)],
        ids=["no_mask", "mask_mixed_float16"],
    )
    def test_fit_on_a_partial_batch_then_save_and_load(self, case, policy, masked, tmp_path):
        if BACKEND == "jax" and not masked and self.keras_checks_train():
            pytest.skip(JAX_FLOAT32_JOURNEY)
        role, build = case
        self.run_journey_test(role, build, policy, masked, tmp_path / "model.keras")

    @over("nan_padding")
    def test_nan_at_padded_steps_never_reaches_outputs_or_gradients(self, case):
        self.run_nan_padding_test(case)

    @over("output_spec")
    @pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
    def test_output_shape_and_spec_are_exact(self, case, policy):
        make, shape, call_kwargs = case
        self.run_output_spec_test(make, shape, call_kwargs, policy)

    @over("flags")
    def test_flags_must_be_bools(self, case):
        self.run_flag_test(case)


class CellTests:
    """The suites of a cell (a layer with a ``state_size``, called one step at a time), over
    its ``cells`` cases."""

    cells = {}

    def run_static_state_shapes_test(self, make_cell):
        """The cell's new states keep their static shapes when the batch size is unknown (the
        loop of `keras.layers.RNN` refuses states whose shape changes)."""
        import tensorflow as tf

        cell = make_cell()
        cell.build((None, INPUT_DIM))
        sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
        shapes = {}

        @tf.function(
            input_signature=[tf.TensorSpec((None, INPUT_DIM))]
            + [tf.TensorSpec((None, size)) for size in sizes]
        )
        def step(inputs, *states):
            output, new_states = cell(inputs, list(states))
            shapes["output"] = tuple(output.shape)
            shapes["states"] = [tuple(s.shape) for s in keras.tree.flatten(new_states)]
            return output

        step.get_concrete_function()
        assert shapes["output"] == (None, cell.output_size)
        assert shapes["states"] == [(None, size) for size in sizes]

    def run_step_spec_test(self, make_cell, policy):
        """A cell called on symbolic tensors (one step, as in a hand-written decoder) gives
        the eager step's shapes and dtypes."""
        dtype = keras.DTypePolicy(policy).compute_dtype
        cell = make_cell(policy)
        sizes = [int(s) for s in keras.tree.flatten(cell.state_size)]
        eager = _shapes_and_dtypes(
            cell(np.ones((2, INPUT_DIM), dtype), [np.zeros((2, size), dtype) for size in sizes])
        )
        inputs = keras.Input(batch_shape=(2, INPUT_DIM), dtype=dtype)
        states = [keras.Input(batch_shape=(2, size), dtype=dtype) for size in sizes]
        # Asked directly (as Keras's layer checks do; the spec inferred by tracing `call`
        # outside the layer's autocast scope said float32 under mixed precision) ...
        assert _shapes_and_dtypes(cell.compute_output_spec(inputs, states)) == eager
        # ... and through a symbolic call of a new cell.
        assert _shapes_and_dtypes(make_cell(policy)(inputs, states)) == eager

    @over("cells")
    @tensorflow_only(f"{TF_FUNCTION}: an unknown batch size exists only in TensorFlow graphs")
    def test_cell_states_keep_their_static_shapes_with_an_unknown_batch(self, case):
        self.run_static_state_shapes_test(case)

    @over("cells")
    @pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
    def test_cell_step_spec_is_exact(self, case, policy):
        self.run_step_spec_test(case, policy)


class EmptyInputTests:
    """A layer over sequences called on empty sequences and batches, over its ``empty``
    cases."""

    empty = {}
    #: Whether the last output is the memory, which stays the (zero) initial memory when
    #: no step is read.
    last_output_is_memory = True

    def run_empty_input_test(self, make, shape, with_mask):
        """Empty inputs give empty outputs of the shapes `compute_output_shape` says."""
        layer = make()
        if with_mask and not takes(layer.call, "mask"):
            pytest.skip(f"{type(layer).__name__} takes no mask")
        kwargs = {"mask": np.ones(shape[:2], bool)} if with_mask else {}
        outputs = keras.tree.flatten(layer(np.zeros(shape, "float32"), **kwargs))
        assert [tuple(t.shape) for t in outputs] == _shape_list(layer.compute_output_shape(shape))
        if self.last_output_is_memory and shape[1] == 0:
            # Nothing happened: the memory is still the (zero) initial memory.
            np.testing.assert_array_equal(np.asarray(outputs[-1]), 0.0)

    @over("empty")
    @pytest.mark.parametrize("with_mask", [False, True], ids=["no_mask", "mask"])
    @pytest.mark.parametrize("shape", [(2, 0, 4), (0, 5, 4)], ids=["no_steps", "no_sequences"])
    def test_empty_sequences_and_batches_give_empty_outputs(self, case, shape, with_mask):
        self.run_empty_input_test(case, shape, with_mask)


def _step_states(cell, rng):
    return [rng.normal(size=(B, size)) for size in keras.tree.flatten(cell.state_size)]


class ResetCellTests:
    """A cell whose step takes ``reset``."""

    @in_float64
    def run_one_step_reset_test(self, make):
        """A reset row steps from zero states, except the states a cell carries unchanged
        (the dual cell's source memory); the other rows step from their own states."""
        rng = np.random.default_rng(7)
        cell = make()
        extra = self.call_kwargs(B)
        x = rng.normal(size=(B, 5))
        states = _step_states(cell, rng)
        kept_output, kept_states = cell(x, states, **extra)
        carried = [np.array_equal(np.asarray(new), old) for new, old in zip(kept_states, states)]
        reset = np.array([True, False, True])
        output, new_states = cell(x, states, reset=reset, **extra)
        zeroed = [old if keep else np.zeros_like(old) for old, keep in zip(states, carried)]
        fresh_output, fresh_states = cell(x, zeroed, **extra)
        output = np.asarray(output)
        np.testing.assert_allclose(output[reset], np.asarray(fresh_output)[reset], atol=1e-12)
        np.testing.assert_allclose(output[~reset], np.asarray(kept_output)[~reset], atol=1e-12)
        assert np.abs(output[0] - np.asarray(kept_output)[0]).max() > 1e-3
        for new, fresh, kept in zip(new_states, fresh_states, kept_states):
            new = np.asarray(new)
            np.testing.assert_allclose(new[reset], np.asarray(fresh)[reset], atol=1e-12)
            np.testing.assert_allclose(new[~reset], np.asarray(kept)[~reset], atol=1e-12)

    def run_bad_one_step_reset_test(self, make, bad):
        """A ``reset`` that is not a bool vector of the batch is refused, naming it."""
        cell = make()
        states = [s.astype("float32") for s in _step_states(cell, np.random.default_rng(0))]
        with pytest.raises(ValueError, match="`reset` must"):
            cell(np.zeros((B, 5), "float32"), states, reset=bad, **self.call_kwargs(B))

    @over("reset_cell")
    def test_one_step_cell_reset_starts_the_rows_again(self, case):
        self.run_one_step_reset_test(case)

    @over("reset_cell")
    @pytest.mark.parametrize(
        "bad",
        [
            np.zeros((B,), "float32"),
            np.zeros((B + 1,), bool),
            np.zeros((B, 1), bool),
            np.zeros((B, 5), bool),
        ],
        ids=["float32", "another_batch", "rank_2", "a_sequence"],
    )
    def test_bad_one_step_resets_are_refused_naming_reset(self, case, bad):
        self.run_bad_one_step_reset_test(case, bad)


BAD_RESETS = [
    (np.zeros((B, T), "float32"), "must be a bool tensor"),
    (np.zeros((B, T), "int32"), "must be a bool tensor"),
    (np.zeros((B, T + 1), bool), r"must have shape \(batch, time\)"),
    (np.zeros((B,), bool), r"must have shape \(batch, time\)"),
    (np.zeros((B + 1, T), bool), r"must have shape \(batch, time\)"),
]


class ResetSequenceTests:
    """A layer on whole sequences whose call takes ``reset``."""

    def run_bad_reset_test(self, make, bad, match):
        """A ``reset`` that is not a ``[batch, time]`` bool tensor is refused, naming it."""
        layer = make()
        with pytest.raises(ValueError, match="`reset` " + match):
            layer(np.zeros((B, T, W), "float32"), reset=bad, **self.call_kwargs(B))

    @over("reset_sequence")
    @pytest.mark.parametrize("bad,match", BAD_RESETS)
    def test_bad_resets_are_refused_naming_reset(self, case, bad, match):
        self.run_bad_reset_test(case, bad, match)


def _zeros(*shape):
    return np.zeros(shape, "float32")


def _called_twice(layer, first, second, **kwargs):
    """Builds ``layer`` on ``first``, then calls it on ``second``."""
    layer(first)
    return layer(second, **kwargs)


_X = np.random.default_rng(0).normal(size=(2, 5, INPUT_DIM)).astype("float32")

# (id, the bad call of a layer made by ``make(**kwargs)``, fragments its ValueError names)
BAD_MEMORY_CALLS = {
    "mask_too_long": (
        lambda make: make()(_X, mask=np.ones((2, 6), bool)),
        ["`mask`", "(2, 6)", "(2, 5, 4)"],
    ),
    "mask_of_another_batch": (
        lambda make: make()(_X, mask=np.ones((3, 5), bool)),
        ["`mask`", "(3, 5)", "(2, 5, 4)"],
    ),
    "mask_of_rank_3": (
        lambda make: make()(_X, mask=np.ones((2, 5, 1), bool)),
        ["`mask`", "(2, 5, 1)", "(2, 5, 4)"],
    ),
    "symbolic_mask_too_long": (
        lambda make: make()(keras.Input((5, INPUT_DIM)), mask=keras.Input((6,), dtype="bool")),
        ["`mask`", "(None, 6)", "(None, 5, 4)"],
    ),
    "initial_memory_of_another_batch": (
        lambda make: make()(_X, initial_memory=_zeros(3, make().memory_size_for(4))),
        ["`initial_memory`", "(3, ", "(2, 5, 4)"],
    ),
    "stateful_batch_of_another_size": (
        lambda make: _called_twice(make(stateful=True), _X, _X[:1]),
        ["`inputs`", "(1, 5, 4)", "memory of shape (2, "],
    ),
    "stateful_with_initial_memory_of_another_batch": (
        lambda make: _called_twice(
            make(stateful=True), _X, _X[:1], initial_memory=_zeros(1, make().memory_size_for(4))
        ),
        ["`inputs`", "(1, 5, 4)", "memory of shape (2, "],
    ),
    "inputs_of_another_width": (
        lambda make: _called_twice(make(), _X, _zeros(2, 5, 6)),
        ["`inputs`", "width 4", "(2, 5, 6)"],
    ),
}


class CarriedMemoryTests:
    """A sequence layer with a carried memory (``initial_memory``, ``return_memory``,
    ``stateful`` and ``reset``), over ``make`` and its ``memory_variants``."""

    memory_variants = {}

    @in_float64
    def run_packed_documents_test(self, make):
        """Packed documents equal separate runs, and the memory is the last document's."""
        rng = np.random.default_rng(7)
        x = rng.normal(size=(B, T, W))
        reset = packed_resets()
        layer = make(return_memory=True)
        layer.build(x.shape)
        call = compiled(lambda x, reset: layer(x, reset=reset))
        outputs, memory = call(x, reset)
        for row in range(B):
            for start, stop in documents(reset, row):
                alone, alone_memory = call(x[row : row + 1, start:stop], None)
                np.testing.assert_allclose(
                    np.asarray(outputs)[row, start:stop], np.asarray(alone)[0], atol=1e-12, rtol=0
                )
            # The memory after the call is the last document's: continuing from it equals
            # continuing the last document alone.
            np.testing.assert_allclose(
                np.asarray(memory)[row], np.asarray(alone_memory)[0], atol=1e-12, rtol=0
            )

    @in_float64
    def run_reset_forgets_memory_test(self, make):
        """A reset forgets the carried memory in its row; the other rows keep it."""
        rng = np.random.default_rng(7)
        x = rng.normal(size=(B, T, W))
        layer = make(return_memory=True)
        layer.build(x.shape)
        call = compiled(lambda x, memory, reset: layer(x, initial_memory=memory, reset=reset))
        _, carried = call(rng.normal(size=(B, 6, W)), None, None)
        reset = np.zeros((B, T), bool)
        reset[0, 0] = True  # row 0 starts a new document: the carried memory is forgotten
        reset[1, 4] = True
        outputs = np.asarray(call(x, carried, reset)[0])
        fresh = np.asarray(call(x, None, None)[0])
        continued = np.asarray(call(x, carried, None)[0])
        np.testing.assert_allclose(outputs[0], fresh[0], atol=1e-12, rtol=0)
        np.testing.assert_allclose(outputs[1, :4], continued[1, :4], atol=1e-12, rtol=0)
        np.testing.assert_allclose(
            outputs[1, 4:], np.asarray(call(x[1:2, 4:], None, None)[0])[0], atol=1e-12, rtol=0
        )
        np.testing.assert_allclose(outputs[2], continued[2], atol=1e-12, rtol=0)
        assert not np.allclose(fresh[2], continued[2])

    @in_float64
    def run_stateful_segments_test(self, make):
        """A stateful layer over segments with resets equals one run over the whole."""
        x = np.random.default_rng(7).normal(size=(B, T, W))
        reset = packed_resets()
        whole = make()
        whole.build(x.shape)
        expected = np.asarray(compiled(lambda x, reset: whole(x, reset=reset))(x, reset))
        stateful = make(stateful=True)
        stateful.build((B, None, W))
        stateful.set_weights(
            whole.get_weights()[: len(stateful.trainable_weights)]
            + [np.zeros(stateful.memory.shape)]
        )
        parts = [stateful(x[:, a:b], reset=reset[:, a:b]) for a, b in ((0, 5), (5, 9), (9, T))]
        np.testing.assert_allclose(
            np.concatenate([np.asarray(p) for p in parts], axis=1), expected, atol=1e-12, rtol=0
        )

    def run_bad_memory_call_test(self, make, bad_call, fragments):
        """A call with a mask, memory or input of the wrong shape raises a `ValueError`
        naming the argument and the shapes."""
        with pytest.raises(ValueError) as info:
            bad_call(make)
        for fragment in fragments:
            assert fragment in str(info.value), (fragment, str(info.value))

    @over("carried_memory")
    def test_packed_documents_equal_separate_runs_and_memory_is_the_last_document(self, case):
        self.run_packed_documents_test(case)

    @over("carried_memory")
    def test_a_reset_forgets_carried_memory_and_other_rows_keep_it(self, case):
        self.run_reset_forgets_memory_test(case)

    @over("carried_memory")
    def test_stateful_segments_with_resets_equal_one_run(self, case):
        self.run_stateful_segments_test(case)

    @over("carried_memory")
    @pytest.mark.parametrize("bad", sorted(BAD_MEMORY_CALLS))
    def test_bad_calls_are_named_errors(self, case, bad):
        self.run_bad_memory_call_test(case, *BAD_MEMORY_CALLS[bad])


def _pieces(make):
    """The one number of sizes ``make`` accepts, found by trying 1 to 6 pieces (a cell may
    still refuse sizes that do not add up to its cell's output width)."""
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


class SizesTests:
    """A layer taking explicit piece sizes (``sizes``)."""

    def run_sizes_checks(self, make):
        """``sizes`` is checked when the layer is made, with errors that name it, and NumPy
        sizes give a JSON config."""
        name = self.layer_cls.__name__
        count = _pieces(make)
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
            with pytest.raises(error, match=re.escape(fragment)):
                make(sizes=sizes)
        # The width a cell's sizes must add up to (its cell's output), or any width for a
        # layer, which checks the sum when built.
        width = getattr(make(), "cell_output_size", None) or 12
        sizes = [1] * (count - 1)
        sizes.append(width - sum(sizes))
        config = make(sizes=np.array(sizes)).get_config()
        assert json.loads(json.dumps(config))["sizes"] == sizes

    @over("sizes")
    def test_sizes_are_checked_when_made(self, case):
        self.run_sizes_checks(case)


#: The mixins, by the suite their tests are parametrized over.
KIND_SUITES = {
    CellTests: "cells",
    EmptyInputTests: "empty",
    ResetCellTests: "reset_cell",
    ResetSequenceTests: "reset_sequence",
    CarriedMemoryTests: "carried_memory",
    SizesTests: "sizes",
}


def is_cell(layer):
    """Whether ``layer`` is a cell: it has a ``state_size`` and is not an RNN layer."""
    return hasattr(layer, "state_size") and not isinstance(layer, keras.layers.RNN)


def takes(method, name):
    """Whether ``method`` takes an argument ``name``."""
    return name in inspect.signature(method).parameters
