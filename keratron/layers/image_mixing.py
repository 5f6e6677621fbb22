"""Image layers that mix images, erase patches, chain augmentations or pad box lists, as in
Keras 3.15: `CutMix`, `MixUp`, `RandomErasing`, `RandAugment`, `AugMix`,
`MaxNumBoundingBoxes`.

`CutMix` and `MixUp` also take Keras's dict input `{"images": ..., "labels": ...,
"segmentation_masks": ...}` and mix the labels with the images' weights;
`MaxNumBoundingBoxes` pads or truncates `{"bounding_boxes": {"boxes", "labels"}}`. The random
layers are the identity when `training=False`.
"""

from __future__ import annotations

import random as python_random

from keratron import ops
from keratron import random as kt_random
from keratron.layers.image_augmentation import (
    RandomBrightness,
    RandomContrast,
    RandomRotation,
    RandomTranslation,
    _factor_pair,
)
from keratron.layers.image_color import (
    AutoContrast,
    Equalization,
    RandomColorDegeneration,
    RandomPosterization,
    RandomSharpness,
    Solarization,
    _apply_where,
    _per_image,
    _TransformLayer,
    _value_range,
)
from keratron.layers.image_warping import RandomShear
from keratron.layers.node import KerasTensor

__all__ = ["CutMix", "MixUp", "RandomErasing", "RandAugment", "AugMix", "MaxNumBoundingBoxes"]

_DICT_KEYS = ("images", "labels", "segmentation_masks")


