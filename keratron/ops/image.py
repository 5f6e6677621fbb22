"""`keras.ops.image`: resizing, geometric transforms, colour conversions, padding/cropping,
patches, filters and SSIM, on `channels_last` (default) or `channels_first` images.

Resampling is written as products with small constant interpolation matrices (resize,
scale_and_translate) or as gathers with interpolation weights (affine and perspective
transforms, map_coordinates), so every op here is differentiable in its image input, and the
transforms also in their coefficients.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from keratron import config
from keratron.autodiff.tensor import Tensor
from keratron.ops._core import as_tensor
from keratron.ops.convolution import conv, depthwise_conv
from keratron.ops.elementwise import (
    _float,
    abs,
    add,
    cast,
    clip,
    divide,
    equal,
    floor,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    maximum,
    minimum,
    mod,
    multiply,
    round,
    sin,
    square,
    subtract,
    where,
)
from keratron.ops.linalg import _promote, matmul, solve
from keratron.ops.reduction import mean, sum
from keratron.ops.shaping import (
    _const,
    _home,
    concatenate,
    expand_dims,
    get_item,
    moveaxis,
    pad,
    reshape,
    squeeze,
    stack,
    take_p,
    transpose,
)

__all__ = [
    "resize",
    "affine_transform",
    "perspective_transform",
    "map_coordinates",
    "scale_and_translate",
    "rgb_to_grayscale",
    "rgb_to_hsv",
    "hsv_to_rgb",
    "pad_images",
    "crop_images",
    "extract_patches",
    "extract_patches_3d",
    "gaussian_blur",
    "sobel_edges",
    "ssim",
    "elastic_transform",
]

# Sampling lives in keratron.random, a layer above ops (ARCHITECTURE decision 1): it installs
# its seed check and normal draw here when imported, as ops installs the gradient engine's
# primitives; `import keratron` imports it, so both are in place before any call.
_sampler: dict = {}


def install_sampler(*, check_seed, normal) -> None:
    """Installs what the random image ops (`elastic_transform`) draw with.

    Args:
        check_seed: `check_seed(seed, op)` validates an int / SeedGenerator / None seed and
            returns it, raising `ValueError` naming `op` otherwise.
        normal: `normal(shape, stddev=, dtype=, seed=)` draws normal noise.
    """
    _sampler.update(check_seed=check_seed, normal=normal)


def _sampling(name: str):
    if name not in _sampler:
        raise RuntimeError(
            "keratron.ops.image: the random image ops need keratron.random; `import keratron`."
        )
    return _sampler[name]


def _to_last(x: Tensor, fmt: str, batched: bool) -> Tensor:
    if not batched:
        x = expand_dims(x, 0)
    return moveaxis(x, 1, -1) if fmt == "channels_first" else x


def _from_last(y: Tensor, fmt: str, batched: bool) -> Tensor:
    if fmt == "channels_first":
        y = moveaxis(y, -1, 1)
    return y if batched else squeeze(y, 0)


def _prepare(images, data_format, op, spatial=2):
    x = as_tensor(images)
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(
            f"{op}: images must have rank {spatial + 1} (one image) or {spatial + 2} (a batch). "
            f"Received shape {x.shape}."
        )
    fmt = config.standardize_data_format(data_format)
    batched = x.ndim == spatial + 2
    return _to_last(x, fmt, batched), fmt, batched


def _restore_dtype(y: Tensor, dtype: str) -> Tensor:
    if y.dtype == dtype:
        return y
    if dtype.startswith(("int", "uint")):
        y = round(y)  # round before casting back to integers
    return cast(y, dtype)


# ------------------------------------------------------------------------------ colour
def rgb_to_grayscale(images, data_format=None):
    """Luma `0.2989 R + 0.587 G + 0.114 B`, keeping a channel axis of size 1 (a 1-channel
    input is returned as is).

    Example:
        >>> keratron.ops.image.rgb_to_grayscale(keratron.ops.ones((4, 4, 3))).shape
        (4, 4, 1)
    """
    x, fmt, batched = _prepare(images, data_format, "rgb_to_grayscale")
    c = x.shape[-1]
    if c not in (1, 3):
        raise ValueError(
            "rgb_to_grayscale: expected 3 (RGB) or 1 channels. Received shape "
            f"{as_tensor(images).shape}."
        )
    if c == 1:
        return as_tensor(images)
    dtype = x.dtype
    w = _const(np.array([0.2989, 0.587, 0.114]), x, dtype=_float(x)._value.dtype)
    y = expand_dims(sum(multiply(_float(x), w), axis=-1), -1)
    return _from_last(cast(y, dtype), fmt, batched)


def _check_float(x: Tensor, op: str):
    if not x._value.dtype.is_floating_point:
        raise ValueError(f"{op}: images must have a float dtype. Received {x.dtype}.")


def rgb_to_hsv(images, data_format=None):
    """RGB in [0, 1] to hue, saturation, value in [0, 1].

    Example:
        >>> keratron.ops.image.rgb_to_hsv([[[1.0, 0.0, 0.0]]]).numpy()
        array([[[0., 1., 1.]]], dtype=float32)
    """
    x, fmt, batched = _prepare(images, data_format, "rgb_to_hsv")
    _check_float(x, "rgb_to_hsv")
    eps = torch.finfo(x._value.dtype).eps
    x = where(less(abs(x), eps), 0.0, x)
    r, g, b = (get_item(x, (Ellipsis, i)) for i in range(3))
    value = maximum(maximum(r, g), b)
    rng = subtract(value, minimum(minimum(r, g), b))
    safe_v = where(greater(value, 0), value, 1.0)
    safe_r = where(greater(rng, 0), rng, 1.0)
    sat = where(greater(value, 0), divide(rng, safe_v), 0.0)
    norm = divide(1.0, multiply(safe_r, 6.0))
    hue = where(
        equal(value, g),
        add(multiply(norm, subtract(b, r)), 2.0 / 6.0),
        add(multiply(norm, subtract(r, g)), 4.0 / 6.0),
    )
    hue = where(equal(value, r), multiply(norm, subtract(g, b)), hue)
    hue = add(where(greater(rng, 0), hue, 0.0), cast(less(hue, 0.0), hue.dtype))
    return _from_last(stack([hue, sat, value], axis=-1), fmt, batched)


def hsv_to_rgb(images, data_format=None):
    """Hue, saturation, value in [0, 1] to RGB.

    Example:
        >>> keratron.ops.image.hsv_to_rgb([[[0.0, 1.0, 1.0]]]).numpy()
        array([[[1., 0., 0.]]], dtype=float32)
    """
    x, fmt, batched = _prepare(images, data_format, "hsv_to_rgb")
    _check_float(x, "hsv_to_rgb")
    h, s, v = (get_item(x, (Ellipsis, i)) for i in range(3))
    dh = multiply(mod(h, 1.0), 6.0)
    dr = clip(subtract(abs(subtract(dh, 3.0)), 1.0), 0.0, 1.0)
    dg = clip(subtract(2.0, abs(subtract(dh, 2.0))), 0.0, 1.0)
    db = clip(subtract(2.0, abs(subtract(dh, 4.0))), 0.0, 1.0)
    one_minus_s = subtract(1.0, s)
    rgb = [multiply(v, add(one_minus_s, multiply(s, d))) for d in (dr, dg, db)]
    return _from_last(stack(rgb, axis=-1), fmt, batched)


# ------------------------------------------------------------------------------ resize
_RESIZE_METHODS = ("nearest", "bilinear", "bicubic")


def _cubic(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _resize_matrix(n_in: int, n_out: int, method: str, antialias: bool) -> np.ndarray:
    """(n_out, n_in) interpolation weights with torch's half-pixel conventions."""
    scale = n_in / n_out
    w = np.zeros((n_out, n_in))
    centers = scale * (np.arange(n_out) + 0.5)
    if method == "nearest":  # torch's "nearest-exact"
        src = np.minimum(np.floor(centers).astype(int), n_in - 1)
        w[np.arange(n_out), src] = 1.0
        return w
    if antialias:
        # A filter widened by the scale when shrinking, normalized over its support.
        base = 1.0 if method == "bilinear" else 2.0
        support = base * scale if scale >= 1.0 else base
        inv = 1.0 / scale if scale >= 1.0 else 1.0
        for i, c in enumerate(centers):
            lo = builtin_max(int(c - support + 0.5), 0)
            hi = builtin_min(int(c + support + 0.5), n_in)
            j = np.arange(lo, hi)
            t = (j - c + 0.5) * inv
            k = np.maximum(0.0, 1.0 - np.abs(t)) if method == "bilinear" else _cubic(t, -0.5)
            w[i, lo:hi] = k / k.sum()
        return w
    src = centers - 0.5
    if method == "bilinear":
        src = np.maximum(src, 0.0)
        i0 = np.floor(src).astype(int)
        frac = src - i0
        i0 = np.minimum(i0, n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        np.add.at(w, (np.arange(n_out), i0), 1.0 - frac)
        np.add.at(w, (np.arange(n_out), i1), frac)
        return w
    # Bicubic (a = -0.75) on four taps, borders replicated.
    i0 = np.floor(src).astype(int)
    frac = src - i0
    for tap in range(-1, 3):
        idx = np.clip(i0 + tap, 0, n_in - 1)
        np.add.at(w, (np.arange(n_out), idx), _cubic(frac - tap, -0.75))
    return w


builtin_max, builtin_min = max, min


def _apply_along(x: Tensor, axis: int, w: np.ndarray) -> Tensor:
    """Resamples `axis` of x with an (out, in) matrix."""
    m = _const(w.T, x, dtype=x._value.dtype)
    return moveaxis(matmul(moveaxis(x, axis, -1), m), -1, axis)


def resize(
    images,
    size,
    interpolation="bilinear",
    antialias=False,
    crop_to_aspect_ratio=False,
    pad_to_aspect_ratio=False,
    fill_mode="constant",
    fill_value=0.0,
    data_format=None,
):
    """Resizes images to `size = (height, width)` with half-pixel sampling, as
    `torch.nn.functional.interpolate` (align_corners=False; "nearest" is "nearest-exact").

    Args:
        images: `(H, W, C)` or `(N, H, W, C)` (or channels_first).
        size: `(height, width)`.
        interpolation: "nearest", "bilinear" or "bicubic".
        antialias: widen the filter when downsampling (bilinear and bicubic).
        crop_to_aspect_ratio: crop the largest centred window of the target aspect ratio
            first.
        pad_to_aspect_ratio: pad the short side evenly with `fill_value` first.
        fill_mode: must be "constant".
        fill_value: padding value for `pad_to_aspect_ratio`.
        data_format: "channels_last" or "channels_first"; default the global setting.

    Example:
        >>> keratron.ops.image.resize(keratron.ops.ones((2, 8, 8, 3)), (4, 5)).shape
        (2, 4, 5, 3)
    """
    if interpolation not in _RESIZE_METHODS:
        raise ValueError(
            f"resize: interpolation must be one of {_RESIZE_METHODS}. Received: "
            f"interpolation={interpolation!r}"
        )
    if fill_mode != "constant":
        raise ValueError(f"resize: only fill_mode='constant' is supported. Received {fill_mode!r}")
    if crop_to_aspect_ratio and pad_to_aspect_ratio:
        raise ValueError("resize: crop_to_aspect_ratio and pad_to_aspect_ratio exclude each other.")
    if len(size) != 2:
        raise ValueError(f"resize: size must be (height, width). Received: size={size!r}")
    th, tw = int(size[0]), int(size[1])
    if th < 1 or tw < 1:
        raise ValueError(f"resize: size must be positive. Received: size={size!r}")
    x, fmt, batched = _prepare(images, data_format, "resize")
    dtype = x.dtype
    if dtype not in ("float32", "float64"):
        x = cast(x, "float32")
    h, w = x.shape[1], x.shape[2]
    if crop_to_aspect_ratio:
        ch = builtin_max(builtin_min(h, int(w * th / tw)), 1)
        cw = builtin_max(builtin_min(w, int(h * tw / th)), 1)
        top, left = int((h - ch) / 2), int((w - cw) / 2)
        x = get_item(x, (slice(None), slice(top, top + ch), slice(left, left + cw)))
    elif pad_to_aspect_ratio:
        ph = builtin_max(h, int(w * th / tw))
        pw = builtin_max(w, int(h * tw / th))
        top, left = int((ph - h) / 2), int((pw - w) / 2)
        x = pad(x, [(0, 0), (top, top), (left, left), (0, 0)], constant_values=fill_value)
    h, w = x.shape[1], x.shape[2]
    aa = bool(antialias) and interpolation != "nearest"
    if interpolation == "nearest":
        rows = _resize_matrix(h, th, "nearest", False).argmax(1)
        cols = _resize_matrix(w, tw, "nearest", False).argmax(1)
        y = take_p.bind(take_p.bind(x, _const(rows, x), axis=1), _const(cols, x), axis=2)
    else:
        y = _apply_along(x, 1, _resize_matrix(h, th, interpolation, aa))
        y = _apply_along(y, 2, _resize_matrix(w, tw, interpolation, aa))
    if interpolation == "bicubic" and dtype == "uint8":
        y = clip(y, 0.0, 255.0)
    return _from_last(_restore_dtype(y, dtype), fmt, batched)


# ------------------------------------------------------------------------------ sampling
_FILL_MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def _fix_index(idx: Tensor, size: int, mode: str) -> Tensor:
    """Maps (float-valued) integer indices into [0, size) according to `mode`."""
    if mode in ("constant", "nearest"):
        return clip(idx, 0, size - 1)
    if mode == "wrap":
        return mod(idx, size)
    if size == 1:
        return multiply(idx, 0)

    def mirror(i, n):
        s = n - 1  # a triangle wave of half-period s
        return abs(subtract(mod(add(i, s), 2 * s), s))

    if mode == "mirror":
        return mirror(idx, size)
    # reflect: the edge pixel repeats (d c b a | a b c d | d c b a).
    return floor_divide(subtract(mirror(add(multiply(idx, 2), 1), 2 * size + 1), 1), 2)


def _nodes(coord: Tensor, order: int):
    if order == 0:
        return [(round(coord), None)]
    lo = floor(coord)
    frac = subtract(coord, lo)
    return [(lo, subtract(1.0, frac)), (add(lo, 1.0), frac)]


def _sample(flat: Tensor, coords, sizes, order, fill_mode, fill_value):
    """Interpolates `flat` (prod(sizes), ...) at coordinate tensors (one per spatial axis,
    all of one shape); returns (*coord_shape, ...)."""
    per_axis = []
    for c, n in zip(coords, sizes):
        per_axis.append(
            [
                (_fix_index(i, n, fill_mode), _inside(i, n, fill_mode), wgt)
                for i, wgt in _nodes(c, order)
            ]
        )
    strides = [int(np.prod(sizes[k + 1 :])) for k in range(len(sizes))]
    extra = flat.ndim - 1
    total = None
    for combo in itertools.product(*per_axis):
        index = None
        weight = None
        valid = None
        for (fixed, ok, wgt), stride in zip(combo, strides):
            term = multiply(fixed, stride)
            index = term if index is None else add(index, term)
            if wgt is not None:
                weight = wgt if weight is None else multiply(weight, wgt)
            if ok is not None:
                valid = ok if valid is None else logical_and(valid, ok)
        vals = take_p.bind(flat, cast(index, "int64"), axis=0)
        if valid is not None:
            mask = reshape(valid, valid.shape + (1,) * extra)
            vals = where(mask, vals, cast(as_tensor(fill_value), vals.dtype))
        if weight is not None:
            vals = multiply(vals, reshape(weight, weight.shape + (1,) * extra))
        total = vals if total is None else add(total, vals)
    return total


def _inside(idx, n, mode):
    if mode != "constant":
        return None
    return logical_and(greater_equal(idx, 0), less(idx, n))


def map_coordinates(inputs, coordinates, order, fill_mode="constant", fill_value=0):
    """Samples `inputs` at fractional `coordinates` (one array per input axis, all of the
    output's shape), with nearest (`order=0`) or linear (`order=1`) interpolation, as
    scipy.ndimage.map_coordinates.

    Args:
        inputs: N-D tensor.
        coordinates: N arrays (or an (N, ...) array) of sample positions.
        order: 0 or 1.
        fill_mode: "constant", "nearest", "wrap", "mirror" or "reflect".
        fill_value: value outside the input for "constant".

    Example:
        >>> x = keratron.ops.convert_to_tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> keratron.ops.image.map_coordinates(x, [[0.5], [0.5]], order=1).numpy()
        array([1.5], dtype=float32)
    """
    x = as_tensor(inputs)
    if order not in (0, 1):
        raise ValueError(f"map_coordinates: order must be 0 or 1. Received: order={order!r}")
    if fill_mode not in _FILL_MODES:
        raise ValueError(
            f"map_coordinates: fill_mode must be one of {_FILL_MODES}. Received {fill_mode!r}"
        )
    coords = [as_tensor(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError(
            f"map_coordinates: need one coordinate array per input axis ({x.ndim}). Received "
            f"{len(coords)}."
        )
    if coords[0].ndim < 1:
        raise ValueError("map_coordinates: coordinate arrays must have rank >= 1.")
    dtype = x.dtype
    xf = _float(x)
    coords = [cast(c, xf.dtype) if not c._value.dtype.is_floating_point else c for c in coords]
    out = _sample(reshape(xf, (-1,)), coords, x.shape, order, fill_mode, fill_value)
    return _restore_dtype(out, dtype)


def _warp(x: Tensor, transforms: Tensor, order, fill_mode, fill_value):
    """x: (B, H, W, C); transforms: (B, 8) mapping output (x, y) to input coordinates."""
    b, h, w, c = x.shape
    t = cast(transforms, x.dtype)
    ys = _const(np.arange(h)[:, None] * np.ones((1, w)), x, dtype=x._value.dtype)
    xs = _const(np.ones((h, 1)) * np.arange(w)[None, :], x, dtype=x._value.dtype)

    def coef(i):
        return reshape(get_item(t, (slice(None), i)), (b, 1, 1))

    k = add(add(multiply(coef(6), xs), multiply(coef(7), ys)), 1.0)
    x_in = divide(add(add(multiply(coef(0), xs), multiply(coef(1), ys)), coef(2)), k)
    y_in = divide(add(add(multiply(coef(3), xs), multiply(coef(4), ys)), coef(5)), k)
    return _gather_field(x, y_in, x_in, order, fill_mode, fill_value)


_AFFINE_METHODS = {"nearest": 0, "bilinear": 1}


def affine_transform(
    images,
    transform,
    interpolation="bilinear",
    fill_mode="constant",
    fill_value=0,
    data_format=None,
):
    """Applies projective transforms `[a0, a1, a2, b0, b1, b2, c0, c1]` (one per image or
    one for all): output pixel (x, y) reads input `((a0 x + a1 y + a2) / k,
    (b0 x + b1 y + b2) / k)` with `k = c0 x + c1 y + 1`.

    Example:
        >>> img = keratron.ops.ones((1, 4, 4, 1))
        >>> shift = [1.0, 0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        >>> keratron.ops.image.affine_transform(img, shift).numpy()[0, 0, :, 0]
        array([0., 1., 1., 1.], dtype=float32)
    """
    if interpolation not in _AFFINE_METHODS:
        raise ValueError(
            f"affine_transform: interpolation must be 'nearest' or 'bilinear'. Received "
            f"{interpolation!r}"
        )
    if fill_mode not in _FILL_MODES:
        raise ValueError(
            f"affine_transform: fill_mode must be one of {_FILL_MODES}. Received {fill_mode!r}"
        )
    x, fmt, batched = _prepare(images, data_format, "affine_transform")
    t = _float(transform)
    if t.ndim not in (1, 2) or t.shape[-1] != 8:
        raise ValueError(
            f"affine_transform: transform must be (8,) or (batch, 8). Received {t.shape}."
        )
    if t.ndim == 1:
        t = expand_dims(t, 0)
    if t.shape[0] not in (1, x.shape[0]):
        raise ValueError(
            f"affine_transform: {t.shape[0]} transforms for a batch of {x.shape[0]} images."
        )
    dtype = x.dtype
    xf = _float(x)
    if t.shape[0] == 1 and x.shape[0] > 1:
        t = concatenate([t] * x.shape[0], axis=0)
    y = _warp(xf, t, _AFFINE_METHODS[interpolation], fill_mode, fill_value)
    return _from_last(_restore_dtype(y, dtype), fmt, batched)


def _homography(start: Tensor, end: Tensor) -> Tensor:
    """Coefficients (B, 8) of the projective map taking `end` points to `start` points."""
    ex, ey = get_item(end, (Ellipsis, 0)), get_item(end, (Ellipsis, 1))
    sx, sy = get_item(start, (Ellipsis, 0)), get_item(start, (Ellipsis, 1))
    one, zero = add(multiply(ex, 0), 1.0), multiply(ex, 0)
    rows = []
    for i in range(4):

        def p(t, i=i):
            return get_item(t, (slice(None), i))

        rows.append(
            stack(
                [
                    p(ex),
                    p(ey),
                    p(one),
                    p(zero),
                    p(zero),
                    p(zero),
                    multiply(negative_(p(sx)), p(ex)),
                    multiply(negative_(p(sx)), p(ey)),
                ],
                -1,
            )
        )
        rows.append(
            stack(
                [
                    p(zero),
                    p(zero),
                    p(zero),
                    p(ex),
                    p(ey),
                    p(one),
                    multiply(negative_(p(sy)), p(ex)),
                    multiply(negative_(p(sy)), p(ey)),
                ],
                -1,
            )
        )
    a = stack(rows, axis=1)  # (B, 8, 8)
    rhs = stack([get_item(start, (slice(None), i // 2, i % 2)) for i in range(8)], axis=-1)
    return solve(a, rhs)


def negative_(x):
    return multiply(x, -1.0)


def perspective_transform(
    images,
    start_points,
    end_points,
    interpolation="bilinear",
    fill_value=0,
    data_format=None,
):
    """Warps images so that the four `start_points` (x, y) land on `end_points`.

    Example:
        >>> pts = [[0.0, 0.0], [3.0, 0.0], [0.0, 3.0], [3.0, 3.0]]
        >>> img = keratron.ops.ones((4, 4, 1))
        >>> keratron.ops.image.perspective_transform(img, pts, pts).shape
        (4, 4, 1)
    """
    s, e = _promote(_float(start_points), _float(end_points))
    if s.shape != e.shape or s.shape[-2:] != (4, 2) or s.ndim not in (2, 3):
        raise ValueError(
            "perspective_transform: start_points and end_points must both be (4, 2) or "
            f"(batch, 4, 2). Received {s.shape} and {e.shape}."
        )
    if s.ndim == 2:
        s, e = expand_dims(s, 0), expand_dims(e, 0)
    compute = "float64" if s.dtype == "float64" else "float32"
    coeffs = _homography(cast(s, compute), cast(e, compute))
    return affine_transform(
        images, coeffs, interpolation, "constant", fill_value, data_format=data_format
    )


_SCALE_METHODS = {
    "linear": "linear",
    "bilinear": "linear",
    "trilinear": "linear",
    "triangle": "linear",
    "cubic": "cubic",
    "bicubic": "cubic",
    "tricubic": "cubic",
    "lanczos3": "lanczos3",
    "lanczos5": "lanczos5",
}


def _kernel(name, x):
    if name == "linear":
        return maximum(subtract(1.0, x), 0.0)
    if name == "cubic":  # Keys, a = -0.5
        near = add(multiply(multiply(subtract(multiply(x, 1.5), 2.5), x), x), 1.0)
        far = add(multiply(subtract(multiply(add(multiply(x, -0.5), 2.5), x), 4.0), x), 2.0)
        return where(less(x, 1.0), near, where(less(x, 2.0), far, 0.0))
    radius = 3.0 if name == "lanczos3" else 5.0
    y = multiply(multiply(sin(multiply(x, math.pi)), sin(multiply(x, math.pi / radius))), radius)
    small = less_equal(x, 1e-3)
    safe = where(small, 1.0, x)
    out = where(small, 1.0, divide(y, multiply(square(safe), math.pi**2)))
    return where(greater(x, radius), 0.0, out)


def _scale_weights(n_in, n_out, scale, translation, method, antialias, like):
    """(n_in, n_out) weights sampling output pixel centers back into the input."""
    inv = divide(1.0, scale)
    width = maximum(inv, 1.0) if antialias else 1.0
    out_pos = _const(np.arange(n_out) + 0.5, like, dtype=like._value.dtype)
    in_pos = _const(np.arange(n_in)[:, None], like, dtype=like._value.dtype)
    sample = subtract(subtract(multiply(out_pos, inv), multiply(translation, inv)), 0.5)
    w = _kernel(method, divide(abs(subtract(expand_dims(sample, 0), in_pos)), width))
    total = sum(w, axis=0, keepdims=True)
    ok = greater(abs(total), 1000.0 * float(np.finfo(np.float32).eps))
    w = where(ok, divide(w, where(equal(total, 0), 1.0, total)), 0.0)
    inside = logical_and(greater_equal(sample, -0.5), less_equal(sample, n_in - 0.5))
    return where(expand_dims(inside, 0), w, 0.0)


def scale_and_translate(
    images, output_shape, scale, translation, spatial_dims, method, antialias=True
):
    """Resamples `images` to `output_shape`: input location x maps to
    `x * scale + translation` along each of `spatial_dims`, as jax.image.scale_and_translate.

    Args:
        images: the input tensor.
        output_shape: the full output shape.
        scale, translation: one value per spatial dim.
        spatial_dims: the resampled axes.
        method: "linear"/"bilinear"/"trilinear"/"triangle", "cubic"/"bicubic"/"tricubic",
            "lanczos3" or "lanczos5".
        antialias: widen the kernel when downsampling.

    Example:
        >>> x = keratron.ops.ones((1, 4, 4, 1))
        >>> keratron.ops.image.scale_and_translate(
        ...     x, (1, 2, 2, 1), [0.5, 0.5], [0.0, 0.0], (1, 2), "linear").shape
        (1, 2, 2, 1)
    """
    if method not in _SCALE_METHODS:
        raise ValueError(
            f"scale_and_translate: method must be one of {sorted(_SCALE_METHODS)}. Received "
            f"{method!r}"
        )
    x = as_tensor(images)
    dtype = x.dtype
    y = _float(x)
    s = cast(as_tensor(scale), y.dtype)
    tr = cast(as_tensor(translation), y.dtype)
    dims = [int(d) % x.ndim for d in spatial_dims]
    if len(output_shape) != x.ndim:
        raise ValueError(
            f"scale_and_translate: output_shape must have rank {x.ndim}. Received {output_shape}."
        )
    for i, d in enumerate(dims):
        wmat = _scale_weights(
            x.shape[d],
            int(output_shape[d]),
            get_item(s, i),
            get_item(tr, i),
            _SCALE_METHODS[method],
            bool(antialias),
            y,
        )
        y = moveaxis(matmul(moveaxis(y, d, -1), wmat), -1, d)
    if dtype != y.dtype:
        y = clip(round(y), float(x._value.min()), float(x._value.max()))
        y = cast(y, dtype)
    return y


# ------------------------------------------------------------------------------ pad, crop
def _solve_extent(a, b, total, size, names, op):
    given = [v is None for v in (a, b, total)]
    if given.count(True) != 1:
        raise ValueError(
            f"{op}: give exactly two of {', '.join(names)}. Received: "
            + ", ".join(f"{n}={v}" for n, v in zip(names, (a, b, total)))
        )
    for n, v in zip(names, (a, b, total)):
        if v is not None and int(v) < 0:
            raise ValueError(f"{op}: {n} must be >= 0. Received: {n}={v}")
    return a, b, total


def pad_images(
    images,
    top_padding=None,
    left_padding=None,
    bottom_padding=None,
    right_padding=None,
    target_height=None,
    target_width=None,
    data_format=None,
):
    """Zero-pads images; give two of top/bottom/target height and two of
    left/right/target width.

    Example:
        >>> keratron.ops.image.pad_images(keratron.ops.ones((4, 4, 3)), 1, 2, 1, 2).shape
        (6, 8, 3)
    """
    x, fmt, batched = _prepare(images, data_format, "pad_images")
    h, w = x.shape[1], x.shape[2]
    top, bottom, th = _solve_extent(
        top_padding,
        bottom_padding,
        target_height,
        h,
        ("top_padding", "bottom_padding", "target_height"),
        "pad_images",
    )
    left, right, tw = _solve_extent(
        left_padding,
        right_padding,
        target_width,
        w,
        ("left_padding", "right_padding", "target_width"),
        "pad_images",
    )
    top = int(th) - int(bottom) - h if top is None else int(top)
    bottom = int(th) - top - h if bottom is None else int(bottom)
    left = int(tw) - int(right) - w if left is None else int(left)
    right = int(tw) - left - w if right is None else int(right)
    for n, v in (
        ("top_padding", top),
        ("bottom_padding", bottom),
        ("left_padding", left),
        ("right_padding", right),
    ):
        if v < 0:
            raise ValueError(
                f"pad_images: {n} must be >= 0 (the target is too small). Received {v}."
            )
    y = pad(x, [(0, 0), (top, bottom), (left, right), (0, 0)])
    return _from_last(y, fmt, batched)


def crop_images(
    images,
    top_cropping=None,
    left_cropping=None,
    bottom_cropping=None,
    right_cropping=None,
    target_height=None,
    target_width=None,
    data_format=None,
):
    """Crops images; give two of top/bottom/target height and two of left/right/target
    width.

    Example:
        >>> keratron.ops.image.crop_images(keratron.ops.ones((6, 8, 3)), 1, 2, 1, 2).shape
        (4, 4, 3)
    """
    x, fmt, batched = _prepare(images, data_format, "crop_images")
    h, w = x.shape[1], x.shape[2]
    top, bottom, th = _solve_extent(
        top_cropping,
        bottom_cropping,
        target_height,
        h,
        ("top_cropping", "bottom_cropping", "target_height"),
        "crop_images",
    )
    left, right, tw = _solve_extent(
        left_cropping,
        right_cropping,
        target_width,
        w,
        ("left_cropping", "right_cropping", "target_width"),
        "crop_images",
    )
    top = h - int(th) - int(bottom) if top is None else int(top)
    th = h - int(bottom) - top if th is None else int(th)
    left = w - int(tw) - int(right) if left is None else int(left)
    tw = w - int(right) - left if tw is None else int(tw)
    for n, v in (
        ("top_cropping", top),
        ("target_height", th),
        ("left_cropping", left),
        ("target_width", tw),
    ):
        if v < 0:
            raise ValueError(
                f"crop_images: {n} must be >= 0 (the crop is too large). Received {v}."
            )
    if top + th > h or left + tw > w:
        raise ValueError(
            f"crop_images: the crop ({top}+{th}, {left}+{tw}) exceeds the image ({h}, {w})."
        )
    y = get_item(x, (slice(None), slice(top, top + th), slice(left, left + tw)))
    return _from_last(y, fmt, batched)


# ------------------------------------------------------------------------------ patches
def _patches(images, size, strides, dilation_rate, padding, data_format, nsp, op):
    sizes = (int(size),) * nsp if isinstance(size, int) else tuple(int(s) for s in size)
    if len(sizes) != nsp:
        raise ValueError(f"{op}: size must be an int or {nsp} ints. Received: size={size!r}")
    x = as_tensor(images)
    if x.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(
            f"{op}: expected rank {nsp + 1} (one input) or {nsp + 2} (a batch). Received "
            f"shape {x.shape}."
        )
    fmt = config.standardize_data_format(data_format)
    batched = x.ndim == nsp + 2
    xb = x if batched else expand_dims(x, 0)
    c = xb.shape[-1] if fmt == "channels_last" else xb.shape[1]
    n = int(np.prod(sizes)) * c
    # One-hot kernel: output channel (spatial offset, channel) copies that input value, so
    # the channel order is Keras's (row-major over the patch, channels fastest).
    kernel = _const(np.eye(n).reshape(sizes + (c, n)), xb, dtype=_float(xb)._value.dtype)
    y = conv(
        _float(xb),
        kernel,
        strides=sizes if strides is None else strides,
        padding=padding,
        data_format=fmt,
        dilation_rate=dilation_rate,
    )
    y = y if batched else squeeze(y, 0)
    return _restore_dtype(y, x.dtype) if x.dtype != y.dtype else y


def extract_patches(images, size, strides=None, dilation_rate=1, padding="valid", data_format=None):
    """Extracts patches into the channel axis: `(N, H, W, C)` becomes
    `(N, H', W', ph * pw * C)`; a 3-tuple `size` extracts 3-D patches from volumes.

    Example:
        >>> keratron.ops.image.extract_patches(keratron.ops.ones((2, 20, 20, 3)), (5, 5)).shape
        (2, 4, 4, 75)
    """
    if not isinstance(size, int) and len(size) == 3:
        return extract_patches_3d(images, size, strides, dilation_rate, padding, data_format)
    return _patches(
        images, size, strides, dilation_rate, padding, data_format, 2, "extract_patches"
    )


def extract_patches_3d(
    volumes, size, strides=None, dilation_rate=1, padding="valid", data_format=None
):
    """Extracts 3-D patches from volumes `(N, D, H, W, C)` into
    `(N, D', H', W', pd * ph * pw * C)`.

    Example:
        >>> keratron.ops.image.extract_patches_3d(keratron.ops.ones((10, 10, 10, 3)), 3).shape
        (3, 3, 3, 81)
    """
    return _patches(
        volumes, size, strides, dilation_rate, padding, data_format, 3, "extract_patches_3d"
    )


# ------------------------------------------------------------------------------ filters
def _gauss1d(n: int, sigma: float) -> np.ndarray:
    t = np.arange(n) - (n - 1) / 2.0
    g = np.exp(-0.5 * (t / sigma) ** 2)
    return g / g.sum()


def gaussian_blur(images, kernel_size=(3, 3), sigma=(1.0, 1.0), data_format=None):
    """Gaussian blur per channel, zero-padded to keep the size (odd kernel sizes).

    Args:
        images: 3-D or 4-D images.
        kernel_size: (height, width) of the kernel.
        sigma: (height, width) standard deviations.
        data_format: "channels_last" or "channels_first".

    Example:
        >>> keratron.ops.image.gaussian_blur(keratron.ops.ones((1, 5, 5, 2))).shape
        (1, 5, 5, 2)
    """
    kh, kw = (int(k) for k in kernel_size)
    sh, sw = (float(s) for s in sigma)
    x, fmt, batched = _prepare(images, data_format, "gaussian_blur")
    dtype = x.dtype
    xf = _float(x)
    c = xf.shape[-1]
    k2 = np.outer(_gauss1d(kh, sh), _gauss1d(kw, sw))
    kernel = _const(
        np.broadcast_to(k2[:, :, None, None], (kh, kw, c, 1)).copy(), xf, dtype=xf._value.dtype
    )
    xp = pad(xf, [(0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)])
    y = depthwise_conv(xp, kernel, padding="valid", data_format="channels_last")
    return _from_last(_restore_dtype(y, dtype), fmt, batched)


def sobel_edges(images, data_format=None):
    """Sobel gradients per channel (zero-padded), stacked as `[d/dy, d/dx]` in a new last
    axis: `(N, H, W, C)` becomes `(N, H, W, C, 2)`.

    Example:
        >>> keratron.ops.image.sobel_edges(keratron.ops.ones((1, 4, 4, 3))).shape
        (1, 4, 4, 3, 2)
    """
    x = as_tensor(images)
    if x.ndim != 4:
        raise ValueError(f"sobel_edges: images must be 4-D. Received shape {x.shape}.")
    fmt = config.standardize_data_format(data_format)
    xl = _float(moveaxis(x, 1, -1) if fmt == "channels_first" else x)
    c = xl.shape[-1]
    ky = np.array([[-1.0, -2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 2.0, 1.0]])
    k = np.stack([ky, ky.T], axis=-1)  # (3, 3, 2): d/dy then d/dx
    kernel = _const(
        np.broadcast_to(k[:, :, None, :], (3, 3, c, 2)).copy(), xl, dtype=xl._value.dtype
    )
    xp = pad(xl, [(0, 0), (1, 1), (1, 1), (0, 0)])
    y = depthwise_conv(xp, kernel, padding="valid", data_format="channels_last")
    y = reshape(y, y.shape[:3] + (c, 2))  # depthwise output channels are (c, multiplier)
    if fmt == "channels_first":
        y = moveaxis(y, 3, 1)
    return y


def ssim(
    image1,
    image2,
    max_val=1.0,
    filter_size=11,
    filter_sigma=1.5,
    k1=0.01,
    k2=0.03,
    data_format=None,
):
    """Structural similarity per image (Wang et al., 2004), with a Gaussian window over
    valid positions, averaged over positions and channels.

    Example:
        >>> x = keratron.ops.ones((1, 16, 16, 3))
        >>> float(keratron.ops.image.ssim(x, x)[0])
        1.0
    """
    a, fmt, batched = _prepare(image1, data_format, "ssim")
    b, _, _ = _prepare(image2, data_format, "ssim")
    if a.shape != b.shape:
        raise ValueError(
            f"ssim: the images must have the same shape. Received {a.shape}, {b.shape}."
        )
    dtype = a.dtype
    a, b = _float(a), cast(_float(b), _float(a).dtype)
    n, h, w, c = a.shape
    g = _gauss1d(int(filter_size), float(filter_sigma))
    kernel = _const(np.outer(g, g)[:, :, None, None], a, dtype=a._value.dtype)

    def blur(t):
        planes = reshape(transpose(t, (0, 3, 1, 2)), (n * c, h, w, 1))
        return conv(planes, kernel, padding="valid", data_format="channels_last")

    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    mu1, mu2 = blur(a), blur(b)
    s11 = subtract(blur(multiply(a, a)), multiply(mu1, mu1))
    s22 = subtract(blur(multiply(b, b)), multiply(mu2, mu2))
    s12 = subtract(blur(multiply(a, b)), multiply(mu1, mu2))
    num = multiply(add(multiply(multiply(mu1, mu2), 2.0), c1), add(multiply(s12, 2.0), c2))
    den = multiply(add(add(multiply(mu1, mu1), multiply(mu2, mu2)), c1), add(add(s11, s22), c2))
    per = mean(reshape(divide(num, den), (n, c, -1)), axis=(1, 2))
    per = per if batched else squeeze(per, 0)
    return cast(per, dtype) if dtype != per.dtype else per


# ------------------------------------------------------------------------------ random warps
def _gather_field(x: Tensor, y_in: Tensor, x_in: Tensor, order, fill_mode, fill_value):
    """x: (B, H, W, C); y_in, x_in: (B, H, W) input (row, column) of every output pixel.

    Batch b reads rows b * H * W ... of the flattened images; only the spatial coordinates
    are interpolated."""
    b, h, w, c = x.shape
    flat = reshape(x, (b * h * w, c))
    # Flat indices are built in int64: a float index stops being exact past 2**24 pixels.
    offs = _const(np.arange(b)[:, None, None] * h * w, x)
    per_axis = [
        [
            (cast(_fix_index(i, n, fill_mode), "int64"), _inside(i, n, fill_mode), wgt)
            for i, wgt in _nodes(coord, order)
        ]
        for coord, n in ((y_in, h), (x_in, w))
    ]
    total = None
    for (fy, oky, wy), (fx, okx, wx) in itertools.product(*per_axis):
        vals = take_p.bind(flat, add(add(multiply(fy, w), fx), offs), axis=0)  # (B, H, W, C)
        if oky is not None:
            valid = expand_dims(logical_and(oky, okx), -1)
            vals = where(valid, vals, cast(as_tensor(fill_value), vals.dtype))
        if wy is not None:
            vals = multiply(vals, expand_dims(multiply(wy, wx), -1))
        total = vals if total is None else add(total, vals)
    return total


def _real(v, name: str) -> float:
    """A Python number, numpy scalar or 0-d tensor as a float (strings and bools refused)."""
    try:
        if isinstance(v, (bool, str, bytes)):
            raise TypeError
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(
            f"elastic_transform: argument `{name}` must be a real number. "
            f"Received: {name}={v!r} (of type {type(v).__name__})"
        ) from None


def elastic_transform(
    images,
    alpha=20.0,
    sigma=5.0,
    interpolation="bilinear",
    fill_mode="reflect",
    fill_value=0.0,
    seed=None,
    data_format=None,
):
    """Warps images by a random, smooth displacement field (Simard et al., 2003).

    Two fields of normal noise with standard deviation `sigma` per image (one for the
    column, one for the row displacement) are blurred with a zero-padded Gaussian of
    standard deviation `sigma` and size `int(6 * sigma) | 1`, scaled by `alpha`, and output
    pixel (row, col) reads the input at (row + dy, col + dx). All channels of an image share
    its field. Differentiable in `images`.

    Args:
        images: a 3-D image or a 4-D batch of images.
        alpha: scale of the displacements, in pixels per unit of blurred noise.
        sigma: standard deviation of the noise and of the Gaussian blur (> 0); larger
            values give smoother fields.
        interpolation: "nearest" or "bilinear".
        fill_mode: how reads outside the image are resolved: "reflect" (d c b a | a b c d),
            "mirror" (d c b | a b c d), "wrap", "nearest" or "constant".
        fill_value: the value outside the image for fill_mode="constant".
        seed: an int (the same field on every call), a `keratron.random.SeedGenerator`
            (a new field on every call, reproducibly) or None (the global generator).
        data_format: "channels_last" or "channels_first"; None uses the global setting.

    Returns:
        The warped images, with the shape and dtype of `images`.

    Raises:
        ValueError: unknown `interpolation` or `fill_mode`, `sigma` not positive, or
            `images` not of rank 3 or 4.
        TypeError: `alpha` or `sigma` not a number.

    Example:
        >>> x = keratron.random.uniform((2, 32, 32, 3), seed=0)
        >>> keratron.ops.image.elastic_transform(x, alpha=10.0, sigma=3.0, seed=1).shape
        (2, 32, 32, 3)
    """
    op = "elastic_transform"
    if interpolation not in _AFFINE_METHODS:
        raise ValueError(
            f"{op}: argument `interpolation` must be one of {tuple(_AFFINE_METHODS)}. "
            f"Received: interpolation={interpolation!r}"
        )
    if fill_mode not in _FILL_MODES:
        raise ValueError(
            f"{op}: argument `fill_mode` must be one of {_FILL_MODES}. "
            f"Received: fill_mode={fill_mode!r}"
        )
    x, fmt, batched = _prepare(images, data_format, op)
    alpha, sigma = _real(alpha, "alpha"), _real(sigma, "sigma")
    if not sigma > 0:  # also rejects NaN; sigma = 0 would make the Gaussian 0 / 0
        raise ValueError(f"{op}: argument `sigma` must be positive. Received: sigma={sigma}")
    seed = _sampling("check_seed")(seed, op)
    dtype = x.dtype
    xf = _float(x)
    if xf.dtype in ("float16", "bfloat16"):
        # Coordinates in half precision are off by whole pixels past 256 (bfloat16) or
        # 2048 (float16) rows; warp in float32 and round once at the end.
        xf = cast(xf, "float32")
    b, h, w, _ = xf.shape
    # Both fields come from one draw: an int seed repeats its values on every draw, so two
    # draws would make the row and column displacements equal.
    with config.device(str(_home(xf))):
        noise = _sampling("normal")((2 * b, h, w, 1), stddev=sigma, dtype=xf.dtype, seed=seed)
    # The 2-D Gaussian is separable: two 1-D passes equal the k x k kernel (zero padding
    # included) at 2k instead of k**2 multiply-adds per pixel.
    k = int(6 * sigma) | 1
    field = gaussian_blur(noise, (k, 1), (sigma, 1.0), data_format="channels_last")
    field = gaussian_blur(field, (1, k), (1.0, sigma), data_format="channels_last")
    field = multiply(reshape(field, (2, b, h, w)), alpha)
    rows = _const(np.arange(h)[:, None], xf, dtype=xf._value.dtype)
    cols = _const(np.arange(w)[None, :], xf, dtype=xf._value.dtype)
    x_in = add(cols, get_item(field, 0))
    y_in = add(rows, get_item(field, 1))
    y = _gather_field(xf, y_in, x_in, _AFFINE_METHODS[interpolation], fill_mode, fill_value)
    return _from_last(_restore_dtype(y, dtype), fmt, batched)
