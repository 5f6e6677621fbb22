"""NASNet-A (Mobile and Large), with Keras's layer names and weight layout, so Keras's `.h5`
files load.

Reference: Zoph et al., "Learning Transferable Architectures for Scalable Image Recognition"
(https://arxiv.org/abs/1707.07012).

Example:
    >>> from keratron.applications.nasnet import preprocess_input
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # what NASNet expects
    [-1.0, 1.0]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = ["NASNetLarge", "NASNetMobile", "decode_predictions", "preprocess_input"]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/nasnet/"
NASNET_MOBILE_WEIGHT_PATH = f"{BASE_WEIGHTS_PATH}NASNet-mobile.h5"
NASNET_MOBILE_WEIGHT_PATH_NO_TOP = f"{BASE_WEIGHTS_PATH}NASNet-mobile-no-top.h5"
NASNET_LARGE_WEIGHT_PATH = f"{BASE_WEIGHTS_PATH}NASNet-large.h5"
NASNET_LARGE_WEIGHT_PATH_NO_TOP = f"{BASE_WEIGHTS_PATH}NASNet-large-no-top.h5"
# (cache file name, URL, md5) per (default size, include_top), as Keras has them: the cached
# names differ from the published ones.
WEIGHT_FILES = {
    (224, True): (
        "nasnet_mobile.h5",
        NASNET_MOBILE_WEIGHT_PATH,
        "020fb642bf7360b370c678b08e0adf61",
    ),
    (224, False): (
        "nasnet_mobile_no_top.h5",
        NASNET_MOBILE_WEIGHT_PATH_NO_TOP,
        "1ed92395b5b598bdda52abe5c0dbfd63",
    ),
    (331, True): ("nasnet_large.h5", NASNET_LARGE_WEIGHT_PATH, "11577c9a518f0070763c2b964a382f17"),
    (331, False): (
        "nasnet_large_no_top.h5",
        NASNET_LARGE_WEIGHT_PATH_NO_TOP,
        "d81d89dc07e6e56530c4e77faddd61b5",
    ),
}

_BN = dict(momentum=0.9997, epsilon=1e-3)


def NASNetMobile(
    input_shape=None,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="nasnet_mobile",
):
    """Builds NASNet-A Mobile (4 @ 1056), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.nasnet.preprocess_input`
    (pixels scaled to [-1, 1]). Only the channels_last image layout is supported.

    Args:
        input_shape: (rows, cols, 3); only needed without the top (it defaults to
            (224, 224, 3) then too). At least 32x32; (224, 224, 3) with ImageNet weights and
            the top.
        include_top: whether to end with global pooling and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        pooling: without the top, None (4D features), "avg" or "max" (global pooling).
        classes: number of classes of the top (1000 for ImageNet weights).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        name: model name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `input_shape` or
            `classifier_activation` combinations, or a channels_first image layout.

    Example:
        >>> model = NASNetMobile(input_shape=(32, 32, 3), weights=None, include_top=False,
        ...                      pooling="avg")
        >>> model.output_shape
        (None, 1056)
    """
    if not include_top and input_shape is None:
        input_shape = (224, 224, 3)
    return _nasnet(
        input_shape,
        penultimate_filters=1056,
        num_blocks=4,
        stem_block_filters=32,
        skip_reduction=False,
        filter_multiplier=2,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        pooling=pooling,
        classes=classes,
        default_size=224,
        classifier_activation=classifier_activation,
        name=name,
        who="NASNetMobile",
    )


def NASNetLarge(
    input_shape=None,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="nasnet_large",
):
    """Builds NASNet-A Large (6 @ 4032), optionally with ImageNet weights.

    The arguments are those of `NASNetMobile`; the native size is (331, 331, 3), and without
    the top `input_shape=None` accepts any size.

    Example:
        >>> model = NASNetLarge(input_shape=(32, 32, 3), weights=None, include_top=False)
        >>> model.output_shape
        (None, 1, 1, 4032)
    """
    return _nasnet(
        input_shape,
        penultimate_filters=4032,
        num_blocks=6,
        stem_block_filters=96,
        skip_reduction=True,
        filter_multiplier=2,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        pooling=pooling,
        classes=classes,
        default_size=331,
        classifier_activation=classifier_activation,
        name=name,
        who="NASNetLarge",
    )


def _nasnet(
    input_shape,
    penultimate_filters,
    num_blocks,
    stem_block_filters,
    skip_reduction,
    filter_multiplier,
    include_top,
    weights,
    input_tensor,
    pooling,
    classes,
    default_size,
    classifier_activation,
    name,
    who,
):
    if backend.image_data_format() == "channels_first":
        raise ValueError(
            f"{who}: the channels_first image data format is not supported. Switch to "
            "channels_last (keratron.config.set_image_data_format('channels_last'))."
        )
    pretrained = imagenet_utils.check_weights_argument(weights, who, include_top, classes)
    if isinstance(input_shape, tuple) and None in input_shape and pretrained:
        raise ValueError(
            f"{who}: with `weights='imagenet'` the input shape must be static (no None "
            f"entries). Received: input_shape={input_shape}"
        )
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)

    filters = penultimate_filters // 24
    x = layers.Conv2D(
        stem_block_filters,
        (3, 3),
        strides=(2, 2),
        padding="valid",
        use_bias=False,
        name="stem_conv1",
        kernel_initializer="he_normal",
    )(img_input)
    x = layers.BatchNormalization(axis=-1, name="stem_bn1", **_BN)(x)

    p = None
    x, p = _reduction_a_cell(x, p, filters // (filter_multiplier**2), block_id="stem_1")
    x, p = _reduction_a_cell(x, p, filters // filter_multiplier, block_id="stem_2")
    for i in range(num_blocks):
        x, p = _normal_a_cell(x, p, filters, block_id=f"{i}")
    x, p0 = _reduction_a_cell(x, p, filters * filter_multiplier, block_id=f"reduce_{num_blocks}")
    p = p0 if not skip_reduction else p
    for i in range(num_blocks):
        x, p = _normal_a_cell(x, p, filters * filter_multiplier, block_id=f"{num_blocks + i + 1}")
    x, p0 = _reduction_a_cell(
        x, p, filters * filter_multiplier**2, block_id=f"reduce_{2 * num_blocks}"
    )
    p = p0 if not skip_reduction else p
    for i in range(num_blocks):
        x, p = _normal_a_cell(
            x, p, filters * filter_multiplier**2, block_id=f"{2 * num_blocks + i + 1}"
        )
    x = layers.Activation("relu")(x)

    if include_top:
        x = layers.GlobalAveragePooling2D()(x)
        x = layers.Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = layers.GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = layers.GlobalMaxPooling2D()(x)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = origin = file_hash = None
    if pretrained:
        file_name, origin, file_hash = WEIGHT_FILES[(default_size, bool(include_top))]
    imagenet_utils.load_model_weights(model, weights, file_name, origin, file_hash)
    return model


def _separable_conv_block(ip, filters, kernel_size=(3, 3), strides=(1, 1), block_id=None):
    """Two [ReLU, separable convolution, batch norm] stages; the first one may be strided."""
    x = layers.Activation("relu")(ip)
    if strides == (2, 2):
        x = layers.ZeroPadding2D(
            padding=imagenet_utils.correct_pad(x, kernel_size),
            name=f"separable_conv_1_pad_{block_id}",
        )(x)
        conv_pad = "valid"
    else:
        conv_pad = "same"
    x = layers.SeparableConv2D(
        filters,
        kernel_size,
        strides=strides,
        name=f"separable_conv_1_{block_id}",
        padding=conv_pad,
        use_bias=False,
    )(x)
    x = layers.BatchNormalization(axis=-1, name=f"separable_conv_1_bn_{block_id}", **_BN)(x)
    x = layers.Activation("relu")(x)
    x = layers.SeparableConv2D(
        filters,
        kernel_size,
        name=f"separable_conv_2_{block_id}",
        padding="same",
        use_bias=False,
    )(x)
    return layers.BatchNormalization(axis=-1, name=f"separable_conv_2_bn_{block_id}", **_BN)(x)


def _adjust_block(p, ip, filters, block_id=None):
    """Brings the previous cell's output `p` to the size and width of `ip`: a factorized
    stride-2 reduction when the spatial sizes differ, a 1x1 projection when only the widths
    do."""
    if p is None:
        return ip
    if p.shape[-2] != ip.shape[-2]:
        p = layers.Activation("relu", name=f"adjust_relu_1_{block_id}")(p)
        p1 = layers.AveragePooling2D(
            (1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_1_{block_id}"
        )(p)
        p1 = layers.Conv2D(
            filters // 2,
            (1, 1),
            padding="same",
            use_bias=False,
            name=f"adjust_conv_1_{block_id}",
            kernel_initializer="he_normal",
        )(p1)
        # The second path sees the input shifted by one pixel.
        p2 = layers.ZeroPadding2D(padding=((0, 1), (0, 1)))(p)
        p2 = layers.Cropping2D(cropping=((1, 0), (1, 0)))(p2)
        p2 = layers.AveragePooling2D(
            (1, 1), strides=(2, 2), padding="valid", name=f"adjust_avg_pool_2_{block_id}"
        )(p2)
        p2 = layers.Conv2D(
            filters // 2,
            (1, 1),
            padding="same",
            use_bias=False,
            name=f"adjust_conv_2_{block_id}",
            kernel_initializer="he_normal",
        )(p2)
        p = layers.concatenate([p1, p2], axis=-1)
        return layers.BatchNormalization(axis=-1, name=f"adjust_bn_{block_id}", **_BN)(p)
    if p.shape[-1] != filters:
        p = layers.Activation("relu")(p)
        p = layers.Conv2D(
            filters,
            (1, 1),
            strides=(1, 1),
            padding="same",
            name=f"adjust_conv_projection_{block_id}",
            use_bias=False,
            kernel_initializer="he_normal",
        )(p)
        p = layers.BatchNormalization(axis=-1, name=f"adjust_bn_{block_id}", **_BN)(p)
    return p


def _cell_input(ip, filters, kind, block_id):
    """ReLU + 1x1 convolution + batch norm of a cell's main input."""
    h = layers.Activation("relu")(ip)
    h = layers.Conv2D(
        filters,
        (1, 1),
        strides=(1, 1),
        padding="same",
        name=f"{kind}_conv_1_{block_id}",
        use_bias=False,
        kernel_initializer="he_normal",
    )(h)
    return layers.BatchNormalization(axis=-1, name=f"{kind}_bn_1_{block_id}", **_BN)(h)


def _avg_pool_3x3(x, strides, padding, name):
    return layers.AveragePooling2D((3, 3), strides=strides, padding=padding, name=name)(x)


def _normal_a_cell(ip, p, filters, block_id=None):
    """A NASNet-A normal cell (Fig. 4 of the paper): five pairwise combinations of the two
    inputs, concatenated with the adjusted previous input."""
    p = _adjust_block(p, ip, filters, block_id)
    h = _cell_input(ip, filters, "normal", block_id)

    x1_1 = _separable_conv_block(
        h, filters, kernel_size=(5, 5), block_id=f"normal_left1_{block_id}"
    )
    x1_2 = _separable_conv_block(p, filters, block_id=f"normal_right1_{block_id}")
    x1 = layers.add([x1_1, x1_2], name=f"normal_add_1_{block_id}")

    x2_1 = _separable_conv_block(p, filters, (5, 5), block_id=f"normal_left2_{block_id}")
    x2_2 = _separable_conv_block(p, filters, (3, 3), block_id=f"normal_right2_{block_id}")
    x2 = layers.add([x2_1, x2_2], name=f"normal_add_2_{block_id}")

    x3 = _avg_pool_3x3(h, (1, 1), "same", f"normal_left3_{block_id}")
    x3 = layers.add([x3, p], name=f"normal_add_3_{block_id}")

    x4_1 = _avg_pool_3x3(p, (1, 1), "same", f"normal_left4_{block_id}")
    x4_2 = _avg_pool_3x3(p, (1, 1), "same", f"normal_right4_{block_id}")
    x4 = layers.add([x4_1, x4_2], name=f"normal_add_4_{block_id}")

    x5 = _separable_conv_block(h, filters, block_id=f"normal_left5_{block_id}")
    x5 = layers.add([x5, h], name=f"normal_add_5_{block_id}")

    x = layers.concatenate([p, x1, x2, x3, x4, x5], axis=-1, name=f"normal_concat_{block_id}")
    return x, ip


def _reduction_a_cell(ip, p, filters, block_id=None):
    """A NASNet-A reduction cell (Fig. 4 of the paper): like the normal cell, with stride-2
    operations that halve the spatial size."""
    p = _adjust_block(p, ip, filters, block_id)
    h = _cell_input(ip, filters, "reduction", block_id)
    h3 = layers.ZeroPadding2D(
        padding=imagenet_utils.correct_pad(h, 3), name=f"reduction_pad_1_{block_id}"
    )(h)

    x1_1 = _separable_conv_block(
        h, filters, (5, 5), strides=(2, 2), block_id=f"reduction_left1_{block_id}"
    )
    x1_2 = _separable_conv_block(
        p, filters, (7, 7), strides=(2, 2), block_id=f"reduction_right1_{block_id}"
    )
    x1 = layers.add([x1_1, x1_2], name=f"reduction_add_1_{block_id}")

    x2_1 = layers.MaxPooling2D(
        (3, 3), strides=(2, 2), padding="valid", name=f"reduction_left2_{block_id}"
    )(h3)
    x2_2 = _separable_conv_block(
        p, filters, (7, 7), strides=(2, 2), block_id=f"reduction_right2_{block_id}"
    )
    x2 = layers.add([x2_1, x2_2], name=f"reduction_add_2_{block_id}")

    x3_1 = _avg_pool_3x3(h3, (2, 2), "valid", f"reduction_left3_{block_id}")
    x3_2 = _separable_conv_block(
        p, filters, (5, 5), strides=(2, 2), block_id=f"reduction_right3_{block_id}"
    )
    x3 = layers.add([x3_1, x3_2], name=f"reduction_add3_{block_id}")

    x4 = _avg_pool_3x3(x1, (1, 1), "same", f"reduction_left4_{block_id}")
    x4 = layers.add([x2, x4])

    x5_1 = _separable_conv_block(x1, filters, (3, 3), block_id=f"reduction_left4_{block_id}")
    x5_2 = layers.MaxPooling2D(
        (3, 3), strides=(2, 2), padding="valid", name=f"reduction_right5_{block_id}"
    )(h3)
    x5 = layers.add([x5_1, x5_2], name=f"reduction_add4_{block_id}")

    x = layers.concatenate([x2, x3, x4, x5], axis=-1, name=f"reduction_concat_{block_id}")
    return x, ip


def preprocess_input(x, data_format=None):
    """Scales pixels from [0, 255] to [-1, 1], as NASNet expects.

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
