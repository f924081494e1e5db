"""examples/ptb_memory_lm.py end to end on tiny settings."""

import importlib.util
import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.support import REPO_ROOT, assert_hparams_named_as_options, logged_hparams

SPEC = importlib.util.spec_from_file_location(
    "ptb_memory_lm", REPO_ROOT / "examples" / "ptb_memory_lm.py"
)
example = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(example)

TINY = [
    "--generated-tokens",
    "1500",
    "--units",
    "16",
    "--embedding-dim",
    "8",
    "--batch-size",
    "4",
    "--sequence-length",
    "10",
    "--window",
    "3",
    "--no-jit",
    "--verbose",
    "0",
]


def _metrics_line(captured):
    lines = [line for line in captured.out.splitlines() if line.startswith("METRICS ")]
    assert len(lines) == 1
    return json.loads(lines[0][len("METRICS ") :])


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        example.parse_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in (
        "--model",
        "--data-dir",
        "--form",
        "--strategy",
        "--workdir",
        "--tie-weights",
        "--config",
        "--optimizer",
        "--lr-decay",
        "--loss-reduction",
    ):
        assert option in text
    assert "key_value_predict" in text and "zaremba-small" in text


def test_generated_default_end_to_end(tmp_path, capsys):
    workdir = tmp_path / "run"
    argv = [*TINY, "--model", "attention", "--epochs", "1", "--workdir", str(workdir)]
    metrics = example.main(argv)
    assert _metrics_line(capsys.readouterr()) == json.loads(json.dumps(metrics))
    assert metrics["corpus"] == "generated" and metrics["model"] == "attention"
    corpus = example.load_data(example.parse_args(TINY))
    assert metrics["valid_tokens"] == corpus.valid.num_tokens - 1
    assert metrics["test_tokens"] == corpus.test.num_tokens - 1
    for split in ("valid", "test"):
        assert 1.0 < metrics[f"{split}_perplexity"] < len(corpus.vocabulary)
    assert (workdir / "best.keras").is_file() and (workdir / "last.keras").is_file()
    tags = set()
    for path in (workdir / "logs").rglob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            tags.update(v.tag for v in tf.compat.v1.Event.FromString(record.numpy()).summary.value)
    assert {"window_attention/probe_sentence", "window_attention/average_by_position"} <= tags
    assert {"epoch_loss", "epoch_perplexity", "epoch_learning_rate"} <= tags
    hparams, scalars = logged_hparams(str(workdir / "logs"))
    assert hparams["model"] == "attention" and hparams["source"] == "generated"
    assert_hparams_named_as_options(hparams, example.parse_args(argv))
    assert hparams["learning_rate"] == pytest.approx(1e-3) and hparams["units"] == 16
    assert scalars["test_perplexity"] == pytest.approx(metrics["test_perplexity"])


class _Interrupt(keras.callbacks.Callback):
    """Stops a run in the middle of its second epoch, as a crash would."""

    def on_train_batch_begin(self, batch, logs=None):
        if self._epoch == 1 and batch == 3:
            raise KeyboardInterrupt("simulated interruption")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch


def _saved_weights(workdir):
    model = keras.saving.load_model(workdir / "last.keras")
    return {w.path: w.numpy() for w in model.weights}


def test_resume_after_interruption_matches_an_uninterrupted_run(tmp_path, capsys):
    # SGD with the per-epoch decay: the resumed run must also continue the schedule.
    argv = [
        *TINY,
        "--model",
        "key_value",
        "--epochs",
        "2",
        "--config",
        "zaremba-small",
        "--full-rate-epochs",
        "1",
    ]
    straight = example.main([*argv, "--workdir", str(tmp_path / "straight")])
    args = example.parse_args([*argv, "--workdir", str(tmp_path / "resumed")])
    with pytest.raises(KeyboardInterrupt):
        example.run(args, extra_callbacks=[_Interrupt()])
    resumed = example.main([*argv, "--workdir", str(tmp_path / "resumed")])
    assert straight["epochs_run_now"] == 2 and resumed["epochs_run_now"] == 1
    # The resumed epoch runs at the halved rate (a restarted schedule would run it at 1).
    assert resumed["last_epoch_learning_rate"] == straight["last_epoch_learning_rate"] == 0.5
    # Weights, optimizer state and epoch are restored; the carried memory starts the epoch
    # from zero in both runs, so the weights after the last step are the same.
    expected = _saved_weights(tmp_path / "straight")
    got = _saved_weights(tmp_path / "resumed")
    assert expected.keys() == got.keys()
    for path, value in expected.items():
        np.testing.assert_allclose(got[path], value, rtol=1e-6, atol=1e-7, err_msg=path)
    for key in ("valid_perplexity", "test_perplexity"):
        np.testing.assert_allclose(resumed[key], straight[key], rtol=1e-5)


