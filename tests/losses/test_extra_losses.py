"""CTC, Circle and CategoricalGeneralizedCrossEntropy against Keras 3 (values for every
reduction, gradients against Keras's torch-backend autograd), central-difference gradient
checks, configs and errors."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.gradcheck import check_grads

keras = require("keras")
torch = require("torch")

L = kt.losses
R = np.random.default_rng(21)
REDUCTIONS = ["sum_over_batch_size", "sum", "none"]


def ctc_data():
    y_true = np.array([[1, 2, 2, 0], [3, 1, 0, 0], [2, 0, 0, 0]], "int32")
    return y_true, R.standard_normal((3, 7, 5)).astype("float32")


def circle_data():
    emb = R.standard_normal((6, 4)).astype("float32")
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    # Label 3 appears once: with the diagonal removed its row has no positive pair.
    return np.array([0, 1, 0, 2, 1, 3], "int32"), emb


def gce_data():
    logits = R.standard_normal((5, 4))
    probs = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype("float32")
    return R.integers(0, 4, (5,)).astype("int32"), probs


CASES = [
    ("CTC", {}, ctc_data),
    ("Circle", {}, circle_data),
    ("Circle", {"gamma": 10.0, "margin": 0.25, "remove_diagonal": False}, circle_data),
    ("CategoricalGeneralizedCrossEntropy", {}, gce_data),
    ("CategoricalGeneralizedCrossEntropy", {"q": 0.8}, gce_data),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kwargs,data", CASES)
def test_values_and_gradients_match_keras(name, kwargs, data, reduction):
    y_true, y_pred = data()
    ours = getattr(L, name)(reduction=reduction, **kwargs)
    theirs = getattr(keras.losses, name)(reduction=reduction, **kwargs)
    yp = torch.tensor(y_pred, requires_grad=True)
    k_value = theirs(torch.tensor(y_true), yp)
    k_value.sum().backward()
    xp = kt.ops.convert_to_tensor(y_pred)
    with kt.GradientTape() as tape:
        tape.watch(xp)
        value = ours(y_true, xp)
        total = kt.ops.sum(value)
    np.testing.assert_allclose(value.numpy(), k_value.detach().numpy(), rtol=2e-5, atol=1e-5)
    grad = tape.gradient(total, xp).numpy()
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad, yp.grad.numpy(), rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("name,kwargs,data", CASES)
def test_config_round_trip(name, kwargs, data):
    ours = getattr(L, name)(**kwargs)
    theirs = getattr(keras.losses, name)(**kwargs)
    assert ours.get_config() == theirs.get_config()
    clone = L.deserialize(L.serialize(ours))
    assert type(clone) is type(ours) and clone.get_config() == ours.get_config()
    y_true, y_pred = data()
    np.testing.assert_allclose(float(clone(y_true, y_pred)), float(ours(y_true, y_pred)))


def test_functions_match_keras():
    y_true, y_pred = ctc_data()
    np.testing.assert_allclose(
        L.ctc(y_true, y_pred).numpy(), keras.losses.ctc(y_true, y_pred).numpy(), rtol=1e-5
    )
    y_true, y_pred = circle_data()
    ref_labels = np.array([1, 0, 2], "int32")
    ref_emb = y_pred[:3][::-1].copy()
    want = keras.losses.circle(
        y_true, y_pred, ref_labels=ref_labels, ref_embeddings=ref_emb, remove_diagonal=False
    )
    got = L.circle(
        y_true, y_pred, ref_labels=ref_labels, ref_embeddings=ref_emb, remove_diagonal=False
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    y_true, y_pred = gce_data()
    np.testing.assert_allclose(
        L.categorical_generalized_cross_entropy(y_true, y_pred, q=0.3).numpy(),
        keras.losses.categorical_generalized_cross_entropy(
            torch.tensor(y_true), torch.tensor(y_pred), q=0.3
        ).numpy(),
        rtol=1e-6,
    )
    assert L.get("ctc") is L.ctc and L.get("circle") is L.circle
    assert isinstance(L.get("CTC"), L.CTC) and isinstance(L.get("Circle"), L.Circle)


def test_circle_masks_zero_losses_from_the_mean():
    # Two well separated classes: every loss is tiny but the masked mean divides by the
    # number of positive losses only (Keras's set_keras_mask on loss > 0).
    y_true, y_pred = circle_data()
    values = L.Circle(reduction="none")(y_true, y_pred).numpy()
    assert values[-1] == 0.0  # the sample with no positive pair
    mean = float(L.Circle()(y_true, y_pred))
    np.testing.assert_allclose(mean, values[values > 0].mean(), rtol=1e-6)


def test_gradients_by_central_differences():
    y_true, y_pred = ctc_data()
    check_grads(lambda p: L.ctc(y_true, p), [y_pred.astype("float64")], rtol=1e-4)
    y_true, y_pred = circle_data()
    check_grads(lambda p: L.circle(y_true, p, gamma=4.0), [y_pred.astype("float64")], rtol=1e-4)
    y_true, y_pred = gce_data()
    check_grads(
        lambda p: L.categorical_generalized_cross_entropy(y_true, p, 0.5),
        [y_pred.astype("float64")],
    )


def test_errors():
    with pytest.raises(ValueError, match="y_true.shape"):
        L.ctc(np.zeros((2,), "int32"), np.zeros((2, 3, 4), "float32"))
    with pytest.raises(ValueError, match="y_pred.shape"):
        L.ctc(np.zeros((2, 3), "int32"), np.zeros((2, 4), "float32"))
    for q in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="`q`"):
            L.CategoricalGeneralizedCrossEntropy(q=q)
