"""What `examples/ptb_memory_lm.py` (and the language-model benchmarks) need beyond the
package: corpus readers (`ptb`, `wikitext2`, `cbt`, picked by `lm_corpora`), the generated
copy corpus (`generated_lm`), token streams (`token_streams`), truncated-BPTT batches and their
``tf.data`` pipeline (`lm_batches`), evaluation over packed or padded documents
(`evaluation`), the paper's recipes (`presets`) and equal parameter budgets
(`parameter_budget`)."""
