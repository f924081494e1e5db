"""The language-model benchmark scripts' own arithmetic (the runs themselves are long)."""

import importlib.util
import json

from conftest import REPO_ROOT

from tf_memlayers.models.language_model import (
    build_language_model,
)
from tf_memlayers.models.parameter_budget import count_language_model_parameters


def _load(name):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_flops_count_every_weight_matrix_but_the_embedding():
    throughput = _load("lm_throughput")
    vocab, embedding, hidden = 50, 6, 8
    model = build_language_model(
        vocab, kind="lstm", hidden=hidden, embedding_dim=embedding, layers=2, stateful=False
    )
    lstm = lambda inputs: 4 * hidden * (inputs + hidden)  # noqa: E731  kernel + recurrent
    forward_per_token = 2 * (lstm(embedding) + lstm(hidden) + hidden * vocab)
    assert throughput.training_flops_per_token(model) == 3 * forward_per_token


def test_real_data_report_keeps_rows_only_for_the_same_settings(tmp_path):
    real_data = _load("lm_real_data")
    settings = {"epochs": 1, "hidden": 200}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    assert real_data.saved_rows(str(path), settings) == [{"model": "lstm"}]
    assert real_data.saved_rows(str(path), dict(settings, epochs=2)) == []
    assert real_data.saved_rows(str(tmp_path / "missing.json"), settings) == []


def test_equal_budget_report_is_resumed_only_with_the_same_settings(tmp_path):
    equal_budget = _load("lm_equal_budget")
    settings = {"max_epochs": 15, "dropout": 0.4}
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"settings": settings, "rows": [{"model": "lstm"}]}))
    assert equal_budget.read_report(path, settings)["rows"] == [{"model": "lstm"}]
    assert equal_budget.read_report(path, dict(settings, dropout=0.5)) is None
    assert equal_budget.read_report(tmp_path / "missing.json", settings) is None


def test_equal_budget_widths_give_every_kind_the_lstm_parameter_count():
    equal_budget = _load("lm_equal_budget")
    args = equal_budget.parse_args(["--hidden", "20", "--embedding-dim", "10"])
    kinds = ("lstm", "key_value_predict", "ngram")
    widths = equal_budget.widths(100, kinds, args)
    common = dict(embedding_dim=10, window=args.window, ngram=args.ngram)
    budget = count_language_model_parameters(100, kind="lstm", hidden=20, **common)
    assert widths["lstm"] == 20
    for kind in kinds[1:]:
        multiple = 3 if kind == "key_value_predict" else args.ngram - 1
        counts = {
            hidden: count_language_model_parameters(100, kind=kind, hidden=hidden, **common)
            for hidden in (widths[kind] - multiple, widths[kind], widths[kind] + multiple)
        }
        assert min(counts, key=lambda h: abs(counts[h] - budget)) == widths[kind]


def test_equal_budget_caption_names_the_models_the_epoch_cap_stopped():
    equal_budget = _load("lm_equal_budget")
    rows = [
        {"model": "lstm", "epochs_trained": 15, "best_epoch": 15},  # capped, still improving
        {"model": "ngram", "epochs_trained": 9, "best_epoch": 7},  # stopped early
        {"model": "key_value", "epochs_trained": 15, "best_epoch": 13},  # capped, had stalled
    ]
    note = equal_budget.capped_note(rows, 15)
    assert "15-epoch cap" in note and note.endswith("still improving: lstm.")
    assert equal_budget.capped_note(rows[1:], 15) == ""
