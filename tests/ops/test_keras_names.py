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


def _keras_namespace_names(keras, name: str) -> set:
    """The public names of `keras.ops.<name>`. Keras 3 has no public `keras.ops.core` or
    `keras.ops.math` module: their names are the `keras.ops` functions defined in
    `keras.src.ops.core` / `keras.src.ops.math`."""
    import importlib

    if name in ("core", "math"):
        src = importlib.import_module(f"keras.src.ops.{name}")
        return {
            n
            for n in _public(src)
            if callable(getattr(src, n)) and getattr(keras.ops, n, None) is getattr(src, n)
        }
    return _public(getattr(keras.ops, name))


@pytest.mark.parametrize("name", ["numpy", "nn", "linalg", "image", "core", "math"])
def test_namespace_has_every_keras_name(name):
    keras = require("keras")
    module = getattr(kt.ops, name)
    assert len(module.__all__) == len(set(module.__all__)), name
    missing = sorted(_keras_namespace_names(keras, name) - set(module.__all__))
    assert missing == []
    for op in module.__all__:
        assert callable(getattr(module, op)), f"{name}.{op}"
        # One definition per public name: a namespace re-exports the top-level op (image ops,
        # as in Keras, live in their namespace only).
        if hasattr(kt.ops, op):
            assert getattr(module, op) is getattr(kt.ops, op), f"{name}.{op}"


@pytest.mark.parametrize("name", ["numpy", "math"])
def test_pure_namespaces_hold_exactly_keras_names(name):
    keras = require("keras")
    assert set(getattr(kt.ops, name).__all__) == _keras_namespace_names(keras, name)


def test_family_modules_import_one_way():
    """`_core -> elementwise -> shaping -> sorting -> reduction -> creation -> linalg -> ...`:
    a family module imports only families before it at module level."""
    import ast
    import pathlib

    order = [
        "_core", "elementwise", "shaping", "sorting", "reduction", "creation", "linalg", "arrays",
        "segment", "nn", "signal", "core", "image",
    ]  # fmt: skip
    root = pathlib.Path(kt.ops.__file__).parent
    for i, mod in enumerate(order):
        tree = ast.parse((root / f"{mod}.py").read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keratron.ops"):
                names = [node.module.split(".")[2]] if node.module.count(".") == 2 else []
                names += [a.name for a in node.names if node.module == "keratron.ops"]
                for dep in names:
                    if dep in order:
                        assert order.index(dep) < i, f"ops.{mod} imports ops.{dep}"


def test_shape_ops_module_is_not_shadowed():
    import keratron.ops.shaping as shaping

    assert callable(kt.ops.shape)
    assert kt.ops.shape is shaping.shape
