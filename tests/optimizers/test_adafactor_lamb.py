"""Adafactor and Lamb against real Keras 3 (torch backend): variables and slots after five
`apply` steps from the same start, config round trips with Keras's keys, and one `fit`."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

_R = np.random.default_rng(11)
# A rank-3 variable (factored over its last two axes), a matrix, a vector and a scalar.
SHAPES = [(2, 3, 4), (5, 3), (4,), ()]
INIT = [_R.standard_normal(s).astype("float32") for s in SHAPES]
INIT[2][:] = 0.0  # a zero variable: Lamb's trust ratio falls back to 1, Adafactor's rms to eps_2
GRADS = [
    [(_R.standard_normal(s) * sc).astype("float32") for s in SHAPES] for sc in (1, 3, 0.2, 1, 2)
]

ROWS = [
    ("Adafactor", {}),
    ("Adafactor", {"learning_rate": 0.5}),
    ("Adafactor", {"learning_rate": 0.05, "relative_step": False, "clip_threshold": 0.5}),
    ("Adafactor", {"learning_rate": 0.1, "beta_2_decay": -0.5, "epsilon_2": 0.1}),
    ("Adafactor", {"learning_rate": 0.1, "weight_decay": 0.1, "clipnorm": 1.0}),
    ("Lamb", {}),
    ("Lamb", {"learning_rate": 0.05}),
    ("Lamb", {"learning_rate": 0.05, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-3}),
    ("Lamb", {"learning_rate": 0.05, "weight_decay": 0.1, "global_clipnorm": 2.0}),
    ("Lamb", {"learning_rate": 0.05, "gradient_accumulation_steps": 2}),
]


def _run(module, cls_name, kwargs):
    variables = [module.Variable(w.copy()) for w in INIT]
    opt = getattr(module.optimizers, cls_name)(**kwargs)
    for step in GRADS:
        opt.apply([module.ops.convert_to_tensor(g) for g in step], variables)
    conv = module.ops.convert_to_numpy
    return [conv(v) for v in variables], [conv(v) for v in opt.variables]


@pytest.mark.interop
@pytest.mark.parametrize("cls_name,kwargs", ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_five_steps_match_keras(cls_name, kwargs):
    keras = require("keras")
    want_vars, want_slots = _run(keras, cls_name, kwargs)
    got_vars, got_slots = _run(kt, cls_name, kwargs)
    for got, want in zip(got_vars, want_vars):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    assert [s.shape for s in got_slots] == [s.shape for s in want_slots]
    for got, want in zip(got_slots, want_slots):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    # The run actually moved the variables.
    assert not np.allclose(got_vars[0], INIT[0])


@pytest.mark.interop
@pytest.mark.parametrize("cls_name", ["Adafactor", "Lamb"])
def test_config_round_trip_with_keras_keys(cls_name):
    keras = require("keras")
    kwargs = {"learning_rate": 0.01, "clipnorm": 2.0}
    if cls_name == "Adafactor":
        kwargs.update(beta_2_decay=-0.6, epsilon_2=1e-2, relative_step=False)
    else:
        kwargs.update(beta_1=0.8, epsilon=1e-5)
    want = getattr(keras.optimizers, cls_name)(**kwargs).get_config()
    config = getattr(kt.optimizers, cls_name)(**kwargs).get_config()
    assert set(config) == set(want)
    for key, value in want.items():
        if isinstance(value, float):
            assert config[key] == pytest.approx(value, rel=1e-6), key
        else:
            assert config[key] == value, key
    # Each side reads the other's config.
    again = getattr(kt.optimizers, cls_name).from_config(want)
    assert again.get_config() == config
    getattr(keras.optimizers, cls_name).from_config(config)
    restored = kt.optimizers.deserialize(kt.optimizers.serialize(again))
    assert type(restored).__name__ == cls_name
    assert kt.optimizers.get(cls_name.lower()).__class__.__name__ == cls_name


def test_defaults():
    a = kt.optimizers.Adafactor()
    assert (a.beta_2_decay, a.epsilon_1, a.epsilon_2, a.clip_threshold, a.relative_step) == (
        -0.8,
        1e-30,
        1e-3,
        1.0,
        True,
    )
    b = kt.optimizers.Lamb()
    assert (b.beta_1, b.beta_2, b.epsilon) == (0.9, 0.999, 1e-7)


@pytest.mark.parametrize("cls_name", ["Adafactor", "Lamb"])
def test_fit_reduces_loss(cls_name):
    kt.utils.set_random_seed(0)
    x = np.random.default_rng(0).standard_normal((64, 5)).astype("float32")
    y = (x @ np.arange(1, 6, dtype="float32")[:, None]).astype("float32")
    model = kt.Sequential(
        [kt.Input((5,)), kt.layers.Dense(8, activation="relu"), kt.layers.Dense(1)]
    )
    model.compile(optimizer=getattr(kt.optimizers, cls_name)(learning_rate=0.05), loss="mse")
    history = model.fit(x, y, epochs=4, batch_size=16, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0]
