"""MobileNetV3 (Small and Large), with Keras's layer names and weight layout, so Keras's `.h5`
files load.

The models rescale their [0, 255] inputs themselves (a `Rescaling` layer, unless
`include_preprocessing=False`), so `preprocess_input` returns its input unchanged.

Reference: Howard et al., "Searching for MobileNetV3" (https://arxiv.org/abs/1905.02244).

Example:
    >>> from keratron.applications.mobilenet_v3 import preprocess_input
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # the model rescales by itself
    [0.0, 255.0]
"""

from __future__ import annotations

import warnings

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.layers.node import KerasTensor
from keratron.models import Model

__all__ = ["MobileNetV3Large", "MobileNetV3Small", "decode_predictions", "preprocess_input"]

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v3/"
# (top file, no-top file) checksums, as Keras publishes them, per "{type}_224_{alpha}_float".
WEIGHTS_HASHES = {
    "large_224_0.75_float": (
        "765b44a33ad4005b3ac83185abf1d0eb",
        "40af19a13ebea4e2ee0c676887f69a2e",
    ),
    "large_224_1.0_float": (
        "59e551e166be033d707958cf9e29a6a7",
        "07fb09a5933dd0c8eaafa16978110389",
    ),
    "large_minimalistic_224_1.0_float": (
        "675e7b876c45c57e9e63e6d90a36599c",
        "ec5221f64a2f6d1ef965a614bdae7973",
    ),
    "small_224_0.75_float": (
        "cb65d4e5be93758266aa0a7f2c6708b7",
        "ebdb5cc8e0b497cd13a7c275d475c819",
    ),
    "small_224_1.0_float": (
        "8768d4c2e7dee89b9d02b2d03d65d862",
        "d3e8ec802a04aa4fc771ee12a9a9b836",
    ),
    "small_minimalistic_224_1.0_float": (
        "99cd97fb2fcdad2bf028eb838de69e37",
        "cde8136e733e811080d9fcd8a252f7e4",
    ),
}

# Inverted residual blocks as (expansion, filters, kernel, stride, squeeze-excite, activation);
# kernel "k", squeeze-excite "se" and activation "act" follow `minimalistic` (3 / None / relu)
# or not (5 / 0.25 / hard-swish).
_SMALL_BLOCKS = (
    (1, 16, 3, 2, "se", "relu"),
    (72.0 / 16, 24, 3, 2, None, "relu"),
    (88.0 / 24, 24, 3, 1, None, "relu"),
    (4, 40, "k", 2, "se", "act"),
    (6, 40, "k", 1, "se", "act"),
    (6, 40, "k", 1, "se", "act"),
    (3, 48, "k", 1, "se", "act"),
    (3, 48, "k", 1, "se", "act"),
    (6, 96, "k", 2, "se", "act"),
    (6, 96, "k", 1, "se", "act"),
    (6, 96, "k", 1, "se", "act"),
)
_LARGE_BLOCKS = (
    (1, 16, 3, 1, None, "relu"),
    (4, 24, 3, 2, None, "relu"),
    (3, 24, 3, 1, None, "relu"),
    (3, 40, "k", 2, "se", "relu"),
    (3, 40, "k", 1, "se", "relu"),
    (3, 40, "k", 1, "se", "relu"),
    (6, 80, 3, 2, None, "act"),
    (2.5, 80, 3, 1, None, "act"),
    (2.3, 80, 3, 1, None, "act"),
    (2.3, 80, 3, 1, None, "act"),
    (6, 112, 3, 1, "se", "act"),
    (6, 112, 3, 1, "se", "act"),
    (6, 160, "k", 2, "se", "act"),
    (6, 160, "k", 1, "se", "act"),
    (6, 160, "k", 1, "se", "act"),
)


