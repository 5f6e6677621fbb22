"""Sequence helpers, as `keras.preprocessing.sequence` (the same function as `keratron.utils`)."""

from keratron.utils.sequence_utils import pad_sequences

__all__ = ["pad_sequences"]
