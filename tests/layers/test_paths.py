"""Variable and layer paths: the names of the layers a weight was built inside, as Keras 3
gives them ("sequential/dense/kernel"), so scripts that print, filter or key on `path` see
the same strings, and optimizer slots are named after them."""

import re

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require


def _unnumbered(path):
    # Layer names carry per-process counters ("dense_3"); two frameworks number differently.
    return "/".join(re.sub(r"_\d+$", "", part) for part in path.split("/"))


def _cases(keras):
    """name -> a function building a model or layer with `keras` and returning its weights."""
    L = keras.layers
    ones = lambda *shape: np.ones(shape, "float32")  # noqa: E731

    def sequential():
        return keras.Sequential([keras.Input((4,)), L.Dense(3), L.Dense(2)]).weights

    def functional():
        i = keras.Input((4,))
        return keras.Model(i, L.Dense(3, name="d1")(i), name="outer").weights

    def subclassed():
        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.hidden = L.Dense(2)

            def call(self, x):
                return self.hidden(x)

        net = Net()
        net(ones(1, 4))
        return net.weights

    def lstm():
        layer = L.LSTM(3)
        layer(ones(1, 5, 2))
        return layer.weights

    def bidirectional():
        layer = L.Bidirectional(L.GRU(3))
        layer(ones(1, 5, 2))
        return layer.weights

    def attention():
        layer = L.MultiHeadAttention(2, 4)
        q = ones(1, 3, 4)
        layer(q, q)
        return layer.weights

    def nested():
        inner = keras.Sequential([L.Dense(2)], name="inner")
        return keras.Sequential([keras.Input((4,)), inner], name="outer").weights

    def built_on_first_call():
        model = keras.Sequential([L.Dense(2), L.BatchNormalization()])
        model(ones(2, 4))
        return model.weights

    def wrapper():
        layer = L.TimeDistributed(L.Dense(2))
        layer(ones(1, 3, 4))
        return layer.weights

    return {
        "sequential": sequential,
        "functional": functional,
        "subclassed": subclassed,
        "lstm": lstm,
        "bidirectional": bidirectional,
        "attention": attention,
        "nested": nested,
        "built_on_first_call": built_on_first_call,
        "wrapper": wrapper,
    }


@pytest.mark.parametrize("case", list(_cases(kt)))
def test_weight_paths_match_keras(case):
    keras = require("keras")
    ours = [_unnumbered(w.path) for w in _cases(kt)[case]()]
    theirs = [_unnumbered(w.path) for w in _cases(keras)[case]()]
    assert ours == theirs


def test_paths_name_the_enclosing_layers():
    model = kt.Sequential([kt.Input((4,)), kt.layers.Dense(3, name="hidden")], name="net")
    assert [w.path for w in model.weights] == ["net/hidden/kernel", "net/hidden/bias"]
    assert model.get_layer("hidden").path == "net/hidden"
    # A layer built on its own is its own first scope; one not built yet answers its name.
    alone = kt.layers.Dense(2, name="alone")
    assert alone.path == "alone"
    alone.build((None, 3))
    assert [w.path for w in alone.weights] == ["alone/kernel", "alone/bias"]


def test_optimizer_slots_follow_the_paths():
    model = kt.Sequential([kt.Input((4,)), kt.layers.Dense(3, name="hidden")], name="net")
    opt = kt.optimizers.Adam(name="adam")
    opt.build(model.trainable_variables)
    assert "adam/net_hidden_kernel_momentum" in [v.path for v in opt.variables]


def test_a_build_that_raises_leaves_no_scope_open():
    class Broken(kt.layers.Layer):
        def build(self, input_shape):
            raise RuntimeError("no weights today")

    with pytest.raises(RuntimeError, match="no weights today"):
        Broken(name="broken")(np.ones((1, 2), "float32"))
    later = kt.layers.Dense(2, name="later")
    later(np.ones((1, 2), "float32"))
    assert later.kernel.path == "later/kernel"
