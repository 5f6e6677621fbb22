"""Weight and activity regularizers (L1, L2, L1L2, orthogonal), as Keras has them."""

from __future__ import annotations

__all__ = [
    "Regularizer",
    "L1",
    "L2",
    "L1L2",
    "OrthogonalRegularizer",
    "l1",
    "l2",
    "l1_l2",
    "orthogonal_regularizer",
    "get",
    "serialize",
    "deserialize",
]


class Regularizer:
    """Base class: `regularizer(x)` returns a scalar penalty Tensor."""

    def __call__(self, x):
        return 0.0

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _check(name, value):
    value = float(value)
    if value < 0:
        raise ValueError(
            f"Value for argument `{name}` must be non-negative. Received: {name}={value}"
        )
    return value


class L1(Regularizer):
    def __init__(self, l1=0.01):
        self.l1 = _check("l1", l1)

    def __call__(self, x):
        from keratron import ops

        return ops.multiply(self.l1, ops.sum(ops.abs(x)))

    def get_config(self):
        return {"l1": self.l1}


class L2(Regularizer):
    def __init__(self, l2=0.01):
        self.l2 = _check("l2", l2)

    def __call__(self, x):
        from keratron import ops

        return ops.multiply(self.l2, ops.sum(ops.square(x)))

    def get_config(self):
        return {"l2": self.l2}


class L1L2(Regularizer):
    def __init__(self, l1=0.0, l2=0.0):
        self.l1 = _check("l1", l1)
        self.l2 = _check("l2", l2)

    def __call__(self, x):
        from keratron import ops

        out = ops.zeros((), dtype=x.dtype)
        if self.l1:
            out = ops.add(out, ops.multiply(self.l1, ops.sum(ops.abs(x))))
        if self.l2:
            out = ops.add(out, ops.multiply(self.l2, ops.sum(ops.square(x))))
        return out

    def get_config(self):
        return {"l1": self.l1, "l2": self.l2}


class OrthogonalRegularizer(Regularizer):
    """Penalizes non-orthogonal rows (mode="rows") or columns of a 2D weight."""

    def __init__(self, factor=0.01, mode="rows"):
        if mode not in ("rows", "columns"):
            raise ValueError(
                f"OrthogonalRegularizer: mode must be rows or columns. Received: {mode!r}"
            )
        self.factor, self.mode = _check("factor", factor), mode

    def __call__(self, x):
        from keratron import ops

        if x.ndim != 2:
            raise ValueError(f"OrthogonalRegularizer expects a 2D input. Received shape {x.shape}")
        if self.mode == "columns":
            x = ops.transpose(x)
        x = ops.divide(
            x, ops.sqrt(ops.maximum(ops.sum(ops.square(x), axis=1, keepdims=True), 1e-12))
        )
        n = x.shape[0]
        off_diagonal = ops.multiply(
            ops.matmul(x, ops.transpose(x)), ops.subtract(1.0, ops.eye(n, dtype=x.dtype))
        )
        # As Keras: half the mean |cosine| over the n * (n - 1) / 2 pairs (0 for one vector,
        # where Keras divides 0 by 0).
        pairs = n * (n - 1) / 2 if n > 1 else 1.0
        return ops.multiply(self.factor * 0.5 / pairs, ops.sum(ops.abs(off_diagonal)))

    def get_config(self):
        return {"factor": self.factor, "mode": self.mode}


l1, l2, l1_l2 = L1, L2, L1L2
orthogonal_regularizer = OrthogonalRegularizer
_ALIASES = {"l1": L1, "l2": L2, "l1_l2": L1L2, "orthogonal_regularizer": OrthogonalRegularizer}
_CLASSES = {c.__name__: c for c in (L1, L2, L1L2, OrthogonalRegularizer)}


def get(identifier):
    if identifier is None:
        return None
    if isinstance(identifier, Regularizer) or (
        callable(identifier) and not isinstance(identifier, type)
    ):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _ALIASES.get(identifier) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}")
        return cls()
    raise ValueError(f"Could not interpret regularizer identifier: {identifier!r}")


def serialize(regularizer) -> dict | None:
    if regularizer is None:
        return None
    return {
        "module": "keras.regularizers",
        "class_name": type(regularizer).__name__,
        "config": regularizer.get_config(),
        "registered_name": None,
    }


def deserialize(config):
    name = config.get("class_name")
    cls = _CLASSES.get(name) or _ALIASES.get(name)
    if cls is None:
        from keratron.layers.serialization import lookup_custom

        cls = lookup_custom(name)
    if cls is None:
        raise ValueError(f"Unknown regularizer class: {name!r}")
    return cls.from_config(config.get("config", {}))
