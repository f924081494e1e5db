"""A pytest plugin of the GPU run's layer tests: writes the ids of the tests a run collected.

``pytest -p benchmarks.gpu.collected_ids --collected-ids-file FILE ...`` writes the ids, one
per line in collection order, as soon as collection ends, so that a run its time limit stops
still leaves them: `benchmarks.gpu.layer_tests` names from them the tests it left unrun,
without collecting the selection a second time in a process of its own. Under pytest-xdist the
controller writes the ids its workers report (each worker collects the same tests); without
it, the one process writes what it collected.
"""

import pathlib

import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--collected-ids-file",
        default=None,
        help="the file the collected tests' ids are written to",
    )


def _write(config, ids):
    path = config.getoption("collected_ids_file")
    # A pytest-xdist worker (``workerinput``) leaves the file to the controller.
    if path and not hasattr(config, "workerinput"):
        pathlib.Path(path).write_text("".join(f"{test_id}\n" for test_id in ids), encoding="utf-8")


def pytest_collection_finish(session):
    _write(session.config, [item.nodeid for item in session.items])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _write(node.config, ids)


def read(path):
    """The ids a run wrote to ``path``, or None where it wrote none (collection did not end)."""
    path = pathlib.Path(path)
    if not path.is_file():
        return None
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line]
