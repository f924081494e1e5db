import keras
import numpy as np
import pytest

from tf_memlayers import Perplexity, SequenceCrossentropy
from tf_memlayers.losses import LOSS_REDUCTIONS
from tf_memlayers.training._global_batch import GlobalBatchLoss, GlobalBatchMetrics


@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", *LOSS_REDUCTIONS])
def test_the_shares_of_a_global_batch_add_up_to_its_loss_and_metrics(loss):
    """Two replicas' sums and counts (masked steps, sample weights, a regularizer) and summed
    metric states give what `keras.Model.evaluate` reports for the whole batch."""
    keras.utils.set_random_seed(5)
    embedding = keras.layers.Embedding(9, 4, mask_zero=True)
    dense = keras.layers.Dense(9, kernel_regularizer="l2")
    model = keras.Sequential([keras.Input((5,), dtype="int32"), embedding, dense])
    loss_of_logits = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compiled = SequenceCrossentropy(loss) if loss in LOSS_REDUCTIONS else loss_of_logits
    weighted = [keras.metrics.SparseCategoricalCrossentropy(from_logits=True), Perplexity()]
    # A weighted metric of an unweighted one's name is logged as Keras logs it: "weighted_...".
    model.compile("sgd", compiled, metrics=["accuracy"], weighted_metrics=[*weighted, "accuracy"])
    rng = np.random.default_rng(1)
    x, y, w = rng.integers(0, 9, (6, 5)), rng.integers(0, 9, (6, 5)), rng.random((6, 5))
    expected = model.evaluate(x, y, sample_weight=w, batch_size=6, verbose=0, return_dict=True)
    y_pred = model(x)
    loss, metrics = GlobalBatchLoss(model, y, y_pred), GlobalBatchMetrics(model, y, y_pred)
    shares = [(x[i : i + 3], y[i : i + 3], w[i : i + 3]) for i in (0, 3)]
    sums = [loss.sum_and_count(y, model(x), w) for x, y, w in shares]
    added = loss.regularization(model.losses, "float32")
    total = sum(s for s, _ in sums) / sum(c for _, c in sums) + added
    np.testing.assert_allclose(total, expected["loss"], rtol=1e-6)
    states = [metrics.batch_states(y, model(x), w) for x, y, w in shares]
    metrics.add([a + b for a, b in zip(*states)])
    assert {"loss": total, **metrics.result()}.keys() == expected.keys()
    for name, value in metrics.result().items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, err_msg=name)
    model.compile("sgd", ["mse", "mse"])
    pytest.raises(NotImplementedError, GlobalBatchLoss, model, y, y_pred).match("supports one loss")
    model.compile("sgd", "mse", metrics=[FromOne()])
    pytest.raises(NotImplementedError, GlobalBatchMetrics, model, y, y_pred).match("not a zero")
    model.compile("sgd", "mse", metrics=[lambda y, p: y])  # a function Keras cannot rebuild
    pytest.raises(ValueError, GlobalBatchMetrics, model, y, y_pred).match("register_keras_ser")


@keras.saving.register_keras_serializable("tests")
class FromOne(keras.metrics.Sum):  # a sum starting at one: its replicas' states add up to 2
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.total.assign(1.0)
