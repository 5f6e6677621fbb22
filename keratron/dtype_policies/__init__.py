"""`keras.dtype_policies`: the dtype policy classes and their (de)serialization.

`DTypePolicy` is `keratron.mixed_precision.DTypePolicy`; `FloatDTypePolicy` is Keras's
backward-compatible subclass of it, serialized under its own class name. keratron has no
quantized layers, so Keras's quantized policies (`QuantizedDTypePolicy`, ...) and
`DTypePolicyMap`, which maps layer paths to them, are not provided.

Example:
    >>> keratron.dtype_policies.get("mixed_float16").compute_dtype
    'float16'
"""

from __future__ import annotations

from keratron.mixed_precision import policy as _policy
from keratron.mixed_precision.policy import DTypePolicy

__all__ = ["DTypePolicy", "FloatDTypePolicy", "deserialize", "get", "serialize"]


class FloatDTypePolicy(DTypePolicy):
    """Keras's name for a floating-point `DTypePolicy` ("float32", "mixed_bfloat16", ...)."""


_CLASSES = {"DTypePolicy": DTypePolicy, "FloatDTypePolicy": FloatDTypePolicy, "Policy": DTypePolicy}


def serialize(dtype_policy: DTypePolicy) -> dict:
    """The policy in Keras 3's serialized form, under its class name.

    Example:
        >>> keratron.dtype_policies.serialize(keratron.DTypePolicy("float16"))["config"]
        {'name': 'float16'}
    """
    if not isinstance(dtype_policy, DTypePolicy):
        raise TypeError(
            "dtype_policies.serialize: expected a DTypePolicy. Received: "
            f"dtype_policy={dtype_policy!r} (of type {type(dtype_policy).__name__})"
        )
    return {**_policy.serialize(dtype_policy), "class_name": type(dtype_policy).__name__}


def deserialize(config: dict, custom_objects=None) -> DTypePolicy:
    """A policy from its serialized form (Keras 3's, or tf.keras 2's `"Policy"`)."""
    if not isinstance(config, dict) or "config" not in config:
        raise ValueError(
            "dtype_policies.deserialize: expected a dict with 'class_name' and 'config'. "
            f"Received: config={config!r}"
        )
    name = config.get("class_name")
    cls = (custom_objects or {}).get(name) or _CLASSES.get(name)
    if cls is None:
        raise ValueError(
            f"dtype_policies.deserialize: unknown dtype policy class {name!r}. Expected one "
            f"of {sorted(_CLASSES)}."
        )
    return cls.from_config(config["config"])


def get(identifier) -> DTypePolicy:
    """A policy from a policy, a policy or dtype name, a serialized dict, or None (the global
    policy)."""
    if isinstance(identifier, dict) and identifier.get("class_name") in _CLASSES:
        return deserialize(identifier)
    return _policy.get(identifier)
