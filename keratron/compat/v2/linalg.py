"""`tf.linalg`: matrix products and norms."""

# ruff: noqa: F401
from __future__ import annotations

from keratron.compat.v2.ops import global_norm, l2_normalize, matmul, norm, transpose
