"""README.rst stays true: its quick start runs, its commands are the ones CI runs."""

import re
import shlex

from tests.support import REPO_ROOT

README = (REPO_ROOT / "README.rst").read_text(encoding="utf-8")


def code_blocks(language):
    pattern = re.compile(rf"^\.\. code-block:: {language}\n\n((?:    .*\n|\n)+)", re.MULTILINE)
    return ["\n".join(line[4:] for line in block.splitlines()) for block in pattern.findall(README)]


def test_quick_start_runs_as_written(capsys):
    blocks = code_blocks("python")
    assert blocks, "README.rst has no python code block"
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.rst", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    # Each print in the quick start states the shapes it expects in a comment.
    expected = [
        line.split("#")[1].strip()
        for block in blocks
        for line in block.splitlines()
        if line.lstrip().startswith("print(") and "#" in line
    ]
    assert printed == expected


def test_ci_runs_the_readme_install_and_test_commands():
    commands = [c for block in code_blocks("bash") for c in block.splitlines() if "pytest" in c]
    assert len(commands) == 1, commands
    install, test = (part.strip() for part in commands[0].split("&&"))
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert install in ci and test in ci
    assert shlex.split(test)[-2:] == ["tests", "examples"]


def test_readme_holds_the_headlines_only():
    """The results tables are generated into the documentation's results page
    (docs/results.rst); README.rst has one generated block, the headline per paper."""
    blocks = re.findall(r"^\.\. BEGIN GENERATED: (\S+)$", README, re.M)
    assert blocks == ["headlines"]
