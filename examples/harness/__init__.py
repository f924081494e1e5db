"""What the example scripts (and the benchmarks built on them) share because they have a
command line: the options and their checks (`options`), run directories named after the
options (`run_directory`) and a quiet start (`startup`). Not part of the package."""
