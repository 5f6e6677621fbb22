"""Xception, with Keras's layer names and weight layout, so Keras's `.h5` files load.

Reference: Chollet, "Xception: Deep Learning with Depthwise Separable Convolutions"
(https://arxiv.org/abs/1610.02357).

The strided 1x1 shortcut convolutions, their batch norms and the residual additions carry
automatic names (`conv2d`, `batch_normalization`, `add`, ...) as in Keras; every other layer
is named `block{n}_...`.

Example:
    >>> from keratron.applications.xception import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # what Xception expects
    [-1.0, 1.0]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = ["Xception", "decode_predictions", "preprocess_input"]

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/xception/"
WEIGHTS_NAME = "xception_weights_tf_dim_ordering_tf_kernels.h5"
WEIGHTS_NAME_NO_TOP = "xception_weights_tf_dim_ordering_tf_kernels_notop.h5"
# MD5 checksums of the published files, as Keras lists them.
WEIGHTS_HASHES = {
    WEIGHTS_NAME: "0a58e3b7378bc2990ea3b43d5981f1f6",
    WEIGHTS_NAME_NO_TOP: "b0042744bf5b25fce3cb969f33bebb97",
}


def Xception(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="xception",
):
    """Builds Xception, optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.xception.preprocess_input`
    (pixels scaled to [-1, 1]).

    Args:
        include_top: whether to end with global average pooling and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, 3) for channels_last; only without the top (the top needs
            299x299). At least 71x71.
        pooling: without the top, None (4D features), "avg" or "max" (global pooling).
        classes: number of classes of the top (1000 for ImageNet weights).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        name: model name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `input_shape` or
            `classifier_activation` combinations.

    Example:
        >>> model = Xception(weights=None, include_top=False, input_shape=(71, 71, 3),
        ...                  pooling="avg")
        >>> model.output_shape
        (None, 2048)
    """
    pretrained = imagenet_utils.check_weights_argument(weights, "Xception", include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=299,
        min_size=71,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:  # fail before building anything
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    axis = 1 if backend.image_data_format() == "channels_first" else -1

    # Entry flow: two plain convolutions, then three downsampling blocks.
    x = layers.Conv2D(32, (3, 3), strides=(2, 2), use_bias=False, name="block1_conv1")(img_input)
    x = layers.BatchNormalization(axis=axis, name="block1_conv1_bn")(x)
    x = layers.Activation("relu", name="block1_conv1_act")(x)
    x = layers.Conv2D(64, (3, 3), use_bias=False, name="block1_conv2")(x)
    x = layers.BatchNormalization(axis=axis, name="block1_conv2_bn")(x)
    x = layers.Activation("relu", name="block1_conv2_act")(x)
    # Block 2 starts from the activated block 1 output: no ReLU in front of its first sepconv.
    x = _downsampling_block(x, (128, 128), axis, block=2, first_relu=False)
    x = _downsampling_block(x, (256, 256), axis, block=3)
    x = _downsampling_block(x, (728, 728), axis, block=4)

    # Middle flow: eight residual blocks of three separable convolutions.
    for block in range(5, 13):
        residual = x
        for conv in range(1, 4):
            x = layers.Activation("relu", name=f"block{block}_sepconv{conv}_act")(x)
            x = _separable_bn(x, 728, axis, f"block{block}_sepconv{conv}")
        x = layers.add([x, residual])

    # Exit flow.
    x = _downsampling_block(x, (728, 1024), axis, block=13)
    x = _separable_bn(x, 1536, axis, "block14_sepconv1")
    x = layers.Activation("relu", name="block14_sepconv1_act")(x)
    x = _separable_bn(x, 2048, axis, "block14_sepconv2")
    x = layers.Activation("relu", name="block14_sepconv2_act")(x)

    if include_top:
        x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
        x = layers.Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = layers.GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = layers.GlobalMaxPooling2D()(x)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = None
    if pretrained:
        file_name = WEIGHTS_NAME if include_top else WEIGHTS_NAME_NO_TOP
    imagenet_utils.load_model_weights(
        model,
        weights,
        file_name,
        BASE_WEIGHT_PATH + (file_name or ""),
        WEIGHTS_HASHES.get(file_name),
    )
    return model


def _separable_bn(x, filters, axis, name):
    """3x3 separable convolution (no bias) `{name}` + batch norm `{name}_bn`."""
    x = layers.SeparableConv2D(filters, (3, 3), padding="same", use_bias=False, name=name)(x)
    return layers.BatchNormalization(axis=axis, name=f"{name}_bn")(x)


def _downsampling_block(x, filters, axis, block, first_relu=True):
    """[ReLU] - sepconv - BN - ReLU - sepconv - BN - 3x3/2 max pool, added to a strided 1x1
    projection of the input (auto-named `conv2d*` and `batch_normalization*`)."""
    residual = layers.Conv2D(filters[1], (1, 1), strides=(2, 2), padding="same", use_bias=False)(x)
    residual = layers.BatchNormalization(axis=axis)(residual)
    prefix = f"block{block}"
    if first_relu:
        x = layers.Activation("relu", name=f"{prefix}_sepconv1_act")(x)
    x = _separable_bn(x, filters[0], axis, f"{prefix}_sepconv1")
    x = layers.Activation("relu", name=f"{prefix}_sepconv2_act")(x)
    x = _separable_bn(x, filters[1], axis, f"{prefix}_sepconv2")
    x = layers.MaxPooling2D((3, 3), strides=(2, 2), padding="same", name=f"{prefix}_pool")(x)
    return layers.add([x, residual])


def preprocess_input(x, data_format=None):
    """Scales pixels from [0, 255] to [-1, 1], as Xception expects.

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
