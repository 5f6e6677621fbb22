"""`keras.activations`, re-exported from `keratron.layers.activations`.

Example:
    >>> from keratron.activations import get
"""

from keratron import ops
from keratron.layers.activations import *  # noqa: F403
from keratron.layers.activations import __all__  # noqa: F401

__all__ = list(__all__) + [
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
]


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
