"""What `examples/seq2seq_autoencoder.py` (and its benchmark) need beyond the package: the
sentences, vocabulary and teacher-forced batches (`sentences`), the auto-encoders and their
decoding (`models`), and the memory probes of the paper's Figure 3 (`probes`)."""
