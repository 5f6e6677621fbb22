"""serialize_keras_object / deserialize_keras_object and nested layers in configs, against
Keras 3 (torch backend): the same dicts, each side reading the other's."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

pytestmark = pytest.mark.interop


def _objects(k):
    return [
        k.layers.Dense(3, activation="relu", name="d"),
        k.optimizers.Adam(learning_rate=0.01),
        k.losses.MeanSquaredError(),
        k.initializers.GlorotUniform(seed=1),
        k.regularizers.L2(0.1),
        k.activations.relu,
    ]


def test_serialized_dicts_name_what_keras_names():
    keras = require("keras")
    for ours, theirs in zip(_objects(keratron), _objects(keras)):
        a = keratron.saving.serialize_keras_object(ours)
        b = keras.saving.serialize_keras_object(theirs)
        # Keras on torch writes its backend's optimizer module and registered name; Keras
        # reads "keras.optimizers" (checked below).
        keys = ("class_name",) if b["class_name"] == "Adam" else ("module", "class_name")
        for key in (*keys, "registered_name"):
            if key != "registered_name" or b["class_name"] != "Adam":
                assert a[key] == b[key], (key, a, b)
        if b["class_name"] == "function":
            assert a["config"] == b["config"]


def test_each_side_reads_the_others_configs():
    keras = require("keras")
    for ours, theirs in zip(_objects(keratron), _objects(keras)):
        from_keras = keratron.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(theirs)
        )
        from_ours = keras.saving.deserialize_keras_object(
            keratron.saving.serialize_keras_object(ours)
        )
        assert type(from_keras).__name__ == type(ours).__name__
        assert type(from_ours).__name__ == type(theirs).__name__
    dense = keratron.layers.deserialize(keras.layers.serialize(keras.layers.Dense(4)))
    assert isinstance(dense, keratron.layers.Dense) and dense.units == 4


@pytest.mark.parametrize(
    "value",
    [None, 3, "a", [1, (2, 3)], {"x": [1.5]}, b"xyz", slice(1, None, 2), Ellipsis],
)
def test_plain_values_round_trip_as_in_keras(value):
    keras = require("keras")
    ours = keratron.saving.serialize_keras_object(value)
    assert ours == keras.saving.serialize_keras_object(value)
    expected = keras.saving.deserialize_keras_object(ours)
    assert keratron.saving.deserialize_keras_object(ours) == expected


def test_arrays_and_tensors_round_trip():
    keras = require("keras")
    a = np.arange(6, dtype="float32").reshape(2, 3)
    config = keratron.saving.serialize_keras_object(a)
    assert config == keras.saving.serialize_keras_object(a)
    np.testing.assert_array_equal(keratron.saving.deserialize_keras_object(config), a)
    t = keratron.saving.serialize_keras_object(keratron.convert_to_tensor(a))
    assert t["class_name"] == "__tensor__"
    np.testing.assert_array_equal(keratron.saving.deserialize_keras_object(t).numpy(), a)


def test_utils_and_layers_export_the_saving_functions():
    keras = require("keras")
    for name in (
        "register_keras_serializable",
        "serialize_keras_object",
        "deserialize_keras_object",
        "custom_object_scope",
        "get_registered_object",
    ):
        assert hasattr(keras.utils, name)
        assert getattr(keratron.utils, name) is getattr(keratron.saving, name)
        assert name in keratron.utils.__all__
    assert keratron.layers.serialize is keratron.saving.serialize_keras_object
    assert keratron.layers.deserialize is keratron.saving.deserialize_keras_object


def _wrap_model(k, tag):
    @k.saving.register_keras_serializable(package=f"TestSerializationLib{tag}")
    class Wrap(k.layers.Layer):
        def __init__(self, inner, **kwargs):
            super().__init__(**kwargs)
            self.inner = inner

        def call(self, x):
            return self.inner(x)

        def get_config(self):
            return {**super().get_config(), "inner": self.inner}

        @classmethod
        def from_config(cls, config):
            config["inner"] = k.layers.deserialize(config["inner"])
            return cls(**config)

    inp = k.Input((3,))
    return k.Model(inp, Wrap(k.layers.Dense(2, name="inner_dense"))(inp))


def test_layer_objects_in_get_config_are_serialized_as_in_keras(tmp_path):
    keras = require("keras")
    ours, theirs = _wrap_model(keratron, "Ours"), _wrap_model(keras, "Keras")
    inner = ours.get_config()["layers"][1]["config"]["inner"]
    expected = theirs.get_config()["layers"][1]["config"]["inner"]
    for key in ("module", "class_name", "registered_name"):
        assert inner[key] == expected[key]
    assert inner["config"]["units"] == 2 and inner["config"]["name"] == "inner_dense"
    path = str(tmp_path / "wrap.keras")
    ours.save(path)
    restored = keratron.saving.load_model(path)
    assert isinstance(restored.layers[1].inner, keratron.layers.Dense)
    x = np.random.default_rng(0).normal(size=(4, 3)).astype("float32")
    np.testing.assert_allclose(
        restored.predict(x, verbose=0), ours.predict(x, verbose=0), rtol=1e-6
    )


def _registry_answers(k, tag):
    """What `get_registered_object` answers, as class names, for a class registered under a
    package, one in a scope, one passed as `custom_objects` and one as `module_objects`,
    names shared between those places included."""

    def make(name):
        return type(name, (k.layers.Layer,), {})

    package = f"TestRegistry{tag}"
    scale = k.saving.register_keras_serializable(package=package)(make("Scale"))
    shared = k.saving.register_keras_serializable(package=package, name="Shared")(make("Shared"))
    scoped, passed, module = make("Scoped"), make("Passed"), make("Module")
    custom = {"Passed": passed, f"{package}>Shared": passed}
    modules = {"Module": module, "Passed": module}
    lookups = ["Scale", f"{package}>Scale", f"{package}>Shared", "Scoped", "Passed", "Module"]
    with k.saving.custom_object_scope({"Scoped": scoped, f"{package}>Scale": scoped}):
        found = [k.saving.get_registered_object(n, custom, modules) for n in lookups]
    found += [k.saving.get_registered_object(n) for n in ("Scale", f"{package}>Scale")]
    assert shared is not None and scale is not None
    return [None if c is None else c.__name__ for c in found]


def test_get_registered_object_answers_as_keras_does():
    # Exact names only (a packaged class is not found by its bare name), and Keras's order:
    # scopes, then the registry, then custom_objects, then module_objects.
    keras = require("keras")
    ours = _registry_answers(keratron, "Ours")
    assert ours == _registry_answers(keras, "Keras")
    assert ours == [None, "Scoped", "Shared", "Scoped", "Passed", "Module", None, "Scale"]
