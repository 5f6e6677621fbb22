"""Pickling a model, as Keras 3 does: the whole model as the bytes of a `.keras` archive.

`pickle.dumps(model)` (and `copy.deepcopy`, multiprocessing, joblib) goes through
`Model.__reduce__`, which calls `serialize_model_as_bytecode`; unpickling calls
`deserialize_model_from_bytecode`, which loads the archive as `load_model` does: architecture,
weights, compile arguments and optimizer state.
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["deserialize_model_from_bytecode", "serialize_model_as_bytecode"]


def serialize_model_as_bytecode(model) -> bytes:
    """The `.keras` archive of `model`, as bytes."""
    from keratron.saving.saving_api import save_model

    with tempfile.TemporaryDirectory(prefix="keratron-pickle-") as tmp:
        path = os.path.join(tmp, "model.keras")
        save_model(model, path)
        with open(path, "rb") as f:
            return f.read()


def deserialize_model_from_bytecode(data: bytes):
    """The model held by `.keras` archive bytes (see `serialize_model_as_bytecode`)."""
    from keratron.saving.saving_api import load_model

    with tempfile.TemporaryDirectory(prefix="keratron-pickle-") as tmp:
        path = os.path.join(tmp, "model.keras")
        with open(path, "wb") as f:
            f.write(data)
        return load_model(path)
