"""Attention over a sliding window of recent outputs, with key/value/predict outputs, and the
N-gram RNN (Daniluk et al. 2017), each as a sequence layer and as an RNN cell."""
