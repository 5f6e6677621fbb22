"""Runs Keras's `text_dataset_from_directory`, `audio_dataset_from_directory` and
`split_dataset` (TensorFlow backend, in a process of its own: TensorFlow never shares a
process with keratron's kernels) on the cases of `CASES` and writes what they yield as JSON.

Usage: KERAS_BACKEND=tensorflow python keras_file_datasets_oracle.py ROOT OUT.json
"""

import contextlib
import io
import json
import sys

import numpy as np

CASES = {
    "text_int": ("text", {"label_mode": "int", "batch_size": 3, "shuffle": False}),
    "text_categorical_cut": (
        "text",
        {"label_mode": "categorical", "batch_size": 4, "shuffle": False, "max_length": 5},
    ),
    "text_binary_unbatched": (
        "text2",
        {"label_mode": "binary", "batch_size": None, "shuffle": False},
    ),
    "text_no_labels": ("text", {"label_mode": None, "batch_size": 5, "shuffle": False}),
    "text_class_names": ("text", {"class_names": ["c", "a"], "batch_size": 8, "shuffle": False}),
    "text_listed_labels": (
        "flat",
        {"labels": [3, 1, 3, 0], "label_mode": "int", "batch_size": 2, "shuffle": False},
    ),
    "text_split": (
        "text",
        {"validation_split": 0.4, "subset": "both", "seed": 7, "batch_size": 2},
    ),
    "audio_padded": ("audio", {"batch_size": 2, "shuffle": False}),
    "audio_fixed_length": (
        "audio",
        {
            "batch_size": 3,
            "shuffle": False,
            "output_sequence_length": 50,
            "label_mode": "categorical",
        },
    ),
    "audio_split": (
        "audio",
        {"validation_split": 0.5, "subset": "validation", "seed": 3, "batch_size": 4},
    ),
}

SPLITS = {
    "split_tuple": ("tuple", {"left_size": 0.7}),
    "split_array_shuffled": ("array", {"right_size": 3, "shuffle": True, "seed": 5}),
    "split_list_shuffled": ("list", {"left_size": 4, "shuffle": True, "seed": 2}),
}


def split_inputs():
    x = np.arange(24, dtype="float32").reshape(12, 2)
    y = np.arange(12) * 10
    return {"tuple": (x, y), "array": x, "list": [x, y]}


def encode(a):
    a = np.asarray(a)
    if a.dtype.kind in "OS":  # strings: bytes objects (batched) or a bytes scalar
        return {"dtype": "bytes", "shape": a.shape, "v": [b.decode("latin-1") for b in a.ravel()]}
    return {"dtype": str(a.dtype), "shape": a.shape, "v": a.ravel().tolist()}


def elements(ds):
    return [[encode(x) for x in (e if isinstance(e, tuple) else (e,))] for e in ds]


def main(root, out_path):
    import keras

    results = {}
    for name, (folder, kwargs) in CASES.items():
        loader = (
            keras.utils.audio_dataset_from_directory
            if folder == "audio"
            else (keras.utils.text_dataset_from_directory)
        )
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            made = loader(f"{root}/{folder}", **kwargs)
        made = made if isinstance(made, (tuple, list)) else (made,)
        results[name] = {
            "printed": printed.getvalue(),
            "class_names": made[0].class_names,
            "datasets": [elements(ds) for ds in made],
        }
    inputs = split_inputs()
    for name, (kind, kwargs) in SPLITS.items():
        left, right = keras.utils.split_dataset(
            inputs[kind], preferred_backend="tensorflow", **kwargs
        )
        results[name] = {"datasets": [elements(left), elements(right)]}
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
