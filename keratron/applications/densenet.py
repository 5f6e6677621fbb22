"""DenseNet121, DenseNet169 and DenseNet201, with Keras's layer names and weight layout, so
Keras's `.h5` files load.

Reference: Huang et al., "Densely Connected Convolutional Networks"
(https://arxiv.org/abs/1608.06993).

The three models differ only in the number of conv blocks in each of the four dense blocks
(`DenseNet`'s `blocks`). As in Keras, only the `channels_last` layout is supported.

Example:
    >>> from keratron.applications.densenet import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([[255.0, 255.0, 255.0]])).round(4).tolist()  # torch mode
    [[2.2489, 2.4286, 2.64]]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = [
    "DenseNet",
    "DenseNet121",
    "DenseNet169",
    "DenseNet201",
    "decode_predictions",
    "preprocess_input",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/densenet/"
# Blocks per dense block -> the published weight files' stem and their MD5 checksums (with
# top, without top), as Keras lists them.
WEIGHTS = {
    (6, 12, 24, 16): (
        "densenet121",
        "9d60b8095a5708f2dcce2bca79d332c7",
        "30ee3e1110167f948a6b9946edeeb738",
    ),
    (6, 12, 32, 32): (
        "densenet169",
        "d699b8f76981ab1b30698df4c175e90b",
        "b8c4d4c20dd625c148057b9ff1c1176b",
    ),
    (6, 12, 48, 32): (
        "densenet201",
        "1ceb130c1ea1b78c3bf6114dbdfd8807",
        "c13680b51ded0fb44dff2d8f86ac8bb1",
    ),
}

_BN_EPSILON = 1.001e-5
_GROWTH_RATE = 32

_ARGS_DOC = """
    Args:
        include_top: whether to end with global average pooling and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, 3); only without the top (the top needs 224x224). At
            least 32x32.
        pooling: without the top, None (4D features), "avg" or "max" (global pooling).
        classes: number of classes of the top (1000 for ImageNet weights).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        name: model name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: under the `channels_first` layout, and for invalid `weights`,
            `classes`, `input_shape` or `classifier_activation` combinations.
