"""ResNet50, ResNet101 and ResNet152, with Keras's layer names and weight layout, so Keras's
`.h5` files load.

Reference: He et al., "Deep Residual Learning for Image Recognition"
(https://arxiv.org/abs/1512.03385).

`ResNet` is the stem, head and weight loading that the ResNet (v1) and ResNetV2 models share;
each model passes it the function that stacks its residual blocks.

Example:
    >>> from keratron.applications.resnet import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([[0.0, 0.0, 0.0]])).round(3).tolist()  # BGR, centred
    [[-103.939, -116.779, -123.68]]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = [
    "ResNet",
    "ResNet50",
    "ResNet101",
    "ResNet152",
    "decode_predictions",
    "preprocess_input",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/resnet/"
# MD5 checksums of the published files (with top, without top), as Keras lists them.
WEIGHTS_HASHES = {
    "resnet50": ("2cb95161c43110f7111970584f804107", "4d473c1dd8becc155b73f8504c6f6626"),
    "resnet101": ("f1aeb4b969a6efcfb50fad2f0c20cfc5", "88cf7a10940856eca736dc7b7e228a21"),
    "resnet152": ("100835be76be38e30d865e96f2aaae62", "ee4c566cf9a93f14d82f913c2dc6dd0c"),
    "resnet50v2": ("3ef43a0b657b3be2300d5770ece849e0", "fac2f116257151a9d068a22e544a4917"),
    "resnet101v2": ("6343647c601c52e1368623803854d971", "c0ed64b8031c3730f411d2eb4eea35b5"),
    "resnet152v2": ("a49b44d1979771252814e80f8ec446f9", "ed17cf2e0169df9d443503ef94b23b33"),
}

# ResNet's batch norms use epsilon 1.001e-5 (the value of the original Caffe models).
_BN_EPSILON = 1.001e-5

_ARGS_DOC = """
    Args:
        include_top: whether to end with global average pooling and the dense classifier.
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, 3) for channels_last; only without the top (the top needs
            224x224). At least 32x32.
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
"""


def ResNet(
    stack_fn,
    preact,
    use_bias,
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet",
    weights_name=None,
):
    """The ResNet / ResNetV2 network around a stack of residual blocks.

    Args:
        stack_fn: function from the stem's output to the last residual block's output.
        preact: True for ResNetV2 (pre-activation: no batch norm in the stem, one after the
            last block), False for ResNet.
        use_bias: whether the stem convolution has a bias.
        weights_name: key of `WEIGHTS_HASHES` naming the published weight files; needed
            for `weights="imagenet"`.
        Others: as `ResNet50`.

    Returns:
        A functional `keratron.Model`.

    Example:
        >>> model = ResNet(lambda x: x, preact=False, use_bias=True, weights=None,
        ...                include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 8, 8, 64)
    """
    pretrained = imagenet_utils.check_weights_argument(weights, name, include_top, classes)
    if pretrained and weights_name not in WEIGHTS_HASHES:
        raise ValueError(
            f"{name}: ImageNet weights are published for {sorted(WEIGHTS_HASHES)} only. "
            f"Received: weights_name={weights_name!r}"
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
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1

    x = layers.ZeroPadding2D(padding=((3, 3), (3, 3)), name="conv1_pad")(img_input)
    x = layers.Conv2D(64, 7, strides=2, use_bias=use_bias, name="conv1_conv")(x)
    if not preact:
        x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name="conv1_bn")(x)
        x = layers.Activation("relu", name="conv1_relu")(x)
    x = layers.ZeroPadding2D(padding=((1, 1), (1, 1)), name="pool1_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool1_pool")(x)
    x = stack_fn(x)
    if preact:
        x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name="post_bn")(x)
        x = layers.Activation("relu", name="post_relu")(x)

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
        suffix = "" if include_top else "_notop"
        file_name = f"{weights_name}_weights_tf_dim_ordering_tf_kernels{suffix}.h5"
        file_hash = WEIGHTS_HASHES[weights_name][0 if include_top else 1]
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHTS_PATH + (file_name or ""), file_hash
    )
    return model


def _residual_block_v1(x, filters, kernel_size=3, stride=1, conv_shortcut=True, name=None):
    """Bottleneck block: 1x1 (strided) - kxk - 1x1 (4x filters), batch norm after each
    convolution, added to the (projected) input, then ReLU."""
    bn_axis = 3 if backend.image_data_format() == "channels_last" else 1
    if conv_shortcut:
        shortcut = layers.Conv2D(4 * filters, 1, strides=stride, name=f"{name}_0_conv")(x)
        shortcut = layers.BatchNormalization(
            axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_0_bn"
        )(shortcut)
    else:
        shortcut = x
    x = layers.Conv2D(filters, 1, strides=stride, name=f"{name}_1_conv")(x)
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_1_bn")(x)
    x = layers.Activation("relu", name=f"{name}_1_relu")(x)
    x = layers.Conv2D(filters, kernel_size, padding="same", name=f"{name}_2_conv")(x)
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_2_bn")(x)
    x = layers.Activation("relu", name=f"{name}_2_relu")(x)
    x = layers.Conv2D(4 * filters, 1, name=f"{name}_3_conv")(x)
    x = layers.BatchNormalization(axis=bn_axis, epsilon=_BN_EPSILON, name=f"{name}_3_bn")(x)
    x = layers.Add(name=f"{name}_add")([shortcut, x])
    return layers.Activation("relu", name=f"{name}_out")(x)


def _stack_v1(x, filters, blocks, stride1=2, name=None):
    """`blocks` bottleneck blocks named `{name}_block1..`; the first projects its input."""
    x = _residual_block_v1(x, filters, stride=stride1, name=f"{name}_block1")
    for i in range(2, blocks + 1):
        x = _residual_block_v1(x, filters, conv_shortcut=False, name=f"{name}_block{i}")
    return x


def _stack_fn(blocks_per_stage):
    """The four stages conv2..conv5 (64, 128, 256, 512 filters); conv2 keeps the size."""

    def stack_fn(x):
        x = _stack_v1(x, 64, blocks_per_stage[0], stride1=1, name="conv2")
        x = _stack_v1(x, 128, blocks_per_stage[1], name="conv3")
        x = _stack_v1(x, 256, blocks_per_stage[2], name="conv4")
        return _stack_v1(x, 512, blocks_per_stage[3], name="conv5")

    return stack_fn


def ResNet50(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet50",
):
    """Builds ResNet50 (3, 4, 6, 3 bottleneck blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet.preprocess_input`
    (converted to BGR and centred on the ImageNet channel means, not scaled).
    {args}
    Example:
        >>> model = ResNet50(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...                  pooling="avg")
        >>> model.output_shape
        (None, 2048)
    """
    return ResNet(
        _stack_fn((3, 4, 6, 3)),
        preact=False,
        use_bias=True,
        weights_name="resnet50",
        name=name,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
    )


def ResNet101(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet101",
):
    """Builds ResNet101 (3, 4, 23, 3 bottleneck blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet.preprocess_input`.
    {args}
    Example:
        >>> model = ResNet101(weights=None, include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 2048)
    """
    return ResNet(
        _stack_fn((3, 4, 23, 3)),
        preact=False,
        use_bias=True,
        weights_name="resnet101",
        name=name,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
    )


def ResNet152(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="resnet152",
):
    """Builds ResNet152 (3, 8, 36, 3 bottleneck blocks), optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.resnet.preprocess_input`.
    {args}
    Example:
        >>> model = ResNet152(weights=None, include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 2048)
    """
    return ResNet(
        _stack_fn((3, 8, 36, 3)),
        preact=False,
        use_bias=True,
        weights_name="resnet152",
        name=name,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
    )


for _builder in (ResNet50, ResNet101, ResNet152):
    if _builder.__doc__:  # None under `python -OO`
        _builder.__doc__ = _builder.__doc__.replace("{args}", _ARGS_DOC)


def preprocess_input(x, data_format=None):
    """Converts RGB pixels in [0, 255] to BGR and subtracts the ImageNet channel means (no
    scaling), as ResNet expects.

    Example:
        >>> preprocess_input(np.array([[[[255.0, 0.0, 0.0]]]])).round(3).tolist()
        [[[[-103.939, -116.779, 131.32]]]]
    """
    return imagenet_utils.preprocess_input(x, data_format=data_format, mode="caffe")


def decode_predictions(preds, top=5):
    """Decodes ImageNet scores into (wnid, name, score) tuples; see
    `imagenet_utils.decode_predictions`.

    Example:
        >>> decode_predictions(np.eye(1000)[:1], top=1)[0][0][1]
        'tench'
    """
    return imagenet_utils.decode_predictions(preds, top=top)
