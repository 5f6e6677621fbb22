"""`tf.image` (TF1): the ops of the CIFAR-10 input pipeline, with TF's signatures.

Images are HWC (one image) or NHWC (a batch). The random ops draw in the session on each
run (seeded by the graph seed and `seed`, as `tf.random_uniform`); a batch is distorted image
by image, as TF does.

Example:
    >>> import numpy as np
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default(), tf.Session() as sess:
    ...     img = tf.constant(np.arange(12.0).reshape(2, 2, 3), tf.float32)
    ...     print(sess.run(tf.image.per_image_standardization(img)).std().round(3))
    1.0
"""

from __future__ import annotations

import math

from keratron import ops as kops
from keratron import random as krandom
from keratron.compat.v1 import array_ops
from keratron.compat.v1.framework import TensorShape, convert_to_tensor, make_op, op_scope

__all__ = [
    "ResizeMethod",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "flip_left_right",
    "flip_up_down",
    "random_brightness",
    "adjust_brightness",
    "random_contrast",
    "adjust_contrast",
    "per_image_standardization",
    "resize_images",
    "resize_image_with_crop_or_pad",
]


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _image(image, what):
    x = convert_to_tensor(image, name="image")
    if x.shape.ndims not in (None, 3, 4):
        raise ValueError(
            f"{what}: 'image' must be 3-D (height, width, channels) or 4-D (batch, height, "
            f"width, channels). Received: shape={x.shape}"
        )
    return x


def _op(op_type, name, default, inputs, lower, out_specs=None):
    with op_scope(name, default) as scope:
        return make_op(op_type, scope, inputs, lower, out_specs).outputs[0]


def _per_image(x, fn):
    """`fn(image)` on a HWC image, or on each image of a NHWC batch."""
    if x.ndim == 3:
        return fn(x)
    return kops.stack([fn(x[i]) for i in range(x.shape[0])], axis=0)


# ---------------------------------------------------------------------------- crops and flips
def random_crop(value, size, seed=None, name=None):
    """A `size` window of `value` at a uniformly random offset (any rank).

    Raises:
        ValueError: `size` has another rank than `value` or exceeds its shape.
    """
    size = [int(s) for s in size]
    x = convert_to_tensor(value, name="value")
    dims = x.shape.dims
    if dims is not None and (
        len(dims) != len(size) or any(d is not None and s > d for d, s in zip(dims, size))
    ):
        raise ValueError(
            f"random_crop: 'size' must have the rank of 'value' and fit in its shape. "
            f"Received: size={size}, value.shape={x.shape}"
        )
    gen = array_ops._seed(seed)

    def lower(ctx, v):
        out = v
        for axis, s in enumerate(size):
            extent = v.shape[axis]
            if s == extent:
                continue
            off = krandom.randint((1,), 0, extent - s + 1, dtype="int32", seed=gen)
            out = kops.take(out, off + kops.arange(s, dtype="int32"), axis=axis)
        return out

    return _op("RandomCrop", name, "random_crop", [x], lower, [(size, x.dtype)])


def _flip(axis_3d, random, default):
    def op(image, seed=None, name=None):
        x = _image(image, default)
        gen = array_ops._seed(seed) if random else None

        def lower(ctx, v):
            def one(img):
                flipped = kops.flip(img, axis=axis_3d)
                if not random:
                    return flipped
                u = krandom.uniform((), dtype="float32", seed=gen)
                return kops.where(u < 0.5, flipped, img)

            return _per_image(v, one)

        return _op("ReverseV2", name, default, [x], lower, [(x.shape, x.dtype)])

    op.__name__ = default
    return op


flip_left_right = _flip(1, False, "flip_left_right")
flip_left_right.__doc__ = "Reverses the width axis of an image or of each image of a batch."
flip_up_down = _flip(0, False, "flip_up_down")
flip_up_down.__doc__ = "Reverses the height axis of an image or of each image of a batch."
random_flip_left_right = _flip(1, True, "random_flip_left_right")
random_flip_left_right.__doc__ = "Flips left-right with probability 1/2 (each image of a batch)."
random_flip_up_down = _flip(0, True, "random_flip_up_down")
random_flip_up_down.__doc__ = "Flips up-down with probability 1/2 (each image of a batch)."


# ---------------------------------------------------------------------------- color
def adjust_brightness(image, delta):
    """`image + delta` (float images; no clipping, as TF)."""
    x = _image(image, "adjust_brightness")
    d = convert_to_tensor(delta, dtype=x.dtype, name="delta")
    return _op("AdjustBrightness", None, "adjust_brightness", [x, d], lambda c, v, t: v + t)


def random_brightness(image, max_delta, seed=None):
    """`image + delta`, delta uniform in [-max_delta, max_delta) per run.

    Raises:
        ValueError: `max_delta` is negative.
    """
    if max_delta < 0:
        raise ValueError(
            f"random_brightness: 'max_delta' must be non-negative. Received: {max_delta}"
        )
    x = _image(image, "random_brightness")
    gen = array_ops._seed(seed)

    def lower(ctx, v):
        return v + krandom.uniform((), -max_delta, max_delta, dtype=v.dtype, seed=gen)

    return _op("AdjustBrightness", None, "random_brightness", [x], lower, [(x.shape, x.dtype)])


def _contrast(v, factor):
    mean = kops.mean(v, axis=(-3, -2), keepdims=True)
    return (v - mean) * factor + mean


