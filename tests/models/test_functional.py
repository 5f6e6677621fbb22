"""Functional models: construction, multi-io, shared and nested layers, masks, training flag,
configs and JSON."""

import json

import numpy as np
import pytest

import keratron as kt
from keratron import layers
from keratron.models.functional import Functional
from tests.conftest import require


def _two_io_model():
    a = kt.Input((4,), name="a")
    b = kt.Input((2,), name="b")
    h = layers.Dense(3, name="d")(a)
    o1 = layers.Dense(1, name="out1")(h)
    o2 = layers.Dense(2, activation="softmax", name="out2")(layers.Concatenate(name="cat")([h, b]))
    return kt.Model({"a": a, "b": b}, {"out1": o1, "out2": o2}, name="two_io")


def test_model_call_returns_functional_and_matches_manual_forward(rng):
    x = kt.Input((4,))
    d1 = layers.Dense(3, activation="tanh")
    d2 = layers.Dense(2)
    model = kt.Model(x, d2(d1(x)))
    assert isinstance(model, Functional) and isinstance(model, kt.Model)
    data = rng.standard_normal((5, 4)).astype("float32")
    w1, b1, w2, b2 = model.get_weights()
    expected = np.tanh(data @ w1 + b1) @ w2 + b2
    np.testing.assert_allclose(model(data).numpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(data, verbose=0), expected, rtol=1e-5, atol=1e-6)
    assert [type(x).__name__ for x in model.layers] == ["InputLayer", "Dense", "Dense"]
    assert model.input_shape == (None, 4) and model.output_shape == (None, 2)
    assert model.input is x and model.inputs == [x]


def test_multi_io_dicts_layer_order_and_names(rng):
    model = _two_io_model()
    # Keras 3's order: the depth-first discovery order from the outputs, inputs first.
    assert [x.name for x in model.layers] == ["a", "d", "b", "cat", "out1", "out2"]
    assert model.output_names == ["out1", "out2"]
    assert model.input_names == ["a", "b"]
    xa = rng.standard_normal((3, 4)).astype("float32")
    xb = rng.standard_normal((3, 2)).astype("float32")
    out = model({"a": xa, "b": xb})
    assert set(out) == {"out1", "out2"}
    assert out["out1"].shape == (3, 1) and out["out2"].shape == (3, 2)
    np.testing.assert_allclose(out["out2"].numpy().sum(-1), 1.0, rtol=1e-5)


def test_list_model_accepts_dict_by_input_name_and_checks_shapes(rng):
    a, b = kt.Input((2,), name="left"), kt.Input((2,), name="right")
    model = kt.Model([a, b], layers.Add()([a, b]))
    xa, xb = np.ones((2, 2), "float32"), 2 * np.ones((2, 2), "float32")
    np.testing.assert_allclose(model({"right": xb, "left": xa}).numpy(), 3.0)
    np.testing.assert_allclose(model([xa, xb]).numpy(), 3.0)
    with pytest.raises(ValueError, match="expects 2 input"):
        model([xa])
    with pytest.raises(ValueError, match="missing"):
        model({"left": xa})
    with pytest.raises(ValueError, match=r"incompatible.*expected shape=\(None, 2\)"):
        model([np.ones((2, 3), "float32"), xb])


def test_shared_layer_has_two_nodes_and_one_set_of_weights(rng):
    a, b = kt.Input((3,)), kt.Input((3,))
    shared = layers.Dense(2, use_bias=False)
    model = kt.Model([a, b], layers.Subtract()([shared(a), shared(b)]))
    assert len(shared._inbound_nodes) == 2
    assert len(model.weights) == 1
    xa = rng.standard_normal((4, 3)).astype("float32")
    xb = rng.standard_normal((4, 3)).astype("float32")
    (k,) = model.get_weights()
    np.testing.assert_allclose(model([xa, xb]).numpy(), (xa - xb) @ k, rtol=1e-5, atol=1e-6)


