"""Keras's top-level names added to keratron: Initializer, Regularizer, FloatDTypePolicy,
dtype_policies and distribution, against real Keras where it runs."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


def test_base_classes_are_the_namespaces_ones():
    assert keratron.Initializer is keratron.initializers.Initializer
    assert keratron.Regularizer is keratron.regularizers.Regularizer

    class Scaled(keratron.Initializer):
        def __call__(self, shape, dtype=None):
            return np.full(shape, 0.5, dtype or "float32")

    layer = keratron.layers.Dense(2, kernel_initializer=Scaled())
    layer.build((None, 3))
    np.testing.assert_array_equal(layer.kernel.numpy(), np.full((3, 2), 0.5, "float32"))


def test_dtype_policies_match_keras():
    keras = require("keras")
    for name in ("float32", "mixed_float16", "bfloat16"):
        ours, theirs = keratron.FloatDTypePolicy(name), keras.FloatDTypePolicy(name)
        assert isinstance(ours, keratron.DTypePolicy)
        assert (ours.compute_dtype, ours.variable_dtype, repr(ours)) == (
            theirs.compute_dtype,
            theirs.variable_dtype,
            repr(theirs),
        )
        for policy_ours, policy_theirs in ((ours, theirs), (keratron.DTypePolicy(name),
                                                             keras.DTypePolicy(name))):  # fmt: skip
            serialized = keras.dtype_policies.serialize(policy_theirs)
            assert keratron.dtype_policies.serialize(policy_ours) == serialized
            back = keratron.dtype_policies.deserialize(serialized)
            assert (
                type(back).__name__ == type(keras.dtype_policies.deserialize(serialized)).__name__
            )
            assert back.name == name
        got = keratron.dtype_policies.get(name)
        assert type(got).__name__ == type(keras.dtype_policies.get(name)).__name__
    with pytest.raises(ValueError, match="unknown dtype policy class 'Int8Policy'"):
        keratron.dtype_policies.deserialize({"class_name": "Int8Policy", "config": {"name": "x"}})
    dense = keratron.layers.Dense(2, dtype=keratron.FloatDTypePolicy("mixed_bfloat16"))
    assert dense(np.ones((1, 3), "float32")).dtype == "bfloat16"


def test_distribution_points_to_distribute():
    assert keratron.distribution.distribution() is None
    assert keratron.distribution.list_devices("cpu") == ["cpu:0"]
    assert keratron.distribution.get_device_count("cpu") == 1
    with pytest.raises(ValueError, match="device_type='tpu'"):
        keratron.distribution.list_devices("tpu")
    for make in (
        lambda: keratron.distribution.DataParallel(),
        lambda: keratron.distribution.DeviceMesh((2,), ["batch"]),
        lambda: keratron.distribution.set_distribution(None),
        lambda: keratron.distribution.initialize(),
    ):
        with pytest.raises(NotImplementedError, match="keratron.distribute"):
            make()
