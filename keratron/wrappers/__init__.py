"""scikit-learn estimators around keratron models, as `keras.wrappers`: `SKLearnClassifier`,
`SKLearnRegressor`, `SKLearnTransformer`.

scikit-learn (an optional dependency) is imported when one of the three is first used, not
with keratron.

Example:
    >>> from keratron.wrappers import SKLearnRegressor
    >>> def build_model(X, y):
    ...     model = keratron.Sequential([keratron.Input((X.shape[1],)), keratron.layers.Dense(1)])
    ...     model.compile(loss="mse", optimizer="adam")
    ...     return model
    >>> reg = SKLearnRegressor(model=build_model, fit_kwargs={"epochs": 5, "verbose": 0})
    >>> len(reg.fit(np.ones((8, 3)), np.zeros(8)).history_.history["loss"])
    5
"""

import importlib

__all__ = ["SKLearnClassifier", "SKLearnRegressor", "SKLearnTransformer"]


def __getattr__(name):
    if name in __all__:
        module = importlib.import_module("keratron.wrappers.sklearn_wrapper")
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})