def adjust_contrast(images, contrast_factor):
    """`(x - mean) * contrast_factor + mean`, the mean per channel of each image."""
    x = _image(images, "adjust_contrast")
    f = convert_to_tensor(contrast_factor, dtype=x.dtype, name="contrast_factor")
    return _op("AdjustContrastv2", None, "adjust_contrast", [x, f], lambda c, v, t: _contrast(v, t))


def random_contrast(image, lower, upper, seed=None):
    """`adjust_contrast` by a factor uniform in [lower, upper) per run.

    Raises:
        ValueError: `upper <= lower` or `lower < 0`.
    """
    if upper <= lower:
        raise ValueError(f"random_contrast: 'upper' must be > 'lower'. Received: {lower}, {upper}")
    if lower < 0:
        raise ValueError(f"random_contrast: 'lower' must be non-negative. Received: {lower}")
    x = _image(image, "random_contrast")
    gen = array_ops._seed(seed)

    def lo(ctx, v):
        return _contrast(v, krandom.uniform((), lower, upper, dtype=v.dtype, seed=gen))

    return _op("AdjustContrastv2", None, "random_contrast", [x], lo, [(x.shape, x.dtype)])


def per_image_standardization(image):
    """`(x - mean) / max(stddev, 1 / sqrt(N))` over the N values of each image."""
    x = _image(image, "per_image_standardization")

    def lower(ctx, v):
        v = v if v.dtype in ("float16", "float32", "float64") else kops.cast(v, "float32")
        n = math.prod(v.shape[-3:])
        mean = kops.mean(v, axis=(-3, -2, -1), keepdims=True)
        std = kops.sqrt(kops.mean(kops.square(v - mean), axis=(-3, -2, -1), keepdims=True))
        return (v - mean) / kops.maximum(std, 1.0 / math.sqrt(n))

    dt = x.dtype if x.dtype.is_floating else "float32"
    return _op(
        "PerImageStandardization", None, "per_image_standardization", [x], lower, [(x.shape, dt)]
    )


# ---------------------------------------------------------------------------- resizing
def _axis_resize(v, axis, out_size, nearest):
    """TF1's resize along one axis: source coordinate `i * in / out` (no half-pixel shift,
    corners not aligned); nearest takes its floor, bilinear blends floor and floor + 1."""
    n = v.shape[axis]
    if n == out_size:
        return v
    scale = n / out_size
    src = [i * scale for i in range(out_size)]
    lo = [min(int(math.floor(p)), n - 1) for p in src]
    take = kops.take(v, kops.convert_to_tensor(lo, dtype="int32"), axis=axis)
    if nearest:
        return take
    hi = [min(i + 1, n - 1) for i in lo]
    shape = [1] * v.ndim
    shape[axis] = out_size
    frac = kops.reshape(kops.convert_to_tensor([p - i for p, i in zip(src, lo)], v.dtype), shape)
    return take + (kops.take(v, kops.convert_to_tensor(hi, dtype="int32"), axis=axis) - take) * frac


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):  # fmt: skip
    """Resizes to `size` = (new_height, new_width) as TF1 does (`align_corners=False`,
    no half-pixel centers); BILINEAR and NEAREST_NEIGHBOR.

    Raises:
        ValueError: another `method`, or `align_corners` / `preserve_aspect_ratio`.
    """
    if method not in (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR):
        raise ValueError(
            "resize_images: 'method' must be ResizeMethod.BILINEAR or NEAREST_NEIGHBOR. "
            f"Received: method={method!r}"
        )
    if align_corners or preserve_aspect_ratio:
        raise ValueError(
            "resize_images: align_corners=True and preserve_aspect_ratio=True are not supported."
        )
    h, w = (int(s) for s in size)
    x = _image(images, "resize_images")
    nearest = method == ResizeMethod.NEAREST_NEIGHBOR

    def lower(ctx, v):
        if not nearest and v.dtype not in ("float32", "float64"):
            v = kops.cast(v, "float32")
        return _axis_resize(_axis_resize(v, v.ndim - 3, h, nearest), v.ndim - 2, w, nearest)

    dims = x.shape.dims
    shape = TensorShape(None) if dims is None else TensorShape(dims[:-3] + [h, w, dims[-1]])
    dt = x.dtype if nearest or x.dtype.is_floating else "float32"
    return _op("ResizeBilinear", name, "resize", [x], lower, [(shape, dt)])


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centrally crops or zero-pads an image (or batch) to the target height and width."""
    x = _image(image, "resize_image_with_crop_or_pad")
    th, tw = int(target_height), int(target_width)

    def fit(v, axis, target):
        size = v.shape[axis]
        if size > target:
            off = (size - target) // 2
            return kops.take(v, kops.arange(off, off + target, dtype="int32"), axis=axis)
        if size < target:
            before = (target - size) // 2
            pads = [(0, 0)] * v.ndim
            pads[axis] = (before, target - size - before)
            return kops.pad(v, pads)
        return v

    def lower(ctx, v):
        return fit(fit(v, v.ndim - 3, th), v.ndim - 2, tw)

    dims = x.shape.dims
    shape = TensorShape(None) if dims is None else TensorShape(dims[:-3] + [th, tw, dims[-1]])
    return _op(
        "ResizeImageWithCropOrPad",
        None,
        "resize_image_with_crop_or_pad",
        [x],
        lower,
        [(shape, x.dtype)],
    )
