"""The paper benchmarks' results files: one JSON object per benchmark, ``{"settings": {...},
"<rows>": [{...}, ...], ...}``, written after every finished row, so that a rerun with the same
settings resumes where the last one stopped.

A rerun keeps the stored rows only when its settings are the same (``compared``: the part of
the settings that must be, e.g. not the rules that only say when to stop). A row is identified
by a few of its fields, its key (e.g. model and seed): a new row replaces a stored row with the
same key. Anything else in the object (corpus sizes, a summary) is the benchmark's own.

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


def read_or_exit(path, write_docs=None):
    """The object stored at ``path``, with ``write_docs(report)`` called on it when given (a
    benchmark's ``--from-results``); exits with a one-line message when there is no file."""
    report = read(path) or sys.exit(f"No results file at {path}.")
    if write_docs is not None:
        write_docs(report)
    return report


def write(path, report):
    """Writes ``report`` to ``path`` as indented JSON, creating the folder if needed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def add_results_options(parser, default):
    """Adds ``--results`` (default ``default``) and ``--from-results`` to ``parser``."""
    add = parser.add_argument
    add("--results", type=pathlib.Path, default=default, help="results file, resumed by a rerun")
    add("--from-results", action="store_true", help="do not train: the table from --results")
    return parser


class ResultsFile:
    """One benchmark's results file ``path`` for the ``settings`` (JSON values) of this run: its
    list of rows named ``rows``, a row identified by its fields ``key``; ``compared(settings)``:
    the part that must be equal for stored rows to be kept (default: all); ``summarise(rows)``:
    stored under ``"summary"`` whenever the file is written."""

    def __init__(
        self, path, settings, rows="runs", key=("model", "seed"), compared=None, summarise=None
    ):
        self.path, self.settings, self.rows, self.key = pathlib.Path(path), settings, rows, key
        self.compared = compared or (lambda settings: settings)
        self.summarise = summarise

    def stored(self):
        """The stored object if its compared settings are this run's, else ``None``."""
        report = read(self.path)
        same = report is not None and self.compared(report.get("settings", {})) == self.compared(
            self.settings
        )
        return report if same else None

    def resume(self, fresh=None):
        """The stored object (`stored`) with this run's settings, or else ``fresh`` (default:
        ``{"settings": settings, <rows>: []}``)."""
        report = self.stored()
        if report is None:
            return fresh if fresh is not None else {"settings": self.settings, self.rows: []}
        report["settings"] = self.settings
        return report

    def key_of(self, row):
        values = tuple(row[name] for name in self.key)
        return values[0] if len(values) == 1 else values

    def missing(self, report, keys, finished=None):
        """The ``keys`` that no finished row of ``report`` has yet, in order, each once;
        ``finished(row)``: whether a stored row is finished (default: all are)."""
        done = {self.key_of(row) for row in report[self.rows] if finished is None or finished(row)}
        return [key for key in dict.fromkeys(keys) if key not in done]

    def add(self, report, row):
        """Puts ``row`` last in ``report``'s rows, replacing a row with its key; writes the file."""
        key = self.key_of(row)
        report[self.rows] = [r for r in report[self.rows] if self.key_of(r) != key] + [row]
        self.write(report)

    def write(self, report):
        if self.summarise is not None:
            report["summary"] = self.summarise(report[self.rows])
        write(self.path, report)

    def run(self, args, keys, run_row, write_docs, prepare=None):
        """A paper benchmark's ``main``: with ``--from-results`` the stored object, else this
        run's, each missing key's row ``run_row(report, key)`` added (``prepare(report)`` once
        before the first); ``write_docs(report)`` with ``--update-docs``. Returns the object."""
        write_docs = write_docs if args.update_docs else None
        if args.from_results:
            return read_or_exit(self.path, write_docs)
        report = self.resume()
        for index, key in enumerate(self.missing(report, keys)):
            if prepare is not None and index == 0:
                prepare(report)
            self.add(report, run_row(report, key))
        self.write(report)
        if write_docs is not None:
            write_docs(report)
        return report
