"""scikit-learn estimators around keratron models, as `keras.wrappers`: `SKLearnClassifier`,
`SKLearnRegressor`, `SKLearnTransformer`.

scikit-learn (an optional dependency) is imported when one of the three is first used, not
with keratron.

Example:
    >>> from keratron.wrappers import SKLearnRegressor
    >>> reg = SKLearnRegressor(model=build_model, fit_kwargs={"epochs": 5, "verbose": 0})
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
