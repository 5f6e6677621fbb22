"""ResNet50V2, ResNet101V2 and ResNet152V2, with Keras's layer names and weight layout, so
Keras's `.h5` files load.

Reference: He et al., "Identity Mappings in Deep Residual Networks"
(https://arxiv.org/abs/1603.05027).

The stem, head and weight files are `keratron.applications.resnet.ResNet`'s; here are the
pre-activation blocks, which downsample in the last block of a stage (not the first).

Example:
    >>> from keratron.applications.resnet_v2 import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # what ResNetV2 expects
    [-1.0, 1.0]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils, resnet

__all__ = ["ResNet50V2", "ResNet101V2", "ResNet152V2", "decode_predictions", "preprocess_input"]

# The same batch-norm epsilon and argument documentation as ResNet (V1).
_BN_EPSILON = resnet._BN_EPSILON
_ARGS_DOC = resnet._ARGS_DOC


def _residual_block_v2(x, filters, kernel_size=3, stride=1, conv_shortcut=False, name=None):
    """Pre-activation bottleneck: BN-ReLU, then 1x1 - kxk (strided) - 1x1 (4x filters, with
    bias), added to the shortcut (a projection of the pre-activation, or the input itself,
    subsampled by a 1x1 max pooling when strided)."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    preact = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_preact_bn")(
        x
    )
    preact = layers.Activation("relu", name=f"{name}_preact_relu")(preact)
    if conv_shortcut:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(preact)
    elif stride > 1:
        shortcut = layers.MaxPooling2D(1, strides=stride)(x)  # auto-named, as in Keras
    else:
        shortcut = x
    x = layers.Conv2D(filters, 1, strides=1, use_bias=False, name=f"{name}_1_conv")(preact)
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_1_bn")(x)
    x = layers.Activation("relu", name=f"{name}_1_relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)), name=f"{name}_2_pad")(x)
    x = layers.Conv2D(filters, kernel_size, strides=stride, use_bias=False, name=f"{name}_2_conv")(
        x
    )
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_2_bn")(x)
    x = layers.Activation("relu", name=f"{name}_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    return layers.Add(name=f"{name}_out")([shortcut, x])


def _stack_v2(x, filters, blocks, stride1=2, name=None):
    """`blocks` pre-activation blocks: the first projects, the last has stride `stride1`."""
    x = _residual_block_v2(x, filters, conv_shortcut=True, name=f"{name}_block1")
    for i in range(2, blocks):
        x = _residual_block_v2(x, filters, name=f"{name}_block{i}")
    return _residual_block_v2(x, filters, stride=stride1, name=f"{name}_block{blocks}")


def _stack_fn(blocks_per_stage):
    """The four stages conv2..conv5 (64, 128, 256, 512 filters); conv5 keeps the size."""

    def stack_fn(x):
        x = _stack_v2(x, 64, blocks_per_stage[0], name="conv2")
        x = _stack_v2(x, 128, blocks_per_stage[1], name="conv3")
        x = _stack_v2(x, 256, blocks_per_stage[2], name="conv4")
        return _stack_v2(x, 512, blocks_per_stage[3], stride1=1, name="conv5")

    return stack_fn


def _build(blocks_per_stage, weights_name, **kwargs):
    return resnet.ResNet(
        _stack_fn(blocks_per_stage), preact=True, use_bias=True, weights_name=weights_name, **kwargs
    )


def ResNet50V2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet50v2",
):
    """Builds ResNet50V2 (3, 4, 6, 3 pre-activation blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet_v2.preprocess_input`
    (pixels scaled to [-1, 1]).
    {args}
    Example:
        >>> model = ResNet50V2(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...                    pooling="max")
        >>> model.output_shape
        (None, 2048)
    """
    return _build(
        (3, 4, 6, 3),
        "resnet50v2",
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
        name=name,
    )


def ResNet101V2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet101v2",
):
    """Builds ResNet101V2 (3, 4, 23, 3 pre-activation blocks), optionally with ImageNet
    weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet_v2.preprocess_input`.
    {args}
    Example:
        >>> model = ResNet101V2(weights=None, include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 2048)
    """
    return _build(
        (3, 4, 23, 3),
        "resnet101v2",
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
        name=name,
    )


def ResNet152V2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet152v2",
):
    """Builds ResNet152V2 (3, 8, 36, 3 pre-activation blocks), optionally with ImageNet
    weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet_v2.preprocess_input`.
    {args}
    Example:
        >>> model = ResNet152V2(weights=None, include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 2048)
    """
    return _build(
        (3, 8, 36, 3),
        "resnet152v2",
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
        name=name,
    )


for _builder in (ResNet50V2, ResNet101V2, ResNet152V2):
    if _builder.__doc__:  # None under `python -OO`
        _builder.__doc__ = _builder.__doc__.replace("{args}", _ARGS_DOC)


def preprocess_input(x, data_format=None):
    """Scales pixels from [0, 255] to [-1, 1], as ResNetV2 expects.

    Example:
        >>> preprocess_input(np.array([[[[0.0, 255.0, 127.5]]]]))
        array([[[[-1.,  1.,  0.]]]])
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="tf")


def decode_predictions(preds, top=5):
    """Decodes ImageNet scores into (wnid, name, score) tuples; see
    `imagenet_utils.decode_predictions`.

    Example:
        >>> decode_predictions(np.eye(1000)[:1], top=1)[0][0][1]
        'tench'
    """
    return imagenet_utils.decode_predictions(preds, top=top)
