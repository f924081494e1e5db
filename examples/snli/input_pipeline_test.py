"""The SNLI example's data: every source gives the same pairs, the chain of sources, the
generated corpus, the batches, the word vectors, and a clear error for every bad file."""

import json
import os
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from . import corpora, input_pipeline, main

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
# InferSent's pre-tokenised versions of the same pairs (gold "-" already removed).
INFERSENT = [
    (
        "Two women are embracing while holding to go packages .",
        "Two woman are holding packages .",
        "entailment",
    ),
    ("A man does n't wear a hat , it 's sunny .", "The man 's head is bare .", "neutral"),
    ("A dog runs ( fast ) on the beach !", "The cat sleeps .", "contradiction"),
]
EXPECTED = [
    corpora.Pair(tuple(p.lower().split()), tuple(h.lower().split()), i)
    for i, (p, h, _) in enumerate(INFERSENT)
]


def _write_official(directory):
    lines = [json.dumps({"sentence1": p, "sentence2": h, "gold_label": y}) for p, h, y in RAW]
    header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    header += "sentence2_parse\tsentence1\tsentence2\tcaptionID\tpairID\tlabel1"
    rows = [header] + [f"{y}\t(x)\t(y)\t(X)\t(Y)\t{p}\t{h}\tc\tp\t{y}" for p, h, y in RAW]
    (directory / "jsonl").mkdir()
    (directory / "txt").mkdir()
    with zipfile.ZipFile(directory / "snli_1.0.zip", "w") as archive:
        for split in corpora.SPLITS:
            (directory / "jsonl" / f"snli_1.0_{split}.jsonl").write_text("\n".join(lines) + "\n")
            text = "\ufeff" + "\n".join(rows) + "\n"  # as saved by a Windows editor
            (directory / "txt" / f"snli_1.0_{split}.txt").write_text(text, encoding="utf-8")
            archive.writestr(f"snli_1.0/snli_1.0_{split}.jsonl", "\n".join(lines) + "\n")


def _write_infersent(directory):
    directory.mkdir()
    for split in corpora.SPLITS:
        for prefix, column in (("s1", 0), ("s2", 1), ("labels", 2)):
            text = "\n".join(row[column] for row in INFERSENT) + "\n"
            (directory / f"{prefix}.{split}").write_text(text)


class FakeTfds:
    """tensorflow-datasets as `corpora.read_tfds` sees it: records what `load` was asked."""

    def __init__(self, prepared=True):
        self.prepared, self.calls = prepared, []

    def load(self, name, split, download, data_dir):
        self.calls.append((name, split, download, data_dir))
        if not (self.prepared or download):
            raise AssertionError("Dataset snli: could not find data in ~/tensorflow_datasets")
        if not self.prepared:
            raise ConnectionError("no route to host")
        labels = {"entailment": 0, "neutral": 1, "contradiction": 2, "-": -1}
        return tf.data.Dataset.from_tensor_slices(
            {
                "premise": [p for p, _, _ in RAW],
                "hypothesis": [h for _, h, _ in RAW],
                "label": [labels[y] for *_, y in RAW],
            }
        )


def test_every_source_gives_the_same_pairs(tmp_path, monkeypatch):
    _write_official(tmp_path)
    _write_infersent(tmp_path / "infersent")
    fake = FakeTfds()
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
    results = {
        "jsonl": corpora.read_files(tmp_path / "jsonl", "dev"),
        "txt": corpora.read_files(tmp_path / "txt", "dev"),
        "zip": corpora.read_files(str(tmp_path / "snli_1.0.zip"), "dev"),
        "infersent": corpora.read_files(tmp_path / "infersent", "dev"),
        "tfds": corpora.read_tfds("dev", data_dir="/somewhere"),
    }
    assert fake.calls == [("snli", "validation", False, "/somewhere")]
    (tmp_path / "zipped").mkdir()  # a folder of the archive alone reads the archive
    (tmp_path / "snli_1.0.zip").rename(tmp_path / "zipped" / "snli_1.0.zip")
    assert main.snli_files(str(tmp_path / "zipped")) == str(tmp_path / "zipped" / "snli_1.0.zip")
    for name, pairs in results.items():
        assert pairs == EXPECTED, name


