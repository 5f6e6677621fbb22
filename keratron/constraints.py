"""`keras.constraints`, re-exported from `keratron.layers.constraints`.

Example:
    >>> from keratron.constraints import get
"""

from keratron.layers import constraints as _constraints
from keratron.layers.constraints import *  # noqa: F403

# Keras's snake_case names are the classes themselves (`keras.constraints.max_norm is MaxNorm`).
_ALIASES = {
    "max_norm": "MaxNorm",
    "min_max_norm": "MinMaxNorm",
    "non_neg": "NonNeg",
    "unit_norm": "UnitNorm",
}
globals().update({alias: getattr(_constraints, name) for alias, name in _ALIASES.items()})
__all__ = [*_constraints.__all__, *_ALIASES]
