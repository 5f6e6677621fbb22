"""ConvNeXt (Tiny, Small, Base, Large, XLarge), with Keras's layer names and weight layout, so
Keras's `.h5` files load.

The models normalize their [0, 255] inputs themselves (a `Normalization` layer with the
ImageNet statistics, unless `include_preprocessing=False`), so `preprocess_input` returns its
input unchanged.

Reference: Liu et al., "A ConvNet for the 2020s" (https://arxiv.org/abs/2201.03545).

Example:
    >>> from keratron.applications.convnext import preprocess_input
    >>> preprocess_input(np.array([0.0, 255.0])).tolist()  # the model normalizes by itself
    [0.0, 255.0]
"""

from __future__ import annotations

import numpy as np

from keratron import backend, layers
from keratron.applications import imagenet_utils
from keratron.layers.node import KerasTensor
from keratron.layers.residual_branch import LayerScale, StochasticDepth
from keratron.models import Model, Sequential

__all__ = [
    "ConvNeXtBase",
    "ConvNeXtLarge",
    "ConvNeXtSmall",
    "ConvNeXtTiny",
    "ConvNeXtXLarge",
    "LayerScale",
    "StochasticDepth",
    "decode_predictions",
    "preprocess_input",
]

BASE_WEIGHTS_PATH = "https://storage.googleapis.com/tensorflow/keras-applications/convnext/"
# (top file, no-top file) sha256 checksums, as Keras publishes them.
WEIGHTS_HASHES = {
    "convnext_tiny": (
        "8ae6e78ce2933352b1ef4008e6dd2f17bc40771563877d156bc6426c7cf503ff",
        "d547c096cabd03329d7be5562c5e14798aa39ed24b474157cef5e85ab9e49ef1",
    ),
    "convnext_small": (
        "ce1277d8f1ee5a0ef0e171469089c18f5233860ceaf9b168049cb9263fd7483c",
        "6fc8009faa2f00c1c1dfce59feea9b0745eb260a7dd11bee65c8e20843da6eab",
    ),
    "convnext_base": (
        "52cbb006d3dadd03f6e095a8ca1aca47aecdd75acb4bc74bce1f5c695d0086e6",
        "40a20c5548a5e9202f69735ecc06c990e6b7c9d2de39f0361e27baeb24cb7c45",
    ),
    "convnext_large": (
        "070c5ed9ed289581e477741d3b34beffa920db8cf590899d6d2c67fba2a198a6",
        "96f02b6f0753d4f543261bc9d09bed650f24dd6bc02ddde3066135b63d23a1cd",
    ),
    "convnext_xlarge": (
        "c1f5ccab661354fc3a79a10fa99af82f0fbf10ec65cb894a3ae0815f17a889ee",
        "de3f8a54174130e0cecdc71583354753d557fcf1f4487331558e2a16ba0cfe05",
    ),
}

MODEL_CONFIGS = {
    "tiny": {"depths": [3, 3, 9, 3], "projection_dims": [96, 192, 384, 768], "default_size": 224},
    "small": {
        "depths": [3, 3, 27, 3],
        "projection_dims": [96, 192, 384, 768],
        "default_size": 224,
    },
    "base": {
        "depths": [3, 3, 27, 3],
        "projection_dims": [128, 256, 512, 1024],
        "default_size": 224,
    },
    "large": {
        "depths": [3, 3, 27, 3],
        "projection_dims": [192, 384, 768, 1536],
        "default_size": 224,
    },
    "xlarge": {
        "depths": [3, 3, 27, 3],
        "projection_dims": [256, 512, 1024, 2048],
        "default_size": 224,
    },
}

_BUILDER_NAMES = {
    "tiny": "ConvNeXtTiny",
    "small": "ConvNeXtSmall",
    "base": "ConvNeXtBase",
    "large": "ConvNeXtLarge",
    "xlarge": "ConvNeXtXLarge",
}