def test_the_chain_prefers_data_dir_then_tfds_then_generated(tmp_path, monkeypatch):
    _write_infersent(tmp_path / "infersent")
    splits, source = input_pipeline.load_splits("auto", data_dir=tmp_path / "infersent")
    assert source == "files" and splits["test"] == EXPECTED
    fake = FakeTfds()
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
    splits, source = input_pipeline.load_splits("auto", tfds_data_dir="/tfds")
    assert source == "tfds" and splits["train"] == EXPECTED
    assert [call[1:] for call in fake.calls] == [
        ("train", False, "/tfds"),
        ("validation", False, "/tfds"),
        ("test", False, "/tfds"),
    ]
    fake.calls.clear()
    input_pipeline.load_splits("auto", download=True)  # prepared: loaded, asked to download
    assert {call[2] for call in fake.calls} == {True}

    monkeypatch.setitem(sys.modules, "tensorflow_datasets", FakeTfds(prepared=False))
    splits, source = input_pipeline.load_splits("auto", train_size="small")
    assert source == "generated"
    sizes = [len(splits[s]) for s in corpora.SPLITS]
    assert sizes == list(input_pipeline.GENERATED_SIZES["small"])
    # Not prepared: an error where tfds is asked for, or where it was to download.
    with pytest.raises(FileNotFoundError, match="not prepared .*--download"):
        input_pipeline.load_splits("tfds")
    with pytest.raises(OSError, match="could not download and prepare `snli`: no route"):
        input_pipeline.load_splits("auto", download=True)
    with pytest.raises(FileNotFoundError, match="holds no SNLI 1.0 files"):
        input_pipeline.load_splits("auto", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="missing is not a directory with SNLI 1.0"):
        input_pipeline.load_splits("auto", data_dir=tmp_path / "missing")
    monkeypatch.setitem(sys.modules, "tensorflow_datasets", None)  # as if not installed
    assert input_pipeline.load_splits("auto", train_size="small")[1] == "generated"
    with pytest.raises(ImportError, match="pip install tensorflow-datasets"):
        input_pipeline.load_splits("tfds")


def test_real_snli_dev(shared_data):
    directory = shared_data / "snli" / "esnli_infersent_format"
    if not directory.is_dir():
        pytest.skip(f"{directory} not available")
    dev = corpora.read_files(directory, "dev")
    assert len(dev) == 9842
    counts = np.bincount([pair.label for pair in dev], minlength=3)
    assert counts.tolist() == [3329, 3235, 3278]  # entailment, neutral, contradiction
    assert dev[0].premise[:3] == ("two", "women", "are")


def test_the_generated_corpus_is_balanced_reproducible_and_needs_recall():
    corpus = input_pipeline.generate_recall_corpus(600, seed=3)
    assert corpus == input_pipeline.generate_recall_corpus(600, seed=3)
    assert corpus != input_pipeline.generate_recall_corpus(600, seed=4)
    assert np.bincount([pair.label for pair in corpus]).tolist() == [200, 200, 200]
    colours, entities = set(input_pipeline._COLOURS), set(input_pipeline._ENTITIES)
    recall_needed = 0
    for pair in corpus:
        facts = {}
        for i, word in enumerate(pair.premise[:-1]):
            if word in colours and pair.premise[i + 1] in entities:
                facts[pair.premise[i + 1]] = word
        entity = next(w for w in pair.hypothesis if w in entities)
        colour = next(w for w in pair.hypothesis if w in colours)
        if entity not in facts:
            assert pair.label == 1
        elif facts[entity] == colour:
            assert pair.label == 0
        else:
            assert pair.label == 2
            recall_needed += colour in facts.values()
    # Many contradictions use a colour that IS in the premise: bags of words cannot decide.
    assert recall_needed > 30
    # Each split is drawn with its own seed: the dev and test pairs are not training pairs.
    splits = input_pipeline.generated_splits("small", seed=0)
    train = set(splits["train"])
    for split in ("dev", "test"):
        assert sum(pair in train for pair in splits[split]) < len(splits[split]) / 10


def test_bucketed_and_fixed_batches_hold_the_same_pairs():
    train = input_pipeline.generate_recall_corpus(120, seed=1)
    vocabulary = input_pipeline.build_vocabulary(train)
    assert vocabulary[:2] == ["<pad>", "<unk>"] and len(set(vocabulary)) == len(vocabulary)
    seen = {}
    for padding in input_pipeline.PADDINGS:
        dataset = input_pipeline.make_dataset(train, vocabulary, batch_size=16, padding=padding)
        pairs, batches = [], 0
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
    # Words the vocabulary lacks are <unk> (id 1); sentences are cut to max_length.
    (p, h), _ = next(iter(input_pipeline.make_dataset(EXPECTED, vocabulary, max_length=3)))
    assert p.shape[1] <= 8 and np.count_nonzero(p[0]) == 3 and 1 in p.numpy()


