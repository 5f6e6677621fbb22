"""tf.keras 2's `keras.losses.Reduction` names, which tf.keras code passes to losses, against
tf.keras 2 (the tf-keras package)."""

import numpy as np
import pytest

import keratron
from tests.conftest import require

rng = np.random.default_rng(0)
LABELS = np.array([0, 2, 1, 1])
LOGITS = rng.standard_normal((4, 3)).astype("float32")
WEIGHTS = np.array([1.0, 0.5, 2.0, 0.0], "float32")


@pytest.mark.interop
@pytest.mark.parametrize("reduction", ["AUTO", "NONE", "SUM", "SUM_OVER_BATCH_SIZE"])
def test_each_reduction_name_reduces_as_in_tf_keras(reduction):
    keras2 = require("tf_keras")
    assert getattr(keratron.losses.Reduction, reduction) == getattr(
        keras2.losses.Reduction, reduction
    )
    name = getattr(keratron.losses.Reduction, reduction)
    got = keratron.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=name)
    want = keras2.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=name)
    np.testing.assert_allclose(
        np.asarray(got(LABELS, LOGITS, sample_weight=WEIGHTS)),
        want(LABELS, LOGITS, sample_weight=WEIGHTS).numpy(),
        rtol=1e-6,
    )


def test_reduction_lists_and_validates_its_names():
    Reduction = keratron.losses.Reduction
    assert Reduction.all() == ("auto", "none", "sum", "sum_over_batch_size")
    Reduction.validate("sum")
    with pytest.raises(ValueError, match="mean"):
        Reduction.validate("mean")