_ARGS_DOC = """
    Inputs are RGB images with pixels in [0, 255] (normalized with the ImageNet mean and
    standard deviation inside the model, unless `include_preprocessing=False`). Only the
    channels_last image layout is supported.

    Args:
        include_top: whether to end with global pooling, layer normalization and the dense
            classifier.
        include_preprocessing: whether the model starts with the ImageNet `Normalization`
            (only added for 3-channel inputs).
        weights: None, "imagenet", or the path of a weight file.
        input_tensor: optional symbolic tensor to use as the image input.
        input_shape: (rows, cols, channels); only needed without the top. At least 32x32.
        pooling: without the top, None (4D features), "avg" or "max" (global pooling); both
            are followed by a layer normalization, as in Keras.
        classes: number of classes of the top (1000 for ImageNet weights).
        classifier_activation: activation of the top; None returns logits. Pretrained
            weights allow only None and "softmax".
        name: model name; with ImageNet weights it must contain the variant's name.

    Returns:
        A functional `keratron.Model`.

    Raises:
        ValueError: for invalid `weights`, `classes`, `input_shape`, `name` or
            `classifier_activation` combinations, or a channels_first image layout.
"""
# Only the smallest variant builds in its example (XLarge has 350M weights); the others show
# their stage widths.
_TINY_EXAMPLE = """
    Example:
        >>> model = keratron.applications.ConvNeXtTiny(
        ...     weights=None, include_top=False, pooling="avg", input_shape=(32, 32, 3))
        >>> model.output_shape
        (None, 768)
"""
_WIDTHS_EXAMPLE = """
    Example:
        >>> keratron.applications.convnext.MODEL_CONFIGS["{variant}"]["projection_dims"]
        {dims}
"""


def _convnext(
    depths,
    projection_dims,
    drop_path_rate=0.0,
    layer_scale_init_value=1e-6,
    default_size=224,
    name="convnext",
    include_preprocessing=True,
    include_top=True,
    weights=None,
    input_tensor=None,
    input_shape=None,
    pooling=None,
    classes=1000,
    classifier_activation="softmax",
    weights_name=None,
):
    who = _BUILDER_NAMES[weights_name.split("convnext_")[-1]]
    if backend.image_data_format() == "channels_first":
        raise ValueError(
            f"{who}: the channels_first image data format is not supported. Switch to "
            "channels_last (keratron.config.set_image_data_format('channels_last'))."
        )
    pretrained = imagenet_utils.check_weights_argument(weights, who, include_top, classes)
    input_shape = imagenet_utils.obtain_input_shape(
        input_shape,
        default_size=default_size,
        min_size=32,
        data_format=backend.image_data_format(),
        require_flatten=include_top,
        weights=weights,
    )
    if pretrained:
        # Checked before building: the file only fits the variant's own layers and names.
        expected = MODEL_CONFIGS[weights_name.split("convnext_")[-1]]
        if depths != expected["depths"] or projection_dims != expected["projection_dims"]:
            raise ValueError(
                f"{who}: the architecture does not match the {weights_name} weights. "
                f"Expected depths={expected['depths']} and "
                f"projection_dims={expected['projection_dims']}. "
                f"Received: depths={depths}, projection_dims={projection_dims}"
            )
        if weights_name not in name:
            raise ValueError(
                f"{who}: with imagenet weights the model name must contain "
                f"{weights_name!r} (the weight file names its layers so). Received: name={name!r}"
            )
    if include_top:
        imagenet_utils.validate_activation(classifier_activation, weights)

    img_input = imagenet_utils.model_input(input_tensor, input_shape)
    if isinstance(input_tensor, KerasTensor):
        inputs = imagenet_utils.source_inputs(input_tensor)[0]
        x = input_tensor
    else:
        inputs = x = img_input

    if include_preprocessing and input_shape[-1] == 3:
        x = _pre_stem(name)(x)

    stem = Sequential(
        [
            layers.Conv2D(projection_dims[0], kernel_size=4, strides=4, name=f"{name}_stem_conv"),
            layers.LayerNormalization(epsilon=1e-6, name=f"{name}_stem_layernorm"),
        ],
        name=f"{name}_stem",
    )
    downsample_layers = [stem]
    for i in range(3):
        downsample_layers.append(
            Sequential(
                [
                    layers.LayerNormalization(
                        epsilon=1e-6, name=f"{name}_downsampling_layernorm_{i}"
                    ),
                    layers.Conv2D(
                        projection_dims[i + 1],
                        kernel_size=2,
                        strides=2,
                        name=f"{name}_downsampling_conv_{i}",
                    ),
                ],
                name=f"{name}_downsampling_block_{i}",
            )
        )

    # Stochastic depth grows linearly over the blocks (the ConvNeXt reference schedule).
    depth_drop_rates = [float(r) for r in np.linspace(0.0, drop_path_rate, sum(depths))]
    cur = 0
    for i in range(4):
        x = downsample_layers[i](x)
        for j in range(depths[i]):
            x = _convnext_block(
                x,
                projection_dim=projection_dims[i],
                drop_path_rate=depth_drop_rates[cur + j],
                layer_scale_init_value=layer_scale_init_value,
                name=f"{name}_stage_{i}_block_{j}",
            )
        cur += depths[i]

    if include_top:
        x = layers.GlobalAveragePooling2D(name=f"{name}_head_gap")(x)
        x = layers.LayerNormalization(epsilon=1e-6, name=f"{name}_head_layernorm")(x)
        x = layers.Dense(classes, activation=classifier_activation, name=f"{name}_head_dense")(x)
    else:
        if pooling == "avg":
            x = layers.GlobalAveragePooling2D()(x)
        elif pooling == "max":
            x = layers.GlobalMaxPooling2D()(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)

    model = Model(inputs=inputs, outputs=x, name=name)

    file_name = file_hash = None
    if pretrained:
        if include_top:
            file_name, file_hash = name + ".h5", WEIGHTS_HASHES[weights_name][0]
        else:
            file_name, file_hash = name + "_notop.h5", WEIGHTS_HASHES[weights_name][1]
    imagenet_utils.load_model_weights(
        model, weights, file_name, BASE_WEIGHTS_PATH + (file_name or ""), file_hash
    )
    return model


