"""keratron.legacy.saving (and keratron.utils.legacy) against Keras 3's Keras 2 format, and
keratron.optimizers.legacy against Keras 3's refusal."""

import json

import pytest

import keratron as kt
from tests.conftest import require

legacy = kt.legacy.saving


def _objects(K):
    return [
        K.regularizers.L1L2(0.1, 0.2),
        K.optimizers.Adam(0.01, name="adam"),  # names given: auto-names depend on history
        K.activations.relu,
        K.initializers.GlorotUniform(seed=1),
        K.losses.MeanSquaredError(),
        K.layers.Dense(3, activation="relu", kernel_regularizer=K.regularizers.L2(0.1), name="d"),
        K.layers.Conv2D(2, 3, name="c"),
    ]


def _holder_class(register):
    @register(package="LegacyTest", name="Holder")
    class Holder:
        def __init__(self, inner, fn, n, label):
            self.inner, self.fn, self.n, self.label = inner, fn, n, label

        def get_config(self):
            return {"inner": self.inner, "fn": self.fn, "n": self.n, "label": self.label}

        @classmethod
        def from_config(cls, config):
            return cls(**config)

    return Holder


def _scale(x):
    return x * 2.0


def _without_layer_policy(config):
    # Keras 3.15 writes a layer's dtype as a DTypePolicy dict and adds quantization_config;
    # keratron's layer configs write the dtype name (outside this module's scope).
    if isinstance(config, dict) and isinstance(config.get("config"), dict):
        config["config"].pop("dtype", None)
        config["config"].pop("quantization_config", None)
    return config


@pytest.mark.interop
def test_serialize_matches_keras():
    keras = require("keras")
    from keras.src.legacy.saving import serialization as keras_legacy

    expected = [
        _without_layer_policy(keras_legacy.serialize_keras_object(o)) for o in _objects(keras)
    ]
    got = [_without_layer_policy(legacy.serialize_keras_object(o)) for o in _objects(kt)]
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert keras_legacy.serialize_keras_object(None) is legacy.serialize_keras_object(None) is None


@pytest.mark.interop
def test_nested_objects_are_passively_serialized_as_keras_does():
    keras = require("keras")
    from keras.src.legacy.saving import serialization as keras_legacy

    keras_holder = _holder_class(keras.saving.register_keras_serializable)
    kt_holder = _holder_class(kt.saving.register_keras_serializable)
    expected = keras_legacy.serialize_keras_object(
        keras_holder(keras.regularizers.L2(0.5), _scale, 3, "relu")
    )
    got = legacy.serialize_keras_object(kt_holder(kt.regularizers.L2(0.5), _scale, 3, "relu"))
    assert got == expected
    assert got["config"]["inner"]["__passive_serialization__"] is True
    # Keras's dict loads here: the passive entry becomes an object, the name a function.
    restored = legacy.deserialize_keras_object(
        expected,
        module_objects={"L2": kt.regularizers.L2},
        custom_objects={"_scale": _scale},
    )
    assert isinstance(restored, kt_holder) and isinstance(restored.inner, kt.regularizers.L2)
    assert restored.inner.l2 == 0.5 and restored.fn is _scale and restored.n == 3
    assert restored.label == "relu"  # a string that names no function stays a string


def test_deserialize_names_classes_and_errors():
    objs = {"L2": kt.regularizers.L2, "relu": kt.activations.relu}
    assert legacy.deserialize_keras_object("relu", module_objects=objs) is kt.activations.relu
    assert isinstance(
        legacy.deserialize_keras_object("L2", module_objects=objs), kt.regularizers.L2
    )
    assert legacy.deserialize_keras_object(None) is None
    with pytest.raises(ValueError, match="Unknown regularizer: 'Nope'"):
        legacy.deserialize_keras_object(
            {"class_name": "Nope", "config": {}}, printable_module_name="regularizer"
        )
    with pytest.raises(ValueError, match="Improper config format"):
        legacy.deserialize_keras_object({"config": {}})
    with pytest.raises(ValueError, match="Cannot serialize"):
        legacy.serialize_keras_object(3)


def test_layer_round_trip_and_utils_alias():
    layer = kt.layers.Dense(4, activation="tanh", name="dd")
    config = kt.utils.legacy.serialize_keras_object(layer)
    assert config["class_name"] == "Dense" and config["config"]["units"] == 4
    again = kt.utils.legacy.deserialize_keras_object(
        config, module_objects={"Dense": kt.layers.Dense}
    )
    assert isinstance(again, kt.layers.Dense) and again.get_config() == layer.get_config()
    assert kt.utils.legacy.serialize_keras_object is legacy.serialize_keras_object


@pytest.mark.parametrize("name", ["Adagrad", "Adam", "Ftrl", "Optimizer", "RMSprop", "SGD"])
def test_legacy_optimizers_refuse_like_keras(name):
    with pytest.raises(ImportError, match="`keras.optimizers.legacy` is not supported in Keras 3"):
        getattr(kt.optimizers.legacy, name)(learning_rate=0.1)
