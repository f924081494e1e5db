"""The example scripts, and the harness they share (`examples.harness`)."""