def MobileNetV3Small(
    input_shape=None,
    alpha=1.0,
    minimalistic=False,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    pooling=None,
    dropout_rate=0.2,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="MobileNetV3Small",
):
    """Builds MobileNetV3Small, optionally with ImageNet weights.

    Inputs are RGB images with pixels in [0, 255] (in [-1, 1] with
    `include_preprocessing=False`).

    Args:
        input_shape: (rows, cols, 3) for channels_last; None accepts any size. At least 32x32.
            If `input_tensor` is also given, their widths must agree.
        alpha: width multiplier; the pretrained widths are 0.75 and 1.0 (1.0 only when
            `minimalistic`).
        minimalistic: whether to drop squeeze-and-excite, hard-swish and 5x5 kernels (3x3
            kernels and ReLU throughout).
        include_top: whether to end with the pooled 1x1-convolution classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        classes: number of classes of the top (1000 for ImageNet weights).
        pooling: without the top, None (4D features), "avg" or "max" (global pooling).
        dropout_rate: dropout before the classifier (no Dropout layer when 0).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        include_preprocessing: whether the model starts with a `Rescaling` to [-1, 1].
        name: model name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `alpha`, `input_shape`,
            `input_tensor` or `classifier_activation` combinations.

    Example:
        >>> model = MobileNetV3Small(input_shape=(32, 32, 3), alpha=0.75, weights=None,
        ...                          include_top=False, pooling="avg")
        >>> model.output_shape
        (None, 432)
    """
    return _mobilenet_v3(
        _SMALL_BLOCKS,
        1024,
        input_shape,
        alpha,
        "small",
        minimalistic,
        include_top,
        weights,
        input_tensor,
        classes,
        pooling,
        dropout_rate,
        classifier_activation,
        include_preprocessing,
        name,
    )


def MobileNetV3Large(
    input_shape=None,
    alpha=1.0,
    minimalistic=False,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    classes=1000,
    pooling=None,
    dropout_rate=0.2,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="MobileNetV3Large",
):
    """Builds MobileNetV3Large, optionally with ImageNet weights.

    The arguments are those of `MobileNetV3Small`.

    Example:
        >>> model = MobileNetV3Large(input_shape=(32, 32, 3), weights=None, minimalistic=True,
        ...                          include_top=False, pooling="max")
        >>> model.output_shape
        (None, 960)
    """
    return _mobilenet_v3(
        _LARGE_BLOCKS,
        1280,
        input_shape,
        alpha,
        "large",
        minimalistic,
        include_top,
        weights,
        input_tensor,
        classes,
        pooling,
        dropout_rate,
        classifier_activation,
        include_preprocessing,
        name,
    )


