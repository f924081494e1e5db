"""The benchmarks' one timer (`benchmarks/timing.py`), on a clock that moves when told to."""

import types

import pytest

from benchmarks import timing


@pytest.fixture
def clock(monkeypatch):
    clock = types.SimpleNamespace(now=100.0)
    clock.advance = lambda seconds: setattr(clock, "now", clock.now + seconds)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    return clock


class SlowTensor:
    """A result whose work happens when it is fetched, like an asynchronous tensor."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def numpy(self):
        self.clock.advance(self.seconds)


def test_a_call_is_timed_with_the_wait_for_every_tensor_in_its_result(clock):
    nested = [SlowTensor(clock, 0.001), (SlowTensor(clock, 0.002), {"a": SlowTensor(clock, 0.004)})]
    assert timing.elapsed_ms(lambda: (nested, 7, None, "text")) == pytest.approx(7.0)
    costs = iter([0.010, 0.050, 0.020, 0.030, 0.900])
    assert timing.median_ms(lambda: clock.advance(next(costs)), 5) == pytest.approx(30.0)


def test_runners_are_interleaved_and_their_ratio_cancels_load_that_drifts(clock):
    order, loads = [], iter([1.0, 1.0, 3.0, 3.0, 3.0, 3.0, 1.5, 1.5, 5.0, 5.0])

    def runner(name, seconds):
        return lambda: (order.append(name), clock.advance(seconds * next(loads)))

    samples = timing.interleaved({"slow": runner("slow", 0.02), "fast": runner("fast", 0.005)}, 5)
    assert order == ["slow", "fast"] * 5
    assert timing.median_ratio(samples, "fast") == pytest.approx({"slow": 4.0, "fast": 1.0})
    assert timing.medians(samples) == pytest.approx({"slow": 60.0, "fast": 15.0})
    with pytest.raises(ValueError, match="rounds"):
        timing.interleaved({"a": lambda: None}, rounds=0)


def test_ratios_and_savings_are_medians_over_the_rounds_of_each_rounds_times():
    samples = {"base": [1.0, 2.0, 3.0], "x": [3.0, 2.0, 30.0]}  # ratios 3, 1, 10
    assert timing.median_ratio(samples, "base") == {"base": 1.0, "x": 3.0}
    assert timing.medians(samples) == {"base": 2.0, "x": 3.0}  # ratio of medians: 1.5
    samples = {"ours": [3.0, 5.0, 4.0], "part": [1.0, 1.0, 1.0], "floor": [2.0, 2.0, 4.0]}
    # Rounds: 2 / 2, 4 / 2, 3 / 4; the medians' difference over the floor's median is 1.5.
    assert timing.median_saving(samples, "ours", "part", "floor") == 1.0
