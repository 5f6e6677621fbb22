"""Ops the keras-io examples call in ways the numeric tables do not: argmax / argmin of bool
tensors (`addition_rnn` decodes one-hot booleans), against Keras 3 (torch backend)."""

import numpy as np
import pytest

import keratron
from tests.conftest import require


@pytest.mark.interop
@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_arg_reductions_of_bool_tensors_match_keras(op, axis):
    keras = require("keras")
    x = np.array([[False, True, False], [True, False, True], [False, False, False]])
    ours = getattr(keratron.ops, op)(x, axis=axis)
    theirs = keras.ops.convert_to_numpy(getattr(keras.ops, op)(x, axis=axis))
    np.testing.assert_array_equal(ours.numpy(), theirs)
    assert ours.dtype == str(theirs.dtype)