def test_word_vectors_from_glove_text_and_json(tmp_path):
    vectors = {"the": [0.1, 0.2, 0.3], "cat": [1.0, -1.0, 0.5]}
    (tmp_path / "v.json").write_text(json.dumps(vectors))
    (tmp_path / "v.txt").write_text(
        "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items())
    )
    vocabulary = ["<pad>", "<unk>", "the", "Cat", "dog"]
    matrices = []
    for name in ("v.json", "v.txt"):
        loaded = corpora.load_word_vectors(tmp_path / name, vocabulary=set(vocabulary))
        matrix, found = corpora.embedding_matrix(vocabulary, loaded, seed=0)
        assert found == 2 and matrix.shape == (5, 3)
        np.testing.assert_allclose(matrix[3], vectors["cat"])  # the lowercase form's vector
        matrices.append(matrix)
    np.testing.assert_array_equal(matrices[0], matrices[1])
    with pytest.raises(ValueError, match="No word vectors found in .* for any of the 2 vocab"):
        corpora.load_word_vectors(tmp_path / "v.json", vocabulary={"bird", "dog"})


def test_glove_words_with_spaces_headers_and_bad_values(tmp_path):
    # glove.840B.300d.txt has entries such as "to name@domain.com 0.1 ..."; fastText-style
    # files start with a "count dim" line.
    text = "5 3\nthe 0.1 0.2 0.3\nto name@domain.com 9 9 9\nto 1 2 3\ncat 0.5 oops 0.5\ncat 4 5 6\n"
    (tmp_path / "v.txt").write_text(text)
    loaded = corpora.load_word_vectors(tmp_path / "v.txt", vocabulary={"the", "to", "cat"})
    assert sorted(loaded) == ["cat", "the", "to"]
    np.testing.assert_array_equal(loaded["to"], [1, 2, 3])
    np.testing.assert_array_equal(loaded["cat"], [4, 5, 6])
    everything = corpora.load_word_vectors(tmp_path / "v.txt")
    np.testing.assert_array_equal(everything["to name@domain.com"], [9, 9, 9])
    # A byte-order mark is left out, and any line end ends a line.
    (tmp_path / "w.txt").write_bytes(b"\xef\xbb\xbfthe 1 2\rto name@domain.com 3 4\r\n2001 5 6\n")
    assert sorted(corpora.load_word_vectors(tmp_path / "w.txt")) == [
        "2001",
        "the",
        "to name@domain.com",
    ]
    (tmp_path / "n.txt").write_text("1999 0.5 0.25\nthe 1 2\n")  # a number first: a word
    numbered = corpora.load_word_vectors(tmp_path / "n.txt")
    assert sorted(numbered) == ["1999", "the"]
    np.testing.assert_array_equal(numbered["1999"], [0.5, 0.25])


def test_real_glove_subset(shared_data):
    path = shared_data / "glove_subset" / "glove-50d-5k.json"
    if not path.exists():
        pytest.skip(f"{path} not available")
    loaded = corpora.load_word_vectors(path, vocabulary={"the", "cat", "zzzzq"})
    assert set(loaded) == {"the", "cat"} and loaded["the"].shape == (50,)


# -- bad files: the reader, the files it reads, fragments of its error ------------------------

NOT_TEXT = bytes(range(256)) * 4 + os.urandom(1024)
PAIR = '{"sentence1": "a cat .", "sentence2": "an animal .", "gold_label": "entailment"}\n'
DEV = "snli_1.0_dev.jsonl"
INFERSENT_DEV = {"s1.dev": "a cat .\n", "s2.dev": "an animal .\n", "labels.dev": "entailment\n"}


def _infersent(**files):
    return "infersent", {**INFERSENT_DEV, **{k.replace("_", "."): v for k, v in files.items()}}


