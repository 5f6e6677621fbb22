"""Keras's alias names and small config/backend helpers behave as Keras's do."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


@pytest.mark.parametrize("namespace", ["initializers", "constraints"])
def test_snake_case_aliases_are_the_keras_classes(namespace):
    keras = require("keras")
    ours, theirs = getattr(keratron, namespace), getattr(keras, namespace)
    aliases = [n for n in ours._ALIASES if hasattr(theirs, n)]
    assert aliases
    for alias in aliases:
        # Keras's alias is its class, so the same class name; ours must name our class.
        assert getattr(ours, alias).__name__ == getattr(theirs, alias).__name__, alias
        assert getattr(ours, alias) is getattr(ours, getattr(theirs, alias).__name__)


def test_alias_initializer_values_match_keras():
    keras = require("keras")
    for alias in ["ones", "zeros", "identity"]:
        ours = getattr(keratron.initializers, alias)()((3, 3))
        theirs = getattr(keras.initializers, alias)()((3, 3))
        np.testing.assert_array_equal(np.asarray(ours), keras.ops.convert_to_numpy(theirs))
    w = np.array([[3.0, 4.0], [0.0, 0.5]], "float32")
    ours = keratron.constraints.max_norm(1.0)(keratron.Variable(w))
    theirs = keras.constraints.max_norm(1.0)(keras.ops.convert_to_tensor(w))
    np.testing.assert_allclose(np.asarray(ours), keras.ops.convert_to_numpy(theirs), rtol=1e-6)


@pytest.mark.parametrize(
    "dtype", ["float32", "float16", "bfloat16", "int8", "uint16", "int64", "bool", np.float64]
)
def test_backend_dtype_predicates_match_keras(dtype):
    keras = require("keras")
    for name in ["standardize_dtype", "is_float_dtype", "is_int_dtype"]:
        assert getattr(keratron.backend, name)(dtype) == getattr(keras.backend, name)(dtype)


def test_config_backend_and_nnx():
    keras = require("keras")
    assert keratron.config.backend() == keratron.backend.backend() == "keratron"
    keratron.config.set_backend("keratron")
    with pytest.raises(NotImplementedError, match="single backend"):
        keratron.config.set_backend("jax")
    assert keratron.config.is_nnx_enabled() is keras.config.is_nnx_enabled() is False


def test_models_save_model_round_trips(tmp_path):
    model = keratron.Sequential([keratron.Input((3,)), keratron.layers.Dense(2)])
    path = str(tmp_path / "m.keras")
    keratron.models.save_model(model, path)
    x = np.ones((1, 3), "float32")
    np.testing.assert_allclose(
        keratron.models.load_model(path).predict(x, verbose=0), model.predict(x, verbose=0)
    )