def _mobilenet_v3(
    blocks,
    last_point_ch,
    input_shape,
    alpha,
    model_type,
    minimalistic,
    include_top,
    weights,
    input_tensor,
    classes,
    pooling,
    dropout_rate,
    classifier_activation,
    include_preprocessing,
    name,
):
    who = "MobileNetV3" + model_type.capitalize()
    pretrained = imagenet_utils.check_weights_argument(weights, who, include_top, classes)
    channels_first = backend.image_data_format() == "channels_first"
    input_shape = _resolve_input_shape(who, input_shape, input_tensor, channels_first)
    rows, cols = input_shape[1:3] if channels_first else input_shape[:2]
    if rows and cols and (rows < 32 or cols < 32):
        raise ValueError(
            f"{who}: input size must be at least 32x32. Received: input_shape={input_shape}"
        )
    if pretrained:
        if (not minimalistic and alpha not in (0.75, 1.0)) or (minimalistic and alpha != 1.0):
            raise ValueError(
                f"{who}: imagenet weights exist for alpha 0.75 or 1.0 (non-minimalistic) and "
                f"1.0 (minimalistic) only. Received: alpha={alpha}, minimalistic={minimalistic}"
            )
        if rows != cols or rows != 224:
            warnings.warn(
                "`input_shape` is undefined or non-square, or `rows` is not 224. Weights for "
                "input shape (224, 224) will be loaded as the default.",
                stacklevel=3,
            )
    if include_top:  # fail before building
        imagenet_utils.validate_activation(classifier_activation, weights)

    if minimalistic:
        kernel, activation, se_ratio = 3, _relu, None
    else:
        kernel, activation, se_ratio = 5, _hard_swish, 0.25
    channel_axis = 1 if channels_first else -1

    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    x = img_input
    if include_preprocessing:
        x = layers.Rescaling(scale=1.0 / 127.5, offset=-1.0)(x)
    x = layers.Conv2D(16, 3, strides=(2, 2), padding="same", use_bias=False, name="conv")(x)
    x = _batch_norm(x, channel_axis, "conv_bn")
    x = activation(x)
    for block_id, (expansion, filters, k, stride, se, act) in enumerate(blocks):
        x = _inverted_res_block(
            x,
            expansion,
            _depth(filters * alpha),
            kernel if k == "k" else k,
            stride,
            se_ratio if se else None,
            activation if act == "act" else _relu,
            block_id,
        )
    last_conv_ch = _depth(x.shape[channel_axis] * 6)
    if alpha > 1.0:
        last_point_ch = _depth(last_point_ch * alpha)
    x = layers.Conv2D(last_conv_ch, 1, padding="same", use_bias=False, name="conv_1")(x)
    x = _batch_norm(x, channel_axis, "conv_1_bn")
    x = activation(x)

    if include_top:
        x = layers.GlobalAveragePooling2D(keepdims=True)(x)
        x = layers.Conv2D(last_point_ch, 1, padding="same", use_bias=True, name="conv_2")(x)
        x = activation(x)
        if dropout_rate > 0:
            x = layers.Dropout(dropout_rate)(x)
        x = layers.Conv2D(classes, 1, padding="same", name="logits")(x)
        x = layers.Flatten()(x)
        x = layers.Activation(activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = layers.GlobalMaxPooling2D(name="max_pool")(x)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = file_hash = None
    if pretrained:
        model_name = f"{model_type}{'_minimalistic' if minimalistic else ''}_224_{alpha}_float"
        if include_top:
            file_name = f"weights_mobilenet_v3_{model_name}.h5"
            file_hash = WEIGHTS_HASHES[model_name][0]
        else:
            file_name = f"weights_mobilenet_v3_{model_name}_no_top_v2.h5"
            file_hash = WEIGHTS_HASHES[model_name][1]
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHT_PATH + (file_name or ""), file_hash
    )
    return model


def _resolve_input_shape(who, input_shape, input_tensor, channels_first):
    """Keras's MobileNetV3 rules: `input_shape` and a symbolic `input_tensor` must agree on the
    width; without `input_shape` it is read off the tensor (rows and columns swapped, as Keras
    does; only the size check sees it), and otherwise any size is accepted."""
    if input_tensor is not None and input_shape is not None:
        if not isinstance(input_tensor, KerasTensor):
            raise ValueError(
                f"{who}: `input_tensor` is not a symbolic (Keras) tensor. "
                f"Received: input_tensor={input_tensor!r}"
            )
        tensor_cols = input_tensor.shape[1] if channels_first else input_tensor.shape[2]
        if tensor_cols != input_shape[1]:
            raise ValueError(
                f"{who}: `input_shape[1]` must equal `input_tensor.shape[2]` "
                f"(`input_tensor.shape[1]` with channels_first). Received: "
                f"input_shape={input_shape}, input_tensor.shape={input_tensor.shape}"
            )
    if input_shape is None and isinstance(input_tensor, KerasTensor):
        if channels_first:
            rows, cols = input_tensor.shape[2:4]
            input_shape = (3, cols, rows)
        else:
            rows, cols = input_tensor.shape[1:3]
            input_shape = (cols, rows, 3)
    if input_shape is None:
        input_shape = (3, None, None) if channels_first else (None, None, 3)
    return tuple(input_shape)


