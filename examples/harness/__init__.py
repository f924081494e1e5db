"""What the example scripts (and the benchmarks built on them) share: the options and their
checks (`options`), run directories named after the options (`run_directory`), a quiet start
(`startup`), the argument checks of the examples' functions (`checks`), vocabularies, text
files and word vectors (`data`), and training with resumable runs (`training`). Not part of
the package."""
