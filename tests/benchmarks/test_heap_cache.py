"""The heap-cache speed benchmark (`benchmarks/speed/heap_cache.py`): the rows each weight
matrix of the fill-last-word model multiplies in a training step, for its floor."""

from tests.support import load_script


def test_rows_count_positions_cached_states_and_examples():
    benchmark = load_script("benchmarks/speed", "heap_cache")
    from tf_memlayers.layers import AttentionPooling, HeapCacheAttention
    from tf_memlayers.models.fill_last_word import build_fill_last_word_model

    model = build_fill_last_word_model(
        30, AttentionPooling(4), HeapCacheAttention(7, 4), embedding_dim=4
    )
    rows = benchmark.step_rows(cache_size=7, steps=5)
    counted = {weight.path: rows(weight) for weight in model.trainable_weights}
    positions = benchmark.BATCH * 5
    assert counted["encoder/lstm_cell/kernel"] == counted["encoder/lstm_cell/recurrent_kernel"]
    assert counted["encoder/lstm_cell/kernel"] == positions
    assert counted["pooling/kernel"] == positions
    assert counted["cache_attention/cache_kernel"] == 7
    assert counted["logits/kernel"] == benchmark.BATCH
