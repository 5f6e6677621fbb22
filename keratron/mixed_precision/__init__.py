"""Mixed precision, as `keras.mixed_precision`: dtype policies and the global policy.

`LossScaleOptimizer` is defined in `keratron.optimizers` (above this package, which layers
import); the top-level package installs it here too, where Keras also names it.

Example:
    >>> keratron.mixed_precision.set_global_policy("mixed_bfloat16")
    >>> keratron.mixed_precision.global_policy()
    <DTypePolicy "mixed_bfloat16">
    >>> keratron.mixed_precision.set_global_policy("float32")
"""

from __future__ import annotations

from keratron.mixed_precision.policy import (
    DTypePolicy,
    Policy,
    dtype_policy,
    global_policy,
    set_dtype_policy,
    set_global_policy,
)

__all__ = [
    "DTypePolicy",
    "Policy",
    "dtype_policy",
    "global_policy",
    "set_dtype_policy",
    "set_global_policy",
]
