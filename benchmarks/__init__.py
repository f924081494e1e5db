"""The package's benchmarks, run from the repository root as modules (CONTRIBUTING.rst)."""

import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: The corpora of the paper benchmarks.
DATA = pathlib.Path(os.environ.get("TF_MEMLAYERS_DATA", ROOT.parent / "shared" / "data"))


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors are one line and exit status 2, importable where
    TensorFlow is not installed (the GPU machine)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())} (see --help)\n")


def positive(kind, zero=False):
    """An argparse type: ``kind`` (int or float) of the text, which must be above zero (or, with
    ``zero``, at least zero)."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if not (value >= 0 if zero else value > 0):
            bound = ">= 0" if zero else "positive"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
        return value

    parse.__name__ = f"{'non-negative' if zero else 'positive'} {kind.__name__}"
    return parse


def describe_device():
    """What Keras's backend runs on: versions, CPUs, XLA flags, its default platform
    (``"gpu"`` on a GPU) and its devices (id, platform, kind, memory in MiB)."""
    import keras

    found = {"keras": keras.__version__, "backend": keras.backend.backend()}
    found.update(python=sys.version.split()[0], cpus=os.cpu_count())
    found["xla_flags"] = os.environ.get("XLA_FLAGS")
    if found["backend"] == "jax":
        import jax

        found.update(jax=jax.__version__, default_backend=jax.default_backend())
        found["matmul_precision"] = str(jax.config.jax_default_matmul_precision)
        stats = [(d, (d.memory_stats() or {}).get("bytes_limit")) for d in jax.devices()]
        devices = [(d.id, d.platform, d.device_kind, memory) for d, memory in stats]
    elif found["backend"] == "torch":
        import torch

        found.update(torch=torch.__version__, cuda=torch.version.cuda)
        found["threads"] = torch.get_num_threads()
        gpus = map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
        devices = [(i, "gpu", p.name, p.total_memory) for i, p in enumerate(gpus)]
        found["default_backend"] = "gpu" if devices else "cpu"
    else:
        import tensorflow as tf

        devices, found["tensorflow"] = [], tf.__version__
        found["default_backend"] = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    keys = ("id", "platform", "kind", "memory_mib")
    found["devices"] = [dict(zip(keys, (*d[:3], d[3] and d[3] / 2**20))) for d in devices]
    return found
