"""Sequential models and subclassed models: building, layer lists, configs."""

import numpy as np
import pytest

import keratron as kt
from keratron import layers


def test_sequential_from_input_is_a_functional_graph(rng):
    model = kt.Sequential([kt.Input((4,)), layers.Dense(3, activation="tanh"), layers.Dense(1)])
    assert model.built and model._functional is not None
    assert [type(x).__name__ for x in model.layers] == ["Dense", "Dense"]
    assert model.input_shape == (None, 4) and model.output_shape == (None, 1)
    data = rng.standard_normal((5, 4)).astype("float32")
    w1, b1, w2, b2 = model.get_weights()
    np.testing.assert_allclose(
        model(data).numpy(), np.tanh(data @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-6
    )


def test_sequential_input_shape_argument_builds_at_once():
    model = kt.Sequential([layers.Dense(2, input_shape=(3,)), layers.Dense(1)])
    assert model.built and model.inputs[0].shape == (None, 3)
    assert len(model.weights) == 4
    assert isinstance(model._layers[0], kt.layers.InputLayer)


def test_sequential_deferred_build_on_first_call_and_fit(rng):
    model = kt.Sequential([layers.Dense(2), layers.Dense(1)])
    assert not model.built and model.weights == []
    with pytest.raises(AttributeError, match="no defined inputs"):
        _ = model.inputs
    model(np.zeros((5, 3), "float32"))
    assert model.built and model.inputs[0].shape == (None, 3)
    assert model(np.zeros((7, 3), "float32")).shape == (7, 1)
    fresh = kt.Sequential([layers.Dense(1)])
    fresh.compile("sgd", "mse")
    fresh.fit(np.zeros((4, 2), "float32"), np.zeros((4, 1), "float32"), verbose=0)
    assert fresh.input_shape == (None, 2)


def test_sequential_add_pop_and_errors():
    model = kt.Sequential(name="stack")
    model.add(kt.Input((4,)))
    model.add(layers.Dense(3, name="d1"))
    assert model.output_shape == (None, 3)
    model.add(layers.Dense(2, name="d2"))
    assert model.output_shape == (None, 2)
    popped = model.pop()
    assert popped.name == "d2" and model.output_shape == (None, 3)
    with pytest.raises(ValueError, match="unique names"):
        model.add(layers.Dense(2, name="d1"))
    with pytest.raises(TypeError, match="Only instances of `keratron.layers.Layer`"):
        model.add("dense")
    with pytest.raises(ValueError, match="already been configured to use input shape"):
        model.add(kt.Input((4,)))
    model.pop()
    with pytest.raises(TypeError, match="no layers to pop"):
        model.pop()


def test_sequential_config_round_trip(rng):
    model = kt.Sequential(
        [kt.Input((4,)), layers.Dense(3, activation="relu"), layers.Dense(2)], name="seq"
    )
    config = model.get_config()
    assert config["name"] == "seq"
    assert [c["class_name"] for c in config["layers"]] == ["InputLayer", "Dense", "Dense"]
    assert config["build_input_shape"] == (None, 4)
    clone = kt.Sequential.from_config(config)
    clone.set_weights(model.get_weights())
    data = rng.standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(clone.predict(data, verbose=0), model.predict(data, verbose=0))
    json_clone = kt.models.model_from_json(model.to_json())
    assert isinstance(json_clone, kt.Sequential) and json_clone.name == "seq"
    json_clone.set_weights(model.get_weights())
    np.testing.assert_allclose(json_clone.predict(data, verbose=0), model.predict(data, verbose=0))


def test_sequential_nested_in_functional(rng):
    block = kt.Sequential([layers.Dense(3, activation="relu"), layers.Dense(2)], name="block")
    x = kt.Input((4,))
    model = kt.Model(x, layers.Dense(1)(block(x)))
    assert block.built and model.layers[1] is block
    data = rng.standard_normal((2, 4)).astype("float32")
    expected = model.layers[2](block(data)).numpy()
    np.testing.assert_allclose(model(data).numpy(), expected, rtol=1e-6)
    clone = kt.models.model_from_json(model.to_json())
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(clone(data).numpy(), expected, rtol=1e-6)


class TwoLayers(kt.Model):
    def __init__(self, units=4, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden = layers.Dense(units, activation="tanh")
        self.out = layers.Dense(1)
        self.counter = kt.metrics.Sum(name="calls")

    def call(self, x, training=None):
        return self.out(self.hidden(x))

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_subclassed_model_tracks_layers_and_builds(rng):
    model = TwoLayers(units=5)
    assert model.layers == [model.hidden, model.out]
    assert not model.built and model.weights == []
    data = rng.standard_normal((3, 2)).astype("float32")
    out = model(data)
    assert out.shape == (3, 1) and len(model.weights) == 4
    w1, b1, w2, b2 = model.get_weights()
    np.testing.assert_allclose(out.numpy(), np.tanh(data @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-6)
    built = TwoLayers()
    built.build((None, 2))
    assert [w.shape for w in built.weights] == [(2, 4), (4,), (4, 1), (1,)]
    assert model.get_layer(index=1) is model.out


def test_subclassed_config_and_attribute_metrics():
    model = TwoLayers(units=3, name="two")
    clone = TwoLayers.from_config(model.get_config())
    assert clone.units == 3 and clone.name == "two"
    assert [m.name for m in model.metrics] == ["calls"]
    model.compile("sgd", "mse")
    assert model.metrics_names == ["loss", "calls"]


def test_model_positional_args_error():
    with pytest.raises(TypeError, match="keyword arguments only"):
        kt.Model(1)
