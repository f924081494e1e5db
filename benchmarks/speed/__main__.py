"""The speed tables (`benchmarks.speed.tables`) on Keras's TensorFlow, JAX or torch backend, on
the CPU or a GPU, within ``--budget-s``: prints the results and writes the tables' results files.

    python -m benchmarks.speed --tables language_model --backend jax
    python -m benchmarks.speed --sizes tiny                # every table, in seconds each
    python -m benchmarks.speed --from-results              # the results page, from the files
    python -m benchmarks.speed --from-results --device gpu # its GPU section, from the runs
    python -m benchmarks.speed --device gpu --backend jax --out speed.json  # a GPU run's
    python -m benchmarks.speed --tables backends --python torch=venv-torch/bin/python
"""

import argparse
import json
import os
import sys
import time

from benchmarks import RESULTS, ArgumentParser, describe_device, positive, results_file

DTYPES = ("float32", "mixed_bfloat16")
# The share of the run's budget each table may spend before its next row is skipped.
BUDGET_SHARES = {"window_attention": 0.4, "language_model": 0.25, "snli": 0.15}


class Budget:
    """A table may start a row while the run is within its budget and the table within its
    share (`BUDGET_SHARES`, else 0.1) of what was left when it began."""

    def __init__(self, seconds, tables):
        self.start, self.seconds, self.to_come = time.perf_counter(), seconds, list(tables)

    def begin(self, table):
        self.table_start = time.perf_counter()
        share = lambda name: BUDGET_SHARES.get(name, 0.1)  # noqa: E731
        left = self.seconds - (self.table_start - self.start)
        self.table_seconds = left * share(table) / sum(map(share, self.to_come))
        self.to_come.remove(table)

    def allows(self):
        now = time.perf_counter()
        return now - self.start < self.seconds and now - self.table_start < self.table_seconds


BACKENDS = ("tensorflow", "jax", "torch")


def backend_python(text):
    """``BACKEND=PATH`` of ``--python``: ``(backend, path)``."""
    name, equals, path = text.partition("=")
    if name in BACKENDS and equals and path:
        return name, path
    expected = f"expected BACKEND=PATH with BACKEND in {BACKENDS}"
    raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")


def peaks(args, sizes):
    """``--peaks-from``'s matmul rates, else measured per dtype (a GPU's also without TF32)."""
    from benchmarks.step import peak_gflops

    try:
        earlier = (args.peaks_from and results_file.read(args.peaks_from)) or {}
    except ValueError:
        earlier = {}
    if earlier.get("peak_gflops"):
        keys = ("peak_gflops", "peak_gflops_float32_highest")
        return {**{key: earlier.get(key) for key in keys}, "peaks_from": str(args.peaks_from)}
    if args.buffers_only:
        return {}
    found = {"float32": peak_gflops(sizes), "mixed_bfloat16": peak_gflops(sizes, dtype="bfloat16")}
    if args.device != "gpu" or args.backend != "jax":
        return {"peak_gflops": found}
    import jax

    with jax.default_matmul_precision("highest"):
        return {"peak_gflops": found, "peak_gflops_float32_highest": peak_gflops(sizes)}


def case_key(row):
    return json.dumps({k: v for k, v in row.items() if not k.endswith("_buffers_mib")})


def buffers_from_jax(name, args):
    """XLA's buffers of table ``name``'s variants on JAX: ``{case key: {variant: MiB}}``."""
    from benchmarks.speed.tables import child

    argv = [*args.argv, "--tables", name, "--backend", "jax", "--buffers-only"]
    found = child(*argv, python=args.python.get("jax"))
    if isinstance(found, str):
        print(f"{name}: no XLA buffers: {found}", file=sys.stderr)
        return {}
    end, rows = "_buffers_mib", found["tables"].get(name, [])
    return {
        case_key(r): {k.removesuffix(end): v for k, v in r.items() if k.endswith(end)} for r in rows
    }


