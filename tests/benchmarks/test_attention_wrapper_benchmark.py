"""The attention-over-a-memory speed benchmark (`benchmarks/speed/attention_wrapper.py`): its
rows, each variant's weights, and its options."""

import json
import os
import subprocess
import sys

from tests.support import REPO_ROOT, load_script


def test_a_run_times_every_variant_against_the_bare_cell(capsys):
    benchmark = load_script("benchmarks/speed", "attention_wrapper")
    benchmark.main(["--rounds", "1", "--lengths", "3", "--no-jit-compile"])
    results = json.loads(capsys.readouterr().out)
    assert results["settings"]["jit_compile"] is False
    rows = {row["variant"]: row for row in results["rows"]}
    assert list(rows) == list(benchmark.VARIANTS)
    assert all(row["memory_length"] == 3 and row["median_ms"] > 0 for row in rows.values())
    assert rows["LSTMCell"]["ratio_to_cell"] == 1.0
    k = benchmark.UNITS
    bare = 4 * (k + k + 1) * k + k * benchmark.CLASSES + benchmark.CLASSES
    assert rows["LSTMCell"]["weights"] == bare
    # Without input feeding the cell is the bare one; W_c [c; h] adds 2k x k.
    assert rows["Luong dot, no input feeding"]["weights"] == bare + 2 * k * k
    # Input feeding widens the cell's input by the attention vector; W_a and W_c.
    assert rows["Luong general, input feeding"]["weights"] == bare + 4 * k * k + k * k + 2 * k * k
    # Rocktäschel et al.: W^y, [W^h; W^r], w, W^t and [W^p; W^x] besides the cell.
    assert rows["WordByWordAttention"]["weights"] == bare + 6 * k * k + k


def test_a_bad_option_is_one_line_and_status_2():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.attention_wrapper", "--lengths", "0"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--lengths" in done.stderr
