"""scikit-learn estimators around keratron models, as `keras.wrappers`.

`SKLearnClassifier`, `SKLearnRegressor` and `SKLearnTransformer` take a compiled model, or a
function `model(X=..., y=..., **model_kwargs)` that builds and compiles one from the data, and
follow scikit-learn's estimator contract: `fit` / `predict` / `score` (or `transform`),
`get_params` / `set_params`, `clone`, use in pipelines and searches. The classifier one-hot
encodes the labels for the model and decodes predictions back to the labels (`classes_`).

Where Keras 3.15's wrappers do something other than what their documentation says, these do
what it says: `warm_start=True` continues training the fitted model (Keras builds a new model
on every `fit`), `clone` keeps `fit_kwargs`, `fit` leaves `fit_kwargs` unchanged,
`set_fit_request` requests metadata for `fit` (Keras's records it for `score`), and `epoch_`
counts the epochs trained (Keras's raises AttributeError once fitted).

An estimator pickles (and deep-copies) with its models: keratron models are not picklable
themselves, so each one travels as the bytes of its `.keras` file, as a Keras model pickles.
"""

from __future__ import annotations

import copy
import os
import tempfile

import numpy as np

from keratron.models import Model, clone_model
from keratron.saving import load_model, save_model

try:
    import sklearn
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin
except ImportError:  # the classes stay importable; making an estimator raises
    sklearn = None

    class BaseEstimator:
        pass

    class ClassifierMixin:
        pass

    class RegressorMixin:
        pass

    class TransformerMixin:
        pass


__all__ = ["SKLearnClassifier", "SKLearnRegressor", "SKLearnTransformer"]


def _assert_sklearn_installed(symbol_name):
    if sklearn is None:
        raise ImportError(
            f"{symbol_name} requires `scikit-learn` to be installed. "
            "Run `pip install scikit-learn` to install it."
        )


def _validate_data(estimator, *args, **kwargs):
    """scikit-learn's input validation (`validate_data` from 1.6, the estimator method
    before)."""
    try:
        from sklearn.utils.validation import validate_data
    except ImportError:
        return estimator._validate_data(*args, **kwargs)
    return validate_data(estimator, *args, **kwargs)


def _type_of_target(y):
    from sklearn.utils.multiclass import type_of_target

    target_type = type_of_target(y)
    if target_type == "unknown":
        raise ValueError(f"Unknown label type for data: {y!r}")
    return target_type


def _routing_enabled() -> bool:
    return sklearn is not None and bool(sklearn.get_config().get("enable_metadata_routing"))


def _check_model(model):
    if not model.compiled or not model.loss or not model.optimizer:
        raise RuntimeError("Given model needs to be compiled, and have a loss and an optimizer.")


