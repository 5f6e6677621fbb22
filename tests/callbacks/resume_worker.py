"""Trains a small model with BackupAndRestore or ModelCheckpoint in a process of its own and
prints what it resumed from as JSON.

    python -m tests.callbacks.resume_worker backup|checkpoint DIR first|resume [EXT]

`resume` first builds and trains two other models (advancing the process's auto-name
counters, "dense_4", "adam_2"), then resumes from DIR.
"""

import json
import os
import sys

import numpy as np

import keratron as kt


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype("float32")
    return x, x.sum(axis=1, keepdims=True)


def build():
    model = kt.Sequential(
        [kt.Input((3,)), kt.layers.Dense(4, activation="relu"), kt.layers.Dense(1)]
    )
    model.compile(optimizer=kt.optimizers.Adam(0.01), loss="mse")
    return model


if __name__ == "__main__":
    what, folder, phase = sys.argv[1:4]
    ext = sys.argv[4] if len(sys.argv) > 4 else ".keras"
    x, y = data()
    if phase == "resume":
        for _ in range(2):
            build().fit(x[:8], y[:8], verbose=0)
    out = {}
    if what == "backup":
        model = build()
        backup = kt.callbacks.BackupAndRestore(folder, delete_checkpoint=False)
        history = model.fit(
            x, y, batch_size=16, epochs=2 if phase == "first" else 4, callbacks=[backup], verbose=0
        )
        out["epochs_run"] = history.epoch
    else:
        path = os.path.join(folder, "model" + ext)
        if phase == "first":
            model = build()
            checkpoint = kt.callbacks.ModelCheckpoint(path, save_weights_only=False)
            model.fit(x, y, batch_size=16, epochs=2, callbacks=[checkpoint], verbose=0)
        else:
            model = kt.models.load_model(path)
            out["loaded_iterations"] = int(model.optimizer.iterations.numpy())
            model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    out["iterations"] = int(model.optimizer.iterations.numpy())
    print(json.dumps(out))
