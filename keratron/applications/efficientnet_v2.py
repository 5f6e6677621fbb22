"""EfficientNetV2 B0 to B3, S, M and L, with Keras's layer names and weight layout, so Keras's
`.h5` files load.

With `include_preprocessing=True` (the default) the input preprocessing is part of the model,
so the models take pixels in [0, 255] and `preprocess_input` returns its input unchanged.

Reference: Tan and Le, "EfficientNetV2: Smaller Models and Faster Training"
(https://arxiv.org/abs/2104.00298).

Example:
    >>> from keratron.applications.efficientnet_v2 import preprocess_input
    >>> x = np.array([0.0, 255.0])
    >>> preprocess_input(x) is x  # a pass-through: the model rescales its input itself
    True
"""

from __future__ import annotations

import math

from keratron import backend, initializers, layers
from keratron.applications import imagenet_utils
from keratron.applications.efficientnet import (
    CONV_KERNEL_INITIALIZER,
    _residual,
    _squeeze_excite,
    _top,
)
from keratron.models import Model

__all__ = [
    "EfficientNetV2B0",
    "EfficientNetV2B1",
    "EfficientNetV2B2",
    "EfficientNetV2B3",
    "EfficientNetV2L",
    "EfficientNetV2M",
    "EfficientNetV2S",
    "decode_predictions",
    "preprocess_input",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/efficientnet_v2/"
# md5 digests of the published files, (with top, without top), as Keras lists them.
WEIGHTS_HASHES = {
    "b0": ("21ecbf6da12460d5c40bb2f29ceb2188", "893217f2bb855e2983157299931e43ff"),
    "b1": ("069f0534ff22adf035c89e2d9547a9dc", "0e80663031ca32d657f9caa404b6ec37"),
    "b2": ("424e49f28180edbde1e94797771950a7", "1dfe2e7a5d45b6632553a8961ea609eb"),
    "b3": ("1f1fc43bd98a6e4fd8fdfd551e02c7a0", "f6abf7b5849ac99a89b50dd3fd532856"),
    "-s": ("e1d88a8495beba45748fedd0cecbe016", "af0682fb74e8c54910f2d4393339c070"),
    "-m": ("a3bf6aa3276309f4fc6a34aa114c95cd", "1b8dc055df72dde80d614482840fe342"),
    "-l": ("27e6d408b53c7ebc868fefa357689935", "b0b66b5c863aef5b46e8608fe1711615"),
}

# (kernel_size, repeats, filters_in, filters_out, expand_ratio, se_ratio, strides, fused) per
# stage: fused stages (Fused-MBConv) replace the 1x1 expansion and depthwise convolution by
# one full convolution.
_B_STAGES = (
    (3, 1, 32, 16, 1, 0.0, 1, True),
    (3, 2, 16, 32, 4, 0.0, 2, True),
    (3, 2, 32, 48, 4, 0.0, 2, True),
    (3, 3, 48, 96, 4, 0.25, 2, False),
    (3, 5, 96, 112, 6, 0.25, 1, False),
    (3, 8, 112, 192, 6, 0.25, 2, False),
)
_STAGES = {
    "b0": _B_STAGES,
    "b1": _B_STAGES,
    "b2": _B_STAGES,
    "b3": _B_STAGES,
    "s": (
        (3, 2, 24, 24, 1, 0.0, 1, True),
        (3, 4, 24, 48, 4, 0.0, 2, True),
        (3, 4, 48, 64, 4, 0.0, 2, True),
        (3, 6, 64, 128, 4, 0.25, 2, False),
        (3, 9, 128, 160, 6, 0.25, 1, False),
        (3, 15, 160, 256, 6, 0.25, 2, False),
    ),
    "m": (
        (3, 3, 24, 24, 1, 0.0, 1, True),
        (3, 5, 24, 48, 4, 0.0, 2, True),
        (3, 5, 48, 80, 4, 0.0, 2, True),
        (3, 7, 80, 160, 4, 0.25, 2, False),
        (3, 14, 160, 176, 6, 0.25, 1, False),
        (3, 18, 176, 304, 6, 0.25, 2, False),
        (3, 5, 304, 512, 6, 0.25, 1, False),
    ),
    "l": (
        (3, 4, 32, 32, 1, 0.0, 1, True),
        (3, 7, 32, 64, 4, 0.0, 2, True),
        (3, 7, 64, 96, 4, 0.0, 2, True),
        (3, 10, 96, 192, 4, 0.25, 2, False),
        (3, 19, 192, 224, 6, 0.25, 1, False),
        (3, 25, 224, 384, 6, 0.25, 2, False),
        (3, 7, 384, 640, 6, 0.25, 1, False),
    ),
}

# (width_coefficient, depth_coefficient, default_size, weights key) per variant.
_VARIANTS = {
    "b0": (1.0, 1.0, 224, "b0"),
    "b1": (1.0, 1.1, 240, "b1"),
    "b2": (1.1, 1.2, 260, "b2"),
    "b3": (1.2, 1.4, 300, "b3"),
    "s": (1.0, 1.0, 384, "-s"),
    "m": (1.0, 1.0, 480, "-m"),
    "l": (1.0, 1.0, 480, "-l"),
}

# The B variants were trained on images normalized as in EfficientNet (V1); S, M and L on
# pixels scaled to [-1, 1).
_IMAGENET_MEAN_RGB = (0.485, 0.456, 0.406)
_IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


def _efficientnet_v2(
    variant,
    *,
    include_top,
    weights,
    input_tensor,
    input_shape,
    pooling,
    classes,
    classifier_activation,
    include_preprocessing,
    name,
    dropout_rate=0.2,
    drop_connect_rate=0.2,
    depth_divisor=8,
    min_depth=8,
    bn_momentum=0.9,
    activation="swish",
):
    """Builds EfficientNetV2-`variant` as Keras's `EfficientNetV2` does.

    Keras picks the stages and the preprocessing by the model's name (a custom `name` makes
    its builder fail); here the variant picks them, so any `name` works.
    """
    width, depth, default_size, weights_key = _VARIANTS[variant]
    model_name = f"EfficientNetV2{variant.upper()}"
    pretrained = imagenet_utils.check_weights_argument(weights, model_name, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:  # fail before building hundreds of layers
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1

    def round_filters(filters):
        filters *= width
        return int(
            max(min_depth, int(filters + depth_divisor / 2) // depth_divisor * depth_divisor)
        )

    x = img_input
    if include_preprocessing:
        num_channels = input_shape[bn_axis - 1]
        if variant.startswith("b") and num_channels == 3:
            x = layers.Rescaling(scale=1.0 / 255)(x)
            x = layers.Normalization(
                mean=list(_IMAGENET_MEAN_RGB),
                variance=[std**2 for std in _IMAGENET_STDDEV_RGB],
                axis=bn_axis,
            )(x)
        else:
            x = layers.Rescaling(scale=1.0 / 128.0, offset=-1)(x)

    stages = _STAGES[variant]
    # TensorFlow's "same" padding (the odd pixel after) throughout, unlike EfficientNet's
    # explicit ZeroPadding2D layers.
    x = layers.Conv2D(
        filters=round_filters(stages[0][2]),
        kernel_size=3,
        strides=2,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        padding="same",
        use_bias=False,
        name="stem_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name="stem_bn")(x)
    x = layers.Activation(activation, name="stem_activation")(x)

    # Keras spreads the drop-connect rates over the unscaled block count, so the deeper
    # variants reach rates above `drop_connect_rate`; kept for identical layers.
    total_blocks = float(sum(stage[1] for stage in stages))
    b = 0
    for i, stage in enumerate(stages):
        kernel_size, repeats, filters_in, filters_out, expand_ratio, se_ratio, strides, fused = (
            stage
        )
        filters_in, filters_out = round_filters(filters_in), round_filters(filters_out)
        block = _fused_mbconv_block if fused else _mbconv_block
        for j in range(int(math.ceil(depth * repeats))):
            if j > 0:
                strides, filters_in = 1, filters_out
            x = block(
                x,
                filters_in=filters_in,
                filters_out=filters_out,
                expand_ratio=expand_ratio,
                kernel_size=kernel_size,
                strides=strides,
                se_ratio=se_ratio,
                bn_momentum=bn_momentum,
                activation=activation,
                drop_rate=drop_connect_rate * b / total_blocks,
                name=f"block{i + 1}{chr(j + 97)}_",
            )
            b += 1

    x = layers.Conv2D(
        filters=round_filters(1280),
        kernel_size=1,
        strides=1,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        padding="same",
        use_bias=False,
        name="top_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name="top_bn")(x)
    x = layers.Activation(activation=activation, name="top_activation")(x)
    x = _top(
        x,
        include_top,
        pooling,
        dropout_rate,
        classes,
        classifier_activation,
        bias_initializer=initializers.Constant(0.0),
    )

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = file_hash = None
    if pretrained:
        # Keras names the file after `name`; the file of the variant is the one that exists.
        file_name = f"efficientnetv2-{variant}" + (".h5" if include_top else "_notop.h5")
        file_hash = WEIGHTS_HASHES[weights_key][0 if include_top else 1]
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHTS_PATH + (file_name or ""), file_hash
    )
    return model


def _mbconv_block(
    inputs,
    *,
    filters_in,
    filters_out,
    expand_ratio,
    kernel_size,
    strides,
    se_ratio,
    bn_momentum,
    activation,
    drop_rate,
    name,
):
    """MBConv: 1x1 expansion, depthwise convolution, optional squeeze-excitation, 1x1 linear
    projection, and a skip when the shape is kept."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = layers.Conv2D(
            filters=filters,
            kernel_size=1,
            strides=1,
            kernel_initializer=CONV_KERNEL_INITIALIZER,
            padding="same",
            use_bias=False,
            name=f"{name}expand_conv",
        )(x)
        x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name=f"{name}expand_bn")(
            x
        )
        x = layers.Activation(activation, name=f"{name}expand_activation")(x)
    x = layers.DepthwiseConv2D(
        kernel_size=kernel_size,
        strides=strides,
        depthwise_initializer=CONV_KERNEL_INITIALIZER,
        padding="same",
        use_bias=False,
        name=f"{name}dwconv2",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name=f"{name}bn")(x)
    x = layers.Activation(activation, name=f"{name}activation")(x)
    if 0 < se_ratio <= 1:
        x = _squeeze_excite(x, filters_in, filters, se_ratio, activation, name)
    x = layers.Conv2D(
        filters=filters_out,
        kernel_size=1,
        strides=1,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        padding="same",
        use_bias=False,
        name=f"{name}project_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        x = _residual(x, inputs, drop_rate, name)
    return x


def _fused_mbconv_block(
    inputs,
    *,
    filters_in,
    filters_out,
    expand_ratio,
    kernel_size,
    strides,
    se_ratio,
    bn_momentum,
    activation,
    drop_rate,
    name,
):
    """Fused-MBConv: one full convolution does the expansion and the spatial filtering, then
    optional squeeze-excitation and a 1x1 projection (without expansion the projection is
    the full convolution, followed by an activation)."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = layers.Conv2D(
            filters,
            kernel_size=kernel_size,
            strides=strides,
            kernel_initializer=CONV_KERNEL_INITIALIZER,
            padding="same",
            use_bias=False,
            name=f"{name}expand_conv",
        )(x)
        x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name=f"{name}expand_bn")(
            x
        )
        x = layers.Activation(activation=activation, name=f"{name}expand_activation")(x)
    if 0 < se_ratio <= 1:
        x = _squeeze_excite(x, filters_in, filters, se_ratio, activation, name)
    x = layers.Conv2D(
        filters_out,
        kernel_size=1 if expand_ratio != 1 else kernel_size,
        strides=1 if expand_ratio != 1 else strides,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        padding="same",
        use_bias=False,
        name=f"{name}project_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, momentum=bn_momentum, name=f"{name}project_bn")(x)
    if expand_ratio == 1:
        x = layers.Activation(activation=activation, name=f"{name}project_activation")(x)
    if strides == 1 and filters_in == filters_out:
        x = _residual(x, inputs, drop_rate, name)
    return x


_BUILDER_DOC = """Builds EfficientNetV2{variant}, optionally with ImageNet weights.

    With `include_preprocessing=True` the model takes RGB pixels in [0, 255] and rescales
    them itself. Defaults to {size}x{size} inputs.

    Args:
        include_top: whether to end with global pooling, dropout and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, 3) for channels_last; needed without the top for a size
            other than {size}. At least 32x32.
        pooling: without the top, None (4D features), "avg" or "max" (global pooling).
        classes: number of classes of the top (1000 for ImageNet weights).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        include_preprocessing: whether the model starts with its input rescaling ({rescale}).
        name: the model's name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `input_shape` or
            `classifier_activation` combinations.

    Example:
        >>> model = EfficientNetV2{variant}(weights=None, include_top=False, pooling="avg",
        ...                               input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, {features})
    """


def EfficientNetV2B0(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-b0",
):
    return _efficientnet_v2("b0", **locals())


def EfficientNetV2B1(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-b1",
):
    return _efficientnet_v2("b1", **locals())


def EfficientNetV2B2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-b2",
):
    return _efficientnet_v2("b2", **locals())


def EfficientNetV2B3(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-b3",
):
    return _efficientnet_v2("b3", **locals())


def EfficientNetV2S(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-s",
):
    return _efficientnet_v2("s", **locals())


def EfficientNetV2M(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-m",
):
    return _efficientnet_v2("m", **locals())


def EfficientNetV2L(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    include_preprocessing=True,
    name="efficientnetv2-l",
):
    return _efficientnet_v2("l", **locals())


# Each builder passes its own arguments (its `locals()`) on to `_efficientnet_v2` by keyword.
for _variant, _builder in zip(
    _VARIANTS,
    (
        EfficientNetV2B0,
        EfficientNetV2B1,
        EfficientNetV2B2,
        EfficientNetV2B3,
        EfficientNetV2S,
        EfficientNetV2M,
        EfficientNetV2L,
    ),
):
    _width = _VARIANTS[_variant][0]
    _builder.__doc__ = _BUILDER_DOC.format(
        variant=_variant.upper(),
        size=_VARIANTS[_variant][2],
        rescale=(
            "to [0, 1], then normalized with the ImageNet channel statistics"
            if _variant.startswith("b")
            else "to [-1, 1)"
        ),
        features=max(8, int(1280 * _width + 4) // 8 * 8),
    )
del _variant, _builder, _width


def preprocess_input(x, data_format=None):
    """Returns `x` unchanged: EfficientNetV2 models rescale their input themselves (kept so
    that code written for the other applications runs unchanged).

    Args:
        x: a float NumPy array or tensor of pixels in [0, 255].
        data_format: ignored; accepted as the other applications accept it.

    Returns:
        `x` itself.

    Example:
        >>> preprocess_input(np.array([[0.0, 255.0]]))
        array([[  0., 255.]])
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
