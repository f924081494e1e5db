"""README.rst's headline results are what the benchmarks' results files say."""

from conftest import load_script


def test_readme_headlines_are_the_results_files():
    headlines = load_script("benchmarks", "headlines")
    readme = headlines.README.read_text(encoding="utf-8")
    assert headlines.main(["--check"]) == 0, "run: python -m benchmarks.headlines"
    assert headlines.README.read_text(encoding="utf-8") == readme  # checked, not written


def test_headlines_name_every_papers_models():
    rows = load_script("benchmarks", "headlines").rows()
    assert [row["paper"] for row in rows] == ["Daniluk et al. 2017", "Weissenborn 2016", "Gaffney"]
    for model in ("lstm", "attention", "key_value", "key_value_predict", "ngram"):
        assert f"{model} " in rows[0]["result"]
    for model in ("gru", "am_gru", "dual_am_gru"):
        assert f"{model} " in rows[1]["result"]
    for model in ("no attention", "attention pooling", "attention + cache 1,000"):
        assert f"{model} " in rows[2]["result"]
