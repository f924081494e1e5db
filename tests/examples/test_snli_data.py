"""SNLI data chain: every source parses the same pairs into the same examples."""

import json
import sys
import types
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from examples.harness.data import embeddings

# (premise, hypothesis, gold label) as in the official release; "-" pairs are dropped.
from examples.snli import generated_nli, nli_batches, nli_examples, snli

# (premise, hypothesis, gold label) as in the official release; "-" pairs are dropped.
RAW = [
    (
        "Two women are embracing while holding to go packages.",
        "Two woman are holding packages.",
        "entailment",
    ),
    ("A man doesn't wear a hat, it's sunny.", "The man's head is bare.", "neutral"),
    ("Children smiling and waving at camera", "There are children present", "-"),
    ("A dog runs (fast) on the beach!", "The cat sleeps.", "contradiction"),
]
# InferSent-style pre-tokenised versions of the same pairs (gold "-" already removed).
INFERSENT = [
    (
        "Two women are embracing while holding to go packages .",
        "Two woman are holding packages .",
        "entailment",
    ),
    ("A man does n't wear a hat , it 's sunny .", "The man 's head is bare .", "neutral"),
    ("A dog runs ( fast ) on the beach !", "The cat sleeps .", "contradiction"),
]


def _write_official(directory):
    lines = [json.dumps({"sentence1": p, "sentence2": h, "gold_label": y}) for p, h, y in RAW]
    header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    header += "sentence2_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1"
    rows = [header] + [f"{y}\t(x)\t(y)\t(X)\t(Y)\t{p}\t{h}\tc\tp\t{y}" for p, h, y in RAW]
    for split in nli_examples.SPLITS:
        (directory / "jsonl").mkdir(exist_ok=True)
        (directory / "txt").mkdir(exist_ok=True)
        (directory / "jsonl" / f"snli_1.0_{split}.jsonl").write_text("\n".join(lines) + "\n")
        (directory / "txt" / f"snli_1.0_{split}.txt").write_text("\n".join(rows) + "\n")
    with zipfile.ZipFile(directory / "snli_1.0.zip", "w") as archive:
        for split in nli_examples.SPLITS:
            archive.writestr(f"snli_1.0/snli_1.0_{split}.jsonl", "\n".join(lines) + "\n")


def _write_infersent(directory):
    directory.mkdir(exist_ok=True)
    for split in nli_examples.SPLITS:
        for prefix, column in (("s1", 0), ("s2", 1), ("labels", 2)):
            text = "\n".join(row[column] for row in INFERSENT) + "\n"
            (directory / f"{prefix}.{split}").write_text(text)


def _tfds_dataset():
    return tf.data.Dataset.from_tensor_slices(
        {
            "premise": [p for p, _, _ in RAW],
            "hypothesis": [h for _, h, _ in RAW],
            "label": [
                {"entailment": 0, "neutral": 1, "contradiction": 2, "-": -1}[y] for *_, y in RAW
            ],
        }
    )


EXPECTED = [
    nli_examples.NLIExample(
        tuple("two women are embracing while holding to go packages .".split()),
        tuple("two woman are holding packages .".split()),
        0,
    ),
    nli_examples.NLIExample(
        tuple("a man does n't wear a hat , it 's sunny .".split()),
        tuple("the man 's head is bare .".split()),
        1,
    ),
    nli_examples.NLIExample(
        tuple("a dog runs ( fast ) on the beach !".split()),
        tuple("the cat sleeps .".split()),
        2,
    ),
]


def test_every_source_gives_identical_examples(tmp_path, monkeypatch):
    _write_official(tmp_path)
    _write_infersent(tmp_path / "infersent")
    results = {
        "jsonl": snli.read_files(tmp_path / "jsonl", "dev"),
        "txt": snli.read_files(tmp_path / "txt", "dev"),
        "zip": snli.read_files(str(tmp_path / "snli_1.0.zip"), "dev"),
        "infersent": snli.read_files(tmp_path / "infersent", "dev"),
        "tfds_records": snli.examples_from_tfds(_tfds_dataset()),
    }
    calls = []

    def fake_load(name, split, download, data_dir):
        calls.append((name, split, download, data_dir))
        return _tfds_dataset()

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", types.SimpleNamespace(load=fake_load))
    results["tfds"] = snli.read_tfds("dev", data_dir="/somewhere")
    assert calls == [("snli", "validation", False, "/somewhere")]
    for name, examples in results.items():
        assert examples == EXPECTED, name


