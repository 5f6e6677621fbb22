"""HashedCrossing against Keras 3 (whose layer runs TensorFlow's `sparse.cross_hashed`):
TensorFlow and triton each bundle LLVM and abort the process when both load, so the Keras
side runs once in a child process over the same table of cases, and the parent compares."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require
from tests.layers.layer_test import run_layer_test

# (init kwargs, inputs as JSON lists, input dtypes)
CASES = [
    ({"num_bins": 5}, [[1, 2, 3], ["a", "b", "c"]], ["int64", "str"]),
    ({"num_bins": 1000}, [[[-7], [0], [2**40]], [[4], [5], [-1]]], ["int64", "int64"]),
    ({"num_bins": 17}, [["x", "yy", "été"], ["q", "", "zzz"], [3, 3, 4]], ["str", "str", "int32"]),
    ({"num_bins": 4, "output_mode": "one_hot"}, [[[1], [2]], [[4], [5]]], ["int64", "int64"]),
    ({"num_bins": 6, "output_mode": "one_hot"}, [[1, 2, 9], ["u", "v", "w"]], ["int64", "str"]),
    ({"num_bins": 9}, [7, "seven"], ["int64", "str"]),
]

_KERAS_SCRIPT = r"""
import json, sys
import numpy as np
import keras

out = []
for kwargs, inputs, dtypes in json.load(sys.stdin):
    layer = keras.layers.HashedCrossing(**kwargs)
    arrays = tuple(np.array(x, dtype=object if d == "str" else d).astype(str if d == "str" else d)
                   for x, d in zip(inputs, dtypes))
    y = keras.ops.convert_to_numpy(layer(arrays))
    out.append({"values": y.tolist(), "dtype": str(y.dtype), "config": layer.get_config()})
print("RESULT" + json.dumps(out))
"""


def _arrays(inputs, dtypes):
    return tuple(
        np.array(x, dtype=object if d == "str" else d).astype(str if d == "str" else d)
        for x, d in zip(inputs, dtypes)
    )


@pytest.fixture(scope="module")
def keras_results():
    require("keras")
    require("tensorflow")
    env = dict(os.environ, KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", _KERAS_SCRIPT],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT") :])


@pytest.mark.interop
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_keras(case, keras_results):
    kwargs, inputs, dtypes = CASES[case]
    want = keras_results[case]
    layer = kt.layers.HashedCrossing(**kwargs)
    got = layer(_arrays(inputs, dtypes)).numpy()
    assert str(got.dtype) == want["dtype"]
    np.testing.assert_array_equal(got, np.array(want["values"]))
    assert layer.get_config() == {**want["config"], "name": layer.name}


def test_layer_helper_and_symbolic_call():
    a, b = np.array([[1], [5], [9]]), np.array([[2], [2], [7]])
    layer = run_layer_test(
        kt.layers.HashedCrossing,
        {"num_bins": 7, "output_mode": "one_hot"},
        input_data=[a, b],
        expected_output_shape=(3, 7),
        expected_num_trainable_weights=0,
    )
    inputs = [kt.layers.Input((1,), dtype="int64"), kt.layers.Input((1,), dtype="int64")]
    model = kt.Model(inputs, kt.layers.HashedCrossing(7)(inputs))
    assert model.output.shape == (None, 1) and model.output.dtype == "int64"
    np.testing.assert_array_equal(
        model([a, b]).numpy(), kt.layers.HashedCrossing(7)([a, b]).numpy()
    )
    assert layer([a, b]).numpy().sum() == 3


def test_errors():
    layer = kt.layers.HashedCrossing(4)
    with pytest.raises(ValueError, match="at least two"):
        layer([np.array([1, 2])])
    with pytest.raises(ValueError, match="list or tuple"):
        layer(np.array([1, 2]))
    with pytest.raises(ValueError, match="same shape"):
        layer([np.array([1, 2]), np.array([1, 2, 3])])
    with pytest.raises(ValueError, match=r"\(batch_size, 1\)"):
        layer([np.ones((2, 3), "int64"), np.ones((2, 3), "int64")])
    with pytest.raises(ValueError, match="integer or string"):
        layer([np.array([1.5]), np.array([2.5])])
    with pytest.raises(ValueError, match="output_mode"):
        kt.layers.HashedCrossing(4, output_mode="multi_hot")
    with pytest.raises(ValueError, match="num_bins"):
        kt.layers.HashedCrossing(0)
