"""tf.keras 2's `layers.experimental` paths: every name tf.keras 2 has there that keratron
has under `keratron.layers` is the same class; SyncBatchNormalization is BatchNormalization
with synchronized statistics."""

import numpy as np
import pytest

import keratron
from keratron.layers import experimental
from tests.conftest import require

# tf.keras 2 layers with no keratron counterpart (DynamicEmbedding/DynamicLookup are TensorFlow
# resources; RandomHeight/RandomWidth change the output shape at every training call).
ABSENT = {"DynamicEmbedding", "DynamicLookup", "RandomFourierFeatures", "RandomHeight",
          "RandomWidth", "PreprocessingLayer"}  # fmt: skip


@pytest.mark.interop
def test_the_names_tf_keras_2_has_there_are_keratrons_classes():
    keras2 = require("tf_keras")
    for namespace, ours in [
        (keras2.layers.experimental, experimental),
        (keras2.layers.experimental.preprocessing, experimental.preprocessing),
    ]:
        names = {n for n in dir(namespace) if not n.startswith("_") and n != "preprocessing"}
        assert names - ABSENT == set(ours.__all__) - {"preprocessing"}
        for name in names - ABSENT - {"SyncBatchNormalization"}:
            assert getattr(ours, name) is getattr(keratron.layers, name), name


def test_an_old_tutorials_rescaling_path_trains():
    from keratron.layers.experimental.preprocessing import RandomFlip, Rescaling

    model = keratron.Sequential(
        [
            keratron.Input((8, 8, 3)),
            Rescaling(1.0 / 255),
            RandomFlip("horizontal"),
            keratron.layers.Flatten(),
            keratron.layers.Dense(2),
        ]
    )
    model.compile("adam", keratron.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(0).integers(0, 256, (16, 8, 8, 3)).astype("float32")
    history = model.fit(x, np.arange(16) % 2, epochs=2, verbose=0).history
    assert len(history["loss"]) == 2 and np.isfinite(history["loss"]).all()


def test_sync_batch_normalization_is_synchronized_batch_normalization():
    layer = experimental.SyncBatchNormalization(momentum=0.9)
    assert isinstance(layer, keratron.layers.BatchNormalization)
    assert layer.synchronized and layer.momentum == 0.9
    assert not experimental.SyncBatchNormalization(synchronized=False).synchronized
