"""XLA's flags for the test processes (``tests/conftest.py``, ``examples/conftest.py``)."""

import os


def compile_quickly():
    """Sets ``XLA_FLAGS`` so that XLA's CPU code is quick to compile, for this process and those
    the tests start: no LLVM optimisation passes (the JAX pass takes 40% less time), neither
    LLVM's costlier passes nor code generation split into parallel parts (12% less), XLA's older
    emitters for fused operations (the N-gram layer's JAX tests 35% less). What the code
    computes does not change. A flag ``XLA_FLAGS`` already sets is kept; the CPU's flags are
    left out on a GPU (``TF_MEMLAYERS_TESTS_DEVICE=gpu``), where another JAX's XLA may not know
    them. Call it before TensorFlow or JAX starts XLA."""
    flags = {"xla_backend_optimization_level": "0"}
    if os.environ.get("TF_MEMLAYERS_TESTS_DEVICE", "cpu") == "cpu":
        flags.update(
            xla_cpu_use_fusion_emitters="false",
            xla_llvm_disable_expensive_passes="true",
            xla_cpu_parallel_codegen_split_count="1",
        )
    found = os.environ.get("XLA_FLAGS", "")
    added = [f"--{flag}={value}" for flag, value in flags.items() if flag not in found]
    os.environ["XLA_FLAGS"] = " ".join([found, *added]).strip()
