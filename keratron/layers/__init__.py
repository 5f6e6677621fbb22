"""Layers, named and defaulted as in `keras.layers`."""

# The families are imported in dependency order (attention and wrappers use core layers).
# ruff: noqa: I001, F403

from keratron.layers.input_layer import Input, InputLayer
from keratron.layers.layer import InputSpec, Layer
from keratron.layers.node import KerasTensor
from keratron.layers.core import *
from keratron.layers.reshaping import *
from keratron.layers.reshaping3d import *
from keratron.layers.regularization import *
from keratron.layers.merging import *
from keratron.layers.advanced_activations import *
from keratron.layers.preprocessing import *
from keratron.layers.preprocessing_categorical import *
from keratron.layers.hashing import *
from keratron.layers.hashed_crossing import *
from keratron.layers.lookup import *
from keratron.layers.text_vectorization import *
from keratron.layers.image_preprocessing import *
from keratron.layers.image_augmentation import *
from keratron.layers.audio import *
from keratron.layers.pipeline import *
from keratron.layers.image_color import *
from keratron.layers.image_warping import *
from keratron.layers.image_mixing import *
from keratron.layers.convolutional import *
from keratron.layers.pooling import *
from keratron.layers.adaptive_pooling import *
from keratron.layers.normalization import *
from keratron.layers.wrappers import *
from keratron.layers.normalization_extra import *
from keratron.layers.recurrent import *
from keratron.layers.conv_lstm import *
from keratron.layers.attention import *
from keratron.layers.grouped_query_attention import *
from keratron.layers.reversible_embedding import *
from keratron.layers.unsupported import *
from keratron.layers import experimental  # noqa: F401 (tf.keras 2's layers.experimental paths)

__all__ = ["Input", "InputLayer", "InputSpec", "Layer", "KerasTensor"]
for _module in (
    core,  # noqa: F405
    reshaping,  # noqa: F405
    reshaping3d,  # noqa: F405
    regularization,  # noqa: F405
    merging,  # noqa: F405
    advanced_activations,  # noqa: F405
    preprocessing,  # noqa: F405
    preprocessing_categorical,  # noqa: F405
    hashing,  # noqa: F405
    hashed_crossing,  # noqa: F405
    lookup,  # noqa: F405
    text_vectorization,  # noqa: F405
    image_preprocessing,  # noqa: F405
    image_augmentation,  # noqa: F405
    audio,  # noqa: F405
    pipeline,  # noqa: F405
    image_color,  # noqa: F405
    image_warping,  # noqa: F405
    image_mixing,  # noqa: F405
    convolutional,  # noqa: F405
    pooling,  # noqa: F405
    adaptive_pooling,  # noqa: F405
    normalization,  # noqa: F405
    wrappers,  # noqa: F405
    normalization_extra,  # noqa: F405
    recurrent,  # noqa: F405
    conv_lstm,  # noqa: F405
    attention,  # noqa: F405
    grouped_query_attention,  # noqa: F405
    reversible_embedding,  # noqa: F405
    unsupported,  # noqa: F405
):
    __all__ += list(getattr(_module, "__all__", []))
del _module
