"""`keras.activations`, re-exported from `keratron.layers.activations`.

Example:
    >>> from keratron.activations import get
"""

from keratron.layers.activations import *  # noqa: F403
from keratron.layers.activations import __all__  # noqa: F401
