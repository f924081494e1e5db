"""The headline results (README.rst, and the top of the results page) are what the benchmarks'
results files say."""

from tests.support import load_script


def test_the_headlines_are_the_results_files():
    headlines = load_script("benchmarks", "headlines")
    pages = {page: page.read_text(encoding="utf-8") for page in headlines.PAGES}
    assert headlines.main(["--check"]) == 0, "run: python -m benchmarks.headlines"
    for page, text in pages.items():
        assert page.read_text(encoding="utf-8") == text  # checked, not written
    # The results page opens with them: its first generated block.
    results = pages[headlines.RESULTS_PAGE]
    assert results.index("BEGIN GENERATED:") == results.index("BEGIN GENERATED: headlines")


def test_headlines_name_every_papers_models():
    rows = load_script("benchmarks", "headlines").rows()
    assert [row["paper"] for row in rows] == [
        "Daniluk et al. 2017",
        "Weissenborn 2016",
        "Weissenborn 2016",
        "Gaffney",
    ]
    for model in ("lstm", "attention", "key_value", "key_value_predict", "ngram"):
        assert f"{model} " in rows[0]["result"]
    for model in ("gru", "am_gru", "dual_am_gru", "word_by_word"):
        assert f"{model} " in rows[1]["result"]
    for model in ("dual_am_gru", "attention", "gru"):
        assert f"{model} " in rows[2]["result"]
    for model in ("no attention", "attention pooling", "attention + cache 1,000"):
        assert f"{model} " in rows[3]["result"]


def test_lm_headline_names_each_models_epochs_when_they_differ():
    lm_headline = load_script("benchmarks", "headlines").lm_headline
    row = {"parameters": 4000, "epochs_trained": 15}
    same = [
        row | {"model": "lstm", "test_perplexity": 120.0},
        row | {"model": "ngram", "test_perplexity": 110.04, "parameters": 3990},
    ]
    assert lm_headline(same) == (
        "PTB word-level test perplexity, equal parameter budget (the LSTM's 4,000 weights), "
        "15 epochs",
        "ngram 110.0, lstm 120.0",
    )
    # Without the LSTM's row, the best model's count.
    assert "budget (3,990 weights)" in lm_headline(same[1:])[0]
    mixed = [same[0] | {"epochs_trained": 40}, same[1]]
    comparison, result = lm_headline(mixed)
    assert comparison.endswith("each model's epochs in brackets")
    assert result == "ngram 110.0 (15 epochs), lstm 120.0 (40 epochs)"
