"""F-scores, IoU and correlation metrics against Keras 3: the same update_state batches with and
without sample weights, reset_state, state variables, configs and use in compile + fit."""

import re

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

keras = require("keras")

R = np.random.default_rng(5)


def _np(x):
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)


def f32(a):
    return np.asarray(a, dtype="float32")


def multilabel(n=8, c=4):
    return f32(R.integers(0, 2, (n, c))), f32(R.uniform(0, 1, (n, c)))


def onehot(n=8, c=4):
    labels = R.integers(0, c, n)
    return f32(np.eye(c)[labels]), f32(R.uniform(0, 1, (n, c)))


def sparse(n=12, c=4):
    # Includes ids outside [0, c) in predictions, which both libraries drop.
    return R.integers(0, c, n), R.integers(-1, c + 1, n)


def binary(n=10):
    return f32(R.integers(0, 2, n)), f32(R.uniform(0, 1, n))


def regression(n=6, d=5):
    return f32(R.normal(size=(n, d))), f32(R.normal(size=(n, d)))


def int_weights(n):
    return R.integers(0, 4, n).astype("int32")


def float_weights(n):
    return f32(R.uniform(0.1, 2.0, n))


# name, constructor kwargs, batch generator, sample-weight generator
CASES = [
    ("FBetaScore", {}, onehot, float_weights),
    ("FBetaScore", {"average": "micro", "beta": 2.0, "threshold": 0.5}, multilabel, float_weights),
    ("FBetaScore", {"average": "macro", "beta": 0.5}, onehot, float_weights),
    ("FBetaScore", {"average": "weighted", "threshold": 0.4}, multilabel, float_weights),
    ("F1Score", {}, multilabel, float_weights),
    ("F1Score", {"average": "macro", "threshold": 0.5}, multilabel, float_weights),
    ("F1Score", {"average": "weighted"}, onehot, float_weights),
    ("IoU", {"num_classes": 4, "target_class_ids": [0, 2]}, sparse, int_weights),
    ("IoU", {"num_classes": 4, "target_class_ids": [1], "ignore_class": 0}, sparse, int_weights),
    ("MeanIoU", {"num_classes": 4}, sparse, int_weights),
    ("MeanIoU", {"num_classes": 4, "dtype": "float32"}, sparse, float_weights),
    ("BinaryIoU", {}, binary, int_weights),
    ("BinaryIoU", {"target_class_ids": [1], "threshold": 0.3}, binary, int_weights),
    ("OneHotIoU", {"num_classes": 4, "target_class_ids": [0, 3]}, onehot, int_weights),
    ("OneHotMeanIoU", {"num_classes": 4}, onehot, int_weights),
    ("OneHotMeanIoU", {"num_classes": 4, "ignore_class": 1}, onehot, int_weights),
    ("PearsonCorrelation", {}, regression, float_weights),
    ("PearsonCorrelation", {"axis": 0}, regression, None),
    ("ConcordanceCorrelation", {}, regression, float_weights),
]
IDS = [f"{name}-{i}" for i, (name, *_) in enumerate(CASES)]


