"""The paper benchmarks' results files: one JSON object per benchmark, written after every
finished row, so that a rerun with the same settings resumes where the last one stopped.

A results file holds one object::

    {"settings": {...}, "<rows>": [{...}, ...], ...}

``settings`` are the options that decide what the rows measure: a rerun keeps the stored rows
only when its own settings are the same (a benchmark may leave some of them out of the
comparison, e.g. rules that only say when to stop training). ``<rows>`` is a list of dicts
(``"runs"`` unless the benchmark names it otherwise), each identified by the values of a few
of its fields, its key (e.g. model and seed): a new row replaces a stored row with the same
key. Anything else in the object (corpus sizes, a summary of the rows) is the benchmark's own.

A benchmark makes a `ResultsFile` with its current settings, takes the object to continue
with from `ResultsFile.resume`, runs the rows `ResultsFile.missing` names and hands each to
`ResultsFile.add`, which writes the file:

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

Only the standard library is used, so importing this module does not start TensorFlow.
"""

import json
import pathlib
import sys


def read(path):
    """The object stored in the results file ``path``, or ``None`` when there is no file."""
    path = pathlib.Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_or_exit(path):
    """The object stored at ``path``; exits with a one-line message when there is no file (for
    the benchmarks' options that render stored results instead of running)."""
    return read(path) or sys.exit(f"No results file at {path}.")


def render(path, write_docs=None):
    """The object stored at ``path`` (`read_or_exit`), with ``write_docs(report)`` called on it
    when given (a benchmark's ``--from-results``: its results-page table from a stored run)."""
    report = read_or_exit(path)
    if write_docs is not None:
        write_docs(report)
    return report


def write(path, report):
    """Writes ``report`` to ``path`` as indented JSON, creating the folder if needed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def add_results_options(parser, default, renders="the results table"):
    """Adds ``--results`` (the results file, default ``default``) and ``--from-results`` (do
    not run: render ``renders`` from the stored file) to ``parser``."""
    add = parser.add_argument
    add("--results", type=pathlib.Path, default=default, help="results file, resumed by a rerun")
    add(
        "--from-results", action="store_true", help=f"do not train: render {renders} from --results"
    )
    return parser


class ResultsFile:
    """One benchmark's results file ``path``, for the ``settings`` (a dict of JSON values) of
    the current run; its list of rows is named ``rows``, a row is identified by the fields
    ``key``. ``compared``: a function giving the part of the settings that must be equal for
    stored rows to be kept (default: all of them); ``summarise``: a function ``rows ->
    summary`` stored under ``"summary"`` every time the file is written."""

    def __init__(
        self, path, settings, rows="runs", key=("model", "seed"), compared=None, summarise=None
    ):
        self.path, self.settings, self.rows, self.key = pathlib.Path(path), settings, rows, key
        self.compared = compared or (lambda settings: settings)
        self.summarise = summarise

    def stored(self):
        """The stored object (its settings as they were written) if its compared settings
        are this run's, else ``None``."""
        report = read(self.path)
        same = report is not None and self.compared(report.get("settings", {})) == self.compared(
            self.settings
        )
        return report if same else None

    def resume(self, fresh=None):
        """The object this run continues: the stored one (`stored`) with this run's settings,
        or, when the stored rows cannot be kept, ``fresh`` (default: ``{"settings":
        settings, <rows>: []}``)."""
        report = self.stored()
        if report is None:
            return fresh if fresh is not None else {"settings": self.settings, self.rows: []}
        report["settings"] = self.settings
        return report

    def key_of(self, row):
        """The key of ``row``: the value of its one key field, or a tuple of the values."""
        values = tuple(row[name] for name in self.key)
        return values[0] if len(values) == 1 else values

    def missing(self, report, keys, finished=None):
        """The ``keys`` (see `key_of`) that no finished row of ``report`` has yet, in their
        order, each once; ``finished(row)``: whether a stored row is finished (default: all
        are), a row it rejects being run again and replaced (`add`)."""
        done = {self.key_of(row) for row in report[self.rows] if finished is None or finished(row)}
        return [key for key in dict.fromkeys(keys) if key not in done]

    def add(self, report, row):
        """Puts ``row`` last in ``report``'s rows, replacing a row with the same key, and
        writes the file."""
        key = self.key_of(row)
        report[self.rows] = [r for r in report[self.rows] if self.key_of(r) != key] + [row]
        self.write(report)

    def finish(self, report, write_docs=None):
        """Writes the file a last time (`write`), then, when given, ``write_docs(report)``
        (the benchmark's results-page table); returns ``report``."""
        self.write(report)
        if write_docs is not None:
            write_docs(report)
        return report

    def write(self, report):
        """Writes ``report`` (with its summary, when the file has one) to the file."""
        if self.summarise is not None:
            report["summary"] = self.summarise(report[self.rows])
        write(self.path, report)