class _PickledModel:
    """A model as the bytes of its `.keras` file (custom layers must be registered, as for
    `load_model`)."""

    def __init__(self, model):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            save_model(model, path)
            with open(path, "rb") as f:
                self.data = f.read()

    def restore(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.keras")
            with open(path, "wb") as f:
                f.write(self.data)
            return load_model(path)


class TargetReshaper(TransformerMixin, BaseEstimator):
    """Makes 1-D targets 2-D (for `OneHotEncoder`, and models with a (batch, 1) output) and
    reverses it on predictions.

    Attributes:
        ndim_: the number of dimensions of the target it was fitted on.
    """

    def fit(self, y):
        self.ndim_ = y.ndim
        return self

    def transform(self, y):
        return y.reshape(-1, 1) if y.ndim == 1 else y

    def inverse_transform(self, y):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        if self.ndim_ == 1 and y.ndim == 2:
            return np.squeeze(y, axis=1)
        return y


class SKLBase(BaseEstimator):
    """The estimator contract shared by the three wrappers (see `SKLearnClassifier`)."""

    def __init__(self, model, warm_start=False, model_kwargs=None, fit_kwargs=None):
        _assert_sklearn_installed(self.__class__.__name__)
        self.model = model
        self.warm_start = warm_start
        self.model_kwargs = model_kwargs
        self.fit_kwargs = fit_kwargs

    def _more_tags(self):
        return {"non_deterministic": True}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True
        return tags

    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters; a model (or model function) and the
        values in `model_kwargs` / `fit_kwargs` are shared, as `fit` builds its own model."""
        model = self.model if callable(self.model) else copy.deepcopy(self.model)
        return type(self)(
            model=model,
            warm_start=self.warm_start,
            model_kwargs=copy.copy(self.model_kwargs),
            fit_kwargs=copy.copy(self.fit_kwargs),
        )

    def __getstate__(self):
        state = super().__getstate__()
        state = {k: _PickledModel(v) if isinstance(v, Model) else v for k, v in state.items()}
        history = state.get("history_")
        if getattr(history, "model", None) is not None:  # the fitted model, pickled above
            history = copy.copy(history)
            history.set_model(None)
            state["history_"] = history
        return state

    def __setstate__(self, state):
        state = {k: v.restore() if isinstance(v, _PickledModel) else v for k, v in state.items()}
        history, model = state.get("history_"), state.get("model_")
        if history is not None and model is not None:
            history.set_model(model)
        super().__setstate__(state)

    @property
    def epoch_(self) -> int:
        """The number of epochs the fitted model has been trained for (0 before `fit`)."""
        history = getattr(self, "history_", None)
        epochs = getattr(history, "epoch", None)
        return epochs[-1] + 1 if epochs else 0

    def set_fit_request(self, **kwargs):
        """Requests metadata for `fit` (scikit-learn's metadata routing, which must be on).

        Args:
            **kwargs: `param_name=alias`, the alias one of True, False, None or a string.

        Returns:
            self
        """
        if not _routing_enabled():
            raise RuntimeError(
                "This method is only available when metadata routing is enabled. You can "
                "enable it using sklearn.set_config(enable_metadata_routing=True)."
            )
        from sklearn.utils.metadata_routing import MetadataRequest

        self._metadata_request = MetadataRequest(owner=self.__class__.__name__)
        for param, alias in kwargs.items():
            self._metadata_request.fit.add_request(param=param, alias=alias)
        return self

    def _get_model(self, X, y):
        if self.warm_start and getattr(self, "model_", None) is not None:
            return self.model_
        if isinstance(self.model, Model):
            if self.warm_start:
                return self.model
            model = clone_model(self.model)
            if self.model.compiled:  # as Keras's clone_model does
                model.compile_from_config(self.model.get_compile_config())
            return model
        return self.model(X=X, y=y, **(self.model_kwargs or {}))

    def fit(self, X, y, **kwargs):
        """Builds (or, with `warm_start`, reuses) the model and trains it.

        Args:
            X: array-like of shape (n_samples, n_features), the inputs.
            y: array-like of shape (n_samples,), the targets (scikit-learn's validation
                takes one column, for Keras's wrappers too).
            **kwargs: passed to `model.fit`, over `fit_kwargs`.

        Returns:
            self
        """
        X, y = _validate_data(self, X, y)
        y = self._process_target(y, reset=True)
        model = self._get_model(X, y)
        _check_model(model)
        self.history_ = model.fit(X, y, **{**(self.fit_kwargs or {}), **kwargs})
        self.model_ = model
        return self

    def predict(self, X):
        """The model's predictions on `X`, as targets (labels for the classifier)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        X = _validate_data(self, X, reset=False)
        return self._reverse_process_target(self.model_.predict(X))

    def _process_target(self, y, reset=False):
        _type_of_target(y)
        if reset:
            self._target_encoder = TargetReshaper().fit(y)
        return self._target_encoder.transform(y)

    def _reverse_process_target(self, y):
        return self._target_encoder.inverse_transform(y)


class SKLearnClassifier(ClassifierMixin, SKLBase):
    """A scikit-learn classifier around a keratron model.

    The labels (binary or multiclass, of any type) are one-hot encoded for the model, which
    should output one score per class; `predict` returns the label of the highest score and
    `decision_function` the scores themselves.

    Args:
        model: a compiled `keratron.Model` (cloned and recompiled for each `fit`), or a
            function `model(X=..., y=..., **model_kwargs)` returning a compiled model for the
            data (`y` one-hot encoded).
        warm_start: continue training the model of the previous `fit` (and train a given
            model itself, uncloned) instead of starting anew. Defaults to False.
        model_kwargs: keyword arguments for `model` when it is a function.
        fit_kwargs: keyword arguments for `model.fit`; those given to `fit` take precedence.

    Attributes:
        model_: the fitted model.
        history_: the `History` of the last `model.fit`.
        classes_: the class labels.

    Example:
        >>> def build(X, y):
        ...     inputs = keratron.Input((X.shape[1],))
        ...     outputs = keratron.layers.Dense(
        ...         y.shape[1], activation="softmax", kernel_initializer="zeros")(inputs)
        ...     model = keratron.Model(inputs, outputs)
        ...     model.compile(
        ...         loss="categorical_crossentropy", optimizer=keratron.optimizers.Adam(0.1))
        ...     return model
        >>> X, y = np.array([[-2.0], [-1.0], [1.0], [2.0]]), np.array([0, 0, 1, 1])
        >>> clf = keratron.wrappers.SKLearnClassifier(
        ...     build, fit_kwargs={"epochs": 20, "verbose": 0})
        >>> keratron.config.disable_interactive_logging()  # no progress bars from `predict`
        >>> clf.fit(X, y).score(X, y)
        1.0
        >>> clf.predict(X)
        array([0, 0, 1, 1])
        >>> keratron.config.enable_interactive_logging()
    """

    def decision_function(self, X):
        """The model's raw outputs on `X` (one column per class)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        X = _validate_data(self, X, reset=False)
        return self.model_.predict(X)

    def _process_target(self, y, reset=False):
        target_type = _type_of_target(y)
        if target_type not in ("binary", "multiclass"):
            raise ValueError(
                f"Only binary and multiclass target types are supported. Target type: {target_type}"
            )
        if reset:
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import OneHotEncoder

            self._target_encoder = make_pipeline(
                TargetReshaper(), OneHotEncoder(sparse_output=False)
            ).fit(y)
            self.classes_ = np.unique(y)
            if len(self.classes_) == 1:
                raise ValueError("Classifier can't train when only one class is present.")
        return self._target_encoder.transform(y)

    def _more_tags(self):
        return {"poor_score": True}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags


class SKLearnRegressor(RegressorMixin, SKLBase):
    """A scikit-learn regressor around a keratron model.

    Args:
        model: a compiled `keratron.Model` (cloned and recompiled for each `fit`), or a
            function `model(X=..., y=..., **model_kwargs)` returning a compiled model.
        warm_start: continue training the model of the previous `fit` (and train a given
            model itself, uncloned) instead of starting anew. Defaults to False.
        model_kwargs: keyword arguments for `model` when it is a function.
        fit_kwargs: keyword arguments for `model.fit`; those given to `fit` take precedence.

    Attributes:
        model_: the fitted model.
        history_: the `History` of the last `model.fit`.

    Example:
        >>> def build(X, y):
        ...     model = keratron.Sequential([keratron.Input((X.shape[1],)),
        ...                                  keratron.layers.Dense(1)])
        ...     model.compile(loss="mse", optimizer="adam")
        ...     return model
        >>> X, y = np.ones((8, 3)), np.zeros(8)
        >>> reg = keratron.wrappers.SKLearnRegressor(build, fit_kwargs={"verbose": 0})
        >>> keratron.config.disable_interactive_logging()  # no progress bars from `predict`
        >>> reg.fit(X, y).predict(X).shape
        (8,)
        >>> keratron.config.enable_interactive_logging()
    """

    def _more_tags(self):
        return {"poor_score": True}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True
        return tags


class SKLearnTransformer(TransformerMixin, SKLBase):
    """A scikit-learn transformer around a keratron model: `transform` returns the model's
    outputs (an embedding, say), for use as a pipeline step.

    Args:
        model: a compiled `keratron.Model` (cloned and recompiled for each `fit`), or a
            function `model(X=..., y=..., **model_kwargs)` returning a compiled model.
        warm_start: continue training the model of the previous `fit` (and train a given
            model itself, uncloned) instead of starting anew. Defaults to False.
        model_kwargs: keyword arguments for `model` when it is a function.
        fit_kwargs: keyword arguments for `model.fit`; those given to `fit` take precedence.

    Attributes:
        model_: the fitted model.
        history_: the `History` of the last `model.fit`.

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> from sklearn.pipeline import make_pipeline
        >>> def build(X, y):
        ...     dense = keratron.layers.Dense(2, kernel_initializer="ones")
        ...     model = keratron.Sequential([keratron.Input((X.shape[1],)), dense])
        ...     model.compile(loss="mse", optimizer="adam")
        ...     return model
        >>> X, y = np.array([[-2.0], [-1.0], [1.0], [2.0]]), np.array([0, 0, 1, 1])
        >>> embed = keratron.wrappers.SKLearnTransformer(build, fit_kwargs={"verbose": 0})
        >>> pipe = make_pipeline(embed, LogisticRegression())
        >>> keratron.config.disable_interactive_logging()  # no progress bars from `predict`
        >>> embed.fit(X, y).transform(X).shape
        (4, 2)
        >>> pipe.fit(X, y).predict(X)
        array([0, 0, 1, 1])
        >>> keratron.config.enable_interactive_logging()
    """

    def transform(self, X):
        """The model's outputs on `X`, an array of shape (n_samples, n_outputs)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        X = _validate_data(self, X, reset=False)
        return self.model_.predict(X)

    def _more_tags(self):
        return {"preserves_dtype": []}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = []
        return tags
