"""Runs Keras's FeatureSpace (TensorFlow backend, in a process of its own: TensorFlow never
shares a process with keratron's kernels) on the cases of `CASES` and writes the encoded
features as JSON.

Usage: KERAS_BACKEND=tensorflow python keras_feature_space_oracle.py OUT.json
"""

import json
import sys

import numpy as np

ROWS = 24


def data():
    """A small structured data set: numbers, integer codes and strings."""
    rng = np.random.default_rng(3)
    return {
        "age": rng.uniform(20, 80, ROWS).round(1).astype("float32"),
        "chol": rng.uniform(100, 400, ROWS).round(0).astype("float32"),
        "fbs": rng.integers(0, 2, ROWS).astype("float32"),
        "sex": rng.integers(0, 2, ROWS).astype("int32"),
        "ca": rng.integers(0, 4, ROWS).astype("int32"),
        "thal": np.array(rng.choice(["normal", "fixed", "reversible"], ROWS), dtype=object),
        "cp": np.array(rng.choice(["typical", "atypical", "none", "asym"], ROWS), dtype=object),
    }


def queries():
    batch = {k: v[:5] for k, v in data().items()}
    batch["thal"] = np.array(["normal", "unknown", "fixed", "reversible", "normal"], dtype=object)
    batch["sex"] = np.array([0, 1, 1, 7, 0], dtype="int32")
    single = {k: v[7] for k, v in data().items()}
    return {"batch": batch, "single": single}


def build(k, case):
    fs = k.utils.FeatureSpace
    if case == "concat":
        return fs(
            {
                "age": "float_normalized",
                "chol": fs.float_rescaled(scale=0.01, offset=-1.0),
                "fbs": "float",
                "sex": "integer_categorical",
                "ca": "integer_hashed",
                "thal": "string_categorical",
                "cp": fs.string_hashed(num_bins=5),
            },
            crosses=[("sex", "thal"), fs.cross(("ca", "cp"), crossing_dim=6)],
            crossing_dim=8,
            hashing_dim=4,
            output_mode="concat",
        )
    return fs(
        {
            "age": fs.float_normalized(),
            "ca": fs.integer_hashed(num_bins=3, output_mode="int"),
            "sex": fs.integer_categorical(output_mode="int"),
            "thal": fs.string_categorical(max_tokens=3, num_oov_indices=1),
            "cp": "string_hashed",
        },
        crosses=[fs.cross(("sex", "cp"), crossing_dim=4, output_mode="int")],
        hashing_dim=3,
        output_mode="dict",
    )


CASES = ("concat", "dict")


def encode(out):
    if isinstance(out, dict):
        return {k: encode(v) for k, v in out.items()}
    a = np.asarray(out)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "v": a.ravel().tolist()}


def main(out_path):
    import keras

    results = {}
    for case in CASES:
        space = build(keras, case)
        space.adapt(data())
        results[case] = {
            name: encode(space({k: q[k] for k in space.features})) for name, q in queries().items()
        }
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1])
