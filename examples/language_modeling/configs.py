"""The named recipes of ``--config``: command-line defaults from the papers.

* ``zaremba-small`` / ``-medium`` / ``-large``: Zaremba et al. (2014) as configured in
  TensorFlow's PTB tutorial (``ptb_word_lm.py``, whose small model reaches test perplexity
  115.9): 2-layer LSTMs of 200 / 650 / 1500 units (embedding = LSTM width), plain SGD at
  learning rate 1 decayed by 0.5 / 0.8 / 1/1.15 per epoch after 4 / 6 / 14 epochs, 13 / 39 /
  55 epochs, batch 20, BPTT 20 / 35 / 35, global-norm clipping 5 / 5 / 10, dropout 0 / 0.5 /
  0.65 on the non-recurrent connections, init U(-s, s) with s = 0.1 / 0.05 / 0.04, forget-gate
  bias 0, and the cost summed over the time steps (mean over the batch).
* ``short-attention-spans``: Daniluk et al. (2017, §4.1) at 200 units (the paper's are 300;
  200 keeps a PTB epoch short on a CPU): Adam 1e-3, batch 64, BPTT 20, clipping 5, forget-gate
  bias 1, init U(-0.1, 0.1), window 5, N = 4, one LSTM layer, 4 epochs. ``--model`` picks
  the memory (default: attention).
"""


def _zaremba(units, dropout, init_scale, full_rate_epochs, lr_decay, epochs, length, clip):
    return dict(
        model="lstm",
        num_layers=2,
        units=units,
        embedding_dim=units,
        dropout=dropout,
        init_scale=init_scale,
        forget_bias=0.0,
        optimizer="sgd",
        learning_rate=1.0,
        lr_decay=lr_decay,
        full_rate_epochs=full_rate_epochs,
        epochs=epochs,
        batch_size=20,
        sequence_length=length,
        clip_norm=clip,
        loss_reduction="sum_over_time",
    )


PRESETS = {
    "zaremba-small": _zaremba(200, 0.0, 0.1, 4, 0.5, 13, 20, 5.0),
    "zaremba-medium": _zaremba(650, 0.5, 0.05, 6, 0.8, 39, 35, 5.0),
    "zaremba-large": _zaremba(1500, 0.65, 0.04, 14, 1 / 1.15, 55, 35, 10.0),
    "short-attention-spans": dict(units=200, embedding_dim=200, epochs=4),
}
