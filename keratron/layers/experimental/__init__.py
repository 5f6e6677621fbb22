"""tf.keras 2's `keras.layers.experimental` namespace, where tf.keras 2.3-2.5 code found the
preprocessing layers (`layers.experimental.preprocessing.Rescaling`, ...) before they moved
to `keras.layers`: the same classes under their old paths.

Example:
    >>> from keratron.layers.experimental import preprocessing
    >>> preprocessing.Rescaling is keratron.layers.Rescaling
    True
"""

from keratron.layers.core import EinsumDense
from keratron.layers.experimental import preprocessing
from keratron.layers.normalization import BatchNormalization


class SyncBatchNormalization(BatchNormalization):
    """tf.keras 2's name for `BatchNormalization(synchronized=True)`: statistics over the
    global batch when training data-parallel."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("synchronized", True)
        super().__init__(*args, **kwargs)


__all__ = ["EinsumDense", "SyncBatchNormalization", "preprocessing"]
