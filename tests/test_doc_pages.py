"""What the documentation's pages and README.rst say (without Sphinx; the site itself:
tests/test_docs.py)."""

import re
import shlex

import pytest

from tests.support import REPO_ROOT, split_rows, tensorflow_only


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


def _code_blocks(page, language="python"):
    pattern = re.compile(rf"^\.\. code-block:: {language}\n\n((?:    .*\n|\n)+)", re.MULTILINE)
    return ["\n".join(line[4:] for line in block.splitlines()) for block in pattern.findall(page)]


README = (REPO_ROOT / "README.rst").read_text(encoding="utf-8")
PAGES_WITH_CODE = sorted(
    path.relative_to(REPO_ROOT).as_posix()
    for path in [REPO_ROOT / "README.rst", *(REPO_ROOT / "docs").glob("*.rst")]
    if _code_blocks(path.read_text(encoding="utf-8"))
)


# The pages ``docs/<name>.rst`` whose code needs TensorFlow or keras-hub (its samplers).
TF_PAGES = ("guide_language_model", "streaming", "training")
TENSORFLOW = tensorflow_only("needs TensorFlow or keras-hub")
# README.rst, the first steps, the backends page on every backend; the others split (`split_rows`).
EVERY_BACKEND = ("README.rst", "docs/getting_started.rst", "docs/backends.rst")
PAGES = [pytest.param(p, marks=TENSORFLOW) if p[5:-4] in TF_PAGES else p for p in PAGES_WITH_CODE]
PAGES = [*EVERY_BACKEND, *split_rows([p for p in PAGES if p not in EVERY_BACKEND])]


@pytest.mark.parametrize("page_name", PAGES)
def test_the_code_on_each_page_runs_as_written(page_name, capsys):
    """Each page's Python blocks run in order, and each print shows what its comment says."""
    blocks, namespace = _code_blocks((REPO_ROOT / page_name).read_text(encoding="utf-8")), {}
    for block in blocks:
        exec(compile(block, page_name, "exec"), namespace)
    prints = [line for b in blocks for line in b.splitlines() if line.lstrip().startswith("print(")]
    expected = [line.split("#")[1].strip() for line in prints if "#" in line]
    assert capsys.readouterr().out.splitlines() == expected


def test_ci_runs_the_readme_install_and_test_commands():
    commands = [c for block in _code_blocks(README, "bash") for c in block.splitlines()]
    commands = [command for command in commands if "pytest" in command]
    assert len(commands) == 1, commands
    assert _code_blocks(README), "README.rst has no python code block (its quick start)"
    install, test = (part.strip() for part in commands[0].split("&&"))
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert install in ci and test in ci
    assert shlex.split(test)[-2:] == ["tests", "examples"]
    # The results tables are generated into the documentation's results page (docs/results.rst);
    # README.rst has one generated block, the headline per paper.
    assert re.findall(r"^\.\. BEGIN GENERATED: (\S+)$", README, re.M) == ["headlines"]