BAD_FILES = {
    # GloVe lines of unequal length: `dog 0.6` was read as a word, `cat` dropped.
    "glove_longer_line": (
        "vectors",
        {"v.txt": "cat 0.1 0.2\ndog 0.6 0.5 0.4\n"},
        ["v.txt", "line 2", "3 values", "has 2"],
    ),
    "glove_shorter_line": ("vectors", {"v.txt": "dog 0.6\ncat 0.1 0.2\n"}, ["v.txt", "line 2"]),
    "glove_line_too_short": (
        "vectors",
        {"v.txt": "the 1 2 3\ncat 1 2\n"},
        ["line 2", "2 values", "has 3"],
    ),
    "glove_not_text": ("vectors", {"v.txt": NOT_TEXT}, ["v.txt", "line 1"]),
    "glove_latin_1": ("vectors", {"v.txt": "café 1\n".encode("latin-1") * 10}, ["not UTF-8"]),
    "json_unequal": (
        "vectors",
        {"v.json": '{"cat": [1, 2], "dog": [1]}'},
        ["v.json", "'dog'", "1 value", "has 2"],
    ),
    "json_truncated": ("vectors", {"v.json": '{"cat": [1, 2'}, ["v.json", "not valid JSON"]),
    "json_not_an_object": ("vectors", {"v.json": "[1, 2]"}, ["v.json", "JSON object"]),
    "json_vector_not_a_list": (
        "vectors",
        {"v.json": '{"cat": 5}'},
        ["v.json", "'cat'", "list of numbers"],
    ),
    "gz_not_gzip": ("vectors", {"v.txt.gz": "the 1 2\n"}, ["v.txt.gz", "gzip"]),
    "zip_not_a_zip": ("official", {"snli_1.0.zip": "no zip"}, ["snli_1.0.zip", "zip"]),
    "zip_member_without_gold_label": (
        "official",
        {"snli_1.0.zip": {"snli_1.0/" + DEV: '{"sentence1": "a", "sentence2": "b"}\n'}},
        ["snli_1.0.zip", DEV, "gold_label"],
    ),
    "jsonl_not_utf8": (
        "official",
        {DEV: PAIR.encode() + b'{"sentence1": "\xff"}\n'},
        [DEV, "line 2", "UTF-8"],
    ),
    "jsonl_truncated": (
        "official",
        {DEV: PAIR + '{"sentence1": "a", "sent'},
        [DEV, "line 2", "JSON"],
    ),
    "jsonl_without_sentence1": (
        "official",
        {DEV: '{"sentence2": "a", "gold_label": "neutral"}\n'},
        [DEV, "line 1", "sentence1"],
    ),
    "jsonl_without_gold_label": (
        "official",
        {DEV: '{"sentence1": "a", "sentence2": "b"}\n'},
        [DEV, "gold_label"],
    ),
    "jsonl_sentence_not_text": (
        "official",
        {DEV: '{"sentence1": 5, "sentence2": "b", "gold_label": "neutral"}\n'},
        [DEV, "line 1", "premise must be text"],
    ),
    "txt_without_gold_label_column": (
        "official",
        {"snli_1.0_dev.txt": "sentence1\tsentence2\na\tb\n"},
        ["snli_1.0_dev.txt", "gold_label"],
    ),
    "split_empty": ("official", {DEV: ""}, [DEV, "empty"]),
    "split_without_gold_labels": (
        "official",
        {DEV: PAIR.replace("entailment", "-")},
        [DEV, "gold label"],
    ),
    "infersent_unknown_label": (
        *_infersent(labels_dev="maybe\n"),
        ["labels.dev", "line 1", "'maybe'"],
    ),
    "infersent_blank_file": (*_infersent(s2_dev="\n \n"), ["s2.dev", "blank"]),
    "infersent_not_utf8": (*_infersent(s1_dev=NOT_TEXT), ["s1.dev", "UTF-8"]),
    "infersent_uneven": (*_infersent(s2_dev="a\nb\n"), ["s1/s2/labels.dev", "different numbers"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_an_error_naming_it(case, tmp_path):
    reader, files, fragments = BAD_FILES[case]
    for name, content in files.items():
        if isinstance(content, dict):
            with zipfile.ZipFile(tmp_path / name, "w") as archive:
                for member, text in content.items():
                    archive.writestr(member, text)
        else:
            (tmp_path / name).write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(ValueError) as info:
        if reader == "vectors":
            corpora.load_word_vectors(tmp_path / next(iter(files)))
        elif reader == "infersent":
            corpora.read_infersent(tmp_path, "dev")
        else:
            zipped = "snli_1.0.zip" in files
            corpora.read_official(tmp_path / "snli_1.0.zip" if zipped else tmp_path, "dev")
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {info.value}"
