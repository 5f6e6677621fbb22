"""Muon and ScheduleFreeAdamW against real Keras 3: the same variables and gradients, a few
`apply` steps; variables, slots (order, names, values), iterations and configs must agree.

Muon is compared with Keras on its torch backend, in this process. ScheduleFreeAdamW is
compared with Keras on JAX, in a child process: on torch (and TensorFlow) Keras reads the
`z` slot after updating it where it means the value before (its `momentum.value` aliases the
variable it then updates in place), so those backends drift from the algorithm; on JAX the
read is a snapshot, as the algorithm intends, and keratron matches it.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.optimizers.test_optimizer_parity import _configs_match, _strip_uid

pytestmark = pytest.mark.interop

_R = np.random.default_rng(11)
# (name, shape): 2-D weights take Muon steps unless excluded (a tall one is transposed inside
# the Newton-Schulz iteration); the bias, the embedding and the "head" take AdamW steps.
VARIABLES = [
    ("kernel", (3, 5)),
    ("tall_kernel", (6, 2)),
    ("bias", (5,)),
    ("token_embedding", (4, 3)),
    ("head_kernel", (5, 2)),
]
INIT = [_R.standard_normal(shape).astype("float32") for _, shape in VARIABLES]
GRADS = [
    [(_R.standard_normal(x.shape) * s).astype("float32") for x in INIT] for s in (1, 3, 0.3, 1)
]

MUON_ROWS = [
    ("Muon", {"learning_rate": 0.05, "exclude_layers": ["head"]}),
    ("Muon", {"learning_rate": 0.02, "nesterov": False, "rms_rate": None, "ns_steps": 3}),
    (
        "Muon",
        {
            "learning_rate": 0.05,
            "weight_decay": 0.1,
            "adam_weight_decay": 0.0,
            "adam_lr_ratio": 0.5,
            "exclude_embeddings": False,
            "momentum": 0.8,
            "clipnorm": 1.0,
        },
    ),  # fmt: skip
]
SCHEDULE_FREE_ROWS = [
    ("ScheduleFreeAdamW", {}),
    ("ScheduleFreeAdamW", {"learning_rate": 0.05, "beta_1": 0.8, "warmup_steps": 3}),
    ("ScheduleFreeAdamW", {"learning_rate": 0.01, "weight_decay": 0.1, "epsilon": 1e-4}),
]


def _run_ours(name, kw):
    ours = getattr(kt.optimizers, name)(name="opt", **kw)
    kvars = [kt.Variable(x, name=n) for (n, _), x in zip(VARIABLES, INIT)]
    for grads in GRADS:
        ours.apply([kt.convert_to_tensor(g) for g in grads], kvars)
    for k, init in zip(kvars, INIT):
        assert not np.allclose(k.numpy(), init), k.name  # the row really trained
    again = kt.optimizers.deserialize(kt.optimizers.serialize(ours))
    assert type(again) is type(ours) and again.get_config() == ours.get_config()
    return ours, kvars


def _compare(ours, kvars, expected):
    """`expected`: the Keras run as (variables, [(slot name, value)], iterations, config)."""
    variables, slots, iterations, config = expected
    for k, r in zip(kvars, variables):
        np.testing.assert_allclose(k.numpy(), r, atol=2e-5, rtol=2e-5, err_msg=k.name)
    assert int(ours.iterations.numpy()) == iterations
    assert [_strip_uid(v.name) for v in ours.variables] == [_strip_uid(n) for n, _ in slots]
    for k, (_, r) in zip(ours.variables, slots):
        np.testing.assert_allclose(k.numpy(), r, atol=2e-5, rtol=2e-5, err_msg=k.name)
    assert _configs_match(ours.get_config(), config)


def _keras_run(keras, name, kw):
    theirs = getattr(keras.optimizers, name)(name="opt", **kw)
    rvars = [keras.Variable(x, name=n) for (n, _), x in zip(VARIABLES, INIT)]
    for grads in GRADS:
        theirs.apply([keras.ops.convert_to_tensor(g) for g in grads], rvars)
    numpy = keras.ops.convert_to_numpy
    return (
        [numpy(r) for r in rvars],
        [(v.name, numpy(v)) for v in theirs.variables],
        int(numpy(theirs.iterations)),
        theirs.get_config(),
    )


@pytest.mark.parametrize("row", MUON_ROWS, ids=[f"Muon-{i}" for i in range(len(MUON_ROWS))])
def test_muon_matches_keras(row):
    keras = require("keras")
    name, kw = row
    _compare(*_run_ours(name, kw), _keras_run(keras, name, kw))


# Keras first: importing the tests' conftest sets KERAS_BACKEND=torch for what comes after.
_JAX_SCRIPT = """
import json, sys
import keras
assert keras.config.backend() == "jax"
from tests.optimizers import test_new_optimizers as t
out = []
for name, kw in t.SCHEDULE_FREE_ROWS:
    variables, slots, iterations, config = t._keras_run(keras, name, kw)
    out.append([[v.tolist() for v in variables], [(n, v.tolist()) for n, v in slots],
                iterations, config])
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def keras_on_jax():
    require("keras")
    require("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-c", _JAX_SCRIPT], env=env, cwd=root, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("index", range(len(SCHEDULE_FREE_ROWS)))
def test_schedule_free_adamw_matches_keras_on_jax(keras_on_jax, index):
    name, kw = SCHEDULE_FREE_ROWS[index]
    _compare(*_run_ours(name, kw), keras_on_jax[index])


def test_muon_trains_a_model():
    kt.utils.set_random_seed(1)
    x = np.random.default_rng(0).normal(size=(64, 6)).astype("float32")
    y = (x[:, :1] - 2 * x[:, 1:2]).astype("float32")
    model = kt.Sequential([kt.Input((6,)), kt.layers.Dense(8, activation="tanh"),
                           kt.layers.Dense(1, name="head")])  # fmt: skip
    model.compile(optimizer=kt.optimizers.Muon(0.02, exclude_layers=["head"]), loss="mse")
    history = model.fit(x, y, epochs=5, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0]
