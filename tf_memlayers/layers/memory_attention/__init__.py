"""Attention over a memory inside the recurrent loop (`AttentionWrapper`, `AttentionRNN`)."""
