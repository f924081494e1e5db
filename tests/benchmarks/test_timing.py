"""The benchmarks' shared timing helper (`benchmarks/timing.py`)."""

import importlib
import sys
import time
import types

import pytest

from tests.support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))
try:
    timing = importlib.import_module("benchmarks.timing")
finally:
    sys.path.remove(str(REPO_ROOT))


class FakeClock:
    """A `time.perf_counter` stand-in that moves only when a runner says so (seconds)."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


class SlowTensor:
    """A result whose work happens when it is fetched, like an asynchronous tensor."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds, self.fetched = clock, seconds, 0

    def numpy(self):
        self.fetched += 1
        self.clock.advance(self.seconds)
        return 0.0


def test_elapsed_ms_is_milliseconds_of_the_call(clock):
    assert timing.elapsed_ms(lambda: clock.advance(0.02)) == pytest.approx(20.0)


def test_elapsed_ms_waits_for_tensors_in_the_result(clock):
    single = SlowTensor(clock, 0.003)
    assert timing.elapsed_ms(lambda: single) == pytest.approx(3.0)
    nested = [
        SlowTensor(clock, 0.001),
        (SlowTensor(clock, 0.002), {"a": SlowTensor(clock, 0.004)}),
    ]
    assert timing.elapsed_ms(lambda: (nested, 7, None, "text")) == pytest.approx(7.0)
    assert single.fetched == 1
    assert [nested[0].fetched, nested[1][0].fetched, nested[1][1]["a"].fetched] == [1, 1, 1]


def test_median_ms_times_rounds_calls_and_takes_the_median(clock):
    costs = iter([0.010, 0.050, 0.020, 0.030, 0.900])
    calls = []

    def run():
        calls.append(1)
        clock.advance(next(costs))

    assert timing.median_ms(run, 5) == pytest.approx(30.0)
    assert len(calls) == 5
    with pytest.raises(ValueError, match="rounds"):
        timing.median_ms(run, 0)


def test_interleaved_times_each_runner_once_per_round_in_order(clock):
    order = []

    def runner(name, seconds):
        def run():
            order.append(name)
            clock.advance(seconds)

        return run

    samples = timing.interleaved(
        {"c": runner("c", 0.003), "a": runner("a", 0.001), "b": runner("b", 0.002)}, rounds=4
    )
    assert order == ["c", "a", "b"] * 4
    assert list(samples) == ["c", "a", "b"]
    assert samples["a"] == pytest.approx([1.0] * 4)
    assert samples["b"] == pytest.approx([2.0] * 4)
    assert samples["c"] == pytest.approx([3.0] * 4)
    with pytest.raises(ValueError, match="rounds"):
        timing.interleaved({"a": runner("a", 0.001)}, rounds=0)


def test_median_ratio_cancels_load_that_drifts_between_rounds(clock):
    # Machine load multiplies every runner of a round alike; it changes from round to round.
    loads = iter([1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.5, 1.5, 5.0, 5.0])

    samples = timing.interleaved(
        {
            "slow": lambda: clock.advance(0.020 * next(loads)),
            "fast": lambda: clock.advance(0.005 * next(loads)),
        },
        rounds=5,
    )
    ratios = timing.median_ratio(samples, "fast")
    assert ratios["slow"] == pytest.approx(4.0)
    assert ratios["fast"] == pytest.approx(1.0)
    medians = timing.medians(samples)
    assert medians == pytest.approx({"slow": 60.0, "fast": 15.0})


def test_median_ratio_is_the_median_of_per_round_ratios_not_a_ratio_of_medians():
    samples = {"base": [1.0, 2.0, 3.0], "x": [3.0, 2.0, 30.0]}  # ratios 3, 1, 10
    assert timing.median_ratio(samples, "base") == {"base": 1.0, "x": 3.0}
    assert timing.medians(samples) == {"base": 2.0, "x": 3.0}  # ratio of medians: 1.5
    with pytest.raises(ValueError, match="rounds"):
        timing.median_ratio({"base": [1.0, 2.0], "x": [1.0]}, "base")


def test_real_clock_sleeps_20_ms_against_5_ms_give_a_ratio_near_4():
    samples = timing.interleaved(
        {"20 ms": lambda: time.sleep(0.020), "5 ms": lambda: time.sleep(0.005)}, rounds=7
    )
    assert [len(values) for values in samples.values()] == [7, 7]
    # Sleeps never end early (less a margin for clock granularity).
    assert min(samples["20 ms"]) > 19.5 and min(samples["5 ms"]) > 4.5
    # A loaded machine wakes sleepers late (which pulls the ratio below 4) and may stall one
    # round (which the median discards).
    assert 2.5 < timing.median_ratio(samples, "5 ms")["20 ms"] < 6.0
    assert timing.median_ms(lambda: time.sleep(0.005), 3) > 4.5
