"""What JAX runs on: prints the devices and writes them as JSON (the GPU run's step 2); exit
status 3 when ``--require-gpu yes`` and JAX's default backend is not a GPU."""

import json
import sys

from benchmarks import ArgumentParser


def main(argv=None):
    parser = ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    why = "exit with status 3 unless JAX runs on a GPU (default: yes)"
    parser.add_argument("--require-gpu", choices=("yes", "no"), default="yes", help=why)
    args = parser.parse_args(argv)
    import jax
    import keras

    found = {"jax": jax.__version__, "keras": keras.__version__, "python": sys.version.split()[0]}
    found.update(keras_backend=keras.backend.backend(), default_backend=jax.default_backend())
    found["devices"] = []
    for device in jax.devices():
        stats = device.memory_stats() or {}
        memory = stats["bytes_limit"] / 2**20 if "bytes_limit" in stats else None
        kind = getattr(device, "device_kind", "")
        found["devices"].append(
            dict(id=device.id, platform=device.platform, kind=kind, memory_mib=memory)
        )
        print(
            f"JAX {jax.__version__} ({found['default_backend']}): device {device.id} "
            f"{device.platform} {kind} {memory or '?'} MiB"
        )
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(found, out, indent=1)
    if args.require_gpu == "yes" and found["default_backend"] != "gpu":
        print(f"JAX's default backend is {found['default_backend']!r}, not 'gpu'", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
