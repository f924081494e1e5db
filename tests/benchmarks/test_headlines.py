"""The headline results (README.rst, and the top of the results page) from the benchmarks'
results files (tests/benchmarks/test_results_page.py checks that the pages hold them)."""

from benchmarks import headlines


def test_headlines_open_the_results_page_and_name_every_papers_models():
    results = headlines.RESULTS_PAGE.read_text(encoding="utf-8")
    assert results.index("BEGIN GENERATED:") == results.index("BEGIN GENERATED: headlines")
    rows = headlines.rows()
    assert [row["paper"] for row in rows] == [
        "Daniluk et al. 2017",
        "Weissenborn 2016",
        "Weissenborn 2016",
        "Gaffney",
    ]
    models = [
        ("lstm", "attention", "key_value", "key_value_predict", "ngram"),
        ("gru", "am_gru", "dual_am_gru", "word_by_word"),
        ("dual_am_gru", "attention", "gru"),
        ("no attention", "attention pooling", "attention + cache 1,000"),
    ]
    for row, names in zip(rows, models):
        assert all(f"{name} " in row["result"] for name in names), row


def test_lm_headline_names_each_models_epochs_when_they_differ():
    row = {"parameters": 4000, "epochs_trained": 15}
    same = [
        row | {"model": "lstm", "test_perplexity": 120.0},
        row | {"model": "ngram", "test_perplexity": 110.04, "parameters": 3990},
    ]
    assert headlines.lm_headline(same) == (
        "PTB word-level test perplexity, equal parameter budget (the LSTM's 4,000 weights), "
        "15 epochs",
        "ngram 110.0, lstm 120.0",
    )
    # Without the LSTM's row, the best model's count.
    assert "budget (3,990 weights)" in headlines.lm_headline(same[1:])[0]
    comparison, result = headlines.lm_headline([same[0] | {"epochs_trained": 40}, same[1]])
    assert comparison.endswith("each model's epochs in brackets")
    assert result == "ngram 110.0 (15 epochs), lstm 120.0 (40 epochs)"
