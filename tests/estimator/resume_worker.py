"""Trains an Estimator some steps into a model_dir, in a process of its own; prints its
checkpoint's global step and optimizer counters as JSON.

    python -m tests.estimator.resume_worker dnn|keras MODEL_DIR STEPS [--others]

`--others` first builds what a notebook might have built before: an Adam, a compiled Keras
model and another Estimator, trained. That advances the process's auto-name counters, which
must not change the checkpoint's variable names.
"""

import json
import sys
import tempfile

import numpy as np

import keratron as kt
from keratron import estimator as E
from keratron import feature_column as fc


def data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5]], dtype="float32")).astype("float32")


def build_others():
    kt.optimizers.Adam(0.01)
    model = kt.Sequential([kt.Input((3,)), kt.layers.Dense(2), kt.layers.Dense(1)])
    model.compile(optimizer=kt.optimizers.Adam(0.01), loss="mse")
    other = E.DNNRegressor([2], [fc.numeric_column("x", shape=(3,))], model_dir=tempfile.mkdtemp())
    x, y = data()
    other.train(lambda: ({"x": x}, y), steps=2)


def dnn(model_dir):
    x, y = data()
    est = E.DNNRegressor(
        [4],
        [fc.numeric_column("x", shape=(3,))],
        model_dir=model_dir,
        optimizer=kt.optimizers.Adam(0.01),
        config=E.RunConfig(tf_random_seed=0),
    )
    return est, lambda: ({"x": x}, y)


def keras(model_dir):
    x, y = data()
    # Named, so that its layers' paths do not depend on the models built before it; its
    # optimizer is auto-named ("adam_2" after --others).
    model = kt.Sequential(
        [
            kt.Input((3,), name="x"),
            kt.layers.Dense(4, name="hidden"),
            kt.layers.Dense(1, name="out"),
        ],
        name="regressor",
    )
    model.compile(optimizer=kt.optimizers.Adam(0.01), loss="mse")
    est = E.model_to_estimator(model, model_dir=model_dir, config=E.RunConfig(tf_random_seed=0))
    return est, lambda: ({"x": x}, y)


if __name__ == "__main__":
    kind, model_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if "--others" in sys.argv:
        build_others()
    est, input_fn = {"dnn": dnn, "keras": keras}[kind](model_dir)
    est.train(input_fn, steps=steps)
    names = est.get_variable_names()
    print(
        json.dumps(
            {
                "global_step": int(est.get_variable_value("global_step")),
                "iterations": {
                    n: int(est.get_variable_value(n)) for n in names if n.endswith("/iteration")
                },
            }
        )
    )
