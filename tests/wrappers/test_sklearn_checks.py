"""scikit-learn's own estimator checks on the three wrappers, with the expected failures that
Keras 3.15's test of its wrappers lists (keras/src/wrappers/sklearn_test.py), for the same
reasons: training is not reproducible between two fits, and a few epochs on tiny data do not
reach the scores some checks ask for."""

import pytest

from tests.conftest import require

sklearn = require("sklearn")

import functools  # noqa: E402

from sklearn.utils.estimator_checks import estimator_checks_generator  # noqa: E402

import keratron as kt  # noqa: E402
from keratron.wrappers import (  # noqa: E402
    SKLearnClassifier,
    SKLearnRegressor,
    SKLearnTransformer,
)


def dynamic_model(X, y, loss, out_activation_function="softmax", layers=(10,)):
    """Keras's test model: an MLP sized from the data, compiled with `loss`."""
    inputs = kt.Input(shape=(X.shape[1],))
    hidden = inputs
    for units in layers:
        hidden = kt.layers.Dense(units, activation="relu")(hidden)
    n_outputs = y.shape[1] if len(y.shape) > 1 else 1
    outputs = [kt.layers.Dense(n_outputs, activation=out_activation_function)(hidden)]
    model = kt.Model(inputs, outputs)
    model.compile(loss=loss, optimizer="rmsprop")
    return model


EXPECTED_FAILED_CHECKS = {
    "SKLearnClassifier": {
        # Not deterministic: it passed in 8 of 11 runs on 2026-11-29.
        "check_classifiers_one_label_sample_weights": (
            "every test prediction must be the one class left with weight after 5 epochs "
            "(5 steps) from an unseeded start; in some runs a few are not"
        ),
        "check_classifiers_classes": (
            "with small test cases the estimator returns not all classes sometimes"
        ),
        "check_classifier_data_not_an_array": "This test assumes reproducibility in fit.",
        "check_supervised_y_2d": "This test assumes reproducibility in fit.",
        "check_fit_idempotent": "This test assumes reproducibility in fit.",
        "check_classifiers_train": "decision_function can return both probabilities and logits",
    },
    "SKLearnRegressor": {},
    "SKLearnTransformer": {},
}


ESTIMATORS = [
    SKLearnClassifier(
        model=dynamic_model,
        model_kwargs={"loss": "categorical_crossentropy", "layers": [20, 20, 20]},
        fit_kwargs={"epochs": 5, "verbose": 0},
    ),
    SKLearnRegressor(model=dynamic_model, model_kwargs={"loss": "mse"}, fit_kwargs={"verbose": 0}),
    SKLearnTransformer(
        model=dynamic_model, model_kwargs={"loss": "mse"}, fit_kwargs={"verbose": 0}
    ),
]


def _check_id(obj):
    # scikit-learn's own ids print the estimator, whose `model` function's repr holds its
    # address: the xdist workers would collect different ids.
    if isinstance(obj, functools.partial):
        keywords = ",".join(f"{k}={v}" for k, v in obj.keywords.items())
        return f"{obj.func.__name__}({keywords})" if keywords else obj.func.__name__
    if callable(obj) and hasattr(obj, "__name__"):
        return obj.__name__
    return type(obj).__name__


@pytest.mark.parametrize(
    "estimator, check",
    [
        case
        for estimator in ESTIMATORS
        for case in estimator_checks_generator(
            estimator,
            legacy=True,
            expected_failed_checks=EXPECTED_FAILED_CHECKS[type(estimator).__name__],
            mark="xfail",
        )
    ],
    ids=_check_id,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