def test_nested_model_as_layer(rng):
    inner_in = kt.Input((3,))
    inner = kt.Model(inner_in, layers.Dense(2, activation="relu")(inner_in), name="inner")
    x = kt.Input((5,))
    h = layers.Dense(3)(x)
    model = kt.Model(x, layers.Dense(1)(inner(h)))
    assert model.layers[2] is inner
    assert len(model.weights) == 6
    data = rng.standard_normal((4, 5)).astype("float32")
    expected = model.layers[-1](inner(model.layers[1](data)))
    np.testing.assert_allclose(model(data).numpy(), expected.numpy(), rtol=1e-6)
    # The nested model keeps working on its own.
    assert inner(np.zeros((2, 3), "float32")).shape == (2, 2)


def test_submodel_from_intermediate_tensors(rng):
    x = kt.Input((4,))
    h = layers.Dense(3, name="first")(x)
    y = layers.Dense(2, name="second")(h)
    full = kt.Model(x, y)
    head = kt.Model(h, y)
    data = rng.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(
        head(data).numpy(), full.get_layer("second")(data).numpy(), rtol=1e-6
    )
    assert head.get_layer("second") is full.get_layer("second")


def test_get_layer_by_name_and_index():
    model = _two_io_model()
    assert model.get_layer("cat").name == "cat"
    assert model.get_layer(index=1).name == "d"
    with pytest.raises(ValueError, match="No such layer: nope"):
        model.get_layer("nope")
    with pytest.raises(ValueError, match="only has 6 layers"):
        model.get_layer(index=10)
    with pytest.raises(ValueError, match="Provide only a layer name or a layer index"):
        model.get_layer("d", 1)


def test_graph_errors():
    x = kt.Input((2,))
    other = kt.Input((2,))
    y = layers.Add()([x, other])
    with pytest.raises(ValueError, match="Graph disconnected"):
        kt.Model(x, y)
    with pytest.raises(ValueError, match="must be KerasTensors"):
        kt.Model(x, np.zeros((2,)))
    x2 = kt.Input((2,))
    d = layers.Dense(2, name="same")(x2)
    d = layers.Dense(2, name="same")(d)
    with pytest.raises(ValueError, match='"same" is used 2 times'):
        kt.Model(x2, d)


def test_training_flag_reaches_dropout():
    x = kt.Input((200,))
    model = kt.Model(x, layers.Dropout(0.5)(x))
    ones = np.ones((2, 200), "float32")
    np.testing.assert_array_equal(model(ones).numpy(), ones)
    dropped = model(ones, training=True).numpy()
    assert 0.2 < (dropped == 0).mean() < 0.8
    np.testing.assert_allclose(dropped[dropped != 0], 2.0)


def test_mask_propagates_through_graph():
    x = kt.Input((4,), dtype="int32")
    emb = layers.Embedding(10, 3, mask_zero=True)(x)
    model = kt.Model(x, layers.Dense(2)(emb))
    out = model(np.array([[1, 2, 0, 0]]))
    np.testing.assert_array_equal(out._keras_mask.numpy(), [[True, True, False, False]])


def test_int_input_keeps_dtype_and_float64_is_cast():
    x = kt.Input((3,), dtype="int32")
    y = kt.Input((3,))
    seen = {}

    class Probe(layers.Layer):
        def call(self, a, b):
            seen["dtypes"] = (a.dtype, b.dtype)
            return b

    model = kt.Model([x, y], Probe()(x, y))
    model([np.ones((1, 3), "int64"), np.ones((1, 3), "float64")])
    assert seen["dtypes"] == ("int32", "float32")


