"""`keras.applications.resnet50`: ResNet50 and its preprocessing, defined in
`keratron.applications.resnet`.

Example:
    >>> from keratron.applications.resnet50 import ResNet50, preprocess_input
    >>> ResNet50 is keratron.applications.resnet.ResNet50
    True
"""

from keratron.applications.resnet import ResNet50, decode_predictions, preprocess_input

__all__ = ["ResNet50", "decode_predictions", "preprocess_input"]
