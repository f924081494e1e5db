"""The results page (docs/results.rst) and README's headlines are what the committed results
files give: every writer, the speed tables', the GPU runs' and each paper benchmark's, rewrites
a copy of the page from them, and its figures are drawn again."""

import re

from benchmarks import docs_tables, headlines
from benchmarks.papers import (
    fill_last_word_generated,
    fill_last_word_real_data,
    lm_equal_budget,
    seq2seq_autoencoding,
    snli_real_data,
)
from benchmarks.speed import page as speed_page

PAPERS = {
    fill_last_word_generated: [[]],
    fill_last_word_real_data: [[]],
    snli_real_data: [[]],
    seq2seq_autoencoding: [["--corpus", "generated"], ["--corpus", "ptb"]],
    lm_equal_budget: [[], ["--epochs", "1"], ["--config", "zaremba-small"], ["--cost"]],
}


def test_every_block_and_figure_is_what_the_results_files_give(tmp_path, monkeypatch):
    text = docs_tables.RESULTS_PAGE.read_text(encoding="utf-8")
    page, images = tmp_path / "results.rst", tmp_path / "docs" / "images"
    page.write_text(text, encoding="utf-8")
    speed_page.write(list(speed_page.SPEED_BLOCKS), page=page, images=images)
    speed_page.write_gpu(speed_page.load_runs(), page, images / speed_page.GPU_FIGURE.name)
    update = docs_tables.update_docs
    for module, runs in PAPERS.items():
        # Each run's own results file, then the page and the figures under tmp_path.
        runs = [[*argv, "--results", str(module.parse_args(argv).results)] for argv in runs]
        monkeypatch.setattr(module, "update_docs", lambda *a, **k: update(*a, page=page, **k))
        monkeypatch.setattr(module, "ROOT", tmp_path)
        for argv in runs:
            figures = ["--figures-dir", str(images)] if module is lm_equal_budget else []
            module.main([*argv, *figures, "--from-results", "--update-docs"])
    assert page.read_text(encoding="utf-8") == text
    assert headlines.main(["--check"]) == 0, "run: python -m benchmarks.headlines"
    shown = re.findall(r"^\.\. image:: images/(\S+)", text, re.MULTILINE)
    assert sorted(shown) == sorted(path.name for path in images.glob("*.png"))