def _same_predictions(m1, m2, data):
    p1, p2 = m1.predict(data, verbose=0), m2.predict(data, verbose=0)
    for a, b in zip(
        np.atleast_1d(p1) if isinstance(p1, np.ndarray) else p1.values(),
        np.atleast_1d(p2) if isinstance(p2, np.ndarray) else p2.values(),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_config_and_json_round_trip_multi_io(rng):
    model = _two_io_model()
    config = model.get_config()
    assert [c["name"] for c in config["layers"]] == [x.name for x in model.layers]
    assert config["input_layers"] == {"a": ["a", 0, 0], "b": ["b", 0, 0]}
    assert config["output_layers"] == {"out1": ["out1", 0, 0], "out2": ["out2", 0, 0]}
    node = config["layers"][3]["inbound_nodes"][0]
    assert node["args"][0][0]["class_name"] == "__keras_tensor__"
    assert node["args"][0][0]["config"]["keras_history"] == ["d", 0, 0]
    data = {
        "a": rng.standard_normal((3, 4)).astype("float32"),
        "b": rng.standard_normal((3, 2)).astype("float32"),
    }
    for clone in (kt.Model.from_config(config), kt.models.model_from_json(model.to_json())):
        assert isinstance(clone, Functional) and clone is not model
        clone.set_weights(model.get_weights())
        p1, p2 = model.predict(data, verbose=0), clone.predict(data, verbose=0)
        for k in ("out1", "out2"):
            np.testing.assert_allclose(p1[k], p2[k], rtol=1e-6)
        assert json.loads(json.dumps(clone.get_config())) == json.loads(json.dumps(config))


def test_config_round_trip_shared_and_nested(rng):
    inner_in = kt.Input((3,), name="ii")
    inner = kt.Model(inner_in, layers.Dense(2, name="idense")(inner_in), name="inner")
    a, b = kt.Input((3,), name="a"), kt.Input((3,), name="b")
    shared = layers.Dense(3, name="shared")
    out = layers.Dense(1, name="head")(inner(layers.Add(name="add")([shared(a), shared(b)])))
    model = kt.Model([a, b], out, name="outer")
    config = json.loads(model.to_json())
    assert config["class_name"] == "Functional"
    layer_cfgs = {c["name"]: c for c in config["config"]["layers"]}
    assert len(layer_cfgs["shared"]["inbound_nodes"]) == 2
    assert layer_cfgs["inner"]["class_name"] == "Functional"
    clone = kt.models.model_from_json(model.to_json())
    clone.set_weights(model.get_weights())
    data = [rng.standard_normal((4, 3)).astype("float32") for _ in range(2)]
    np.testing.assert_allclose(
        clone.predict(data, verbose=0), model.predict(data, verbose=0), rtol=1e-6
    )
    assert len(clone.get_layer("shared")._inbound_nodes) == 2


def test_nested_model_output_index_follows_keras_numbering():
    inner_in = kt.Input((3,), name="ii")
    inner = kt.Model(inner_in, layers.Dense(2, name="idense")(inner_in), name="inner")
    x = kt.Input((3,), name="x")
    model = kt.Model(x, inner(x))
    # Keras numbers a nested functional model's calls from 1 in input/output_layers.
    assert model.get_config()["output_layers"] == [["inner", 1, 0]][0]
    clone = kt.Model.from_config(model.get_config())
    assert clone.output_shape == (None, 2)


def test_unknown_class_in_config_is_an_error():
    model = _two_io_model()
    config = model.get_config()
    config["layers"][1]["class_name"] = "NoSuchLayer"
    with pytest.raises(ValueError, match="Unknown layer: 'NoSuchLayer'"):
        kt.Model.from_config(config)
    with pytest.raises(ValueError, match="not valid JSON"):
        kt.models.model_from_json("{not json")


def test_custom_layer_through_custom_objects_and_registry(rng):
    # A name no other test registers: the custom-object registry is process-wide.
    class Scale(layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    Scale.__name__ = Scale.__qualname__ = "ScaleOnlyInTestFunctional"

    x = kt.Input((2,))
    model = kt.Model(x, Scale(3.0)(x))
    with pytest.raises(ValueError, match="Unknown layer: 'ScaleOnlyInTestFunctional'"):
        kt.models.model_from_json(model.to_json())
    clone = kt.models.model_from_json(
        model.to_json(), custom_objects={"ScaleOnlyInTestFunctional": Scale}
    )
    np.testing.assert_allclose(clone(np.ones((1, 2), "float32")).numpy(), 3.0)
    from keratron.layers import serialization

    registered = serialization.register_keras_serializable(package="TestModels")(Scale)
    try:
        clone = kt.models.model_from_json(model.to_json())
        assert type(clone.layers[1]) is registered
    finally:
        serialization._GLOBAL_CUSTOM_OBJECTS.pop("TestModels>ScaleOnlyInTestFunctional", None)
        serialization._GLOBAL_CUSTOM_NAMES.pop(Scale, None)


def test_functional_subclass_pattern(rng):
    class Wrapped(kt.Model):
        def __init__(self, units=2, **kwargs):
            x = kt.Input((3,))
            super().__init__(x, layers.Dense(units)(x), **kwargs)
            self.units = units

    model = Wrapped(units=4)
    assert isinstance(model, Functional)
    assert model(np.zeros((1, 3), "float32")).shape == (1, 4)


def test_clone_model(rng):
    model = _two_io_model()
    clone = kt.models.clone_model(model)
    assert clone is not model and [x.name for x in clone.layers] == [x.name for x in model.layers]
    assert all(a is not b for a, b in zip(clone.layers, model.layers))
    clone.set_weights(model.get_weights())
    data = {
        "a": rng.standard_normal((2, 4)).astype("float32"),
        "b": rng.standard_normal((2, 2)).astype("float32"),
    }
    np.testing.assert_allclose(
        clone.predict(data, verbose=0)["out2"], model.predict(data, verbose=0)["out2"], rtol=1e-6
    )
    seq = kt.Sequential([kt.Input((3,)), layers.Dense(2)])
    seq_clone = kt.models.clone_model(seq)
    assert isinstance(seq_clone, kt.Sequential) and seq_clone.input_shape == (None, 3)


@pytest.mark.interop
def test_keras_reads_our_json(rng):
    keras = require("keras")
    inner_in = kt.Input((3,), name="ii")
    inner = kt.Model(inner_in, layers.Dense(2, activation="relu", name="idense")(inner_in))
    a, b = kt.Input((3,), name="a"), kt.Input((3,), name="b")
    shared = layers.Dense(3, name="shared")
    model = kt.Model([a, b], inner(layers.Add(name="add")([shared(a), shared(b)])))
    theirs = keras.models.model_from_json(model.to_json())
    theirs.set_weights(model.get_weights())
    data = [rng.standard_normal((4, 3)).astype("float32") for _ in range(2)]
    np.testing.assert_allclose(
        np.asarray(theirs.predict(data, verbose=0)), model.predict(data, verbose=0), rtol=1e-5
    )


@pytest.mark.interop
def test_we_read_keras_json(rng):
    keras = require("keras")
    L = keras.layers
    inner_in = keras.Input((3,), name="ii")
    inner = keras.Model(inner_in, L.Dense(2, activation="relu", name="idense")(inner_in))
    a, b = keras.Input((3,), name="a"), keras.Input((3,), name="b")
    shared = L.Dense(3, name="shared")
    theirs = keras.Model([a, b], inner(L.Add(name="add")([shared(a), shared(b)])))
    ours = kt.models.model_from_json(theirs.to_json())
    assert [x.name for x in ours.layers] == [x.name for x in theirs.layers]
    ours.set_weights(theirs.get_weights())
    data = [rng.standard_normal((4, 3)).astype("float32") for _ in range(2)]
    np.testing.assert_allclose(
        ours.predict(data, verbose=0), np.asarray(theirs.predict(data, verbose=0)), rtol=1e-5
    )
    seq = keras.Sequential([keras.Input((4,)), L.Dense(3, activation="tanh"), L.Dense(1)])
    ours_seq = kt.models.model_from_json(seq.to_json())
    assert isinstance(ours_seq, kt.Sequential) and ours_seq.input_shape == (None, 4)


@pytest.mark.parametrize("dtype", ["string", str])
def test_a_string_input_says_where_strings_go_instead(dtype):
    with pytest.raises(ValueError, match=r"Input 'text'.*TextVectorization.*Received: dtype="):
        kt.Input(shape=(1,), dtype=dtype, name="text")


@pytest.mark.interop
def test_targets_keyed_by_the_single_outputs_name_as_in_tf_keras_2():
    # tf.keras 2 takes y={"<output layer>": y} for a one-output model (Keras 3 refuses it).
    keras2 = require("tf_keras")
    rng = np.random.default_rng(0)
    x = rng.random((16, 3)).astype("float32")
    y = (x.sum(1) > 1.5).astype("int32")
    losses = []
    for api in (kt, keras2):
        inputs = api.Input((3,), name="feat")
        outputs = api.layers.Dense(2, activation="softmax", name="cls")(inputs)
        model = api.Model(inputs, outputs)
        model.compile(api.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
        model.set_weights([np.full((3, 2), 0.1, "float32") * [1, -1], np.zeros(2, "float32")])
        model.fit({"feat": x}, {"cls": y}, batch_size=16, epochs=1, shuffle=False, verbose=0)
        losses.append(model.evaluate({"feat": x}, {"cls": y}, verbose=0))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