def test_the_chain_prefers_data_dir_then_tfds_then_generated(tmp_path, monkeypatch):
    _write_infersent(tmp_path / "infersent")
    splits, source = snli.load_nli_splits(data_dir=tmp_path / "infersent")
    assert source == "files" and splits["test"] == EXPECTED
    monkeypatch.setitem(
        sys.modules,
        "tensorflow_datasets",
        types.SimpleNamespace(load=lambda name, split, download, data_dir: _tfds_dataset()),
    )
    splits, source = snli.load_nli_splits()
    assert source == "tfds" and splits["train"] == EXPECTED

    def not_prepared(name, split, download, data_dir):
        raise AssertionError("Dataset snli: could not find data in ~/tensorflow_datasets")

    monkeypatch.setitem(
        sys.modules, "tensorflow_datasets", types.SimpleNamespace(load=not_prepared)
    )
    splits, source = snli.load_nli_splits(train_size="small")
    assert source == "generated"
    assert [len(splits[s]) for s in nli_examples.SPLITS] == list(
        generated_nli.GENERATED_SIZES["small"]
    )
    with pytest.raises(FileNotFoundError, match="not prepared"):
        snli.load_nli_splits(source="tfds")
    with pytest.raises(FileNotFoundError, match="neither SNLI 1.0 files"):
        snli.load_nli_splits(data_dir=tmp_path)


def test_real_snli_dev_counts(shared_data):
    directory = shared_data / "snli" / "esnli_infersent_format"
    if not directory.is_dir():
        pytest.skip(f"{directory} not available")
    dev = snli.read_files(directory, "dev")
    assert len(dev) == 9842
    counts = np.bincount([e.label for e in dev], minlength=3)
    assert counts.tolist() == [3329, 3235, 3278]  # entailment, neutral, contradiction
    assert dev[0].premise[:3] == ("two", "women", "are")


def test_generated_corpus_is_balanced_deterministic_and_needs_recall():
    corpus = generated_nli.generate_recall_corpus(600, seed=3)
    assert corpus == generated_nli.generate_recall_corpus(600, seed=3)
    assert corpus != generated_nli.generate_recall_corpus(600, seed=4)
    assert np.bincount([e.label for e in corpus]).tolist() == [200, 200, 200]
    colours, entities = set(generated_nli._COLOURS), set(generated_nli._ENTITIES)
    recall_needed = 0
    for example in corpus:
        facts = {}
        for i, word in enumerate(example.premise[:-1]):
            if word in colours and example.premise[i + 1] in entities:
                facts[example.premise[i + 1]] = word
        entity = next(w for w in example.hypothesis if w in entities)
        colour = next(w for w in example.hypothesis if w in colours)
        if entity not in facts:
            assert example.label == 1
        elif facts[entity] == colour:
            assert example.label == 0
        else:
            assert example.label == 2
            recall_needed += colour in facts.values()
    # Many contradictions use a colour that IS in the premise: bags of words cannot decide.
    assert recall_needed > 30


