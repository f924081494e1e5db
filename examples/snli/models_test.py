"""The SNLI example's models: the fused loop where the layers run it, the recipe's checks of its
arguments and the layers' of the options passed on, and the folder's docstring examples."""

import doctest
import pathlib
import traceback

import numpy as np
import pytest

import tf_memlayers

from . import corpora, input_pipeline, models


@pytest.mark.parametrize(
    "kind,options,fused",
    [
        ("dual_am_gru", {}, True),
        ("am_gru", {}, True),
        ("dual_am_gru", {"dual_key": "released"}, False),
        ("dual_am_gru", {"fused_loop": False}, False),
        ("dual_am_gru", {"fused_loop": True}, True),
        ("am_gru", {"fused_loop": False}, False),
        ("gru", {}, False),
        ("word_by_word", {}, False),
    ],
)
def test_the_fused_loop_runs_where_the_layers_support_it(kind, options, fused):
    model = models.build_model(20, kind, 8, num_copies=2, embedding_dim=4, **options)
    assert models.runs_fused_loop(model) is fused
    # The option reaches the layers as given, "auto" without it; the GRU and the word-by-word
    # encoder have no such option.
    first = model.get_layer("encoder").encoder_layers[0]
    expected = options.get("fused_loop", "auto") if kind in models.ASSOCIATIVE else None
    assert getattr(first, "fused_loop", None) == expected
    probabilities = model((np.ones((2, 5), "int32"), np.ones((2, 3), "int32")))
    np.testing.assert_allclose(np.asarray(probabilities).sum(-1), 1.0, rtol=1e-5)
    assert model.name == f"snli_{kind}"


PACKAGE = pathlib.Path(tf_memlayers.__file__).parent


@pytest.mark.parametrize(
    "kind,options,owner",
    [
        ("am_gru", {"num_copies": 0}, "associative_gru_cell.py"),
        ("dual_am_gru", {"dual_key": "both"}, "dual_associative_gru.py"),
        ("dual_am_gru", {"fused_loop": "yes"}, "associative_gru.py"),
    ],
)
def test_the_layers_check_the_options_the_example_passes_on(kind, options, owner):
    with pytest.raises((TypeError, ValueError)) as info:
        models.make_encoder(kind, 8, **options)
    assert next(iter(options)) in str(info.value)
    frames = [f.filename for f in traceback.extract_tb(info.value.__traceback__)]
    checker = [f for f in frames if not f.endswith("_validation.py")][-1]
    assert pathlib.Path(checker).is_relative_to(PACKAGE) and checker.endswith(owner)


@pytest.mark.parametrize(
    "kind,options,error,owner",
    [
        ("lstm", {}, ValueError, "make_encoder"),
        ("gru", {"top_units": -1}, ValueError, "make_encoder"),
        ("gru", {"top_units": 2.5}, TypeError, "make_encoder"),
        ("word_by_word", {"top_units": 5}, ValueError, "make_encoder"),
        ("gru", {"init_scale": 0}, ValueError, "build_model"),
        ("gru", {"init_scale": float("inf")}, ValueError, "build_model"),
        ("gru", {"init_scale": "0.1"}, TypeError, "build_model"),
    ],
)
def test_the_recipe_checks_its_own_arguments(kind, options, error, owner):
    with pytest.raises(error) as info:
        models.build_model(20, kind, 8, embedding_dim=4, **options)
    name, value = next(iter(options.items()), ("kind", kind))
    assert f"{owner}: `{name}`" in str(info.value) and str(value) in str(info.value)
    assert traceback.extract_tb(info.value.__traceback__)[-1].name == owner


def test_the_modules_docstring_examples_run():
    for module in (corpora, input_pipeline, models):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted and not result.failed, module.__name__
