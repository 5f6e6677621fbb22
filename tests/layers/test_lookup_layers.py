"""StringLookup, IntegerLookup, TextVectorization and Hashing against Keras 3 (torch backend).

Keras's versions of these layers run TensorFlow ops; TensorFlow and triton each bundle LLVM
and abort the process when both load, so the Keras side runs once in a child process (Keras
on torch) over the same table of cases, and the parent compares.
"""

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

TEXT = [
    "The cat sat on the mat.",
    "The dog, the CAT and the bird!",
    "a b c d e",
    "dog eats: cat?",
]
WORDS = [["a", "b", "c"], ["d", "b", "a"], ["b", "z", "b"]]
INTS = [[12, 36, 5], [36, 12, 12], [7, 7, 42]]

# (layer, init kwargs, adapt data or None, call input); inputs are JSON data.
CASES = [
    ("StringLookup", {"vocabulary": ["a", "b", "c"]}, None, [["a", "z"], ["c", "b"]]),
    ("StringLookup", {}, WORDS, [["a", "q"], ["b", "d"]]),
    ("StringLookup", {"max_tokens": 3}, WORDS, [["a", "b", "c", "d"]]),
    ("StringLookup", {"mask_token": "[M]"}, WORDS, [["a", "[M]"], ["q", "b"]]),
    ("StringLookup", {"num_oov_indices": 3}, WORDS, [["a", "x", "y", "zz", "hello"]]),
    ("StringLookup", {"num_oov_indices": 3, "salt": 7}, WORDS, [["x", "y", "zz", "hello"]]),
    ("StringLookup", {"num_oov_indices": 0, "vocabulary": ["x", "y"]}, None, [["y", "x"]]),
    ("StringLookup", {"output_mode": "one_hot"}, WORDS, [["a"], ["q"], ["b"]]),
    ("StringLookup", {"output_mode": "multi_hot"}, WORDS, [["a", "b"], ["q", "q"]]),
    ("StringLookup", {"output_mode": "count"}, WORDS, [["a", "a", "q"], ["b", "z", "b"]]),
    ("StringLookup", {"output_mode": "tf_idf"}, WORDS, [["a", "a", "q"], ["b", "z", "b"]]),
    (
        "StringLookup",
        {"output_mode": "multi_hot", "max_tokens": 6, "pad_to_max_tokens": True},
        WORDS,
        [["a", "b"], ["z", "q"]],
    ),
    (
        "StringLookup",
        {"output_mode": "multi_hot", "mask_token": "", "vocabulary": ["a", "b"]},
        None,
        [["a", ""], ["b", "c"]],
    ),
    (
        "StringLookup",
        {"output_mode": "tf_idf", "vocabulary": ["a", "b"], "idf_weights": [0.5, 2.0]},
        None,
        [["a", "b", "b", "c"]],
    ),
    ("IntegerLookup", {"vocabulary": [12, 36, 1138, 42]}, None, [[12, 1000, 42], [36, 0, 0]]),
    ("IntegerLookup", {}, INTS, [[12, 7, 99], [42, 36, 5]]),
    ("IntegerLookup", {"mask_token": 0, "max_tokens": 4}, INTS, [[12, 0, 99], [7, 36, 5]]),
    ("IntegerLookup", {"num_oov_indices": 3}, INTS, [[100, 101, 102, -7, 12]]),
    (
        "IntegerLookup",
        {"num_oov_indices": 3, "oov_method": "farmhash"},
        INTS,
        [[100, 101, 102, -7, 12]],
    ),
    ("IntegerLookup", {"output_mode": "count"}, INTS, [[12, 12, 99], [7, 36, 5]]),
    ("IntegerLookup", {"output_mode": "tf_idf"}, INTS, [[12, 12, 99], [7, 36, 5]]),
    ("IntegerLookup", {"vocabulary": [12, 36], "invert": True}, None, [[1, 0, 2, 5]]),
    ("Hashing", {"num_bins": 3}, None, [["A"], ["B"], ["C"], ["D"], ["E"]]),
    ("Hashing", {"num_bins": 7}, None, [[1, 2, 3, 40, -5]]),
    ("Hashing", {"num_bins": 5, "mask_value": ""}, None, [["", "a", "b", "", "hello world"]]),
    ("Hashing", {"num_bins": 5, "salt": 133}, None, [["a", "b", "cc", "ddd"]]),
    ("Hashing", {"num_bins": 5, "salt": [1, 2]}, None, [["a", "b", "cc", "ddd"]]),
    ("Hashing", {"num_bins": 4, "output_mode": "one_hot"}, None, [["a"], ["b"], ["cc"]]),
    ("Hashing", {"num_bins": 4, "output_mode": "multi_hot"}, None, [["a", "b"], ["cc", "a"]]),
    ("Hashing", {"num_bins": 4, "output_mode": "count"}, None, [["a", "a"], ["cc", "a"]]),
    ("TextVectorization", {}, TEXT, ["the cat ate the bird", "zebra and a mat"]),
    (
        "TextVectorization",
        {"max_tokens": 8, "output_sequence_length": 4},
        TEXT,
        ["the cat ate the bird", "zebra"],
    ),
    ("TextVectorization", {"ngrams": 2}, TEXT, ["the cat sat", "a b"]),
    ("TextVectorization", {"ngrams": (1, 3)}, TEXT, ["the cat sat on", "a b c"]),
    ("TextVectorization", {"standardize": "lower"}, TEXT, ["The cat, sat"]),
    ("TextVectorization", {"standardize": None, "split": "character"}, TEXT, ["Cab!"]),
    ("TextVectorization", {"output_mode": "multi_hot"}, TEXT, ["the cat the", "dog x"]),
    ("TextVectorization", {"output_mode": "count"}, TEXT, ["the cat the", "dog x"]),
    ("TextVectorization", {"output_mode": "tf_idf"}, TEXT, ["the cat the", "dog x"]),
    (
        "TextVectorization",
        {"output_mode": "tf_idf", "max_tokens": 12, "pad_to_max_tokens": True},
        TEXT,
        ["the cat the", "dog x"],
    ),
    ("TextVectorization", {"vocabulary": ["cat", "the"]}, None, ["The CAT!", "dog the"]),
]

