"""keratron.ops has the names Keras model code calls: the foundation list, every public
`keras.ops` name, and Keras's `keras.ops.nn` and `keras.ops.image` namespaces."""

import pytest

import keratron as kt
from tests.conftest import require

# The op names the framework's foundation requires (elementwise math, reductions, shape ops,
# creation, linear algebra, nn).
FOUNDATION = """
add subtract multiply divide power abs sign exp log log1p expm1 sqrt rsqrt square reciprocal
sin cos tanh erf floor ceil round clip maximum minimum where equal not_equal less less_equal
greater greater_equal logical_and logical_or logical_not cast sum mean max min prod var std
argmax argmin logsumexp cumsum all any reshape transpose expand_dims squeeze concatenate stack
split tile repeat pad broadcast_to flatten take take_along_axis scatter scatter_update one_hot
top_k sort argsort zeros ones full arange linspace eye zeros_like ones_like full_like matmul
dot tensordot einsum relu relu6 elu selu gelu silu swish softplus softsign sigmoid
hard_sigmoid leaky_relu softmax log_softmax conv depthwise_conv separable_conv conv_transpose
max_pool average_pool moments batch_normalization sparse_categorical_crossentropy
categorical_crossentropy binary_crossentropy
""".split()

# keras.ops.image names keratron does not provide, each with the reason (none now).
IMAGE_EXCEPTIONS: set = set()


def _public(module) -> set:
    return {n for n in dir(module) if not n.startswith("_")}


@pytest.mark.parametrize("name", FOUNDATION)
def test_foundation_name_is_a_callable_op(name):
    assert callable(getattr(kt.ops, name, None)), f"keratron.ops.{name} is missing"


def test_every_keras_ops_name_exists():
    keras = require("keras")
    missing = sorted(_public(keras.ops) - _public(kt.ops))
    assert missing == []


def test_ops_nn_has_keras_nn_names():
    keras = require("keras")
    missing = sorted(_public(keras.ops.nn) - set(kt.ops.nn.__all__))
    assert missing == []
    for name in kt.ops.nn.__all__:
        assert callable(getattr(kt.ops.nn, name)), name
        # One definition per public name: the nn namespace re-exports the top-level op.
        assert getattr(kt.ops.nn, name) is getattr(kt.ops, name), name


def test_ops_image_has_keras_image_names():
    keras = require("keras")
    missing = _public(keras.ops.image) - set(kt.ops.image.__all__)
    assert missing == IMAGE_EXCEPTIONS
    for name in kt.ops.image.__all__:
        assert callable(getattr(kt.ops.image, name)), name


def test_extra_all_lists_only_defined_names():
    from keratron.ops import extra

    assert len(extra.__all__) == len(set(extra.__all__))
    for name in extra.__all__:
        assert callable(getattr(kt.ops, name)), name
