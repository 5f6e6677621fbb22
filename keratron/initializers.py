"""`keras.initializers`, re-exported from `keratron.layers.initializers`.

Example:
    >>> from keratron.initializers import get
"""

from keratron.layers import initializers as _initializers
from keratron.layers.initializers import *  # noqa: F403

# Keras's snake_case names are the classes themselves (`keras.initializers.zeros is Zeros`).
_ALIASES = {
    "IdentityInitializer": "Identity",
    "OrthogonalInitializer": "Orthogonal",
    "STFTInitializer": "STFT",
    "constant": "Constant",
    "glorot_normal": "GlorotNormal",
    "glorot_uniform": "GlorotUniform",
    "he_normal": "HeNormal",
    "he_uniform": "HeUniform",
    "identity": "Identity",
    "lecun_normal": "LecunNormal",
    "lecun_uniform": "LecunUniform",
    "ones": "Ones",
    "orthogonal": "Orthogonal",
    "random_normal": "RandomNormal",
    "random_uniform": "RandomUniform",
    "stft": "STFT",
    "truncated_normal": "TruncatedNormal",
    "variance_scaling": "VarianceScaling",
    "zeros": "Zeros",
}
globals().update({alias: getattr(_initializers, name) for alias, name in _ALIASES.items()})
__all__ = [*_initializers.__all__, *_ALIASES]
