"""What the documentation's pages say: the code on each page runs as written, and the results
page's tables and figures are written by the benchmark scripts. These need no Sphinx; the site
itself is tested by tests/test_docs.py."""

import re

import pytest

from tests.support import REPO_ROOT, load_script


def test_every_results_table_is_written_by_a_benchmark_script():
    """Figures on the results page appear only between markers that a script in benchmarks/
    writes, and every figure the page shows is in the repository."""
    page = (REPO_ROOT / "docs" / "results.rst").read_text(encoding="utf-8")
    scripts = "".join(p.read_text() for p in (REPO_ROOT / "benchmarks").rglob("*.py"))
    names = re.findall(r"^\.\. BEGIN GENERATED: (\S+)", page, re.MULTILINE)
    assert names
    for name in names:
        assert f".. END GENERATED: {name}" in page
        assert f'"{name}"' in scripts, f"no benchmark script writes the results block {name!r}"
    for image in re.findall(r"^\.\. image:: (\S+)", page, re.MULTILINE):
        assert (REPO_ROOT / "docs" / image).is_file(), image


BENCHMARKS_WRITING_RESULTS = sorted(
    path.relative_to(REPO_ROOT).with_suffix("").as_posix()
    for path in (REPO_ROOT / "benchmarks").rglob("*.py")
    if "add_update_docs_option(parser)\n" in path.read_text(encoding="utf-8")
)


@pytest.mark.parametrize("script", BENCHMARKS_WRITING_RESULTS)
def test_update_readme_is_a_hidden_alias_of_update_docs(script, capsys):
    folder, _, name = script.rpartition("/")
    benchmark = load_script(folder, name)
    assert benchmark.parse_args(["--update-docs"]).update_docs
    assert benchmark.parse_args(["--update-readme"]).update_docs
    assert not benchmark.parse_args([]).update_docs
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--help"])
    help_text = capsys.readouterr().out
    assert "--update-docs" in help_text and "--update-readme" not in help_text


def _python_blocks(page):
    pattern = re.compile(r"^\.\. code-block:: python\n\n((?:    .*\n|\n)+)", re.MULTILINE)
    return ["\n".join(line[4:] for line in block.splitlines()) for block in pattern.findall(page)]


PAGES_WITH_CODE = sorted(
    path.name
    for path in (REPO_ROOT / "docs").glob("*.rst")
    if _python_blocks(path.read_text(encoding="utf-8"))
)


@pytest.mark.parametrize("page_name", PAGES_WITH_CODE)
def test_the_code_on_each_page_runs_as_written(page_name, capsys):
    """Each page's Python blocks run in order, and each print shows what its comment says."""
    blocks = _python_blocks((REPO_ROOT / "docs" / page_name).read_text(encoding="utf-8"))
    namespace = {}
    for block in blocks:
        exec(compile(block, page_name, "exec"), namespace)
    expected = [
        line.split("#")[1].strip()
        for block in blocks
        for line in block.splitlines()
        if line.lstrip().startswith("print(") and "#" in line
    ]
    assert capsys.readouterr().out.splitlines() == expected
