"""`benchmarks/peak_memory.py`: a speed benchmark's child process is found and reports."""

import os

from benchmarks import peak_memory

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_child_module_is_the_script_path_under_the_repository():
    script = os.path.join(ROOT, "benchmarks", "speed", "associative_memory.py")
    assert peak_memory.child_module(script, ROOT) == "benchmarks.speed.associative_memory"


def test_a_speed_benchmark_child_runs_and_reports_its_step():
    # The Dual AM-GRU against word-by-word attention's memory child, at tiny shapes: a child
    # that cannot be started (a wrong module name) reports an error instead of a peak.
    script = os.path.join(ROOT, "benchmarks", "speed", "associative_memory.py")
    spec = {
        "model": "dual",
        "batch": 2,
        "hypothesis_steps": 2,
        "units": 4,
        "copies": 2,
        "length": 3,
        "repeats": 1,
    }
    result = peak_memory.run_child(script, spec, memory_limit_gib=12.0)
    assert "error" not in result, result
    assert result["median_ms"] > 0 and result["peak_mib"] >= 0
