"""`keras.legacy`: what Keras 3 keeps of tf.keras 2's API (its object serialization format)."""

from keratron.legacy import saving

__all__ = ["saving"]