def _pre_stem(name):
    """Normalizes [0, 255] inputs with the ImageNet-1k mean and standard deviation."""

    def apply(x):
        return layers.Normalization(
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            variance=[(0.229 * 255) ** 2, (0.224 * 255) ** 2, (0.225 * 255) ** 2],
            name=f"{name}_prestem_normalization",
        )(x)

    return apply


def _convnext_block(x, projection_dim, drop_path_rate, layer_scale_init_value, name):
    """Depthwise 7x7 + layer norm + pointwise MLP (Dense layers, as the reference has them),
    scaled and added back to the input."""
    inputs = x
    x = layers.Conv2D(
        filters=projection_dim,
        kernel_size=7,
        padding="same",
        groups=projection_dim,
        name=f"{name}_depthwise_conv",
    )(x)
    x = layers.LayerNormalization(epsilon=1e-6, name=f"{name}_layernorm")(x)
    x = layers.Dense(4 * projection_dim, name=f"{name}_pointwise_conv_1")(x)
    x = layers.Activation("gelu", name=f"{name}_gelu")(x)
    x = layers.Dense(projection_dim, name=f"{name}_pointwise_conv_2")(x)
    if layer_scale_init_value is not None:
        x = LayerScale(layer_scale_init_value, projection_dim, name=f"{name}_layer_scale")(x)
    if drop_path_rate:
        branch = StochasticDepth(drop_path_rate, name=f"{name}_stochastic_depth")
    else:
        branch = layers.Activation("linear", name=f"{name}_identity")
    # A tensor op, not an Add layer, as in Keras: model.operations lists it as "add_N".
    return inputs + branch(x)


def _variant(variant):
    config = MODEL_CONFIGS[variant]

    def builder(
        include_top=True,
        include_preprocessing=True,
        weights="imagenet",
        input_tensor=None,
        input_shape=None,
        pooling=None,
        classes=1000,
        classifier_activation="softmax",
        name=f"convnext_{variant}",
    ):
        return _convnext(
            weights_name=f"convnext_{variant}",
            depths=config["depths"],
            projection_dims=config["projection_dims"],
            drop_path_rate=0.0,
            layer_scale_init_value=1e-6,
            default_size=config["default_size"],
            name=name,
            include_top=include_top,
            include_preprocessing=include_preprocessing,
            weights=weights,
            input_tensor=input_tensor,
            input_shape=input_shape,
            pooling=pooling,
            classes=classes,
            classifier_activation=classifier_activation,
        )

    doc_name = _BUILDER_NAMES[variant]
    builder.__name__ = builder.__qualname__ = doc_name
    builder.__doc__ = (
        f"Builds {doc_name} (depths {config['depths']}, widths {config['projection_dims']}), "
        "optionally with ImageNet weights.\n"
        + _ARGS_DOC
        + (
            _TINY_EXAMPLE
            if variant == "tiny"
            else _WIDTHS_EXAMPLE.format(variant=variant, dims=config["projection_dims"])
        )
    )
    return builder


ConvNeXtTiny = _variant("tiny")
ConvNeXtSmall = _variant("small")
ConvNeXtBase = _variant("base")
ConvNeXtLarge = _variant("large")
ConvNeXtXLarge = _variant("xlarge")


def preprocess_input(x, data_format=None):
    """Returns `x` unchanged: ConvNeXt normalizes its inputs itself (Keras keeps this function
    for compatibility).

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