_KERAS_SCRIPT = r"""
import json, sys
import numpy as np
import keras

def jsonable(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return {"values": x.tolist(), "dtype": str(x.dtype)}
    return {"values": x, "dtype": None}

out = []
for name, kwargs, adapt, inputs in json.load(sys.stdin):
    if isinstance(kwargs.get("ngrams"), list):
        kwargs["ngrams"] = tuple(kwargs["ngrams"])
    layer = getattr(keras.layers, name)(**kwargs)
    if adapt is not None:
        layer.adapt(np.array(adapt) if name != "TextVectorization" else adapt)
    res = jsonable(layer(np.array(inputs)))
    res["config"] = {k: v for k, v in layer.get_config().items() if k not in ("name", "dtype")}
    res["config_keys"] = sorted(layer.get_config())
    if hasattr(layer, "get_vocabulary"):
        res["vocabulary"] = [str(v) if isinstance(v, np.str_) else v
                             for v in layer.get_vocabulary()]
        res["vocabulary_size"] = int(layer.vocabulary_size())
    out.append(res)
print("RESULT" + json.dumps(out, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
"""


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


def _run_keratron(name, kwargs, adapt, inputs):
    layer = getattr(kt.layers, name)(**kwargs)
    if adapt is not None:
        layer.adapt(np.array(adapt) if name != "TextVectorization" else adapt)
    return layer, layer(np.array(inputs))


