"""An out-of-range sparse class id raises a ValueError naming the loss, the value and the
number of classes, on every path: eager and compiled, probabilities and logits."""

import numpy as np
import pytest
import torch

import keratron as kt
from keratron.ops import xent


@pytest.mark.parametrize("from_logits", [False, True])
@pytest.mark.parametrize("run_eagerly", [True, False])
@pytest.mark.parametrize("label", [3, 5, -1])
def test_fit_raises_on_a_class_id_outside_the_classes(from_logits, run_eagerly, label):
    model = kt.Sequential(
        [kt.Input((4,)), kt.layers.Dense(3, activation=None if from_logits else "softmax")]
    )
    model.compile(
        optimizer="sgd",
        loss=kt.losses.SparseCategoricalCrossentropy(from_logits=from_logits),
        run_eagerly=run_eagerly,
    )
    x = np.ones((8, 4), "float32")
    y = np.array([0, 1, 2, label, 0, 1, 2, 0])
    with pytest.raises(ValueError, match=rf"sparse_categorical_crossentropy.*{label}.*3 classes"):
        model.fit(x, y, batch_size=4, verbose=0)


@pytest.mark.parametrize("from_logits", [False, True])
def test_the_loss_function_raises_and_valid_ids_pass(from_logits):
    pred = kt.convert_to_tensor(np.full((2, 3), 1 / 3, "float32"))
    ok = kt.losses.sparse_categorical_crossentropy([0, 2], pred, from_logits=from_logits)
    np.testing.assert_allclose(ok.numpy(), [np.log(3.0)] * 2, rtol=1e-5)
    with pytest.raises(ValueError, match="label value of 7.*3 classes"):
        kt.losses.sparse_categorical_crossentropy([0, 7], pred, from_logits=from_logits)


def test_ignore_class_is_not_an_out_of_range_label():
    loss = kt.losses.SparseCategoricalCrossentropy(ignore_class=-1)
    value = loss(np.array([0, -1]), np.full((2, 3), 1 / 3, "float32"))
    np.testing.assert_allclose(float(value), np.log(3.0), rtol=1e-5)


def test_device_side_extremes_are_read_once_and_raise():
    # The GPU path, run on a non-CPU device stand-in: the check defers to the running extremes.
    labels = torch.tensor([0, 4, 1])
    xent._pending_class_ids[("stand-in", 3)] = (labels.min(), labels.max())
    with pytest.raises(ValueError, match="label value of 4.*3 classes"):
        xent.raise_for_invalid_class_ids()
    xent.raise_for_invalid_class_ids()  # read and cleared: nothing pending