class _DictInputLayer(_TransformLayer):
    """Accepts Keras's dict input: the images' draw also transforms labels and masks."""

    def call(self, inputs, training=True):
        if not isinstance(inputs, dict):
            return super().call(inputs, training=training)
        unknown = set(inputs) - set(_DICT_KEYS)
        if unknown or "images" not in inputs:
            raise ValueError(
                f"{type(self).__name__}: a dict input takes the keys {_DICT_KEYS} ('images' "
                f"required). Received keys: {sorted(inputs)}"
            )
        images = ops.convert_to_tensor(inputs["images"])
        if images.ndim not in (3, 4):
            raise ValueError(
                f"{type(self).__name__}: expected an image tensor of rank 3 (single image) or "
                f"4 (batch of images). Received: images.shape={tuple(images.shape)}"
            )
        out = dict(inputs)
        batched = images.ndim == 4
        x = ops.cast(images if batched else ops.expand_dims(images, 0), self.compute_dtype)
        if not training:
            out["images"] = x if batched else ops.squeeze(x, 0)
            return out
        params = self._draw(x)
        y = self._apply(x, params)
        out["images"] = y if batched else ops.squeeze(y, 0)
        if "labels" in inputs:
            labels = ops.convert_to_tensor(inputs["labels"])
            labels = labels if batched else ops.expand_dims(labels, 0)
            labels = self._apply_labels(labels, params)
            out["labels"] = labels if batched else ops.squeeze(labels, 0)
        if "segmentation_masks" in inputs:
            masks = ops.convert_to_tensor(inputs["segmentation_masks"])
            masks = masks if batched else ops.expand_dims(masks, 0)
            masks = self._apply_masks(masks, params)
            out["segmentation_masks"] = masks if batched else ops.squeeze(masks, 0)
        return out

    def compute_output_spec(self, inputs, training=None):
        if isinstance(inputs, dict):
            return {
                k: KerasTensor(tuple(v.shape), self.compute_dtype if k == "images" else v.dtype)
                for k, v in inputs.items()
            }
        return super().compute_output_spec(inputs, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape if isinstance(input_shape, dict) else tuple(input_shape)


def _mix_labels(labels, mix_weight, permutation):
    w = ops.reshape(ops.cast(mix_weight, "float32"), (-1, 1))
    labels = ops.cast(labels, "float32")
    return w * labels + (1.0 - w) * ops.take(labels, permutation, axis=0)


class CutMix(_DictInputLayer):
    """Pastes a random box of another image of the batch into each image, as in Keras.

    Per call a Beta parameter a is drawn from `factor` (plus 1e-6; from a Python generator
    seeded by `seed`, so a compiled step keeps the one it was traced with); per image a weight
    lam ~ Beta(a, a) sets a box of `sqrt(1 - lam)` of the height and width at a random place,
    filled from the image at the same position in a random permutation of the batch. Labels
    (dict input) are mixed by the box's share of the image. A single image is returned as is.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 1.0).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.CutMix(seed=0)
        >>> out = layer({"images": np.ones((4, 8, 8, 3)), "labels": np.eye(4)}, training=True)
        >>> out["labels"].shape
        (4, 4)
    """

    def __init__(self, factor=1.0, seed=None, data_format=None, **kwargs):
        self.factor = _factor_pair("CutMix", factor, (0, 1))
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self._python_random = python_random.Random(seed)

    def _bounds(self, batch, length, ratio):
        crop = ratio * float(length)
        start = kt_random.uniform((batch,), 0.0, 1.0, self.compute_dtype, self.generator)
        start = start * (float(length) - crop)
        return start, start + crop

    def _draw(self, images):
        b = images.shape[0]
        h_axis, w_axis = self._hw_axes()
        h, w = images.shape[h_axis], images.shape[w_axis]
        # The Beta parameter is drawn on the host (a traced tensor cannot parameterise
        # random.beta), so a compiled step keeps the one it was traced with; the per-image
        # weights are drawn anew on every call.
        alpha = self._python_random.uniform(*self.factor) + 1e-6
        lam = kt_random.beta((b,), alpha, alpha, dtype=self.compute_dtype, seed=self.generator)
        ratio = ops.sqrt(1.0 - lam)
        x0, x1 = self._bounds(b, w, ratio)
        y0, y1 = self._bounds(b, h, ratio)
        rows = ops.reshape(ops.arange(h, dtype=self.compute_dtype), (1, h, 1))
        cols = ops.reshape(ops.arange(w, dtype=self.compute_dtype), (1, 1, w))

        def col(v):
            return ops.reshape(v, (-1, 1, 1))

        mask = ops.logical_and(
            ops.logical_and(cols >= col(x0), cols < col(x1)),
            ops.logical_and(rows >= col(y0), rows < col(y1)),
        )
        mask = ops.expand_dims(mask, 1 if self.data_format == "channels_first" else -1)
        permutation = kt_random.shuffle(ops.arange(b, dtype="int32"), seed=self.generator)
        mix_weight = 1.0 - (x1 - x0) * (y1 - y0) / float(w * h)
        return {"permutation_order": permutation, "batch_masks": mask, "mix_weight": mix_weight}

    def _apply(self, images, params):
        mixed = ops.take(images, params["permutation_order"], axis=0)
        return ops.where(params["batch_masks"], mixed, images)

    def call(self, inputs, training=True):
        # Keras leaves a single (rank 3) image unmixed: there is no other image to mix in.
        images = inputs.get("images") if isinstance(inputs, dict) else inputs
        if getattr(images, "ndim", None) == 3:
            training = False
        return super().call(inputs, training=training)

    def _apply_labels(self, labels, params):
        return _mix_labels(labels, params["mix_weight"], params["permutation_order"])

    def _apply_masks(self, masks, params):
        mixed = ops.take(masks, params["permutation_order"], axis=0)
        return ops.where(params["batch_masks"], mixed, masks)

    def get_config(self):
        return {**super().get_config(), "factor": self.factor, "seed": self.seed}


class MixUp(_DictInputLayer):
    """Blends each image with another image of the batch, as in Keras.

    Per image a weight lam ~ Beta(alpha, alpha) gives `lam x + (1 - lam) x[perm]` for a random
    permutation of the batch; labels (dict input) are blended with the same weights.

    Args:
        alpha: the Beta distribution's parameter (default 0.2).
        data_format: "channels_last" or "channels_first" (default from the config).
        seed: optional int seed.

    Example:
        >>> layer = keratron.layers.MixUp(seed=0)
        >>> out = layer({"images": np.ones((4, 8, 8, 3)), "labels": np.eye(4)}, training=True)
        >>> out["images"].shape
        (4, 8, 8, 3)
    """

    def __init__(self, alpha=0.2, data_format=None, seed=None, **kwargs):
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
            raise ValueError(f"MixUp: `alpha` must be a positive number. Received: alpha={alpha}")
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.alpha = alpha

    def _draw(self, images):
        b = images.shape[0]
        permutation = kt_random.shuffle(ops.arange(b, dtype="int32"), seed=self.generator)
        weight = kt_random.beta((b,), self.alpha, self.alpha, seed=self.generator)
        return {"mix_weight": weight, "permutation_order": permutation}

    def _apply(self, images, params):
        w = ops.reshape(ops.cast(params["mix_weight"], self.compute_dtype), (-1, 1, 1, 1))
        mixed = ops.take(images, params["permutation_order"], axis=0)
        return w * images + (1.0 - w) * mixed

    def _apply_labels(self, labels, params):
        return _mix_labels(labels, params["mix_weight"], params["permutation_order"])

    def _apply_masks(self, masks, params):
        w = ops.reshape(ops.cast(params["mix_weight"], "float32"), (-1, 1, 1, 1))
        masks = ops.cast(masks, "float32")
        return w * masks + (1.0 - w) * ops.take(masks, params["permutation_order"], axis=0)

    def get_config(self):
        return {**super().get_config(), "alpha": self.alpha, "seed": self.seed}


class RandomErasing(_TransformLayer):
    """Erases a random box of each image with a random probability, as in Keras.

    Per image the box's width and height are `sqrt(s)` of the image's for two draws s from
    `scale`, placed at random; it is filled with `fill_value` (None: normal noise times
    `value_range[1]`), clipped to `value_range`, when a uniform draw falls below a probability
    drawn from `factor`.

    Args:
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 1.0).
        scale: a number or a pair in [0, 1] (default (0.02, 0.33)).
        fill_value: None (default), a number, or three numbers (one per channel).
        value_range: the (low, high) range of the images (default (0, 255)).
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandomErasing(fill_value=0.0, seed=0)
        >>> layer(np.ones((2, 8, 8, 3)), training=True).shape
        (2, 8, 8, 3)
    """

    def __init__(
        self,
        factor=1.0,
        scale=(0.02, 0.33),
        fill_value=None,
        value_range=(0, 255),
        seed=None,
        data_format=None,
        **kwargs,
    ):
        self.factor = _factor_pair("RandomErasing", factor, (0, 1))
        self.scale = _factor_pair("RandomErasing", scale, (0, 1), name="scale")
        bad_fill = not (
            fill_value is None
            or (isinstance(fill_value, (int, float)) and not isinstance(fill_value, bool))
            or (isinstance(fill_value, (tuple, list)) and len(fill_value) == 3)
        )
        if bad_fill:
            raise ValueError(
                "RandomErasing: the `fill_value` argument should be None, a number or a list "
                f"of three numbers. Received: fill_value={fill_value!r}"
            )
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.fill_value = fill_value
        self.value_range = _value_range("RandomErasing", value_range, sort=False)

    def _draw(self, images):
        b = images.shape[0]
        h_axis, w_axis = self._hw_axes()
        h, w = images.shape[h_axis], images.shape[w_axis]
        dtype = self.compute_dtype
        sizes = ops.sqrt(kt_random.uniform((b, 2), *self.scale, dtype, self.generator))
        bounds = []
        for length, ratio in ((w, sizes[:, 0]), (h, sizes[:, 1])):
            crop = ratio * float(length)
            start = kt_random.uniform((b,), 0.0, 1.0, dtype, self.generator) * (length - crop)
            bounds.append((ops.reshape(start, (-1, 1, 1)), ops.reshape(start + crop, (-1, 1, 1))))
        (x0, x1), (y0, y1) = bounds
        rows = ops.reshape(ops.arange(h, dtype=dtype), (1, h, 1))
        cols = ops.reshape(ops.arange(w, dtype=dtype), (1, 1, w))
        mask = ops.logical_and(
            ops.logical_and(cols >= x0, cols < x1), ops.logical_and(rows >= y0, rows < y1)
        )
        mask = ops.expand_dims(mask, 1 if self.data_format == "channels_first" else -1)
        probability = _per_image(self, images, self.factor[0], self.factor[1])
        apply = _per_image(self, images, 0.0, 1.0) < probability
        if self.fill_value is None:
            fill = kt_random.normal(images.shape, dtype=dtype, seed=self.generator)
            fill = fill * float(self.value_range[1])
        elif isinstance(self.fill_value, (tuple, list)):
            shape = (1, 3, 1, 1) if self.data_format == "channels_first" else (1, 1, 1, 3)
            fill = ops.broadcast_to(
                ops.reshape(ops.convert_to_tensor(list(self.fill_value), dtype), shape),
                images.shape,
            )
        else:
            fill = ops.full(images.shape, float(self.fill_value), dtype=dtype)
        fill = ops.clip(fill, *self.value_range)
        return {"apply_erasing": apply, "batch_masks": mask, "fill_value": fill}

    def _apply(self, images, params):
        erased = ops.where(params["batch_masks"], params["fill_value"], images)
        return _apply_where(params["apply_erasing"], erased, images)

    def get_config(self):
        return {
            **super().get_config(),
            "factor": self.factor,
            "scale": self.scale,
            "fill_value": self.fill_value,
            "value_range": self.value_range,
            "seed": self.seed,
        }


def _augmentation_layers(layer, factor, value_range, interpolation, seed, data_format):
    """The sub-layers AugMix and RandAugment choose from, as Keras builds them."""
    fmt = {"seed": seed, "data_format": data_format}
    colour = {"value_range": value_range, **fmt}
    return {
        "random_shear": RandomShear(factor, factor, interpolation=interpolation, **fmt),
        "random_translation": RandomTranslation(factor, factor, interpolation=interpolation, **fmt),
        "random_rotation": RandomRotation(factor, interpolation=interpolation, **fmt),
        "random_brightness": RandomBrightness(factor, **colour),
        "random_color_degeneration": RandomColorDegeneration(factor, **colour),
        "random_contrast": RandomContrast(factor, **colour),
        "random_sharpness": RandomSharpness(factor, **colour),
        "random_posterization": RandomPosterization(max(1, int(8 * factor[1])), **colour),
        "solarization": Solarization(factor, factor, **colour),
        "auto_contrast": AutoContrast(value_range=value_range, data_format=data_format),
        "equalization": Equalization(value_range=value_range, data_format=data_format),
    }


class RandAugment(_TransformLayer):
    """Applies `num_ops` augmentations, each chosen at random per call, as in Keras.

    The eleven candidates (shear, translation, rotation, brightness, color degeneration,
    contrast, sharpness, posterization, solarization, auto-contrast, equalization) take their
    strength from `factor`. As in Keras, every candidate is computed and the chosen one kept
    by selection, so a compiled step draws a new choice on every call.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        num_ops: how many augmentations to apply in sequence (default 2).
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 0.5).
        interpolation: "bilinear" (default) or "nearest", for the geometric ones.
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.RandAugment(seed=0)
        >>> layer(np.random.uniform(0, 255, (2, 8, 8, 3)), training=True).shape
        (2, 8, 8, 3)
    """

    _AUGMENT_LAYERS = (
        "random_shear",
        "random_translation",
        "random_rotation",
        "random_brightness",
        "random_color_degeneration",
        "random_contrast",
        "random_sharpness",
        "random_posterization",
        "solarization",
        "auto_contrast",
        "equalization",
    )

    def __init__(
        self,
        value_range=(0, 255),
        num_ops=2,
        factor=0.5,
        interpolation="bilinear",
        seed=None,
        data_format=None,
        **kwargs,
    ):
        if isinstance(num_ops, bool) or not isinstance(num_ops, int) or num_ops < 0:
            raise ValueError(
                f"RandAugment: `num_ops` must be a non-negative integer. Received: {num_ops!r}"
            )
        self.factor = _factor_pair("RandAugment", factor, (0, 1))
        value_range = _value_range("RandAugment", value_range, sort=False)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = value_range
        self.num_ops = num_ops
        self.interpolation = interpolation
        self._candidates = _augmentation_layers(
            self, self.factor, value_range, interpolation, seed, self.data_format
        )
        for name, layer in self._candidates.items():
            setattr(self, name, layer)

    def _augment(self, images):
        choices = kt_random.randint(
            (self.num_ops,), 0, len(self._AUGMENT_LAYERS), seed=self.generator
        )
        for i in range(self.num_ops):
            for j, name in enumerate(self._AUGMENT_LAYERS):
                out = ops.cast(self._candidates[name]._augment(images), self.compute_dtype)
                images = ops.where(ops.equal(choices[i], j), out, images)
        return images

    def get_config(self):
        return {
            **super().get_config(),
            "value_range": self.value_range,
            "num_ops": self.num_ops,
            "factor": self.factor,
            "interpolation": self.interpolation,
            "seed": self.seed,
        }


class AugMix(_TransformLayer):
    """AugMix (Hendrycks et al., 2020): a random convex mix of augmentation chains, as Keras.

    `num_chains` chains each apply up to `chain_depth` augmentations chosen at random (a step
    may be skipped); the chains' outputs are mixed with Dirichlet(alpha) weights and the mix
    blended with the image by a Beta(alpha, alpha) weight, then clipped to `value_range`. The
    chains are chosen on the host from a Python generator seeded by `seed` (Keras uses the
    global `random`), so a compiled step keeps the chains it was traced with, as in Keras.

    Args:
        value_range: the (low, high) range of the images (default (0, 255)).
        num_chains: number of chains (default 3).
        chain_depth: the most augmentations per chain (default 3).
        factor: a number in [0, 1] (meaning [0, f]) or a pair (default 0.3).
        alpha: the Dirichlet and Beta parameter (default 1.0).
        all_ops: use all eleven augmentations (default True) or only the seven that leave
            brightness, colour, contrast and sharpness alone.
        interpolation: "bilinear" (default) or "nearest", for the geometric ones.
        seed: optional int seed.
        data_format: "channels_last" or "channels_first" (default from the config).

    Example:
        >>> layer = keratron.layers.AugMix(seed=0)
        >>> layer(np.random.uniform(0, 255, (2, 8, 8, 3)), training=True).shape
        (2, 8, 8, 3)
    """

    _ALL = (
        "random_shear",
        "random_translation",
        "random_rotation",
        "random_posterization",
        "solarization",
        "auto_contrast",
        "equalization",
        "random_brightness",
        "random_color_degeneration",
        "random_contrast",
        "random_sharpness",
    )

    def __init__(
        self,
        value_range=(0, 255),
        num_chains=3,
        chain_depth=3,
        factor=0.3,
        alpha=1.0,
        all_ops=True,
        interpolation="bilinear",
        seed=None,
        data_format=None,
        **kwargs,
    ):
        for arg, v in (("num_chains", num_chains), ("chain_depth", chain_depth)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"AugMix: `{arg}` must be a positive integer. Received: {v!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
            raise ValueError(f"AugMix: `alpha` must be a positive number. Received: {alpha!r}")
        self.factor = _factor_pair("AugMix", factor, (0, 1))
        value_range = _value_range("AugMix", value_range, sort=False)
        super().__init__(seed=seed, data_format=data_format, **kwargs)
        self.value_range = value_range
        self.num_chains = num_chains
        self.chain_depth = chain_depth
        self.alpha = alpha
        self.all_ops = all_ops
        self.interpolation = interpolation
        self._choices = list(self._ALL if all_ops else self._ALL[:7])
        self._candidates = _augmentation_layers(
            self, self.factor, value_range, interpolation, seed, self.data_format
        )
        for name in self._choices:
            setattr(self, name, self._candidates[name])
        self._python_random = python_random.Random(seed)

    def _augment(self, images):
        gamma = kt_random.gamma((self.num_chains,), self.alpha, seed=self.generator)
        chain_weights = ops.cast(gamma / ops.sum(gamma), self.compute_dtype)
        blend = ops.cast(
            kt_random.beta((), self.alpha, self.alpha, seed=self.generator), self.compute_dtype
        )
        mixed = ops.zeros_like(images)
        for c in range(self.num_chains):
            chained = images
            for _ in range(self.chain_depth):
                name = self._python_random.choice(self._choices + [None])
                if name is not None:
                    chained = ops.cast(self._candidates[name]._augment(chained), self.compute_dtype)
            mixed = mixed + chained * chain_weights[c]
        out = blend * images + (1.0 - blend) * mixed
        return ops.clip(out, float(self.value_range[0]), float(self.value_range[1]))

    def get_config(self):
        return {
            **super().get_config(),
            "value_range": self.value_range,
            "num_chains": self.num_chains,
            "chain_depth": self.chain_depth,
            "factor": self.factor,
            "alpha": self.alpha,
            "all_ops": self.all_ops,
            "interpolation": self.interpolation,
            "seed": self.seed,
        }


class MaxNumBoundingBoxes(_TransformLayer):
    """Pads (with `fill_value`) or truncates each image's bounding boxes to `max_number`.

    Takes Keras's dict input `{"images": ..., "bounding_boxes": {"boxes": (batch, n, 4),
    "labels": (batch, n)}}` (or a single image's, without the batch axis); images and other
    entries pass through. A plain image tensor is returned as is. Active at inference too.

    Args:
        max_number: the number of boxes per image in the output.
        fill_value: the value of padded boxes and labels (default -1).
        bounding_box_format: the boxes' format ("xyxy", ...), required with bounding boxes.

    Example:
        >>> layer = keratron.layers.MaxNumBoundingBoxes(3, bounding_box_format="xyxy")
        >>> boxes = {"boxes": np.ones((2, 1, 4)), "labels": np.ones((2, 1))}
        >>> layer({"images": np.ones((2, 4, 4, 3)), "bounding_boxes": boxes})[
        ...     "bounding_boxes"]["boxes"].shape
        (2, 3, 4)
    """

    def __init__(self, max_number, fill_value=-1, bounding_box_format=None, **kwargs):
        if isinstance(max_number, bool) or int(max_number) < 1:
            raise ValueError(
                "MaxNumBoundingBoxes: `max_number` must be a positive integer. Received: "
                f"max_number={max_number!r}"
            )
        data_format = kwargs.pop("data_format", None)
        super().__init__(data_format=data_format, **kwargs)
        self.max_number = int(max_number)
        self.fill_value = int(fill_value)
        self.bounding_box_format = bounding_box_format

    def call(self, inputs, training=True):
        if not isinstance(inputs, dict):
            return ops.convert_to_tensor(inputs)
        out = dict(inputs)
        if "bounding_boxes" not in inputs:
            return out
        if not self.bounding_box_format:
            raise ValueError(
                "MaxNumBoundingBoxes: an input with a 'bounding_boxes' key needs a bounding "
                "box format. Pass `bounding_box_format` (e.g. 'xyxy') to the layer."
            )
        boxes_in = dict(inputs["bounding_boxes"])
        extra = set(boxes_in) - {"boxes", "labels"}
        if extra:
            raise KeyError(
                f"MaxNumBoundingBoxes: unsupported keys in `bounding_boxes`: {sorted(extra)}. "
                "Only `boxes` and `labels` are supported."
            )
        boxes = ops.convert_to_tensor(boxes_in["boxes"])
        labels = ops.convert_to_tensor(boxes_in["labels"])
        batched = boxes.ndim == 3
        if not batched:
            boxes, labels = ops.expand_dims(boxes, 0), ops.expand_dims(labels, 0)
        boxes, labels = self._pad(boxes), self._pad(labels)
        if not batched:
            boxes, labels = ops.squeeze(boxes, 0), ops.squeeze(labels, 0)
        out["bounding_boxes"] = {**boxes_in, "boxes": boxes, "labels": labels}
        return out

    def _pad(self, x):
        x = x[:, : self.max_number]
        missing = self.max_number - x.shape[1]
        if missing > 0:
            widths = [(0, 0), (0, missing)] + [(0, 0)] * (x.ndim - 2)
            x = ops.pad(x, widths, constant_values=self.fill_value)
        return x

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, dict) and "bounding_boxes" in input_shape:
            shape = dict(input_shape)
            boxes = dict(shape["bounding_boxes"])
            for key in ("boxes", "labels"):
                s = list(boxes[key])
                s[-2 if key == "boxes" else -1] = self.max_number
                boxes[key] = tuple(s)
            shape["bounding_boxes"] = boxes
            return shape
        return input_shape

    def compute_output_spec(self, inputs, training=None):
        if isinstance(inputs, dict):
            shapes = self.compute_output_shape(
                {
                    k: (
                        {kk: tuple(vv.shape) for kk, vv in v.items()}
                        if isinstance(v, dict)
                        else tuple(v.shape)
                    )
                    for k, v in inputs.items()
                }
            )
            return {
                k: (
                    {kk: KerasTensor(s, v[kk].dtype) for kk, s in shapes[k].items()}
                    if isinstance(v, dict)
                    else KerasTensor(shapes[k], v.dtype)
                )
                for k, v in inputs.items()
            }
        return KerasTensor(tuple(inputs.shape), inputs.dtype)

    def get_config(self):
        config = {**super().get_config(), "max_number": self.max_number}
        # Keras 3.15 keeps `fill_value` out of the config; it is kept here so it round-trips.
        config["fill_value"] = self.fill_value
        if self.bounding_box_format is not None:
            config["bounding_box_format"] = self.bounding_box_format
        return config
