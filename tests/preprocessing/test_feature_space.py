"""FeatureSpace against real Keras on a small structured data set: Keras runs on its
TensorFlow backend in a child process (tests/preprocessing/keras_feature_space_oracle.py)
with the same features, crosses, data and queries; the encoded values, shapes and dtypes
must agree."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keratron
from tests.conftest import require
from tests.preprocessing import keras_feature_space_oracle as oracle


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    require("keras")
    require("tensorflow")
    out = tmp_path_factory.mktemp("feature_space") / "keras.json"
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(
        [sys.executable, oracle.__file__, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


def _assert_same(ours, theirs, where):
    if isinstance(theirs, dict) and "v" not in theirs:
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), where
        for key in theirs:
            _assert_same(ours[key], theirs[key], f"{where}/{key}")
        return
    ours = np.asarray(ours)
    assert list(ours.shape) == theirs["shape"], where
    assert ours.dtype.kind == np.dtype(theirs["dtype"]).kind, where
    np.testing.assert_allclose(ours.ravel(), theirs["v"], rtol=1e-5, atol=1e-6, err_msg=where)


@pytest.mark.parametrize("case", oracle.CASES)
def test_feature_space_matches_keras(expected, case):
    space = oracle.build(keratron, case)
    space.adapt(oracle.data())
    for name, query in oracle.queries().items():
        query = {k: query[k] for k in space.features}
        _assert_same(space(query), expected[case][name], f"{case}/{name}")


def test_adapt_from_a_dataset_and_train():
    data = oracle.data()
    labels = (data["age"] > 50).astype("float32")
    ds = keratron.data.Dataset.from_tensor_slices((data, labels)).batch(8)
    space = oracle.build(keratron, "concat")
    space.adapt(ds.map(lambda x, y: x))
    reference = oracle.build(keratron, "concat")
    reference.adapt(data)
    np.testing.assert_allclose(space(data).numpy(), reference(data).numpy(), rtol=1e-6)
    encoded = space.get_encoded_features()
    model = keratron.Model(encoded, keratron.layers.Dense(1, activation="sigmoid")(encoded))
    model.compile(optimizer="adam", loss="binary_crossentropy")
    history = model.fit(ds.map(lambda x, y: (space(x), y)), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))


def test_end_to_end_model_on_numeric_features():
    space = keratron.utils.FeatureSpace(
        {"age": "float_normalized", "sex": "integer_categorical", "ca": "integer_hashed"},
        crosses=[("sex", "ca")],
        crossing_dim=4,
        hashing_dim=3,
    )
    data = oracle.data()
    space.adapt({k: data[k] for k in ("age", "sex", "ca")})
    encoded = space.get_encoded_features()
    assert encoded.shape == (None, 1 + 3 + 3 + 4)
    outputs = keratron.layers.Dense(2)(encoded)
    model = keratron.Model(space.get_inputs(), outputs)
    query = {k: data[k][:6, None] for k in ("age", "sex", "ca")}
    dense = model.layers[-1]
    expected = space(query).numpy() @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(model(query).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_errors_and_config():
    fs = keratron.utils.FeatureSpace
    with pytest.raises(ValueError, match="Invalid feature type: text"):
        fs({"a": "text"})
    with pytest.raises(ValueError, match="unknown features"):
        fs({"a": "float"}, crosses=[("a", "b")])
    space = fs({"a": "float_normalized", "s": "string_categorical"})
    with pytest.raises(ValueError, match="call `.adapt"):
        space({"a": [1.0], "s": ["x"]})
    space.adapt({"a": [1.0, 2.0], "s": ["x", "y"]})
    with pytest.raises(ValueError, match="no string-typed symbolic inputs"):
        space.get_inputs()
    assert space.get_encoded_features().shape == (None, 4)
    with pytest.raises(ValueError, match="has not been encoded"):
        fs({"n": fs.integer_categorical(output_mode="int")}).adapt({"n": [1, 2]})
    again = fs.from_config(oracle.build(keratron, "dict").get_config())
    assert sorted(again.features) == ["age", "ca", "cp", "sex", "thal"]
    assert [c.name for c in again.crosses] == ["sex_X_cp"]
