"""What a test run of the repository (``pytest tests examples``) orders across both trees; each
tree's own set-up is in its ``conftest.py``."""


def pytest_collection_modifyitems(config, items):
    # The tests marked ``slow`` (pyproject.toml) first: pytest-xdist hands tests out in this
    # order, so that a pass does not end with one worker on a slow test while the other waits.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
