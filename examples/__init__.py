"""The example scripts, each with a folder of what its experiment needs beyond the package
(`examples.language_modeling`, `examples.snli`, `examples.fill_last_word`), and the harness
the three share (`examples.harness`)."""
