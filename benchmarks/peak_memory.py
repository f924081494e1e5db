"""Time and peak resident memory of a training step, each measurement in its own process.

A child process (the benchmark script itself, re-run with ``--child <json>``) builds one
step, resets the kernel's resident-memory high-water mark (Linux ``/proc/self/clear_refs``),
times ``repeats`` runs and reports the peak above the level at the reset (`measure_step`). The
parent limits the child's address space, so a configuration that
would exhaust the machine fails alone.
"""

import json
import os
import resource
import subprocess
import sys

from benchmarks import timing

_PREFIX = "CHILD "


def rss_kib(field):
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_step(step, repeats, include_first_run=False):
    """Median milliseconds and peak MiB (above the pre-step level) of ``step()``.

    ``step`` must return something whose evaluation finishes the work (its tensors are fetched
    with ``.numpy()``, see `timing.wait_for`; times from `timing.median_ms`). By default a
    first, untimed run comes before the memory baseline, so the peak is what a step needs
    beyond what the earlier runs left allocated; with ``include_first_run=True`` the baseline
    is taken before any run (trace ``step`` first), so the peak includes the memory the step
    allocates for its tensors the first time.
    """

    def run():
        timing.wait_for(step())

    if not include_first_run:
        run()
    before = rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as refs:  # reset the peak (VmHWM) to now
        refs.write("5")
    if include_first_run:
        run()
    median_ms = timing.median_ms(step, repeats)
    peak = rss_kib("VmHWM")
    return {"median_ms": median_ms, "peak_mib": max(peak - before, 0) / 1024}


def xla_training_buffers_mib(model, inputs):
    """MiB of the temporary buffers XLA assigns to one gradient step of ``model`` on ``inputs``
    (a mean-square loss of its output), on Keras's JAX backend.

    XLA plans every buffer of a compiled program before it runs (`jax.stages.Compiled.
    memory_analysis`), so this is the step's exact working memory beyond its arguments and
    outputs, independent of the allocator and of the load on the machine. The calling process
    must run Keras on JAX (``KERAS_BACKEND=jax``).
    """
    import jax
    import jax.numpy as jnp

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss(trainable, inputs):
        outputs, _ = model.stateless_call(trainable, non_trainable, inputs)
        return jnp.mean(jnp.square(outputs))

    compiled = jax.jit(jax.grad(loss)).lower(trainable, inputs).compile()
    return compiled.memory_analysis().temp_size_in_bytes / 2**20


def xla_buffers_of_forward(forward, batch, steps, width, seed=0):
    """`xla_training_buffers_mib` of ``keras.Model(x, forward(x))`` on a normal
    ``[batch, steps, width]`` float32 input ``x``. Keras must run on JAX."""
    import keras
    import numpy as np

    inputs = keras.Input((steps, width), batch_size=batch)
    model = keras.Model(inputs, forward(inputs))
    x = np.random.default_rng(seed).normal(size=(batch, steps, width)).astype("float32")
    return xla_training_buffers_mib(model, x)


def report(result):
    """Prints a child's result for `run_child`."""
    print(_PREFIX + json.dumps(result), flush=True)


def child_module(script, root):
    """The module name of ``script`` (a path under the repository ``root``), for ``-m``:
    ``<root>/benchmarks/speed/x.py`` -> ``benchmarks.speed.x``."""
    relative = os.path.relpath(os.path.abspath(script), root)
    return os.path.splitext(relative)[0].replace(os.sep, ".")


def run_child(script, spec, memory_limit_gib, timeout=1800, env=None):
    """Runs ``python -m <script's module> --child <spec as JSON>`` from the repository root,
    under an address-space limit, with ``env`` (a dict) added to the environment.

    Returns the dict the child passed to `report`, or ``{"error": ...}``.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    module = child_module(script, root)
    command = [sys.executable, "-m", module, "--child", json.dumps(spec)]
    limit = int(memory_limit_gib * 2**30)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        preexec_fn=limit_memory,
        timeout=timeout,
        cwd=root,
        env=None if env is None else {**os.environ, **env},
    )
    for line in done.stdout.splitlines():
        if line.startswith(_PREFIX):
            return json.loads(line[len(_PREFIX) :])
    return {"error": f"failed (memory limit {memory_limit_gib} GiB or crash)"}