@pytest.mark.interop
@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: f"{CASES[i][0]}-{i}")
def test_matches_keras(case, keras_results):
    name, kwargs, adapt, inputs = CASES[case]
    want = keras_results[case]
    layer, got = _run_keratron(name, kwargs, adapt, inputs)
    if isinstance(got, list):
        assert got == want["values"]
    else:
        got = got.numpy()
        assert str(got.dtype) == want["dtype"]
        np.testing.assert_allclose(got, np.array(want["values"]), rtol=1e-6)
    config = layer.get_config()
    assert sorted(config) == want["config_keys"]
    config = json.loads(json.dumps({k: v for k, v in config.items() if k not in ("name", "dtype")}))
    assert config == want["config"]
    if "vocabulary" in want:
        assert layer.get_vocabulary() == want["vocabulary"]
        assert layer.vocabulary_size() == want["vocabulary_size"]


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: f"{CASES[i][0]}-{i}")
def test_config_round_trip(case):
    name, kwargs, adapt, inputs = CASES[case]
    layer, out = _run_keratron(name, kwargs, adapt, inputs)
    config = layer.get_config()
    clone = type(layer).from_config(config)
    if adapt is not None:  # an adapted vocabulary is not in the config (as in Keras)
        config["vocabulary_size"] = clone.get_config()["vocabulary_size"]
    assert clone.get_config() == config
    if adapt is None:  # a given vocabulary travels in the config; an adapted one does not
        again = clone(np.array(inputs))
        if isinstance(out, list):
            assert again == out
        else:
            np.testing.assert_array_equal(again.numpy(), out.numpy())


def test_numeric_layers_through_the_layer_test_helper():
    run_layer_test(
        kt.layers.IntegerLookup,
        init_kwargs={"vocabulary": [0, 1, 2], "output_mode": "multi_hot"},
        input_data=np.array([[0, 1], [3, 2]], dtype="int64"),
        expected_output_shape=(2, 4),
        expected_num_trainable_weights=0,
    )
    run_layer_test(
        kt.layers.Hashing,
        init_kwargs={"num_bins": 4},
        input_data=np.array([[0, 1], [3, 2]], dtype="int64"),
        expected_output_shape=(2, 2),
        expected_num_trainable_weights=0,
    )


def test_string_inputs_and_invert():
    layer = kt.layers.StringLookup(vocabulary=["a", "b", "c"], invert=True)
    assert layer(np.array([1, 0, 3])) == ["a", "[UNK]", "c"]
    lookup = kt.layers.StringLookup(vocabulary=["a", "b"])
    np.testing.assert_array_equal(lookup(["b", "a", b"b"]).numpy(), [2, 1, 2])
    assert lookup(np.array(["a"], dtype=object)).dtype == "int64"


def test_adapt_on_a_dataset_matches_adapt_on_an_array():
    ds = kt.data.Dataset.from_tensor_slices(np.array(TEXT)).batch(2)
    a = kt.layers.TextVectorization()
    a.adapt(ds)
    b = kt.layers.TextVectorization()
    b.adapt(np.array(TEXT))
    assert a.get_vocabulary() == b.get_vocabulary()
    ids = kt.data.Dataset.from_tensor_slices(np.array([1, 2, 2, 3, 3, 3])).batch(4)
    lookup = kt.layers.IntegerLookup()
    lookup.adapt(ids)
    assert lookup.get_vocabulary() == [-1, 3, 2, 1]


def test_symbolic_call_gives_keras_shapes_and_dtypes():
    x = kt.layers.Input(shape=(3,), dtype="int64")
    y = kt.layers.IntegerLookup(vocabulary=[5, 6], output_mode="multi_hot")(x)
    assert (y.shape, y.dtype) == ((None, 3), "int64")
    z = kt.layers.Hashing(num_bins=4)(x)
    assert (z.shape, z.dtype) == ((None, 3), "int64")


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="num_oov_indices=0"):
        kt.layers.StringLookup(vocabulary=["a"], num_oov_indices=0)(np.array(["b"]))
    with pytest.raises(ValueError, match="invert"):
        kt.layers.StringLookup(invert=True, output_mode="one_hot")
    with pytest.raises(ValueError, match="repeated"):
        kt.layers.StringLookup(vocabulary=["a", "a"])
    with pytest.raises(ValueError, match="num_bins"):
        kt.layers.Hashing(num_bins=0)
    with pytest.raises(RuntimeError, match="vocabulary"):
        kt.layers.StringLookup(output_mode="multi_hot")(np.array(["a"]))
