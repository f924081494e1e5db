"""The test helpers that choose cases: `tests.support.all_pairs`, also split between the
backends."""

import itertools

import pytest

from tests import support
from tests.support import all_pairs

FACTORS = [
    [("attention", None), ("key_value", (7, 5)), ("key_value_predict", (6, 4, 2))],
    [1, 3, 10, 12],
    ["mask", "zeros"],
    [False, True],
]


def _rows(params):
    return [tuple(param.values) for param in params]


@pytest.mark.parametrize("factors", [FACTORS, FACTORS[:3], FACTORS[1:], [[1, 2, 3], "ab"]])
def test_every_pair_of_values_meets_in_fewer_rows_than_the_product(factors):
    rows = _rows(all_pairs(*factors))
    for (i, first), (j, second) in itertools.combinations(enumerate(factors), 2):
        met = {(row[i], row[j]) for row in rows}
        assert met == set(itertools.product(first, second)), (i, j)
    product = len(list(itertools.product(*factors)))
    # The fewest rows possible are the two largest factors' product.
    largest = sorted(len(values) for values in factors)[-2:]
    assert largest[0] * largest[1] <= len(rows) <= product
    if len(factors) > 2:
        assert len(rows) < product


def test_the_rows_and_ids_are_the_same_every_time_and_the_ids_unique():
    first, second = all_pairs(*FACTORS), all_pairs(*FACTORS)
    assert _rows(first) == _rows(second) and [p.id for p in first] == [p.id for p in second]
    ids = [param.id for param in first]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "attention_None-1-mask-False"
    assert _rows(all_pairs(["a", "b", "c"])) == [("a",), ("b",), ("c",)]  # one factor


@pytest.mark.parametrize("factors", [FACTORS, FACTORS[1:], [[1, 2, 3], "ab"]])
def test_a_design_split_by_backend_meets_every_pair_on_one_backend_and_each_value_on_each(
    factors, monkeypatch
):
    by_backend = {}
    for backend in support.SPLIT_BACKENDS:
        monkeypatch.setattr(support, "BACKEND", backend)
        by_backend[backend] = all_pairs(*factors, split_by_backend=True)
    both = [_rows(params) for params in by_backend.values()]
    for rows in both:
        # Each backend: every value of every factor, in fewer rows than the whole design.
        for k, values in enumerate(factors):
            assert {row[k] for row in rows} == set(values), k
        assert len(rows) < len(all_pairs(*factors))
    rows = both[0] + both[1]
    for (i, first), (j, second) in itertools.combinations(enumerate(factors), 2):
        assert {(row[i], row[j]) for row in rows} == set(itertools.product(first, second))
    ids = [param.id for params in by_backend.values() for param in params]
    assert len(set(ids)) == len(ids) and all(not i.endswith(("-jax", "-tensorflow")) for i in ids)
    # Another backend runs every row.
    monkeypatch.setattr(support, "BACKEND", "torch")
    assert _rows(all_pairs(*factors, split_by_backend=True)) == _rows(all_pairs(*factors))


@support.tensorflow_only("Grappler is TensorFlow's graph optimiser")
def test_the_tests_run_without_graph_optimizations_but_inside_the_block():
    import tensorflow as tf

    def off():
        return tf.config.optimizer.get_experimental_options()[support.NO_GRAPH_OPTIMIZATIONS]

    assert off() is True  # tests/conftest.py
    with support.graph_optimizations(True):
        assert off() is False
        with support.graph_optimizations(False):
            assert off() is True
        assert off() is False
    assert off() is True
