"""Dtype policies (Keras's `keras.DTypePolicy`): the dtype a layer computes in and the dtype
its variables are stored in, and the global policy new layers take.

`"mixed_float16"` and `"mixed_bfloat16"` compute in the half type and keep float32
variables; any other name is a plain dtype that is both. Layers read their policy in
`Layer.__init__`, so changing the global policy later does not change existing layers.
"""

from __future__ import annotations

from keratron import config
from keratron.autodiff.dtypes import standardize_dtype

__all__ = [
    "DTypePolicy",
    "Policy",
    "dtype_policy",
    "get",
    "global_policy",
    "serialize",
    "set_dtype_policy",
    "set_global_policy",
]

_MIXED = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
_global: DTypePolicy | None = None  # None: a policy named floatx()


class DTypePolicy:
    """A dtype policy: `compute_dtype` for a layer's computations, `variable_dtype` for its
    weights.

    Args:
        name: "mixed_float16", "mixed_bfloat16", or a dtype name such as "float32"
            (default: `keratron.config.floatx()`).

    Raises:
        ValueError: for any other name.

    Example:
        >>> p = keratron.mixed_precision.Policy("mixed_bfloat16")
        >>> p.compute_dtype, p.variable_dtype
        ('bfloat16', 'float32')
    """

    def __init__(self, name: str | None = None):
        if name is None:
            name = config.floatx()
        if not isinstance(name, str):
            raise TypeError(
                f"'name' must be a string, such as 'mixed_float16'. Received: name={name!r} "
                f"(of type {type(name).__name__})"
            )
        if name in _MIXED:
            compute, variable = _MIXED[name], "float32"
        else:
            try:
                compute = variable = standardize_dtype(name)
            except ValueError:
                raise ValueError(
                    f"Cannot convert '{name}' to a mixed precision DTypePolicy. Valid policies "
                    "include 'mixed_float16', 'mixed_bfloat16', and the name of any float dtype "
                    "such as 'float32'."
                ) from None
        self._name = name
        self._compute_dtype = compute
        self._variable_dtype = variable

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        return self._compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self._variable_dtype

    @property
    def is_mixed(self) -> bool:
        """Whether computations and variables differ in dtype."""
        return self._compute_dtype != self._variable_dtype

    def get_config(self) -> dict:
        return {"name": self._name}

    @classmethod
    def from_config(cls, config: dict) -> DTypePolicy:
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, DTypePolicy) and other.name == self.name

    def __hash__(self):
        return hash(self._name)

    def __repr__(self):
        return f'<DTypePolicy "{self._name}">'


Policy = DTypePolicy


def serialize(policy: DTypePolicy) -> dict:
    """The policy in Keras 3's serialized form, as layer configs store it."""
    return {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": policy.get_config(),
        "registered_name": None,
    }


def get(identifier) -> DTypePolicy:
    """A policy from a policy, a name, its serialized dict (Keras 3's or a tf.keras 2
    `{"class_name": "Policy", ...}`), or None (the global policy).

    Example:
        >>> keratron.mixed_precision.policy.get("mixed_float16").compute_dtype
        'float16'
    """
    if identifier is None:
        return dtype_policy()
    if isinstance(identifier, DTypePolicy):
        return identifier
    if isinstance(identifier, dict):
        inner = identifier.get("config", identifier)
        name = inner.get("name") if isinstance(inner, dict) else None
        if name is None:
            raise ValueError(f"Cannot interpret a dtype policy from {identifier!r}.")
        return DTypePolicy(name)
    try:
        name = identifier if isinstance(identifier, str) else standardize_dtype(identifier)
        return DTypePolicy(name)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"Cannot interpret `dtype` argument. Expected a DTypePolicy, a policy name or a "
            f"dtype. Received: dtype={identifier!r}"
        ) from e


def set_dtype_policy(policy) -> None:
    """Sets the policy that new layers take when given no `dtype` (Keras's
    `keras.config.set_dtype_policy`); None restores the default (`floatx()`).

    Example:
        >>> keratron.mixed_precision.set_dtype_policy("mixed_bfloat16")
        >>> keratron.layers.Dense(2).compute_dtype
        'bfloat16'
        >>> keratron.mixed_precision.set_dtype_policy("float32")
    """
    global _global
    _global = None if policy is None else get(policy)


def dtype_policy() -> DTypePolicy:
    """The global policy (a policy named `floatx()` unless one was set)."""
    return _global if _global is not None else DTypePolicy(config.floatx())


def explicit_global_policy() -> DTypePolicy | None:
    """The global policy if one was set, else None (layers then follow `floatx()`)."""
    return _global


set_global_policy = set_dtype_policy
global_policy = dtype_policy
