"""Inception-ResNet V2, with Keras's layer names and weight layout, so Keras's `.h5` files load.

Reference: Szegedy et al., "Inception-v4, Inception-ResNet and the Impact of Residual
Connections on Learning" (https://arxiv.org/abs/1602.07261).

As in Keras, the stem and reduction convolutions carry automatic names (`conv2d_5`,
`batch_normalization_5`, `activation_5`, ...); each residual block names its concatenation
`{block}_mixed`, its biased 1x1 projection `{block}_conv` and its final ReLU `{block}_ac`, and
adds the scaled residual with an auto-named `CustomScaleLayer` (`custom_scale_layer_3`), the
layer Keras 3 and tf.keras 2.20 use. Weight files load by layer order, which matches Keras's.

Example:
    >>> from keratron.applications.inception_resnet_v2 import preprocess_input
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # what InceptionResNetV2 expects
    [-1.0, 1.0]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.layers.layer import Layer
from keratron.models import Model

__all__ = ["InceptionResNetV2", "decode_predictions", "preprocess_input"]

BASE_WEIGHT_URL = (
    "https://storage.googleapis.com/tensorflow/keras-applications/inception_resnet_v2/"
)
WEIGHTS_NAME = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels.h5"
WEIGHTS_NAME_NO_TOP = "inception_resnet_v2_weights_tf_dim_ordering_tf_kernels_notop.h5"
# MD5 checksums of the published files, as Keras lists them.
WEIGHTS_HASHES = {
    WEIGHTS_NAME: "e693bd0210a403b3192acc6073ad2e96",
    WEIGHTS_NAME_NO_TOP: "d19885ff4a710c122648d3b5c3b684e4",
}


def InceptionResNetV2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="inception_resnet_v2",
):
    """Builds Inception-ResNet V2, optionally with ImageNet weights.

    Inputs are RGB images preprocessed with
    `keratron.applications.inception_resnet_v2.preprocess_input` (pixels scaled to [-1, 1]).

    Args:
        include_top: whether to end with global average pooling and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, 3) for channels_last; only without the top (the top needs
            299x299). At least 75x75.
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
        >>> model = InceptionResNetV2(weights=None, include_top=False, input_shape=(75, 75, 3),
        ...                           pooling="avg")
        >>> model.output_shape
        (None, 1536)
    """
    pretrained = imagenet_utils.check_weights_argument(
        weights, "InceptionResNetV2", include_top, classes
    )
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=299,
        min_size=75,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:  # fail before building hundreds of layers
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    axis = 1 if backend.image_data_format() == "channels_first" else 3

    # Stem: 35x35x192 at the default size.
    x = _conv2d_bn(img_input, 32, 3, strides=2, padding="valid")
    x = _conv2d_bn(x, 32, 3, padding="valid")
    x = _conv2d_bn(x, 64, 3)
    x = layers.MaxPooling2D(3, strides=2)(x)
    x = _conv2d_bn(x, 80, 1, padding="valid")
    x = _conv2d_bn(x, 192, 3, padding="valid")
    x = layers.MaxPooling2D(3, strides=2)(x)

    # Mixed 5b (Inception-A): 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | avgpool-1x1 -> 320 channels.
    branch_0 = _conv2d_bn(x, 96, 1)
    branch_1 = _conv2d_bn(_conv2d_bn(x, 48, 1), 64, 5)
    branch_2 = _conv2d_bn(_conv2d_bn(_conv2d_bn(x, 64, 1), 96, 3), 96, 3)
    branch_pool = layers.AveragePooling2D(3, strides=1, padding="same")(x)
    branch_pool = _conv2d_bn(branch_pool, 64, 1)
    x = layers.Concatenate(axis=axis, name="mixed_5b")([branch_0, branch_1, branch_2, branch_pool])

    for block_idx in range(1, 11):
        x = _inception_resnet_block(x, 0.17, "block35", block_idx, axis)

    # Mixed 6a (Reduction-A): 17x17x1088.
    branch_0 = _conv2d_bn(x, 384, 3, strides=2, padding="valid")
    branch_1 = _conv2d_bn(_conv2d_bn(x, 256, 1), 256, 3)
    branch_1 = _conv2d_bn(branch_1, 384, 3, strides=2, padding="valid")
    branch_pool = layers.MaxPooling2D(3, strides=2, padding="valid")(x)
    x = layers.Concatenate(axis=axis, name="mixed_6a")([branch_0, branch_1, branch_pool])

    for block_idx in range(1, 21):
        x = _inception_resnet_block(x, 0.1, "block17", block_idx, axis)

    # Mixed 7a (Reduction-B): 8x8x2080.
    branch_0 = _conv2d_bn(_conv2d_bn(x, 256, 1), 384, 3, strides=2, padding="valid")
    branch_1 = _conv2d_bn(_conv2d_bn(x, 256, 1), 288, 3, strides=2, padding="valid")
    branch_2 = _conv2d_bn(_conv2d_bn(x, 256, 1), 288, 3)
    branch_2 = _conv2d_bn(branch_2, 320, 3, strides=2, padding="valid")
    branch_pool = layers.MaxPooling2D(3, strides=2, padding="valid")(x)
    x = layers.Concatenate(axis=axis, name="mixed_7a")([branch_0, branch_1, branch_2, branch_pool])

    for block_idx in range(1, 10):
        x = _inception_resnet_block(x, 0.2, "block8", block_idx, axis)
    # The last block adds its residual unscaled and without the closing ReLU.
    x = _inception_resnet_block(x, 1.0, "block8", 10, axis, activation=None)

    x = _conv2d_bn(x, 1536, 1, name="conv_7b")  # 8x8x1536

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
        BASE_WEIGHT_URL + (file_name or ""),
        WEIGHTS_HASHES.get(file_name),
    )
    return model


def _conv2d_bn(
    x, filters, kernel_size, strides=1, padding="same", activation="relu", use_bias=False, name=None
):
    """Convolution, then (without a bias) batch norm with no scale, then the activation.

    Named as Keras names them: `{name}`, `{name}_bn`, `{name}_ac`, or auto-named without `name`.
    """
    x = layers.Conv2D(
        filters, kernel_size, strides=strides, padding=padding, use_bias=use_bias, name=name
    )(x)
    if not use_bias:
        bn_axis = 1 if backend.image_data_format() == "channels_first" else 3
        bn_name = None if name is None else f"{name}_bn"
        x = layers.BatchNormalization(axis=bn_axis, scale=False, name=bn_name)(x)
    if activation is not None:
        ac_name = None if name is None else f"{name}_ac"
        x = layers.Activation(activation, name=ac_name)(x)
    return x


class CustomScaleLayer(Layer):
    """`inputs[0] + inputs[1] * scale`: a residual added to its shortcut, scaled down.

    Keras's class of the same name, so the layer types and auto-names match Keras's model.

    Args:
        scale: the residual's factor.

    Example:
        >>> CustomScaleLayer(0.5)([np.ones((1, 2)), np.ones((1, 2))]).numpy().tolist()
        [[1.5, 1.5]]
    """

    def __init__(self, scale: float, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def get_config(self) -> dict:
        config = super().get_config()
        config.update({"scale": self.scale})
        return config

    def call(self, inputs):
        return inputs[0] + inputs[1] * self.scale


def _inception_resnet_block(x, scale, block_type, block_idx, axis, activation="relu"):
    """Inception-ResNet block `{block_type}_{block_idx}`: `activation(x + scale * r)`, where
    `r` is a 1x1 projection (back to x's channels) of the concatenated branches."""
    if block_type == "block35":  # 1x1 | 1x1-3x3 | 1x1-3x3-3x3
        branches = [
            _conv2d_bn(x, 32, 1),
            _conv2d_bn(_conv2d_bn(x, 32, 1), 32, 3),
            _conv2d_bn(_conv2d_bn(_conv2d_bn(x, 32, 1), 48, 3), 64, 3),
        ]
    elif block_type == "block17":  # 1x1 | 1x1-1x7-7x1
        branch_0 = _conv2d_bn(x, 192, 1)  # built first: auto-names follow creation order
        branch_1 = _conv2d_bn(_conv2d_bn(x, 128, 1), 160, [1, 7])
        branches = [branch_0, _conv2d_bn(branch_1, 192, [7, 1])]
    elif block_type == "block8":  # 1x1 | 1x1-1x3-3x1
        branch_0 = _conv2d_bn(x, 192, 1)
        branch_1 = _conv2d_bn(_conv2d_bn(x, 192, 1), 224, [1, 3])
        branches = [branch_0, _conv2d_bn(branch_1, 256, [3, 1])]
    else:
        raise ValueError(
            "Unknown Inception-ResNet block type: expected 'block35', 'block17' or 'block8'. "
            f"Received: block_type={block_type!r}"
        )
    block_name = f"{block_type}_{block_idx}"
    mixed = layers.Concatenate(axis=axis, name=f"{block_name}_mixed")(branches)
    up = _conv2d_bn(
        mixed, x.shape[axis], 1, activation=None, use_bias=True, name=f"{block_name}_conv"
    )
    x = CustomScaleLayer(scale)([x, up])
    if activation is not None:
        x = layers.Activation(activation, name=f"{block_name}_ac")(x)
    return x


def preprocess_input(x, data_format=None):
    """Scales pixels from [0, 255] to [-1, 1], as InceptionResNetV2 expects.

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
