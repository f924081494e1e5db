"""`.keras` files move between backends: the file of each exported layer's journey model (its
test class's ``test_journey``: tests/layer_test_case.py) and of each paper's model from the
builders, saved on one of TensorFlow, JAX and torch, loads on the others and gives the same
outputs (float32, 1e-5).

Each backend's pass writes every model's file, with its inputs and outputs (``.npz``), into
``<folder>/<backend>/`` and loads it back, and loads the files that the other backends wrote
there. The folder is the one ``TF_MEMLAYERS_BACKEND_FILES`` names (``.ci/run`` gives its
TensorFlow, JAX and torch passes one, then runs the loading test again on TensorFlow and JAX for
the files of the later passes), else the test's own temporary folder, where only its own
backend's files are."""

import os
import pathlib

import keras
import numpy as np
import pytest

from tests.language_models import language_model
from tests.layer_test_case import journey_model
from tests.models.test_builders_on_every_backend import (
    LANGUAGE_MODELS,
    SMALL,
    VOCAB,
    _outputs,
    _reset_states,
    language_model_case,
)
from tests.pair_encoders import snli_model
from tests.support import BACKEND
from tests.test_layer_test_case import exported_layers, layer_test_classes
from tf_memlayers.layers import AttentionPooling, HeapCacheAttention
from tf_memlayers.layers.memory_cell_wrapper import cell_output_size
from tf_memlayers.models import (
    build_fill_last_word_model,
    build_fixed_length_snli_model,
    build_step_model,
    initial_step_state,
)

FOLDER_VARIABLE, BACKENDS = "TF_MEMLAYERS_BACKEND_FILES", ("tensorflow", "jax", "torch")


def _journey(layer_cls, rng):
    """The journey model of ``layer_cls``'s test class (padded inputs), its hook that fills a
    layer before saving, and the padded steps of a model with an output per step: what Keras's
    loops emit there differs between backends (keras.layers.RNN's on JAX emits a cell's first
    state), so those steps are not compared."""
    _, (test_class,) = layer_test_classes(layer_cls)
    test, recorded = test_class(), []
    test.run_journey_test = lambda role, build, _, **kwargs: recorded.append((role, build, kwargs))
    test.test_journey(None)
    (role, build, kwargs), *_ = recorded
    model, inputs, _ = journey_model(role, build, True, rng)
    padded = inputs == 0 if role in ("step", "token") else None
    return model, inputs, kwargs.get("before_saving"), padded


def _language_model(case, rng):
    model, options, _ = language_model_case(case)
    tokens = rng.integers(0, VOCAB, (2, 5)).astype("int32")
    if options.get("resets"):
        return model, {"tokens": tokens, "reset": rng.random((2, 5)) < 0.3}, None, None
    return model, tokens, None, None


def _snli(kind, rng, fixed=False):
    model = snli_model(20, kind=kind, units=8, embedding_dim=6, num_copies=2)
    premise, hypothesis = rng.integers(2, 20, (4, 7)), rng.integers(2, 20, (4, 4))
    premise[1, 5:], hypothesis[2, 3:] = 0, 0  # padding
    if fixed:
        model = build_fixed_length_snli_model(model, premise_length=7, hypothesis_length=4)
    return model, [premise.astype("int32"), hypothesis.astype("int32")], None, None


def _step_model(rng):
    options = dict(stateful=False, sequence_length=None, **SMALL)
    step_model = build_step_model(language_model(VOCAB, "key_value", "parallel", **options))
    states = [rng.normal(size=s.shape).astype("float32") for s in initial_step_state(step_model, 2)]
    return step_model, [rng.integers(0, VOCAB, (2, 1)).astype("int32"), *states], None, None


def _last_word(cache, rng):
    cache = HeapCacheAttention(12, 4) if cache else None
    sizes = dict(sequence_length=10, embedding_dim=6, units=8)
    model = build_fill_last_word_model(30, AttentionPooling(4), cache, **sizes)

    def fill(model, rng):
        layer = model.get_layer("cache_attention")
        layer.insert(rng.normal(size=(6, layer.width)).astype("float32"))

    return model, rng.integers(0, 30, (4, 10)).astype("int32"), fill if cache else None, None