def test_config_sets_defaults_and_explicit_options_win():
    args = example.parse_args(["--config", "zaremba-small"])
    assert (args.model, args.layers, args.units, args.embedding_dim) == ("lstm", 2, 200, 200)
    assert (args.optimizer, args.learning_rate, args.lr_decay, args.full_rate_epochs) == (
        "sgd",
        1.0,
        0.5,
        4,
    )
    assert (args.epochs, args.batch_size, args.sequence_length, args.clip_norm) == (13, 20, 20, 5.0)
    assert (args.loss_reduction, args.forget_bias, args.init_scale) == ("sum_over_time", 0.0, 0.1)
    mixed = example.parse_args(["--model", "ngram", "--config", "zaremba-medium", "--epochs", "2"])
    assert (mixed.model, mixed.epochs, mixed.units, mixed.dropout) == ("ngram", 2, 650, 0.5)
    plain = example.parse_args([])
    assert (plain.optimizer, plain.model, plain.loss_reduction) == (
        "adam",
        "attention",
        "token_mean",
    )
    assert plain.full_rate_epochs is None


def test_bad_config_and_decay_are_rejected(capsys):
    for argv, fragment in (
        (["--config", "zaremba-tiny"], "--config: invalid choice"),
        (["--lr-decay", "1.5"], "--lr-decay: must be a finite number in (0, 1], got '1.5'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            example.parse_args(argv)
        assert exit_info.value.code == 2
        assert fragment in capsys.readouterr().err


def test_data_dir_in_ptb_format_with_cell_form(tmp_path, capsys):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)] + ["<unk>"]
    for split, lines in (("train", 300), ("valid", 40), ("test", 40)):
        text = "".join(" " + " ".join(rng.choice(words, 8)) + " \n" for _ in range(lines))
        (tmp_path / f"ptb.{split}.txt").write_text(text)
    metrics = example.main(
        [
            *TINY,
            "--model",
            "ngram",
            "--form",
            "cell",
            "--units",
            "18",
            "--epochs",
            "1",
            "--data-dir",
            str(tmp_path),
            "--workdir",
            str(tmp_path / "run"),
        ]
    )
    assert metrics["corpus"] == "ptb" and metrics["form"] == "cell"
    assert metrics["vocabulary"] == 32  # 30 words, <unk>, <eos>
    assert metrics["valid_tokens"] == 40 * 9 - 1
    assert math.isfinite(metrics["test_perplexity"])


