"""The paper experiments, each trained by its example: ``python -m benchmarks.papers.<name>``."""

import pathlib

import numpy as np

from benchmarks import RESULTS, ArgumentParser, positive


def paper_parser(doc, results, seeds=None, parser=ArgumentParser, help=None):
    """A paper benchmark's ``parser``, described by the first paragraph of ``doc``, with
    ``--seeds`` (default ``seeds``; ``help``: its help; neither: no ``--seeds``), ``--results``
    (default ``results`` in `RESULTS`), resumed by a rerun, ``--from-results`` and
    ``--update-docs``."""
    parser = parser(description=doc.split("\n\n")[0])
    add = parser.add_argument
    if seeds or help:
        help = help or f"default: {' '.join(map(str, seeds))}"
        add("--seeds", nargs="+", type=positive(int, zero=True), default=seeds, help=help)
    where = "" if results else " (default: the options', in benchmarks/results/)"
    why = f"results file, resumed by a rerun{where}"
    add("--results", type=pathlib.Path, default=results and RESULTS / f"{results}.json", help=why)
    add("--from-results", action="store_true", help="do not train: the table from --results")
    add("--update-docs", action="store_true", help="write the results into docs/results.rst")
    return parser


def per_model(runs, models, key="model"):
    """``(model, its runs)`` of each of ``models`` with runs, in that order."""
    return [(model, mine) for model in models if (mine := [r for r in runs if r[key] == model])]


def mean_and_spread(values, digits=3):
    """``"mean ± std"`` of ``values`` over the seeds, ``digits`` after the point (the value
    alone for one seed; `None` values left out; empty without any).

    >>> mean_and_spread([0.5, 0.7]), mean_and_spread([0.25], 2), mean_and_spread([None])
    ('0.600 ± 0.100', '0.25', '')
    """
    values = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if not len(values):
        return ""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{values.mean():.{digits}f} ± {values.std():.{digits}f}"