def test_vocabulary_and_datasets(tmp_path):
    train = generated_nli.generate_recall_corpus(120, seed=1)
    vocabulary = nli_batches.build_vocabulary(train)
    assert vocabulary[:2] == ["<pad>", "<unk>"] and len(set(vocabulary)) == len(vocabulary)
    seen = {}
    for padding in nli_batches.PADDINGS:
        dataset = nli_batches.make_dataset(train, vocabulary, batch_size=16, padding=padding)
        pairs = []
        batches = 0
        for (p, h), y in dataset:
            batches += 1
            if padding == "bucket":  # one (premise, hypothesis) pair of 8-step buckets
                for ids in (p, h):
                    lengths = np.count_nonzero(ids.numpy(), axis=1)
                    buckets = {(max(n, 1) - 1) // 8 for n in lengths}
                    assert len(buckets) == 1 and ids.shape[1] == 8 * (buckets.pop() + 1)
            else:
                assert p.shape[1] == h.shape[1]
            for i in range(len(y)):
                pairs.append(
                    (tuple(p[i][p[i] > 0].numpy()), tuple(h[i][h[i] > 0].numpy()), int(y[i]))
                )
        assert batches == int(dataset.cardinality())
        seen[padding] = sorted(pairs)
    assert seen["bucket"] == seen["fixed"] and len(seen["fixed"]) == 120


def test_word_vectors_from_glove_text_and_json(tmp_path):
    vectors = {"the": [0.1, 0.2, 0.3], "cat": [1.0, -1.0, 0.5]}
    (tmp_path / "v.json").write_text(json.dumps(vectors))
    (tmp_path / "v.txt").write_text(
        "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items())
    )
    vocabulary = ["<pad>", "<unk>", "the", "cat", "dog"]
    matrices = []
    for name in ("v.json", "v.txt"):
        loaded = embeddings.load_word_vectors(tmp_path / name, vocabulary=set(vocabulary))
        matrix, found = embeddings.embedding_matrix(vocabulary, loaded, seed=0)
        assert found == 2 and matrix.shape == (5, 3)
        np.testing.assert_allclose(matrix[3], vectors["cat"])
        matrices.append(matrix)
    np.testing.assert_array_equal(matrices[0], matrices[1])


def test_glove_words_with_spaces_headers_and_bad_lines(tmp_path):
    # glove.840B.300d.txt has entries such as "to name@domain.com 0.1 ..."; fastText-style
    # files start with a "count dim" line.
    text = "5 3\nthe 0.1 0.2 0.3\nto name@domain.com 9 9 9\nto 1 2 3\ncat 0.5 oops 0.5\ncat 4 5 6\n"
    (tmp_path / "v.txt").write_text(text)
    loaded = embeddings.load_word_vectors(tmp_path / "v.txt", vocabulary={"the", "to", "cat"})
    assert sorted(loaded) == ["cat", "the", "to"]
    np.testing.assert_array_equal(loaded["to"], [1, 2, 3])
    np.testing.assert_array_equal(loaded["cat"], [4, 5, 6])
    everything = embeddings.load_word_vectors(tmp_path / "v.txt")
    np.testing.assert_array_equal(everything["to name@domain.com"], [9, 9, 9])


def test_capitalised_words_take_the_lowercase_vector(tmp_path):
    (tmp_path / "v.json").write_text(json.dumps({"the": [1.0, 2.0]}))
    vocabulary = ["<pad>", "<unk>", "The"]
    loaded = embeddings.load_word_vectors(tmp_path / "v.json", vocabulary=set(vocabulary))
    matrix, found = embeddings.embedding_matrix(vocabulary, loaded)
    assert found == 1
    np.testing.assert_array_equal(matrix[2], [1.0, 2.0])


def test_no_vector_for_the_vocabulary_is_an_error(tmp_path):
    (tmp_path / "v.json").write_text(json.dumps({"the": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="No word vectors found in .* for any of the 2 vocab"):
        embeddings.load_word_vectors(tmp_path / "v.json", vocabulary={"cat", "dog"})


def test_missing_tensorflow_datasets_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # as if not installed
    with pytest.raises(ImportError, match=r"tf-memlayers\[datasets\]"):
        snli.read_tfds("dev")
    with pytest.raises(ImportError, match="datasets"):
        snli.load_nli_splits("tfds", None, None, "small")


class _FakeTfds:
    """tensorflow-datasets as seen by `read_tfds`: records what `load` was asked."""

    def __init__(self, prepared):
        self.prepared, self.calls = prepared, []

    def load(self, name, split, download, data_dir):
        self.calls.append((name, split, download, data_dir))
        if not (self.prepared or download):
            raise AssertionError("Dataset snli: could not find data in /nowhere")
        if not self.prepared:
            raise ConnectionError("no route to host")
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(
            {"premise": [b"A man sleeps ."], "hypothesis": [b"A man rests ."], "label": [0]}
        )


def test_tfds_downloads_only_when_asked(monkeypatch):
    fake = _FakeTfds(prepared=True)
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
    splits, source = snli.load_nli_splits("auto", download=True, tfds_data_dir="/tfds")
    assert source == "tfds" and len(splits["dev"]) == 1
    assert [call[1:] for call in fake.calls] == [
        ("train", True, "/tfds"),
        ("validation", True, "/tfds"),
        ("test", True, "/tfds"),
    ]
    fake.calls.clear()
    snli.load_nli_splits("auto")
    assert {call[2] for call in fake.calls} == {False}


def test_a_failed_download_is_an_error_not_the_generated_corpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", _FakeTfds(prepared=False))
    assert snli.load_nli_splits("auto", train_size="small")[1] == "generated"
    with pytest.raises(OSError, match="could not download and prepare `snli`: no route"):
        snli.load_nli_splits("auto", download=True)
    with pytest.raises(FileNotFoundError, match="not prepared .*download"):
        snli.read_tfds("dev")
    with pytest.raises(ValueError, match="download=True.*source='generated'"):
        snli.load_nli_splits("generated", download=True)
    with pytest.raises(ValueError, match="download=True.*data_dir='/data'"):
        snli.load_nli_splits("auto", data_dir="/data", download=True)


def test_real_glove_subset(shared_data):
    path = shared_data / "glove_subset" / "glove-50d-5k.json"
    if not path.exists():
        pytest.skip(f"{path} not available")
    loaded = embeddings.load_word_vectors(path, vocabulary={"the", "cat", "zzzzq"})
    assert set(loaded) == {"the", "cat"} and loaded["the"].shape == (50,)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="empty"):
        nli_batches.build_vocabulary([])
    with pytest.raises(ValueError, match="empty"):
        nli_batches.make_dataset([], ["<pad>", "<unk>"])
    with pytest.raises(ValueError, match="outside the three classes"):
        nli_examples.label_id(3)
    with pytest.raises(ValueError, match="Unknown label 'maybe'"):
        nli_examples.make_example("a b", "c d", "maybe")
    bad = [nli_examples.NLIExample(("a",), ("b",), 5)]
    with pytest.raises(ValueError, match="outside the three classes"):
        nli_batches.make_dataset(bad, ["<pad>", "<unk>", "a", "b"])
    with pytest.raises(ValueError, match="padding"):
        nli_batches.make_dataset(EXPECTED, nli_batches.build_vocabulary(EXPECTED), padding="ragged")
