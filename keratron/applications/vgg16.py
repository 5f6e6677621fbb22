"""VGG16, with Keras's layer names and weight layout, so Keras's `.h5` files load.

Reference: Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition" (https://arxiv.org/abs/1409.1556).

The convolutional blocks are shared with VGG19, which differs only in depth (see `build_vgg`).

Example:
    >>> from keratron.applications.vgg16 import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([[0.0, 0.0, 0.0]])).round(3).tolist()  # BGR, centred
    [[-103.939, -116.779, -123.68]]
"""

from __future__ import annotations

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.models import Model

__all__ = ["VGG16", "decode_predictions", "preprocess_input"]

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/vgg16/"
WEIGHTS_NAME = "vgg16_weights_tf_dim_ordering_tf_kernels.h5"
WEIGHTS_NAME_NO_TOP = "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
# MD5 checksums of the published files, as Keras lists them.
WEIGHTS_HASHES = {
    WEIGHTS_NAME: "64373286793e3c8b2b4e3219cbf3544b",
    WEIGHTS_NAME_NO_TOP: "6d6bbae143d832006294945121d1f1fc",
}

# (filters, convolutions) of the five blocks; VGG19 has one more convolution in blocks 3-5.
_BLOCKS = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))


def VGG16(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vgg16",
):
    """Builds VGG16, optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.vgg16.preprocess_input`
    (converted to BGR and centred on the ImageNet channel means, not scaled).

    Args:
        include_top: whether to end with the three fully-connected layers (`fc1`, `fc2`,
            `predictions`).
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

    Example:
        >>> model = VGG16(weights=None, include_top=False, input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 1, 1, 512)
    """
    return build_vgg(
        "VGG16",
        _BLOCKS,
        include_top=include_top,
        weights=weights,
        input_tensor=input_tensor,
        input_shape=input_shape,
        pooling=pooling,
        classes=classes,
        classifier_activation=classifier_activation,
        name=name,
        weight_files=(BASE_WEIGHT_PATH, WEIGHTS_NAME, WEIGHTS_NAME_NO_TOP, WEIGHTS_HASHES),
    )


def build_vgg(
    model_name,
    blocks,
    include_top,
    weights,
    input_tensor,
    input_shape,
    pooling,
    classes,
    classifier_activation,
    name,
    weight_files,
):
    """The VGG network for a table of `(filters, convolutions)` per block.

    Args:
        model_name: "VGG16" or "VGG19", for error messages.
        blocks: `(filters, convolutions)` of the five blocks.
        weight_files: `(base_url, top_file, no_top_file, hashes)` of the published weights.
        Others: as `VGG16`.

    Returns:
        A functional `keratron.Model`.
    """
    pretrained = imagenet_utils.check_weights_argument(weights, model_name, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=224,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if include_top:  # fail before building anything
        imagenet_utils.validate_activation(classifier_activation, weights)
    img_input = imagenet_utils.model_input(input_tensor, input_shape)

    x = img_input
    for block, (filters, convolutions) in enumerate(blocks, start=1):
        for conv in range(1, convolutions + 1):
            x = layers.Conv2D(
                filters,
                (3, 3),
                activation="relu",
                padding="same",
                name=f"block{block}_conv{conv}",
            )(x)
        x = layers.MaxPooling2D((2, 2), strides=(2, 2), name=f"block{block}_pool")(x)

    if include_top:
        x = layers.Flatten(name="flatten")(x)
        x = layers.Dense(4096, activation="relu", name="fc1")(x)
        x = layers.Dense(4096, activation="relu", name="fc2")(x)
        x = layers.Dense(classes, activation=classifier_activation, name="predictions")(x)
    elif pooling == "avg":
        x = layers.GlobalAveragePooling2D()(x)
    elif pooling == "max":
        x = layers.GlobalMaxPooling2D()(x)

    inputs = img_input if input_tensor is None else imagenet_utils.source_inputs(input_tensor)
    model = Model(inputs, x, name=name)

    base_url, top_file, no_top_file, hashes = weight_files
    file_name = None
    if pretrained:
        file_name = top_file if include_top else no_top_file
    imagenet_utils.load_model_weights(
        model, weights, file_name, base_url + (file_name or ""), hashes.get(file_name)
    )
    return model


def preprocess_input(x, data_format=None):
    """Converts RGB pixels in [0, 255] to BGR and subtracts the ImageNet channel means (no
    scaling), as VGG16 expects.

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