MODELS = {
    **{c.__name__: lambda rng, c=c: _journey(c, rng) for c in exported_layers()},
    **{f"language_model-{c}": lambda rng, c=c: _language_model(c, rng) for c in LANGUAGE_MODELS},
    **{f"snli-{k}": lambda rng, k=k: _snli(k, rng) for k in ("gru", "am_gru", "dual_am_gru")},
    "snli-word_by_word": lambda rng: _snli("word_by_word", rng),
    "snli-fixed_length": lambda rng: _snli("dual_am_gru", rng, fixed=True),
    "step_model": _step_model,
    "last_word": lambda rng: _last_word(False, rng),
    "last_word-cache": lambda rng: _last_word(True, rng),
}

# Without the shared folder, a pass has only its own backend's files.
OTHERS = [b for b in BACKENDS if b != BACKEND] if os.environ.get(FOLDER_VARIABLE) else []


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    named = os.environ.get(FOLDER_VARIABLE)
    return pathlib.Path(named) if named else tmp_path_factory.mktemp("files")


def _loads(where, name):
    """Loads ``where/name.keras`` and checks its outputs on the inputs saved beside it."""
    model = keras.saving.load_model(where / f"{name}.keras")
    unmasked = [
        layer.name
        for layer in model.layers
        if type(layer) is keras.layers.RNN
        and not layer.zero_output_for_mask
        and keras.tree.flatten(layer.cell.state_size)[0] != cell_output_size(layer.cell)
    ]
    if BACKEND == "jax" and unmasked and any(getattr(x, "mask_zero", 0) for x in model.layers):
        pytest.skip(
            f"{unmasked}: keras.layers.RNN over a cell whose output is not its first state, "
            "masked, without zero_output_for_mask=True, which Keras's masked loop on JAX needs "
            "(docs/backends.rst)"
        )
    _reset_states(model)
    saved = dict(np.load(where / f"{name}.npz"))
    inputs = {k.split(".", 2)[-1]: v for k, v in saved.items() if k.startswith("in.")}
    kind = next(k for k in saved if k.startswith("in.")).split(".")[1]
    if kind != "dict":
        inputs = [inputs[k] for k in sorted(inputs)] if kind == "list" else inputs["array"]
    expected = [saved[k] for k in sorted(saved) if k.startswith("out.")]
    outputs = keras.tree.flatten(_outputs(model, inputs))
    assert len(outputs) == len(expected)
    for output, value in zip(outputs, expected):  # NaN: a step not compared
        np.testing.assert_allclose(np.where(np.isnan(value), np.nan, output), value, 1e-5, 1e-5)


def prepared_model(name):
    """``(model, inputs, padded)`` of ``MODELS[name]``, every trainable weight away from its
    initial value (so that each shows in the outputs), its states reset and its fill done."""
    rng = np.random.default_rng(0)
    model, inputs, fill, padded = MODELS[name](rng)
    for weight in model.trainable_weights:
        weight.assign(rng.uniform(-0.3, 0.3, weight.shape).astype(weight.dtype))
    _reset_states(model)
    if fill is not None:
        fill(model, rng)
    return model, inputs, padded


@pytest.mark.parametrize("name", MODELS)
def test_writes_a_file_that_loads_back(folder, name):
    model, inputs, padded = prepared_model(name)
    where = folder / BACKEND
    where.mkdir(parents=True, exist_ok=True)
    model.save(where / f"{name}.keras")
    if isinstance(inputs, dict):
        saved = {f"in.dict.{k}": v for k, v in inputs.items()}
    elif isinstance(inputs, list):
        saved = {f"in.list.{i:02d}": v for i, v in enumerate(inputs)}
    else:
        saved = {"in.array": inputs}
    outputs = keras.tree.flatten(_outputs(model, inputs))
    if padded is not None:
        outputs[0][padded] = np.nan
    np.savez(where / f"{name}.npz", **saved, **{f"out.{i:02d}": v for i, v in enumerate(outputs)})
    _loads(where, name)


@pytest.mark.parametrize("name,writer", [(name, writer) for name in MODELS for writer in OTHERS])
def test_loads_the_file_another_backend_wrote(folder, name, writer):
    if not (folder / writer).is_dir():
        pytest.skip(f"no files written on {writer} in {folder} (its pass has not run)")
    _loads(folder / writer, name)
