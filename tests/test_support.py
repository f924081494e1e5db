"""The test helpers that choose cases: `tests.support.all_pairs`, also split between the
backends, and `tests.support.split_rows`."""

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
def test_every_pair_meets_in_fewer_rows_than_the_product_and_on_one_backend_of_a_split(
    factors, monkeypatch
):
    def meet_every_pair(rows):
        for (i, first), (j, second) in itertools.combinations(enumerate(factors), 2):
            met = {(row[i], row[j]) for row in rows}
            assert met == set(itertools.product(first, second)), (i, j)

    rows = _rows(all_pairs(*factors))
    meet_every_pair(rows)
    product = len(list(itertools.product(*factors)))
    # The fewest rows possible are the two largest factors' product.
    largest = sorted(len(values) for values in factors)[-2:]
    assert largest[0] * largest[1] <= len(rows) <= product
    if len(factors) > 2:
        assert len(rows) < product
    # Split between the backends: every pair meets on one of them.
    by_backend = {}
    for backend in support.SPLIT_BACKENDS:
        monkeypatch.setattr(support, "BACKEND", backend)
        by_backend[backend] = all_pairs(*factors, split_by_backend=True)
    both = [_rows(params) for params in by_backend.values()]
    for split in both:
        # Each backend: every value of every factor, in fewer rows than the whole design.
        for k, values in enumerate(factors):
            assert {row[k] for row in split} == set(values), k
        assert len(split) < len(rows)
    meet_every_pair(both[0] + both[1])
    ids = [param.id for params in by_backend.values() for param in params]
    assert len(set(ids)) == len(ids) and all(not i.endswith(("-jax", "-tensorflow")) for i in ids)
    # Another backend runs every row.
    monkeypatch.setattr(support, "BACKEND", "torch")
    assert _rows(all_pairs(*factors, split_by_backend=True)) == rows


def test_the_rows_and_ids_are_the_same_every_time_and_split_rows_shares_them(monkeypatch):
    first, second = all_pairs(*FACTORS), all_pairs(*FACTORS)
    assert _rows(first) == _rows(second) and [p.id for p in first] == [p.id for p in second]
    ids = [param.id for param in first]
    assert len(set(ids)) == len(ids) and ids[0] == "attention_None-1-mask-False"
    assert _rows(all_pairs(["a", "b", "c"])) == [("a",), ("b",), ("c",)]  # one factor
    # `split_rows` gives each plain row to one backend in turn, and marked rows to each.
    marked = pytest.param("fused", marks=pytest.mark.skipif(False, reason="a backend's own path"))
    rows, shares = ["a", "b", marked, "c", "d", "e"], {}
    for backend in (*support.SPLIT_BACKENDS, "torch"):
        monkeypatch.setattr(support, "BACKEND", backend)
        shares[backend] = support.split_rows(rows)
    assert shares["tensorflow"] == ["a", marked, "c", "e"] and shares["jax"] == ["b", marked, "d"]
    assert shares["torch"] == rows


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
