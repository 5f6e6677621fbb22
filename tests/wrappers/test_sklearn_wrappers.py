"""keratron.wrappers: the scikit-learn estimators, against Keras 3.15's (interop tests) and on
their own."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import require

sklearn = require("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import keratron as kt  # noqa: E402
from keratron.wrappers import (  # noqa: E402
    SKLearnClassifier,
    SKLearnRegressor,
    SKLearnTransformer,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mlp(X, y, loss="categorical_crossentropy", activation="softmax", units=8, K=kt, weights=None):
    """A model function: an MLP sized from the data (`y` as the wrapper encodes it)."""
    model = K.Sequential(
        [
            K.Input((X.shape[1],)),
            K.layers.Dense(units, activation="relu"),
            K.layers.Dense(y.shape[1] if y.ndim > 1 else 1, activation=activation),
        ]
    )
    if weights is not None:
        model.set_weights(weights)
    model.compile(loss=loss, optimizer=K.optimizers.SGD(0.1))
    return model


def _classification(n=60, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int) * (classes - 2)
    return X, np.array(["cat", "dog", "emu"])[y] if classes == 3 else y


def _regression(n=40, outputs=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    w = rng.standard_normal((4,) if outputs is None else (4, outputs))
    return X, X @ w


QUIET = {"verbose": 0}


# ---------------------------------------------------------------------------- Keras oracle
@pytest.mark.interop
def test_classifier_matches_keras_with_the_same_weights():
    keras = require("keras")
    from keras.wrappers import SKLearnClassifier as KerasClassifier

    X, y = _classification()
    reference = mlp(X, np.zeros((1, 3)), K=keras)
    weights = reference.get_weights()
    fit_kwargs = {"epochs": 3, "batch_size": 16, "shuffle": False, "verbose": 0}
    results = []
    for K, cls in ((keras, KerasClassifier), (kt, SKLearnClassifier)):
        est = cls(mlp, model_kwargs={"K": K, "weights": weights}, fit_kwargs=fit_kwargs)
        est.fit(X, y)
        results.append(
            (
                est.classes_,
                est.predict(X),
                est.decision_function(X),
                est.predict_proba(X) if hasattr(est, "predict_proba") else None,
                est.score(X, y),
                est.history_.history["loss"],
            )
        )
    (ck, pk, dk, _, sk, lk), (co, po, do, _, so, lo) = results
    np.testing.assert_array_equal(co, ck)
    np.testing.assert_array_equal(po, pk)
    np.testing.assert_allclose(do, dk, atol=1e-5)
    assert so == sk
    np.testing.assert_allclose(lo, lk, rtol=1e-5)


@pytest.mark.interop
def test_regressor_and_transformer_match_keras():
    keras = require("keras")
    from keras.wrappers import SKLearnRegressor as KerasRegressor
    from keras.wrappers import SKLearnTransformer as KerasTransformer

    X, y = _regression()
    weights = mlp(X, y, K=keras).get_weights()
    kwargs = {"loss": "mse", "activation": None, "weights": weights}
    fit_kwargs = {"epochs": 2, "batch_size": 8, "shuffle": False, "verbose": 0}
    found = []
    for K, reg_cls, trans_cls in (
        (keras, KerasRegressor, KerasTransformer),
        (kt, SKLearnRegressor, SKLearnTransformer),
    ):
        reg = reg_cls(mlp, model_kwargs={**kwargs, "K": K}, fit_kwargs=fit_kwargs).fit(X, y)
        trans = trans_cls(mlp, model_kwargs={**kwargs, "K": K}, fit_kwargs=fit_kwargs)
        found.append((reg.predict(X), reg.score(X, y), trans.fit_transform(X, y)))
    (pk, sk, tk), (po, so, to) = found
    assert po.shape == pk.shape == y.shape
    np.testing.assert_allclose(po, pk, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(so, sk, rtol=1e-5)
    assert to.shape == tk.shape
    np.testing.assert_allclose(to, tk, rtol=1e-5, atol=1e-5)


@pytest.mark.interop
def test_params_and_tags_match_keras():
    require("keras")
    import keras.wrappers as kw

    for ours, theirs in (
        (SKLearnClassifier, kw.SKLearnClassifier),
        (SKLearnRegressor, kw.SKLearnRegressor),
        (SKLearnTransformer, kw.SKLearnTransformer),
    ):
        a, b = ours(mlp, model_kwargs={"units": 3}), theirs(mlp, model_kwargs={"units": 3})
        assert a.get_params() == b.get_params()
        assert a.__sklearn_tags__() == b.__sklearn_tags__()
        assert a._more_tags() == b._more_tags()
        assert repr(a) == repr(b)


# ---------------------------------------------------------------------------- on their own
def test_importing_keratron_wrappers_does_not_import_sklearn():
    code = (
        "import sys, keratron, keratron.wrappers; "
        "assert 'sklearn' not in sys.modules; "
        "keratron.wrappers.SKLearnRegressor; "
        "assert 'sklearn' in sys.modules"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import keratron.wrappers as wrappers

    assert {"SKLearnClassifier", "SKLearnRegressor", "SKLearnTransformer"} <= set(dir(wrappers))
    with pytest.raises(AttributeError):
        wrappers.SKLearnNothing  # noqa: B018


def test_classifier_fit_predict_score_and_classes():
    X, y = _classification()
    est = SKLearnClassifier(mlp, fit_kwargs={"epochs": 30, **QUIET})
    assert est.fit(X, y) is est
    np.testing.assert_array_equal(est.classes_, ["cat", "dog", "emu"])
    predicted = est.predict(X)
    assert predicted.shape == (60,) and set(predicted) <= set(est.classes_)
    scores = est.decision_function(X)
    assert scores.shape == (60, 3)
    np.testing.assert_array_equal(est.classes_[scores.argmax(axis=1)], predicted)
    assert est.score(X, y) == np.mean(predicted == y)
    assert est.score(X, y) > 0.6
    assert est.epoch_ == 30 and len(est.history_.history["loss"]) == 30


def test_binary_labels_and_target_errors():
    X, y = _classification(classes=2)
    est = SKLearnClassifier(mlp, fit_kwargs=QUIET).fit(X, y)
    np.testing.assert_array_equal(est.classes_, [0, 1])
    assert est.decision_function(X).shape == (60, 2)
    with pytest.raises(ValueError, match="only one class"):
        SKLearnClassifier(mlp, fit_kwargs=QUIET).fit(X, np.zeros(60, int))
    with pytest.raises(ValueError, match="Target type: continuous"):
        SKLearnClassifier(mlp, fit_kwargs=QUIET).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="y should be a 1d array"):  # as Keras's
        SKLearnClassifier(mlp, fit_kwargs=QUIET).fit(X, np.eye(2, dtype=int)[y])


def test_regressor_predicts_in_the_target_shape():
    X, y = _regression()
    reg = SKLearnRegressor(mlp, model_kwargs={"loss": "mse", "activation": None}, fit_kwargs=QUIET)
    assert reg.fit(X, y).predict(X).shape == (40,)
    assert np.isfinite(reg.score(X, y))
    # scikit-learn's validation takes one target column, for Keras's wrappers too (their
    # tags do not declare multi-output support).
    X, y = _regression(outputs=3)
    with pytest.raises(ValueError, match="y should be a 1d array"):
        reg.fit(X, y)


def test_transformer_in_a_pipeline():
    X, y = _classification()
    embed = SKLearnTransformer(mlp, model_kwargs={"loss": "mse", "units": 6}, fit_kwargs=QUIET)
    pipe = make_pipeline(StandardScaler(), embed, LogisticRegression())
    pipe.fit(X, (y == "dog").astype(int))
    assert pipe.predict(X).shape == (60,)
    assert embed.transform(X).shape == (60, 1)


def test_get_params_set_params_and_clone():
    est = SKLearnClassifier(mlp, model_kwargs={"units": 4}, fit_kwargs={"epochs": 2, **QUIET})
    assert est.get_params() == {
        "fit_kwargs": {"epochs": 2, "verbose": 0},
        "model": mlp,
        "model_kwargs": {"units": 4},
        "warm_start": False,
    }
    assert est.set_params(model_kwargs={"units": 5}) is est
    assert est.model_kwargs == {"units": 5}
    X, y = _classification()
    est.fit(X, y)
    copy = clone(est)
    assert copy.get_params() == est.get_params()
    assert copy.model is mlp and copy.fit_kwargs is not est.fit_kwargs
    assert not hasattr(copy, "model_") and not hasattr(copy, "classes_")
    with pytest.raises(sklearn.exceptions.NotFittedError):
        copy.predict(X)


def test_fit_keyword_arguments_take_precedence_and_leave_params_alone():
    X, y = _classification()
    est = SKLearnClassifier(mlp, fit_kwargs={"epochs": 4, **QUIET})
    est.fit(X, y, epochs=2)
    assert len(est.history_.epoch) == 2
    assert est.fit_kwargs == {"epochs": 4, "verbose": 0}


def test_grid_search():
    X, y = _classification()
    est = SKLearnClassifier(mlp, fit_kwargs={"epochs": 2, **QUIET})
    search = GridSearchCV(est, {"model_kwargs": [{"units": 2}, {"units": 8}]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["model_kwargs"] in ({"units": 2}, {"units": 8})
    assert search.predict(X).shape == (60,)


def test_compiled_model_is_cloned_recompiled_and_left_untouched():
    X, y = _classification()
    model = kt.Sequential([kt.Input((5,)), kt.layers.Dense(3, activation="softmax")])
    model.compile(loss="categorical_crossentropy", optimizer="sgd")
    before = model.get_weights()
    est = SKLearnClassifier(model, fit_kwargs={"epochs": 2, **QUIET}).fit(X, y)
    assert est.model_ is not model and est.model_.compiled
    assert type(est.model_.optimizer) is type(model.optimizer)
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    assert clone(est).model is model  # a model is shared by clones: `fit` clones it

    uncompiled = kt.Sequential([kt.Input((5,)), kt.layers.Dense(3, activation="softmax")])
    with pytest.raises(RuntimeError, match="needs to be compiled"):
        SKLearnClassifier(uncompiled, fit_kwargs=QUIET).fit(X, y)


def test_warm_start_continues_training():
    X, y = _classification()
    est = SKLearnClassifier(mlp, warm_start=True, fit_kwargs={"epochs": 2, **QUIET})
    est.fit(X, y)
    first, weights = est.model_, est.model_.get_weights()
    est.fit(X, y)
    assert est.model_ is first
    assert any(not np.array_equal(a, b) for a, b in zip(first.get_weights(), weights))

    cold = SKLearnClassifier(mlp, fit_kwargs={"epochs": 2, **QUIET})
    cold.fit(X, y)
    first = cold.model_
    assert cold.fit(X, y).model_ is not first


def test_pickle_round_trip():
    X, y = _classification()
    est = SKLearnClassifier(mlp, fit_kwargs={"epochs": 3, **QUIET}).fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.classes_, est.classes_)
    np.testing.assert_allclose(again.decision_function(X), est.decision_function(X))
    assert again.history_.history == est.history_.history
    assert again.history_.model is again.model_
    assert est.history_.model is est.model_  # pickling left the original as it was

    model = kt.Sequential([kt.Input((5,)), kt.layers.Dense(3, activation="softmax")])
    model.compile(loss="categorical_crossentropy", optimizer="sgd")
    unfitted = pickle.loads(pickle.dumps(SKLearnClassifier(model)))
    assert isinstance(unfitted.model, kt.Model) and unfitted.model.compiled
    np.testing.assert_allclose(unfitted.model.get_weights()[0], model.get_weights()[0])


def test_set_fit_request_routes_fit_arguments():
    X, y = _regression()
    est = SKLearnRegressor(mlp, model_kwargs={"loss": "mse", "activation": None}, fit_kwargs=QUIET)
    with pytest.raises(RuntimeError, match="metadata routing"):
        est.set_fit_request(epochs=True)
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(StandardScaler(), est.set_fit_request(epochs=True))
        pipe.fit(X, y, epochs=3)
    assert pipe[-1].history_.epoch == [0, 1, 2]
