"""End-to-end runs of examples/snli_dual_am_gru.py on a tiny setting (killed and resumed, and
what a run logs for TensorBoard: tests/examples/test_kill_resume.py)."""

import importlib.util
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import REPO_ROOT, assert_hparams_named_as_options, logged_hparams, summary_events

SCRIPT = REPO_ROOT / "examples" / "snli_dual_am_gru.py"
TINY = [
    "--train-size",
    "small",
    "--max-train",
    "100",
    "--units",
    "8",
    "--num-copies",
    "2",
    "--embedding-dim",
    "8",
    "--eval-every",
    "2",
    "--batch-size",
    "25",
    "--verbose",
    "0",
    "--padding",
    "fixed",
]


def _load_example():
    spec = importlib.util.spec_from_file_location("snli_dual_am_gru", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "argv,fused",
    [
        ([], True),
        (["--model", "am_gru"], True),
        (["--dual-key", "released"], False),
        (["--model", "gru"], False),
        (["--no-fused-loop"], False),
        (["--fused-loop"], True),
        (["--model", "am_gru", "--no-fused-loop"], False),
        (["--model", "word_by_word"], False),
    ],
)
def test_the_fused_loop_is_the_default_where_it_applies(argv, fused):
    example = _load_example()
    args = example.parse_args(argv + ["--units", "8", "--num-copies", "2"])
    model = example.build_model(args, 20, None, 0.05)
    assert example.runs_fused_loop(model) is fused
    # The option reaches the layers as given; without it the layers choose ("auto").
    first = model.get_layer("encoder").encoder_layers[0]
    given = {"--fused-loop": True, "--no-fused-loop": False}
    expected = next((given[flag] for flag in argv if flag in given), "auto")
    # The GRU and the word-by-word encoder have no such option.
    assert getattr(first, "fused_loop", "auto") == expected


class _TrainingBegan(Exception):
    pass


class _StopAtTrainBegin(keras.callbacks.Callback):
    """Ends a run as training begins, when its run directory holds its settings."""

    def on_train_begin(self, logs=None):
        raise _TrainingBegan


def test_default_run_directory_is_one_per_configuration(tmp_path, monkeypatch):
    example = _load_example()
    monkeypatch.chdir(tmp_path)
    # The plain GRU model: the run directory does not depend on the model's kind of layer.
    argv = TINY + ["--epochs", "1", "--model", "gru"]
    parent = os.path.join("runs", "snli_dual_am_gru")
    with pytest.raises(_TrainingBegan):
        example.main(argv, extra_callbacks=[_StopAtTrainBegin()])
    (first,) = os.listdir(parent)
    with pytest.raises(_TrainingBegan):
        example.main(argv + ["--units", "10"], extra_callbacks=[_StopAtTrainBegin()])
    assert len(set(os.listdir(parent)) - {first}) == 1  # the wider model's own directory
    with pytest.raises(ValueError, match="--model: 'gru' there, 'dual_am_gru' now"):
        example.main(TINY + ["--epochs", "1", "--workdir", os.path.join(parent, first)])


def assert_logged_settings_and_metrics(workdir, metrics, args):
    """What a two-epoch run of the Dual AM-GRU on the generated data (``TINY``) logs for
    TensorBoard: the learning rate of each epoch, the resolved settings as HParams under the
    options' names, the final metrics, and the memory's retrievals. Checked on the straight
    run of `tests.examples.test_kill_resume`'s SNLI test, which trains that run."""
    hparams, scalars = logged_hparams(os.path.join(workdir, "logs"))
    # TensorBoard's learning rate of each epoch is the one it ran with, as in the history,
    # also where the rule halves it: the tiny model's dev accuracy stays flat, so after epoch
    # 2 (the first it can compare) the rate is halved for an epoch that never runs.
    events = summary_events(os.path.join(workdir, "logs", "train"))
    logged = [
        (step, float(tf.make_ndarray(value.tensor)))
        for step, value in events["epoch_learning_rate"]
    ]
    used = metrics["history"]["learning_rate"]
    assert [step for step, _ in logged] == [0, 1]
    np.testing.assert_allclose([rate for _, rate in logged], used, rtol=1e-6)
    assert used == [pytest.approx(3e-3)] * 2
    last = keras.saving.load_model(os.path.join(workdir, "last.keras"))
    assert float(last.optimizer.learning_rate) == pytest.approx(used[-1] / 2)
    # The options left at None are logged with the values the run used on the generated data.
    assert hparams["learning_rate"] == pytest.approx(3e-3)
    assert hparams["init_scale"] == pytest.approx(0.2)
    assert hparams["source"] == "generated" and hparams["model"] == "dual_am_gru"
    assert hparams["units"] == 8 and hparams["num_copies"] == 2
    assert_hparams_named_as_options(hparams, args)
    assert metrics["model"] == "dual_am_gru"
    assert scalars["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    # The Dual AM-GRU draws its memory's retrievals; it has no attention to draw.
    assert os.listdir(os.path.join(workdir, "logs", "memory"))
    assert not os.path.exists(os.path.join(workdir, "logs", "attention"))


def test_the_word_by_word_model_draws_where_the_hypothesis_attends(tmp_path):
    example = _load_example()
    workdir = tmp_path / "run"
    example.main(TINY + ["--model", "word_by_word", "--epochs", "1", "--workdir", str(workdir)])
    events = summary_events(workdir / "logs" / "attention")
    assert [step for step, _ in events["attention/alignment"]] == [0]
    assert not (workdir / "logs" / "memory").exists()
