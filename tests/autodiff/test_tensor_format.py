"""Tensors in format strings show their values, as TensorFlow's eager tensors do."""

import numpy as np
import pytest

import keratron as kt
from tests.conftest import require

VALUES = [
    (np.array([1, 2], "int32"), ""),
    (np.array([[1.5, 2.0], [-3.25, 0.0]], "float32"), ""),
    (np.array(0.6931472, "float32"), ".4f"),
    (np.array(7, "int64"), "5d"),
    (np.array([True, False]), ""),
]


@pytest.mark.interop
@pytest.mark.parametrize("value,spec", VALUES)
def test_format_matches_tensorflow(value, spec):
    tf = require("tensorflow")
    want = format(tf.constant(value), spec)
    assert format(kt.convert_to_tensor(value), spec) == want
    assert f"hello, {kt.convert_to_tensor(value)}" == f"hello, {tf.constant(value)}"


def test_a_traced_tensor_formats_without_its_values():
    seen = []

    @kt.function
    def f(x):
        seen.append(f"{x}")
        return x + 1

    f(np.ones(3, "float32"))
    assert seen and "shape" in seen[0]
