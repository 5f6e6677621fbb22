"""EfficientNet B0 to B7, with Keras's layer names and weight layout, so Keras's `.h5` files load.

The input preprocessing is part of the model (a `Rescaling` to [0, 1] and a `Normalization`
whose statistics come with the weights), so the models take pixels in [0, 255] and
`preprocess_input` returns its input unchanged.

Reference: Tan and Le, "EfficientNet: Rethinking Model Scaling for Convolutional Neural
Networks" (https://arxiv.org/abs/1905.11946).

Example:
    >>> from keratron.applications.efficientnet import preprocess_input, decode_predictions
    >>> x = np.array([0.0, 255.0])
    >>> preprocess_input(x) is x  # a pass-through: the model rescales its input itself
    True
"""

from __future__ import annotations

import math

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = [
    "EfficientNetB0",
    "EfficientNetB1",
    "EfficientNetB2",
    "EfficientNetB3",
    "EfficientNetB4",
    "EfficientNetB5",
    "EfficientNetB6",
    "EfficientNetB7",
    "decode_predictions",
    "preprocess_input",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/keras-applications/"
# md5 digests of the published files, (with top, without top), as Keras lists them.
WEIGHTS_HASHES = {
    "b0": ("902e53a9f72be733fc0bcb005b3ebbac", "50bc09e76180e00e4465e1a485ddc09d"),
    "b1": ("1d254153d4ab51201f1646940f018540", "74c4e6b3e1f6a1eea24c589628592432"),
    "b2": ("b15cce36ff4dcbd00b6dd88e7857a6ad", "111f8e2ac8aa800a7a99e3239f7bfb39"),
    "b3": ("ffd1fdc53d0ce67064dc6a9c7960ede0", "af6d107764bb5b1abb91932881670226"),
    "b4": ("18c95ad55216b8f92d7e70b3a046e2fc", "ebc24e6d6c33eaebbd558eafbeedf1ba"),
    "b5": ("ace28f2a6363774853a83a0b21b9421a", "38879255a25d3c92d5e44e04ae6cec6f"),
    "b6": ("165f6e37dce68623721b423839de8be5", "9ecce42647a20130c1f39a5d4cb75743"),
    "b7": ("8c03f828fec3ef71311cd463b6759d99", "cbcfe4450ddf6f3ad90b1b398090fe4a"),
}

# (kernel_size, repeats, filters_in, filters_out, expand_ratio, strides) of the seven stages
# of B0; every block has squeeze-excitation with ratio 0.25 and an identity skip when the
# shape is kept. The other variants scale filters and repeats.
_STAGES = (
    (3, 1, 32, 16, 1, 1),
    (3, 2, 16, 24, 6, 2),
    (5, 2, 24, 40, 6, 2),
    (3, 3, 40, 80, 6, 2),
    (5, 3, 80, 112, 6, 1),
    (5, 4, 112, 192, 6, 2),
    (3, 1, 192, 320, 6, 1),
)
_SE_RATIO = 0.25

# (width_coefficient, depth_coefficient, default_size, dropout_rate) per variant.
_VARIANTS = {
    "b0": (1.0, 1.0, 224, 0.2),
    "b1": (1.0, 1.1, 240, 0.2),
    "b2": (1.1, 1.2, 260, 0.3),
    "b3": (1.2, 1.4, 300, 0.3),
    "b4": (1.4, 1.8, 380, 0.4),
    "b5": (1.6, 2.2, 456, 0.4),
    "b6": (1.8, 2.6, 528, 0.5),
    "b7": (2.0, 3.1, 600, 0.5),
}

CONV_KERNEL_INITIALIZER = {
    "class_name": "VarianceScaling",
    "config": {"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal"},
}
DENSE_KERNEL_INITIALIZER = {
    "class_name": "VarianceScaling",
    "config": {"scale": 1.0 / 3.0, "mode": "fan_out", "distribution": "uniform"},
}

IMAGENET_STDDEV_RGB = (0.229, 0.224, 0.225)


def _efficientnet(
    variant,
    *,
    include_top,
    weights,
    input_tensor,
    input_shape,
    pooling,
    classes,
    classifier_activation,
    name,
    drop_connect_rate=0.2,
    depth_divisor=8,
    activation="swish",
):
    """Builds EfficientNet-`variant` ("b0" .. "b7") as Keras's `EfficientNet` does."""
    width, depth, default_size, dropout_rate = _VARIANTS[variant]
    model_name = f"EfficientNet{variant.upper()}"
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
        return _round_filters(filters * width, depth_divisor)

    def round_repeats(repeats):
        return int(math.ceil(depth * repeats))

    x = layers.Rescaling(1.0 / 255.0)(img_input)
    x = layers.Normalization(axis=bn_axis)(x)
    if pretrained:
        # The weight files hold the channel variances, but the original model divided by
        # the variance, not by its square root: divide once more by sqrt(std). (Keras
        # adds this layer only for "imagenet", and so do we, to keep its layer list.)
        x = layers.Rescaling([1.0 / math.sqrt(std) for std in IMAGENET_STDDEV_RGB])(x)
    x = layers.ZeroPadding2D(padding=imagenet_utils.correct_pad(x, 3), name="stem_conv_pad")(x)
    x = layers.Conv2D(
        round_filters(32),
        3,
        strides=2,
        padding="valid",
        use_bias=False,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        name="stem_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, name="stem_bn")(x)
    x = layers.Activation(activation, name="stem_activation")(x)

    # The drop-connect rate grows linearly with the block's index over the whole network.
    total_blocks = float(sum(round_repeats(stage[1]) for stage in _STAGES))
    b = 0
    for i, (kernel_size, repeats, filters_in, filters_out, expand_ratio, strides) in enumerate(
        _STAGES
    ):
        filters_in, filters_out = round_filters(filters_in), round_filters(filters_out)
        for j in range(round_repeats(repeats)):
            if j > 0:
                strides, filters_in = 1, filters_out
            x = _block(
                x,
                activation=activation,
                drop_rate=drop_connect_rate * b / total_blocks,
                name=f"block{i + 1}{chr(j + 97)}_",
                filters_in=filters_in,
                filters_out=filters_out,
                kernel_size=kernel_size,
                strides=strides,
                expand_ratio=expand_ratio,
            )
            b += 1

    x = layers.Conv2D(
        round_filters(1280),
        1,
        padding="same",
        use_bias=False,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        name="top_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, name="top_bn")(x)
    x = layers.Activation(activation, name="top_activation")(x)
    x = _top(x, include_top, pooling, dropout_rate, classes, classifier_activation)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = file_hash = None
    if pretrained:
        # Keras names the file after `name`; the file of the variant is the one that exists.
        file_name = f"efficientnet{variant}" + (".h5" if include_top else "_notop.h5")
        file_hash = WEIGHTS_HASHES[variant][0 if include_top else 1]
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHTS_PATH + (file_name or ""), file_hash
    )
    return model


def _round_filters(filters, divisor):
    """Rounds a scaled channel count to a multiple of `divisor`, never more than 10% below."""
    new_filters = max(divisor, int(filters + divisor / 2) // divisor * divisor)
    if new_filters < 0.9 * filters:
        new_filters += divisor
    return int(new_filters)


def _top(x, include_top, pooling, dropout_rate, classes, classifier_activation, **dense_kwargs):
    """The classifier (global average pooling, dropout, dense) or the optional feature
    pooling; shared with EfficientNetV2, which names its layers the same."""
    if include_top:
        x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
        if dropout_rate > 0:
            x = layers.Dropout(dropout_rate, name="top_dropout")(x)
        return layers.Dense(
            classes,
            activation=classifier_activation,
            kernel_initializer=DENSE_KERNEL_INITIALIZER,
            name="predictions",
            **dense_kwargs,
        )(x)
    if pooling == "avg":
        return layers.GlobalAveragePooling2D(name="avg_pool")(x)
    if pooling == "max":
        return layers.GlobalMaxPooling2D(name="max_pool")(x)
    return x


def _squeeze_excite(x, filters_in, filters, se_ratio, activation, name):
    """Squeeze (global average) and excite (two 1x1 convolutions, sigmoid gate) the
    `filters` channels of `x`; the bottleneck has `filters_in * se_ratio` channels."""
    filters_se = max(1, int(filters_in * se_ratio))
    channels_last = backend.image_data_format() == "channels_last"
    se = layers.GlobalAveragePooling2D(name=f"{name}se_squeeze")(x)
    se_shape = (1, 1, filters) if channels_last else (filters, 1, 1)
    se = layers.Reshape(se_shape, name=f"{name}se_reshape")(se)
    se = layers.Conv2D(
        filters_se,
        1,
        padding="same",
        activation=activation,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        name=f"{name}se_reduce",
    )(se)
    se = layers.Conv2D(
        filters,
        1,
        padding="same",
        activation="sigmoid",
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        name=f"{name}se_expand",
    )(se)
    return layers.multiply([x, se], name=f"{name}se_excite")


def _residual(x, inputs, drop_rate, name):
    """Adds the block's input back; the sum's branch is dropped per sample while training
    (drop-connect: one mask value per sample), an identity at inference."""
    if drop_rate > 0:
        x = layers.Dropout(drop_rate, noise_shape=(None, 1, 1, 1), name=f"{name}drop")(x)
    return layers.add([x, inputs], name=f"{name}add")


def _block(
    inputs,
    *,
    activation,
    drop_rate,
    name,
    filters_in,
    filters_out,
    kernel_size,
    strides,
    expand_ratio,
):
    """The MBConv inverted residual block: 1x1 expansion, depthwise convolution,
    squeeze-excitation, 1x1 linear projection, and a skip when the shape is kept."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    filters = filters_in * expand_ratio
    x = inputs
    if expand_ratio != 1:
        x = layers.Conv2D(
            filters,
            1,
            padding="same",
            use_bias=False,
            kernel_initializer=CONV_KERNEL_INITIALIZER,
            name=f"{name}expand_conv",
        )(x)
        x = layers.BatchNormalization(axis=bn_axis, name=f"{name}expand_bn")(x)
        x = layers.Activation(activation, name=f"{name}expand_activation")(x)

    if strides == 2:
        x = layers.ZeroPadding2D(
            padding=imagenet_utils.correct_pad(x, kernel_size), name=f"{name}dwconv_pad"
        )(x)
    x = layers.DepthwiseConv2D(
        kernel_size,
        strides=strides,
        padding="valid" if strides == 2 else "same",
        use_bias=False,
        depthwise_initializer=CONV_KERNEL_INITIALIZER,
        name=f"{name}dwconv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, name=f"{name}bn")(x)
    x = layers.Activation(activation, name=f"{name}activation")(x)
    x = _squeeze_excite(x, filters_in, filters, _SE_RATIO, activation, name)

    x = layers.Conv2D(
        filters_out,
        1,
        padding="same",
        use_bias=False,
        kernel_initializer=CONV_KERNEL_INITIALIZER,
        name=f"{name}project_conv",
    )(x)
    x = layers.BatchNormalization(axis=bn_axis, name=f"{name}project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        x = _residual(x, inputs, drop_rate, name)
    return x


_BUILDER_DOC = """Builds EfficientNet{variant}, optionally with ImageNet weights.

    The model takes RGB pixels in [0, 255] (its first layers rescale and normalize them; with
    `weights="imagenet"` one more `Rescaling` layer completes the original normalization).
    Defaults to {size}x{size} inputs.

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
        name: the model's name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `input_shape` or
            `classifier_activation` combinations.

    Example:
        >>> model = EfficientNet{variant}(weights=None, include_top=False, pooling="avg",
        ...                             input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, {features})
    """


def EfficientNetB0(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb0",
):
    return _efficientnet("b0", **locals())


def EfficientNetB1(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb1",
):
    return _efficientnet("b1", **locals())


def EfficientNetB2(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb2",
):
    return _efficientnet("b2", **locals())


def EfficientNetB3(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb3",
):
    return _efficientnet("b3", **locals())


def EfficientNetB4(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb4",
):
    return _efficientnet("b4", **locals())


def EfficientNetB5(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb5",
):
    return _efficientnet("b5", **locals())


def EfficientNetB6(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb6",
):
    return _efficientnet("b6", **locals())


def EfficientNetB7(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="efficientnetb7",
):
    return _efficientnet("b7", **locals())


# Each builder passes its own arguments (its `locals()`) on to `_efficientnet` by keyword.
for _variant, _builder in zip(
    _VARIANTS,
    (
        EfficientNetB0,
        EfficientNetB1,
        EfficientNetB2,
        EfficientNetB3,
        EfficientNetB4,
        EfficientNetB5,
        EfficientNetB6,
        EfficientNetB7,
    ),
):
    _builder.__doc__ = _BUILDER_DOC.format(
        variant=_variant.upper(),
        size=_VARIANTS[_variant][2],
        features=_round_filters(1280 * _VARIANTS[_variant][0], 8),
    )
del _variant, _builder


def preprocess_input(x, data_format=None):
    """Returns `x` unchanged: EfficientNet models rescale and normalize their input
    themselves (kept so that code written for the other applications runs unchanged).

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
