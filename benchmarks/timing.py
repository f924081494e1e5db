"""The benchmarks' one timing helper: wall-clock milliseconds of calls, medians and ratios.

Every benchmark times the same way: `elapsed_ms` wraps one call in `time.perf_counter` and
waits for its result (TensorFlow and JAX may return before a tensor is computed, so a JAX
array is waited for and anything else with a ``.numpy()`` method is fetched before the clock
stops). `median_ms` repeats one call;
`interleaved` times several runners back to back in each round, so load that drifts on a shared
machine hits every runner of a round alike; `median_ratio` then compares runners round by round
(the median of the per-round ratios), which cancels that drift, and `medians` summarises each
runner's samples.

>>> import time
>>> samples = interleaved({"long": lambda: time.sleep(0.004), "short": lambda: None}, rounds=3)
>>> [len(ms) for ms in samples.values()]
[3, 3]
>>> median_ratio(samples, "short")["long"] > 1
True

Only the standard library is used, so importing this module does not start TensorFlow.
"""

import statistics
import time

__all__ = ["elapsed_ms", "interleaved", "median_ms", "median_ratio", "medians", "wait_for"]


def wait_for(value):
    """Waits for every tensor in ``value`` (a JAX array, or anything with ``.numpy()``; also
    inside lists, tuples and dicts), so the work that computes it is finished; returns
    ``value`` unchanged."""
    if isinstance(value, dict):
        for item in value.values():
            wait_for(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            wait_for(item)
    elif hasattr(value, "block_until_ready"):  # a JAX array: wait, without a copy to the host
        value.block_until_ready()
    elif hasattr(value, "numpy"):
        value.numpy()
    return value


def elapsed_ms(fn):
    """Milliseconds of one call ``fn()``, including the wait for its result (`wait_for`)."""
    start = time.perf_counter()
    wait_for(fn())
    return 1000.0 * (time.perf_counter() - start)


def _check_rounds(rounds):
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")


def median_ms(fn, rounds):
    """Median of ``rounds`` consecutive `elapsed_ms` timings of ``fn``."""
    _check_rounds(rounds)
    return statistics.median(elapsed_ms(fn) for _ in range(rounds))


def interleaved(runners, rounds):
    """Times every runner once per round, back to back in the dict's order.

    ``runners`` maps names to callables; returns ``{name: [ms of round 1, round 2, ...]}``
    (``rounds`` values each). Runners timed in the same round see the same machine load, so
    `median_ratio` of the result is robust to load that changes between rounds.
    """
    _check_rounds(rounds)
    samples = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            samples[name].append(elapsed_ms(run))
    return samples


def medians(samples):
    """``{name: median of its milliseconds}`` of an `interleaved` result."""
    return {name: statistics.median(values) for name, values in samples.items()}


def median_ratio(samples, base_name):
    """``{name: median over rounds of (its time / base_name's time in the same round)}``.

    ``samples`` is an `interleaved` result; the base's own ratio is 1.
    """
    base = samples[base_name]
    ratios = {}
    for name, values in samples.items():
        if len(values) != len(base):
            raise ValueError(f"{name!r} has {len(values)} rounds, {base_name!r} has {len(base)}")
        ratios[name] = statistics.median(value / b for value, b in zip(values, base))
    return ratios
