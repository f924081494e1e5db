"""The paper benchmarks' results files: one JSON object each, ``{"settings": {...}, "<rows>":
[{...}, ...], ...}``, written after every row, so that a rerun with the same settings (or the
same ``compared`` part of them) resumes; a new row replaces the stored row with its key.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "results.json"
>>> results = ResultsFile(path, {"epochs": 2})
>>> report = results.resume()
>>> for model, seed in results.missing(report, [("gru", 0), ("gru", 1)]):
...     results.add(report, {"model": model, "seed": seed, "accuracy": 0.5})
>>> results.missing(ResultsFile(path, {"epochs": 2}).resume(), [("gru", 1), ("gru", 2)])
[('gru', 2)]
>>> ResultsFile(path, {"epochs": 3}).resume()
{'settings': {'epochs': 3}, 'runs': []}
"""

import json
import pathlib
import sys


def read(path):
    """The object stored in the results file ``path``, or ``None`` when there is no file."""
    path = pathlib.Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_or_exit(path):
    return read(path) or sys.exit(f"No results file at {path}.")


def write(path, report):
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


class ResultsFile:
    """The results file ``path`` of a run with ``settings``: its list ``rows``, each identified by
    its fields ``key``; ``compared(settings)``: what must be equal for stored rows to be kept;
    ``summarise(rows)``: stored under ``"summary"``."""

    def __init__(
        self, path, settings, rows="runs", key=("model", "seed"), compared=None, summarise=None
    ):
        self.path, self.settings, self.rows, self.key = pathlib.Path(path), settings, rows, key
        self.compared, self.summarise = compared or (lambda settings: settings), summarise

    def stored(self):
        """The stored object if its compared settings are this run's, else ``None``."""
        report = read(self.path)
        same = report and self.compared(report.get("settings", {})) == self.compared(self.settings)
        return report if same else None

    def resume(self, fresh=None):
        """The stored object (`stored`) with this run's settings, or else ``fresh``."""
        report = self.stored()
        if report is None:
            return fresh if fresh is not None else {"settings": self.settings, self.rows: []}
        return report | {"settings": self.settings}

    def key_of(self, row):
        values = tuple(row[name] for name in self.key)
        return values[0] if len(values) == 1 else values

    def missing(self, report, keys, finished=None):
        """The ``keys`` without a row in ``report`` (where ``finished(row)``), in order, once."""
        done = {self.key_of(row) for row in report[self.rows] if finished is None or finished(row)}
        return [key for key in dict.fromkeys(keys) if key not in done]

    def add(self, report, row):
        key = self.key_of(row)
        report[self.rows] = [r for r in report[self.rows] if self.key_of(r) != key] + [row]
        self.write(report)

    def write(self, report):
        if self.summarise is not None:
            report["summary"] = self.summarise(report[self.rows])
        write(self.path, report)

    def run(self, args, models, run_row, write_docs, prepare=None):
        """A paper benchmark's ``main``: the stored object (``--from-results``) or this run's,
        ``run_row(report, model, seed)`` added of each of ``models`` and ``args.seeds`` without a
        row, seed by seed (so that an interrupted run has every model once), ``prepare(report)``
        before the first; ``write_docs(report)`` with ``--update-docs``."""
        keys = [(model, seed) for seed in args.seeds for model in models]
        report = read_or_exit(self.path) if args.from_results else self.resume()
        for index, key in enumerate([] if args.from_results else self.missing(report, keys)):
            if prepare is not None and index == 0:
                prepare(report)
            self.add(report, run_row(report, *key))
        if not args.from_results:
            self.write(report)
        if args.update_docs:
            write_docs(report)
        return report
