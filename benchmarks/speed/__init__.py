"""The speed tables (`benchmarks.speed.tables`), run by ``python -m benchmarks.speed`` on
either Keras backend and any device, and their blocks of the results page
(`benchmarks.speed.page`)."""