"""


def DenseNet(
    blocks,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="densenet",
):
    """The DenseNet network with `blocks[i]` conv blocks in dense block `i`.

    Args:
        blocks: four ints; (6, 12, 24, 16), (6, 12, 32, 32) and (6, 12, 48, 32) are
            DenseNet121, 169 and 201, the ones with ImageNet weights.
        Others: as `DenseNet121`.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: as `DenseNet121`, and for `weights="imagenet"` with other `blocks`.

    Example:
        >>> model = DenseNet([1, 1, 1, 1], weights=None, include_top=False,
        ...                  input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 68)
    """
    if backend.image_data_format() == "channels_first":
        raise ValueError(
            "DenseNet does not support the `channels_first` image data format. Switch to "
            "`channels_last` with `keratron.config.set_image_data_format('channels_last')` or "
            "in ~/.keras/keras.json. Received: image_data_format='channels_first'"
        )
    pretrained = imagenet_utils.check_weights_argument(weights, name, include_top, classes)
    blocks = tuple(blocks)
    if pretrained and blocks not in WEIGHTS:
        raise ValueError(
            f"{name}: ImageNet weights exist only for blocks {list(WEIGHTS)}. "
            f"Received: blocks={blocks}"
        )
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:  # fail before building hundreds of layers
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    bn_axis = 3

    x = layers.ZeroPadding2D(padding=((3, 3), (3, 3)))(img_input)
    x = layers.Conv2D(64, 7, strides=2, use_bias=False, name="conv1_conv")(x)
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name="conv1_bn")(x)
    x = layers.Activation("relu", name="conv1_relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)))(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1")(x)
    for stage, count in enumerate(blocks):
        x = _dense_block(x, count, name=f"conv{stage + 2}")
        if stage < 3:
            x = _transition_block(x, 0.5, name=f"pool{stage + 2}")
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name="bn")(x)
    x = layers.Activation("relu", name="relu")(x)

    if include_top:
        x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
        x = layers.Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    elif pooling == "max":
        x = layers.GlobalMaxPooling2D(name="max_pool")(x)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    file_name = file_hash = None
    if pretrained:
        stem, top_hash, no_top_hash = WEIGHTS[blocks]
        suffix = "" if include_top else "_notop"
        file_name = f"{stem}_weights_tf_dim_ordering_tf_kernels{suffix}.h5"
        file_hash = top_hash if include_top else no_top_hash
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHTS_PATH + (file_name or ""), file_hash
    )
    return model


def _dense_block(x, blocks, name):
    """`blocks` conv blocks `{name}_block1..`, each concatenating 32 new channels."""
    for i in range(blocks):
        x = _conv_block(x, _GROWTH_RATE, name=f"{name}_block{i + 1}")
    return x


def _transition_block(x, reduction, name):
    """BN-ReLU-1x1 convolution to `reduction` of the channels, then 2x2 average pooling."""
    x = layers.BatchNormalization(axis=3, epsilon=_BN_EPSILON, name=f"{name}_bn")(x)
    x = layers.Activation("relu", name=f"{name}_relu")(x)
    filters = int(x.shape[3] * reduction)
    x = layers.Conv2D(filters, 1, use_bias=False, name=f"{name}_conv")(x)
    return layers.AveragePooling2D(2, strides=2, name=f"{name}_pool")(x)


def _conv_block(x, growth_rate, name):
    """BN-ReLU-1x1 (4 x growth) - BN-ReLU-3x3 (growth), concatenated to the input."""
    x1 = layers.BatchNormalization(axis=3, epsilon=_BN_EPSILON, name=f"{name}_0_bn")(x)
    x1 = layers.Activation("relu", name=f"{name}_0_relu")(x1)
    x1 = layers.Conv2D(4 * growth_rate, 1, use_bias=False, name=f"{name}_1_conv")(x1)
    x1 = layers.BatchNormalization(axis=3, epsilon=_BN_EPSILON, name=f"{name}_1_bn")(x1)
    x1 = layers.Activation("relu", name=f"{name}_1_relu")(x1)
    x1 = layers.Conv2D(growth_rate, 3, padding="same", use_bias=False, name=f"{name}_2_conv")(x1)
    return layers.Concatenate(axis=3, name=f"{name}_concat")([x, x1])


def DenseNet121(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="densenet121",
):
    """Builds DenseNet121 (6, 12, 24, 16 conv blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.densenet.preprocess_input`
    (scaled to [0, 1], then normalized with the ImageNet channel mean and std).
    {args}
    Example:
        >>> model = DenseNet121(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...                     pooling="avg")
        >>> model.output_shape
        (None, 1024)
    """
    return DenseNet(
        (6, 12, 24, 16),
        include_top,
        weights,
        input_tensor,
        input_shape,
        pooling,
        classes,
        classifier_activation,
        name=name,
    )


def DenseNet169(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="densenet169",
):
    """Builds DenseNet169 (6, 12, 32, 32 conv blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.densenet.preprocess_input`.
    {args}
    Example:
        >>> model = DenseNet169(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...                     pooling="avg")
        >>> model.output_shape
        (None, 1664)
    """
    return DenseNet(
        (6, 12, 32, 32),
        include_top,
        weights,
        input_tensor,
        input_shape,
        pooling,
        classes,
        classifier_activation,
        name=name,
    )


def DenseNet201(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="densenet201",
):
    """Builds DenseNet201 (6, 12, 48, 32 conv blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.densenet.preprocess_input`.
    {args}
    Example:
        >>> model = DenseNet201(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...                     pooling="avg")
        >>> model.output_shape
        (None, 1920)
    """
    return DenseNet(
        (6, 12, 48, 32),
        include_top,
        weights,
        input_tensor,
        input_shape,
        pooling,
        classes,
        classifier_activation,
        name=name,
    )


for _builder in (DenseNet121, DenseNet169, DenseNet201):
    if _builder.__doc__:  # None under `python -OO`
        _builder.__doc__ = _builder.__doc__.replace("{args}", _ARGS_DOC)


def preprocess_input(x, data_format=None):
    """Scales pixels from [0, 255] to [0, 1], then normalizes each RGB channel with the
    ImageNet mean and standard deviation, as DenseNet expects.

    Example:
        >>> preprocess_input(np.array([[[[0.0, 0.0, 0.0]]]])).round(4).tolist()
        [[[[-2.1179, -2.0357, -1.8044]]]]
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="torch")


def decode_predictions(preds, top=5):
    """Decodes ImageNet scores into (wnid, name, score) tuples; see
    `imagenet_utils.decode_predictions`.

    Example:
        >>> decode_predictions(np.eye(1000)[:1], top=1)[0][0][1]
        'tench'
    """
    return imagenet_utils.decode_predictions(preds, top=top)