def run(args):
    """Measures ``args.tables``, writing the results files (``--out``: one) after each row."""
    import keras

    from benchmarks import step as training
    from benchmarks.speed.tables import SIZES, SKIPPED, TABLES, one_line

    keras.utils.set_random_seed(0)
    sizes = {**SIZES[args.sizes], "name": args.sizes, "dtypes": args.dtypes}
    sizes.update({k: getattr(args, k) for k in ("rounds", "lengths") if getattr(args, k)})
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()}
    training.JIT = not args.no_jit
    jit = dict(jax="``jax.jit``", tensorflow="XLA", torch="``torch.compile``")
    jit = dict(tensorflow="no XLA", torch="eager") if args.no_jit else jit  # JAX refuses --no-jit
    settings["step"] = f"SGD, ``stateless_call``, {jit[args.backend]}"
    device = describe_device()
    memory = device["devices"] and device["devices"][0]["memory_mib"]
    sizes["limit_mib"] = 0.8 * memory if memory else sizes["memory_limit_gib"] * 1024
    sizes.update(samples=args.samples, buffers_only=args.buffers_only, pythons=args.python)
    results = {"sizes": args.sizes, "tables_asked": args.tables, "settings": settings}
    results.update(device=device, tables={}, errors={}, seconds={})
    started = time.perf_counter()
    results.update(peaks(args, sizes["peak_sizes"]))
    results["peaks_seconds"] = round(time.perf_counter() - started, 1)

    def write(name=None):
        if args.out:
            results_file.write(args.out, results)
        elif name and args.sizes == "full" and TABLES[name].file:
            own = {k: v for k, v in results.items() if k not in ("tables", "errors", "seconds")}
            own["tables"] = {name: results["tables"][name]}
            own["errors"] = {k: v for k, v in results["errors"].items() if k == name}
            results_file.write(RESULTS / TABLES[name].file, own)

    write()
    budget = Budget(args.budget_s, args.tables)
    for name in args.tables:
        table, rows, gave_up, started = TABLES[name], [], {}, time.perf_counter()
        budget.begin(name)

        def progress(extra, name=name, rows=rows):
            results["tables"][name] = rows + extra
            write(name)

        sizes["progress"] = progress
        jax_child = table.buffers and args.backend == "tensorflow"
        buffers = buffers_from_jax(name, args) if jax_child else {}
        try:
            for case in table.cases(sizes):
                if not budget.allows():
                    rows.append({**case, "status": SKIPPED})
                    continue
                dtype = case.get("dtype", "float32")
                peak = results.get("peak_gflops", {}).get(dtype)
                found, gave = buffers.get(case_key(case), {}), gave_up.setdefault(dtype, {})
                keras.config.set_dtype_policy(dtype)  # each case's own
                measured = table.measure(sizes, case, peak, found, gave)
                rows.extend(measured)
                progress([])
                print(json.dumps(measured), file=sys.stderr, flush=True)
        except Exception as error:  # noqa: BLE001  (one table's failure leaves the others)
            results["errors"][name] = one_line(error)
            print(f"{name}: {one_line(error)}", file=sys.stderr, flush=True)
        results["tables"][name] = rows
        results["seconds"][name] = round(time.perf_counter() - started, 1)
        write(name)
    return results


def parse_args(argv=None):
    from benchmarks.speed.tables import GPU_TABLES, SIZES, TABLES

    parser = ArgumentParser(prog="python -m benchmarks.speed", description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--tables", nargs="+", choices=list(TABLES), help="default: all (a GPU run's on a GPU)")
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    add("--backend", choices=BACKENDS, default=backend, help="Keras's backend")
    add("--no-jit", action="store_true", help="TensorFlow without XLA, torch without torch.compile")
    why = "the Python of the children on BACKEND: the backends table's, XLA's buffers (JAX)"
    python = dict(type=backend_python, action="append", default=[], metavar="BACKEND=PATH")
    add("--python", **python, help=why)
    add("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: a GPU run's tables")
    add("--sizes", choices=sorted(SIZES), help="default: full (gpu on a GPU); tiny: seconds")
    add("--dtypes", nargs="+", choices=DTYPES, help="default: float32 (both on a GPU)")
    add("--rounds", type=positive(int), help="timed steps per variant")
    add("--lengths", type=positive(int), nargs="+", help="window attention's lengths T")
    add("--budget-s", type=positive(float), default=float("inf"), help="seconds for all tables")
    add("--peaks-from", metavar="FILE", help="take the matrix-product peaks from this file")
    add("--out", help="one results file for all tables (default: each table's own file)")
    add("--from-results", action="store_true", help="docs/results.rst from the files (or runs)")
    add("--update-docs", action="store_true", help="write the results into docs/results.rst")
    add("--samples", action="store_true", help=argparse.SUPPRESS)
    add("--buffers-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.python = dict(args.python)
    if args.no_jit and args.backend == "jax":
        parser.error("argument --no-jit: Keras's JAX backend always compiles (jax.jit)")
    # The options of the XLA buffers' child on JAX, which always compiles.
    given = sys.argv[1:] if argv is None else argv
    args.argv = [a for a in given if a not in ("--update-docs", "--no-jit")]
    if args.device == "gpu" and args.backend == "tensorflow" and not args.from_results:
        parser.error("argument --device: a GPU run is on Keras's JAX or torch backend (--backend)")
    args.sizes = args.sizes or ("gpu" if args.device == "gpu" else "full")
    args.dtypes = args.dtypes or (list(DTYPES) if args.device == "gpu" else ["float32"])
    default = GPU_TABLES if args.device == "gpu" else [n for n in TABLES if n != "backend_cases"]
    args.tables = args.tables or [n for n in default if args.backend in TABLES[n].backends]
    return args


def main(argv=None):
    """Exit status 1 when a table failed (its error is in the results)."""
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = args.backend
    if results := (None if args.from_results else run(args)):
        print(json.dumps(results, indent=1))
    if args.update_docs or args.from_results:
        from benchmarks.speed import page

        if args.device == "gpu":
            page.write_gpu(page.load_runs())
        else:
            page.write(args.tables, results)
    return 1 if results and results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
