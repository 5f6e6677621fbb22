"""VGG19, with Keras's layer names and weight layout, so Keras's `.h5` files load.

Reference: Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale Image
Recognition" (https://arxiv.org/abs/1409.1556).

VGG19 is VGG16 with a fourth convolution in blocks 3, 4 and 5 (`block3_conv4`, ...).

Example:
    >>> from keratron.applications.vgg19 import preprocess_input, decode_predictions
    >>> preprocess_input(np.array([[0.0, 0.0, 0.0]])).round(3).tolist()  # BGR, centred
    [[-103.939, -116.779, -123.68]]
"""

from __future__ import annotations

from keratron.applications import imagenet_utils, vgg16

__all__ = ["VGG19", "decode_predictions", "preprocess_input"]

BASE_WEIGHT_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/vgg19/"
WEIGHTS_NAME = "vgg19_weights_tf_dim_ordering_tf_kernels.h5"
WEIGHTS_NAME_NO_TOP = "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5"
# MD5 checksums of the published files, as Keras lists them.
WEIGHTS_HASHES = {
    WEIGHTS_NAME: "cbe5617147190e668d6c5d5026f83318",
    WEIGHTS_NAME_NO_TOP: "253f8cb515780f3b799900260a226db6",
}

_BLOCKS = ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4))


def VGG19(
    include_top=True,
    weights="imagenet",
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    name="vgg19",
):
    """Builds VGG19, optionally with ImageNet weights.

    Inputs are RGB images preprocessed with `keratron.applications.vgg19.preprocess_input`
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
        >>> model = VGG19(weights=None, include_top=False, input_shape=(32, 32, 3),
        ...               pooling="avg")
        >>> model.output_shape
        (None, 512)
    """
    return vgg16.build_vgg(
        "VGG19",
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


def preprocess_input(x, data_format=None):
    """Converts RGB pixels in [0, 255] to BGR and subtracts the ImageNet channel means (no
    scaling), as VGG19 expects.

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
