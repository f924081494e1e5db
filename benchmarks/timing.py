"""The benchmarks' one timer: `interleaved` times runners back to back in each round, so that
load that drifts hits a round's runners alike; `median_ratio` compares them round by round.

>>> import time
>>> samples = interleaved({"long": lambda: time.sleep(0.004), "short": lambda: None}, rounds=3)
>>> median_ratio(samples, "short")["long"] > 1
True
"""

import statistics
import time


def wait_for(value):
    """Waits for every tensor in ``value`` (also in lists, tuples and dicts); returns it."""
    if isinstance(value, (list, tuple, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            wait_for(item)
    elif hasattr(value, "block_until_ready"):  # a JAX array: wait, without a copy to the host
        value.block_until_ready()
    elif hasattr(value, "is_cuda"):  # a torch tensor: computed on the CPU, or wait for the GPU
        if value.is_cuda:
            __import__("torch").cuda.synchronize(value.device)
    elif hasattr(value, "numpy"):
        value.numpy()
    return value


def elapsed_ms(fn):
    """Milliseconds of one call ``fn()``, including the wait for its result (`wait_for`)."""
    start = time.perf_counter()
    wait_for(fn())
    return 1000.0 * (time.perf_counter() - start)


def median_ms(fn, rounds):
    """Median of ``rounds`` consecutive `elapsed_ms` timings of ``fn``."""
    return statistics.median(interleaved({"fn": fn}, rounds)["fn"])


def interleaved(runners, rounds):
    """``{name: [ms of round 1, round 2, ...]}`` of ``runners``, each timed once per round."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    samples = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            samples[name].append(elapsed_ms(run))
    return samples


def medians(samples):
    """``{name: median of its milliseconds}`` of an `interleaved` result."""
    return {name: statistics.median(values) for name, values in samples.items()}


def median_ratio(samples, base):
    """``{name: median over the rounds of its time / base's time in the same round}``."""
    ratios = lambda values: (value / b for value, b in zip(values, samples[base]))  # noqa: E731
    return {name: statistics.median(ratios(values)) for name, values in samples.items()}


def median_saving(samples, minuend, subtrahend, unit):
    """The median over the rounds of ``(minuend - subtrahend) / unit``: ``subtrahend``'s saving."""
    rounds = zip(samples[minuend], samples[subtrahend], samples[unit])
    return statistics.median((a - b) / u for a, b, u in rounds)
