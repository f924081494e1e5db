"""The version: PEP 440, the same in the package, ``pyproject.toml``, the installed metadata
and the newest entry of ``CHANGELOG.rst`` (unreleased exactly while a pre-release)."""

import contextlib
import importlib
import importlib.metadata
import re
import tomllib

from packaging.version import Version  # pytest's own dependency

import tf_memlayers
from tests.support import REPO_ROOT
from tf_memlayers.version import __version__

# CHANGELOG.rst's headings (dash-underlined): a version, then "(unreleased)" or an optional date.
HEADING = re.compile(r"^(.+)\n-+$", re.MULTILINE)
ENTRY = re.compile(r"(\d+(?:\.\d+)*)(?: \((.+)\))?")


def test_the_version_is_pep_440_exported_by_the_package_and_the_changelog_starts_from_it():
    assert isinstance(__version__, str)
    assert str(Version(__version__)) == __version__  # already in its normal form
    assert tf_memlayers.__version__ == __version__ and "__version__" in tf_memlayers.__all__
    # The distribution takes its version from the module.
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        project = tomllib.load(file)
    assert "version" in project["project"]["dynamic"]
    module, name = project["tool"]["setuptools"]["dynamic"]["version"]["attr"].rsplit(".", 1)
    assert getattr(importlib.import_module(module), name) == __version__
    # The installed metadata (none where the package is only importable from the checkout).
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        assert importlib.metadata.version("tf-memlayers") == __version__
    # The changelog runs newest first from this version: [(version, unreleased), ...] in order.
    entries = []
    for heading in HEADING.findall((REPO_ROOT / "CHANGELOG.rst").read_text(encoding="utf-8")):
        entry = ENTRY.fullmatch(heading)
        assert entry, f"CHANGELOG.rst: {heading!r} is not a version's heading"
        entries.append((Version(entry[1]), entry[2] == "unreleased"))
    assert len(entries) >= 2, entries
    version = Version(__version__)
    newest, unreleased = entries[0]
    assert newest == Version(version.base_version)
    # A development or pre-release build is of a version not released yet.
    assert unreleased == (version.is_devrelease or version.is_prerelease)
    # The changelog runs newest first.
    versions = [version for version, _ in entries]
    assert versions == sorted(set(versions), reverse=True)
