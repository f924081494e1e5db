"""What `examples/fill_last_word_cache.py` (and its benchmarks) need beyond the package:
sentences with their last words, their vocabulary and ``tf.data`` batches (`sentences`)."""