@pytest.mark.parametrize("name,kwargs,batches,weights", CASES, ids=IDS)
def test_matches_keras_over_batches(name, kwargs, batches, weights):
    # An explicit name: default names get "_<n>" suffixes that depend on earlier tests.
    kwargs = {"name": "m", **kwargs}
    ours, theirs = getattr(kt.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    for step in range(3):
        y_true, y_pred = batches()
        sw = None if weights is None or step == 0 else weights(len(y_true))
        ours.update_state(y_true, y_pred, sample_weight=sw)
        theirs.update_state(y_true, y_pred, sample_weight=sw)
        np.testing.assert_allclose(_np(ours.result()), _np(theirs.result()), rtol=1e-5, atol=1e-6)
    assert [v.path for v in ours.variables] == [v.path for v in theirs.variables]
    for a, b in zip(ours.variables, theirs.variables):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)

    ours.reset_state()
    theirs.reset_state()
    assert all(not _np(v).any() for v in ours.variables)
    y_true, y_pred = batches()
    ours.update_state(y_true, y_pred)
    theirs.update_state(y_true, y_pred)
    np.testing.assert_allclose(_np(ours.result()), _np(theirs.result()), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs,batches,weights", CASES, ids=IDS)
def test_config_round_trip_with_keras_keys(name, kwargs, batches, weights):
    # An explicit name: default names get "_<n>" suffixes that depend on earlier tests.
    kwargs = {"name": "m", **kwargs}
    ours, theirs = getattr(kt.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
    config = ours.get_config()
    assert config == theirs.get_config()
    assert kt.metrics.deserialize(keras.metrics.serialize(theirs)).get_config() == config
    rebuilt = getattr(kt.metrics, name).from_config(config)
    assert rebuilt.get_config() == config
    assert type(rebuilt) is type(ours)
    assert keras.metrics.deserialize(kt.metrics.serialize(ours)).get_config() == config


@pytest.mark.parametrize("fn", ["pearson_correlation", "concordance_correlation"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_functional_forms_match_keras(fn, axis):
    y_true, y_pred = regression()
    ours = getattr(kt.metrics, fn)(y_true, y_pred, axis=axis)
    theirs = getattr(keras.metrics, fn)(y_true, y_pred, axis=axis)
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-5, atol=1e-6)


def test_f1_score_unbuilt_state_and_argument_errors():
    assert kt.metrics.F1Score().variables == []
    with pytest.raises(ValueError, match="average"):
        kt.metrics.FBetaScore(average="samples")
    with pytest.raises(ValueError, match="beta"):
        kt.metrics.FBetaScore(beta=1)
    with pytest.raises(ValueError, match="threshold"):
        kt.metrics.F1Score(threshold=1.5)
    with pytest.raises(ValueError, match="2D"):
        kt.metrics.F1Score().update_state(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="target_class_ids"):
        kt.metrics.IoU(num_classes=2, target_class_ids=[2])


def test_names_and_get_identifiers():
    # Keras names the IoU classes by snake-casing the class name; both add "_<n>" on repeats.
    def base(name):
        return re.sub(r"_\d+$", "", name)

    expected = {
        "IoU": ("io_u", {"num_classes": 2, "target_class_ids": [0]}),
        "MeanIoU": ("mean_io_u", {"num_classes": 2}),
        "BinaryIoU": ("binary_io_u", {}),
        "OneHotIoU": ("one_hot_io_u", {"num_classes": 2, "target_class_ids": [0]}),
        "OneHotMeanIoU": ("one_hot_mean_io_u", {"num_classes": 2}),
    }
    for name, (snake, kwargs) in expected.items():
        assert base(getattr(kt.metrics, name)(**kwargs).name) == snake
        assert base(getattr(keras.metrics, name)(**kwargs).name) == snake
    for name in ("F1Score", "FBetaScore", "PearsonCorrelation", "ConcordanceCorrelation"):
        assert kt.metrics.get(name).name == keras.metrics.get(name).name


def test_f1_score_in_compile_and_fit():
    x = f32(R.normal(size=(32, 5)))
    y = f32(np.eye(3)[R.integers(0, 3, 32)])
    model = kt.Sequential([kt.Input((5,)), kt.layers.Dense(3, activation="softmax")])
    model.compile(
        optimizer="sgd",
        loss="categorical_crossentropy",
        metrics=[kt.metrics.F1Score(average="macro"), kt.metrics.OneHotMeanIoU(3, name="miou")],
    )
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert set(history.history) >= {"loss", "f1_score", "miou"}
    for key in ("f1_score", "miou"):
        assert all(0.0 <= v <= 1.0 for v in history.history[key])

    # The metric over the whole data set after training equals Keras's metric on the same
    # predictions.
    logs = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
    y_pred = _np(model.predict(x, verbose=0))
    for key, reference in (
        ("f1_score", keras.metrics.F1Score(average="macro")),
        ("miou", keras.metrics.OneHotMeanIoU(num_classes=3)),
    ):
        reference.update_state(y, y_pred)
        np.testing.assert_allclose(logs[key], _np(reference.result()), rtol=1e-5)
