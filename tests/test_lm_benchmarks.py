"""The language-model benchmark scripts' own arithmetic (the runs themselves are long)."""

import importlib.util
import json

from conftest import REPO_ROOT

from tf_memlayers.models.language_model import build_language_model


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