def test_bad_data_dir_is_reported(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        example.main([*TINY, "--data-dir", str(tmp_path), "--workdir", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "ptb.train.txt" in error and "wiki.train.tokens" in error and "cbt_test.txt" in error


def test_a_finished_run_generates_from_its_trained_model(tmp_path, capsys):
    workdir = tmp_path / "run"
    argv = [*TINY, "--model", "key_value", "--epochs", "1", "--workdir", str(workdir)]
    trained = example.main(argv)
    assert "generation" not in trained
    corpus = example.load_data(example.parse_args(TINY))
    prompt = " ".join(corpus.vocabulary.decode(corpus.valid.ids[:3]))
    generating = [*argv, "--generate", "6", "--prompt", prompt, "--temperature", "0"]
    # The same run (the generation options do not change it): nothing left to train.
    metrics = example.main(generating)
    assert metrics["workdir"] == trained["workdir"] and metrics["epochs_run_now"] == 0
    assert metrics["test_perplexity"] == pytest.approx(trained["test_perplexity"])
    words = metrics["generation"]["generated"].split()
    assert metrics["generation"]["prompt"] == prompt and len(words) == 6
    assert f"{prompt} >> {metrics['generation']['generated']}" in capsys.readouterr().out
    # The most likely words of the trained model, read back from its best checkpoint.
    model = keras.saving.load_model(workdir / "last.keras")
    from tf_memlayers.models import build_step_model, generate

    expected = generate(
        build_step_model(model), corpus.vocabulary.encode(prompt.split())[None], 6, temperature=0
    )
    assert words == corpus.vocabulary.decode(expected[0])


def _write_ptb_files(folder, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)] + ["<unk>"]
    for split, lines in (("train", 300), ("valid", 40), ("test", 40)):
        text = "".join(" " + " ".join(rng.choice(words, 8)) + " \n" for _ in range(lines))
        (folder / f"ptb.{split}.txt").write_text(text)


def test_pack_on_one_document_trains_and_scores_as_padding_does(tmp_path, capsys):
    # PTB is one document: packing changes nothing in the batches, and the model with
    # in-graph resets has the same weights as the plain one, so the runs agree.
    _write_ptb_files(tmp_path)
    argv = [*TINY, "--model", "lstm", "--epochs", "1", "--data-dir", str(tmp_path)]
    padded = example.main([*argv, "--workdir", str(tmp_path / "padded")])
    packed = example.main([*argv, "--pack", "--workdir", str(tmp_path / "packed")])
    assert packed["pack"] and not padded["pack"]
    assert packed["train_padding_fraction"] == padded["train_padding_fraction"]
    assert packed["valid_tokens"] == padded["valid_tokens"] == 40 * 9 - 1
    for key in ("valid_perplexity", "test_perplexity"):
        np.testing.assert_allclose(packed[key], padded[key], rtol=1e-5)


def test_pack_trains_attention_on_documents_back_to_back(tmp_path, capsys):
    argv = [
        *TINY,
        "--model",
        "attention",
        "--epochs",
        "1",
        "--pack",
        "--generate",
        "3",
        "--workdir",
        str(tmp_path / "run"),
    ]
    metrics = example.main(argv)
    assert len(metrics["generation"]["generated"].split()) == 3  # the step model of it
    corpus = example.load_data(example.parse_args(TINY))
    assert corpus.train.num_documents > 1 and metrics["pack"]
    assert metrics["train_tokens_per_epoch"] == corpus.train.num_tokens - 1
    assert metrics["valid_tokens"] == corpus.valid.num_tokens - 1
    for split in ("valid", "test"):
        assert 1.0 < metrics[f"{split}_perplexity"] < len(corpus.vocabulary)
    model = keras.saving.load_model(tmp_path / "run" / "last.keras")
    assert set(model.input) == {"tokens", "reset"}


def test_mixed_precision_trains_in_float16_and_names_its_own_run(tmp_path, capsys):
    argv = [*TINY, "--model", "key_value", "--epochs", "1", "--mixed-precision"]
    metrics = example.main([*argv, "--workdir", str(tmp_path / "run")])
    model = keras.saving.load_model(tmp_path / "run" / "last.keras")
    assert model.get_layer("embedding").dtype_policy.name == "mixed_float16"
    corpus = example.load_data(example.parse_args(TINY))
    for split in ("valid", "test"):
        assert 1.0 < metrics[f"{split}_perplexity"] < len(corpus.vocabulary)

    # Like --pack, an option added after runs were named: only a run that gives it changes.
    def settings(argv):
        return example.resolved_settings(
            example.parse_args(argv),
            {"corpus": "generated"},
            example.PTB_RUN_OPTIONS,
            example.PTB_ADDED_OPTIONS,
        )

    assert settings(argv)["mixed_precision"] is True
    assert "mixed_precision" not in settings(TINY)


def test_pack_names_its_own_run_directory_and_leaves_the_others_as_they_were():
    from examples.harness.run_directory import resolved_settings, run_workdir

    def workdir(argv):
        args = example.parse_args(argv)
        return run_workdir(
            args,
            example.DEFAULT_ROOT,
            args.model,
            example.PTB_RUN_OPTIONS,
            resolved={"corpus": "ptb"},
            added_options=example.PTB_ADDED_OPTIONS,
        )

    plain = example.parse_args(["--model", "lstm"])
    settings = resolved_settings(
        plain, {"corpus": "ptb"}, example.PTB_RUN_OPTIONS, example.PTB_ADDED_OPTIONS
    )
    # Without --pack (or another added option) the settings, and so the digest, are those of
    # the options before them.
    assert "pack" not in settings
    assert settings == resolved_settings(
        {k: v for k, v in vars(plain).items() if k not in example.PTB_ADDED_OPTIONS},
        {"corpus": "ptb"},
        example.PTB_RUN_OPTIONS,
    )
    packed = workdir(["--model", "lstm", "--pack"])
    assert "pack=True" in packed and packed != workdir(["--model", "lstm"])
    assert workdir(["--model", "lstm"]) == workdir(["--model", "lstm"])
