"""TensorFlow's APIs as views on keratron: `keratron.compat.v1` (TF1 graphs and sessions) and
`keratron.compat.v2` (TF2's eager API).

Nothing below this package imports it; `import keratron.compat.v1 as tf` (or `.v2`) loads it
on demand.
"""

from __future__ import annotations

import importlib

__all__ = ["v1", "v2"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f"keratron.compat.{name}")
    raise AttributeError(f"module 'keratron.compat' has no attribute {name!r}")