def _batch_norm(x, axis, name):
    return layers.BatchNormalization(axis=axis, epsilon=1e-3, momentum=0.999, name=name)(x)


def _relu(x):
    return layers.ReLU()(x)


def _hard_sigmoid(x):
    # Built from a ReLU6 and two tensor ops, as Keras builds it (no weights, no named layer).
    return layers.ReLU(6.0)(x + 3.0) * (1.0 / 6.0)


def _hard_swish(x):
    return layers.Activation("hard_swish")(x)


def _depth(v, divisor=8, min_value=None):
    """Rounds a channel count to a multiple of `divisor`, never more than 10% below `v`."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _se_block(inputs, filters, se_ratio, prefix):
    """Squeeze-and-excite: channel weights from the pooled features, through a bottleneck."""
    x = layers.GlobalAveragePooling2D(keepdims=True, name=f"{prefix}squeeze_excite_avg_pool")(
        inputs
    )
    x = layers.Conv2D(
        _depth(filters * se_ratio), 1, padding="same", name=f"{prefix}squeeze_excite_conv"
    )(x)
    x = layers.ReLU(name=f"{prefix}squeeze_excite_relu")(x)
    x = layers.Conv2D(filters, 1, padding="same", name=f"{prefix}squeeze_excite_conv_1")(x)
    x = _hard_sigmoid(x)
    return layers.Multiply(name=f"{prefix}squeeze_excite_mul")([inputs, x])


def _inverted_res_block(x, expansion, filters, kernel_size, stride, se_ratio, activation, block_id):
    """Expand (1x1) + depthwise + optional squeeze-excite + linear project (1x1), with a
    residual Add when the shape is kept; block 0 has no expansion."""
    channel_axis = 1 if backend.image_data_format() == "channels_first" else -1
    shortcut = x
    prefix = "expanded_conv_"
    infilters = x.shape[channel_axis]
    if block_id:
        prefix = f"expanded_conv_{block_id}_"
        x = layers.Conv2D(
            _depth(infilters * expansion),
            1,
            padding="same",
            use_bias=False,
            name=f"{prefix}expand",
        )(x)
        x = _batch_norm(x, channel_axis, f"{prefix}expand_bn")
        x = activation(x)
    if stride == 2:
        x = layers.ZeroPadding2D(
            padding=imagenet_utils.correct_pad(x, kernel_size), name=f"{prefix}depthwise_pad"
        )(x)
    x = layers.DepthwiseConv2D(
        kernel_size,
        strides=stride,
        padding="same" if stride == 1 else "valid",
        use_bias=False,
        name=f"{prefix}depthwise",
    )(x)
    x = _batch_norm(x, channel_axis, f"{prefix}depthwise_bn")
    x = activation(x)
    if se_ratio:
        x = _se_block(x, _depth(infilters * expansion), se_ratio, prefix)
    x = layers.Conv2D(filters, 1, padding="same", use_bias=False, name=f"{prefix}project")(x)
    x = _batch_norm(x, channel_axis, f"{prefix}project_bn")
    if stride == 1 and infilters == filters:
        x = layers.Add(name=f"{prefix}add")([shortcut, x])
    return x


def preprocess_input(x, data_format=None):
    """Returns `x` unchanged: MobileNetV3 rescales its inputs itself (Keras keeps this
    function for compatibility).

    Example:
        >>> preprocess_input(np.array([[[[0.0, 255.0, 127.5]]]]))
        array([[[[  0. , 255. , 127.5]]]])
    """
    return x


def decode_predictions(preds, top=5):
    """Decodes ImageNet scores into (wnid, name, score) tuples; see
    `imagenet_utils.decode_predictions`.

    Example:
        >>> decode_predictions(np.eye(1000)[:1], top=1)[0][0][1]
        'tench'
    """
    return imagenet_utils.decode_predictions(preds, top=top)
