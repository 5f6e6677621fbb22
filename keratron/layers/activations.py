"""Activation functions by name (`keras.activations`)."""

from __future__ import annotations

from keratron import ops

__all__ = [
    "relu",
    "relu6",
    "sigmoid",
    "tanh",
    "softmax",
    "log_softmax",
    "elu",
    "selu",
    "gelu",
    "softplus",
    "softsign",
    "silu",
    "swish",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "leaky_relu",
    "exponential",
    "linear",
    "mish",
    "log_sigmoid",
    "celu",
    "glu",
    "hard_shrink",
    "hard_tanh",
    "soft_shrink",
    "sparse_plus",
    "sparse_sigmoid",
    "sparsemax",
    "squareplus",
    "tanh_shrink",
    "threshold",
    "get",
    "serialize",
    "deserialize",
]


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """max(x, 0), with optional leak below `threshold`, a cap, and a shifted threshold."""
    if negative_slope == 0.0 and threshold == 0.0:
        if max_value is None:
            return ops.relu(x)
        if float(max_value) == 6.0:
            return ops.relu6(x)  # one primitive, which a matmul/conv epilogue can absorb
    x = ops.convert_to_tensor(x)
    if threshold != 0.0:
        out = ops.where(ops.greater(x, threshold), x, 0.0)
    else:
        out = ops.relu(x)
    if max_value is not None:
        out = ops.minimum(out, max_value)
    if negative_slope != 0.0:
        neg = ops.multiply(negative_slope, ops.subtract(x, threshold))
        out = ops.where(ops.less(x, threshold), neg, out)
    return out


def relu6(x):
    return ops.relu6(x)


def sigmoid(x):
    return ops.sigmoid(x)


def tanh(x):
    return ops.tanh(x)


def softmax(x, axis=-1):
    return ops.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    return ops.log_softmax(x, axis=axis)


def elu(x, alpha=1.0):
    return ops.elu(x, alpha=alpha)


def selu(x):
    return ops.selu(x)


def gelu(x, approximate=False):
    return ops.gelu(x, approximate=approximate)


def softplus(x):
    return ops.softplus(x)


def softsign(x):
    return ops.softsign(x)


def silu(x):
    return ops.silu(x)


swish = silu


def hard_sigmoid(x):
    return ops.hard_sigmoid(x)


def hard_silu(x):
    return ops.hard_silu(x)


hard_swish = hard_silu


def leaky_relu(x, negative_slope=0.2):
    return ops.leaky_relu(x, negative_slope=negative_slope)


def exponential(x):
    return ops.exp(x)


def linear(x):
    return x


def mish(x):
    return ops.multiply(x, ops.tanh(ops.softplus(x)))


def log_sigmoid(x):
    return ops.log_sigmoid(x)


def celu(x, alpha=1.0):
    """Continuously differentiable ELU: `max(x, 0) + alpha * min(0, exp(x / alpha) - 1)`.

    Example:
        >>> keratron.activations.celu(keratron.ops.array([-1.0, 1.0])).shape
        (2,)
    """
    return ops.celu(x, alpha=alpha)


def glu(x, axis=-1):
    """Gated linear unit: `x` split in halves `a, b` along `axis`, then `a * sigmoid(b)`.

    Example:
        >>> keratron.activations.glu(keratron.ops.ones((2, 4))).shape
        (2, 2)
    """
    return ops.glu(x, axis=axis)


def hard_shrink(x, threshold=0.5):
    """`x` where `|x| > threshold`, else 0.

    Example:
        >>> keratron.activations.hard_shrink(keratron.ops.array([0.2, 1.0])).shape
        (2,)
    """
    return ops.hard_shrink(x, threshold=threshold)


def hard_tanh(x):
    """`x` clipped to [-1, 1].

    Example:
        >>> keratron.activations.hard_tanh(keratron.ops.array([-2.0, 0.5])).shape
        (2,)
    """
    return ops.hard_tanh(x)


def soft_shrink(x, threshold=0.5):
    """`x - threshold` above `threshold`, `x + threshold` below `-threshold`, else 0.

    Example:
        >>> keratron.activations.soft_shrink(keratron.ops.array([0.2, 1.0])).shape
        (2,)
    """
    return ops.soft_shrink(x, threshold=threshold)


def sparse_plus(x):
    """0 for `x <= -1`, `(x + 1)**2 / 4` for `-1 < x < 1`, `x` for `x >= 1`.

    Example:
        >>> keratron.activations.sparse_plus(keratron.ops.array([-2.0, 0.0])).shape
        (2,)
    """
    return ops.sparse_plus(x)


def sparse_sigmoid(x):
    """0 for `x <= -1`, `(x + 1) / 2` for `-1 < x < 1`, 1 for `x >= 1`.

    Example:
        >>> keratron.activations.sparse_sigmoid(keratron.ops.array([-2.0, 0.0])).shape
        (2,)
    """
    return ops.sparse_sigmoid(x)


def sparsemax(x, axis=-1):
    """Euclidean projection of `x` onto the probability simplex along `axis`.

    Example:
        >>> keratron.activations.sparsemax(keratron.ops.array([[1.0, 2.0, 0.0]])).shape
        (1, 3)
    """
    return ops.sparsemax(x, axis=axis)


def squareplus(x, b=4):
    """Smooth ReLU `(x + sqrt(x**2 + b)) / 2`.

    Example:
        >>> keratron.activations.squareplus(keratron.ops.array([-1.0, 1.0])).shape
        (2,)
    """
    return ops.squareplus(x, b=b)


def tanh_shrink(x):
    """`x - tanh(x)`.

    Example:
        >>> keratron.activations.tanh_shrink(keratron.ops.array([-1.0, 1.0])).shape
        (2,)
    """
    return ops.tanh_shrink(x)


def threshold(x, threshold, default_value):
    """`x` where `x > threshold`, else `default_value`.

    Example:
        >>> keratron.activations.threshold(keratron.ops.array([0.0, 2.0]), 1.0, -1.0).shape
        (2,)
    """
    return ops.threshold(x, threshold, default_value)


_BY_NAME = {
    name: globals()[name] for name in __all__ if name not in ("get", "serialize", "deserialize")
}


def get(identifier):
    """Resolves None (linear), a name ("relu"), a config dict or a callable."""
    if identifier is None:
        return linear
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        fn = _BY_NAME.get(identifier)
        if fn is None:
            from keratron.layers.serialization import lookup_custom

            fn = lookup_custom(identifier)
        if fn is None:
            raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")
        return fn
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


def serialize(activation):
    """The name Keras writes in configs ("relu"), or a registered custom name."""
    name = getattr(activation, "__name__", None)
    if name in _BY_NAME and _BY_NAME[name] is activation:
        return name
    from keratron.layers.serialization import get_registered_name

    if hasattr(activation, "get_config"):
        return {"class_name": type(activation).__name__, "config": activation.get_config()}
    return get_registered_name(activation)


def deserialize(config):
    if isinstance(config, str):
        return get(config)
    name = config.get("class_name") or config.get("config", {}).get("name")
    if name in _BY_NAME:
        return _BY_NAME[name]
    from keratron.layers.serialization import lookup_custom

    obj = lookup_custom(name)
    if obj is None:
        raise ValueError(f"Unknown activation: {name!r}")
    return obj.from_config(config.get("config", {})) if isinstance(obj, type) else obj
