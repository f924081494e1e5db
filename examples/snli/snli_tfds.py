"""SNLI through tensorflow-datasets: reading the prepared ``snli`` builder, or downloading it.

The second source of `examples.snli.snli.load_nli_splits`. tensorflow-datasets is an
optional dependency (the ``datasets`` extra).
"""

from examples.harness.checks import check_bool, check_choice
from examples.snli.nli_examples import SPLITS, examples_from_rows

_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def examples_from_tfds(dataset):
    """The examples of a tensorflow-datasets ``snli`` split.

    Args:
        dataset: `tf.data.Dataset` of dicts with ``premise`` and ``hypothesis`` (bytes) and
            ``label`` (int, -1 for no majority).

    Returns:
        A list of `NLIExample` (pairs labelled -1 dropped).
    """
    rows = []
    for record in dataset.as_numpy_iterator():
        rows.append(
            (
                record["premise"].decode("utf-8"),
                record["hypothesis"].decode("utf-8"),
                int(record["label"]),
            )
        )
    return examples_from_rows(rows)


def read_tfds(split, data_dir=None, download=False):
    """Reads a split from the tensorflow-datasets ``snli`` builder.

    Args:
        split: str, ``"train"``, ``"dev"`` (the builder's ``validation``) or ``"test"``.
        data_dir: str or `None`, the tensorflow-datasets data folder. Defaults to `None`
            (its default).
        download: bool, let tensorflow-datasets download and prepare the corpus first if it
            is not prepared yet (needs internet). Defaults to False: never download.

    Returns:
        A list of `NLIExample` (pairs labelled -1 dropped).

    Raises:
        ImportError: tensorflow-datasets is not installed (the message names the extra).
        FileNotFoundError: the builder is not prepared (and ``download`` is False).
        OSError: ``download`` is True and the download or preparation failed.
    """
    check_choice("split", split, SPLITS)
    download = check_bool("download", download)
    try:
        import tensorflow_datasets as tfds  # optional dependency (extra "datasets")
    except ImportError as error:
        raise ImportError(
            "Reading SNLI through tensorflow-datasets needs the `datasets` extra: "
            'pip install "tf-memlayers[datasets]" (from a checkout: pip install ".[datasets]").'
        ) from error

    try:
        dataset = tfds.load("snli", split=_TFDS_SPLITS[split], download=download, data_dir=data_dir)
    except Exception as error:  # tfds raises AssertionError/DatasetNotFoundError when unprepared
        if download:
            raise OSError(
                f"tensorflow-datasets could not download and prepare `snli`: {error}"
            ) from error
        raise FileNotFoundError(
            f"tensorflow-datasets `snli` is not prepared (download it with download=True, "
            f"or --download in the examples): {error}"
        ) from error
    return examples_from_tfds(dataset)
