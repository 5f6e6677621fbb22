"""Bounding-box utilities, as `keras.utils.bounding_boxes` names them.

Boxes are arrays or tensors whose last axis holds 4 coordinates, unbatched `(N, 4)` or batched
`(batch, N, 4)`, in one of the formats of `SUPPORTED_FORMATS` (case-insensitive):

- `"xyxy"`: `[left, top, right, bottom]`; `"yxyx"`: `[top, left, bottom, right]`;
- `"xywh"`: `[left, top, width, height]`;
- `"center_xywh"`: `[center_x, center_y, width, height]`; `"center_yxhw"`: its `yx` twin;
- `"rel_xyxy"`, `"rel_yxyx"`, `"rel_xywh"`, `"rel_center_xywh"`: the same, divided by the
  image's width (x coordinates) and height (y coordinates).

Every function is written over `keratron.ops` and returns keratron tensors. Where Keras accepts
only `"xyxy"` (`crop`, `pad`, `affine_transform`) or `"xyxy"` / `"rel_xyxy"`
(`clip_to_image_size`), keratron converts any other format to its `xyxy` form, applies the
operation there and converts back, with Keras's arithmetic for `xyxy` itself.

Example:
    >>> boxes = np.array([[10, 20, 30, 40], [50, 60, 70, 80]])
    >>> keratron.utils.bounding_boxes.convert_format(boxes, "xyxy", "xywh").numpy()
    array([[10., 20., 20., 20.],
           [50., 60., 20., 20.]], dtype=float32)
"""

from __future__ import annotations

import math

from keratron import config, ops

__all__ = [
    "SUPPORTED_FORMATS",
    "affine_transform",
    "clip_to_image_size",
    "compute_ciou",
    "compute_iou",
    "convert_format",
    "crop",
    "decode_deltas_to_boxes",
    "encode_box_to_deltas",
    "pad",
]

SUPPORTED_FORMATS = (
    "xyxy",
    "yxyx",
    "xywh",
    "center_xywh",
    "center_yxhw",
    "rel_xyxy",
    "rel_yxyx",
    "rel_xywh",
    "rel_center_xywh",
)


def _split(boxes):
    return ops.split(boxes, 4, axis=-1)


def _join(*coordinates):
    return ops.concatenate(list(coordinates), axis=-1)


# Each converter maps boxes of one format to (or from) `xyxy`. The arithmetic is Keras's own,
# term for term (`x1 + (x2 - x1) / 2` for a centre, not `(x1 + x2) / 2`), so float32 results
# agree bit for bit where the operations do.
def _yxyx_to_xyxy(boxes, height, width):
    y1, x1, y2, x2 = _split(boxes)
    return _join(x1, y1, x2, y2)


def _xywh_to_xyxy(boxes, height, width):
    x1, y1, w, h = _split(boxes)
    return _join(x1, y1, x1 + w, y1 + h)


def _center_xywh_to_xyxy(boxes, height, width):
    cx, cy, w, h = _split(boxes)
    half_w, half_h = w / 2.0, h / 2.0
    return _join(cx - half_w, cy - half_h, cx + half_w, cy + half_h)


def _center_yxhw_to_xyxy(boxes, height, width):
    cy, cx, h, w = _split(boxes)
    half_w, half_h = w / 2.0, h / 2.0
    return _join(cx - half_w, cy - half_h, cx + half_w, cy + half_h)


def _rel_xyxy_to_xyxy(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(x1 * width, y1 * height, x2 * width, y2 * height)


def _rel_yxyx_to_xyxy(boxes, height, width):
    y1, x1, y2, x2 = _split(boxes)
    return _join(x1 * width, y1 * height, x2 * width, y2 * height)


def _rel_xywh_to_xyxy(boxes, height, width):
    x1, y1, w, h = _split(boxes)
    return _join(x1 * width, y1 * height, (x1 + w) * width, (y1 + h) * height)


def _rel_center_xywh_to_xyxy(boxes, height, width):
    cx, cy, w, h = _split(boxes)
    half_w, half_h = w / 2.0, h / 2.0
    return _join(
        (cx - half_w) * width, (cy - half_h) * height, (cx + half_w) * width, (cy + half_h) * height
    )


def _xyxy_to_yxyx(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(y1, x1, y2, x2)


def _xyxy_to_xywh(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(x1, y1, x2 - x1, y2 - y1)


def _xyxy_to_center_xywh(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(x1 + (x2 - x1) / 2.0, y1 + (y2 - y1) / 2.0, x2 - x1, y2 - y1)


def _xyxy_to_center_yxhw(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(y1 + (y2 - y1) / 2.0, x1 + (x2 - x1) / 2.0, y2 - y1, x2 - x1)


def _xyxy_to_rel_xyxy(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(x1 / width, y1 / height, x2 / width, y2 / height)


def _xyxy_to_rel_yxyx(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(y1 / height, x1 / width, y2 / height, x2 / width)


def _xyxy_to_rel_xywh(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(x1 / width, y1 / height, (x2 - x1) / width, (y2 - y1) / height)


def _xyxy_to_rel_center_xywh(boxes, height, width):
    x1, y1, x2, y2 = _split(boxes)
    return _join(
        (x1 + (x2 - x1) / 2.0) / width,
        (y1 + (y2 - y1) / 2.0) / height,
        (x2 - x1) / width,
        (y2 - y1) / height,
    )


def _identity(boxes, height, width):
    return boxes


_TO_XYXY = {
    "xyxy": _identity,
    "yxyx": _yxyx_to_xyxy,
    "xywh": _xywh_to_xyxy,
    "center_xywh": _center_xywh_to_xyxy,
    "center_yxhw": _center_yxhw_to_xyxy,
    "rel_xyxy": _rel_xyxy_to_xyxy,
    "rel_yxyx": _rel_yxyx_to_xyxy,
    "rel_xywh": _rel_xywh_to_xyxy,
    "rel_center_xywh": _rel_center_xywh_to_xyxy,
}
_FROM_XYXY = {
    "xyxy": _identity,
    "yxyx": _xyxy_to_yxyx,
    "xywh": _xyxy_to_xywh,
    "center_xywh": _xyxy_to_center_xywh,
    "center_yxhw": _xyxy_to_center_yxhw,
    "rel_xyxy": _xyxy_to_rel_xyxy,
    "rel_yxyx": _xyxy_to_rel_yxyx,
    "rel_xywh": _xyxy_to_rel_xywh,
    "rel_center_xywh": _xyxy_to_rel_center_xywh,
}


def _standardize_format(name, value, fn):
    fmt = value.lower() if isinstance(value, str) else value
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(
            f"{fn}(): `{name}` must be one of {SUPPORTED_FORMATS}. Received: {name}={value!r}"
        )
    return fmt


def _is_relative(fmt):
    return fmt.startswith("rel_")


def _absolute(fmt):
    """The absolute format whose arithmetic a relative one shares (`rel_xywh` -> `xywh`)."""
    return fmt[len("rel_") :] if _is_relative(fmt) else fmt


def _convert(boxes, source, target, height, width):
    """Converts standardized formats with no checks; `height` / `width` are only read when
    exactly one of the two formats is relative."""
    if source == target:
        return boxes
    if _is_relative(source) and _is_relative(target):
        source, target = _absolute(source), _absolute(target)
    return _FROM_XYXY[target](_TO_XYXY[source](boxes, height, width), height, width)


def convert_format(boxes, source, target, height=None, width=None, dtype="float32"):
    """Converts bounding boxes from one format to another.

    Args:
        boxes: boxes of shape `(..., 4)`, or a dict whose `"boxes"` entry holds them (that
            entry is replaced, as Keras does, and the same dict returned).
        source: the format of `boxes`, one of `SUPPORTED_FORMATS` (case-insensitive).
        target: the format to convert to.
        height: the image height; needed when exactly one format is relative (`rel_*`).
        width: the image width; needed likewise.
        dtype: the dtype of the result. Defaults to `"float32"`.

    Returns:
        The converted boxes, a tensor of `dtype` (or the dict that holds them).

    Raises:
        ValueError: if the last axis of `boxes` is not 4, a format is unknown, or a relative
            format is given without `height` and `width`.

    Example:
        >>> boxes = np.array([[10, 20, 30, 40]])
        >>> convert_format(boxes, "xyxy", "rel_xyxy", height=200, width=100).numpy()
        array([[0.1, 0.1, 0.3, 0.2]], dtype=float32)
    """
    if isinstance(boxes, dict):
        boxes["boxes"] = convert_format(boxes["boxes"], source, target, height, width, dtype)
        return boxes
    boxes = ops.convert_to_tensor(boxes)
    if len(boxes.shape) == 0 or boxes.shape[-1] != 4:
        raise ValueError(
            "convert_format(): `boxes` must have a last axis of size 4. "
            f"Received: boxes.shape={tuple(boxes.shape)}"
        )
    source = _standardize_format("source", source, "convert_format")
    target = _standardize_format("target", target, "convert_format")
    if (_is_relative(source) or _is_relative(target)) and (height is None or width is None):
        raise ValueError(
            "convert_format() needs `height` and `width` to convert between relative and "
            f"absolute formats. Received: source={source!r}, target={target!r}, "
            f"height={height}, width={width}"
        )
    boxes = ops.cast(boxes, dtype)
    if source == target:
        return boxes
    height = None if height is None else ops.cast(height, dtype)
    width = None if width is None else ops.cast(width, dtype)
    return _convert(boxes, source, target, height, width)


def _xyxy_area(boxes):
    x1, y1, x2, y2 = _split(boxes)
    return ops.squeeze((x2 - x1) * (y2 - y1), axis=-1)


def clip_to_image_size(bounding_boxes, height=None, width=None, bounding_box_format="xyxy"):
    """Clips boxes to the image; a box left with no area gets the label -1.

    Args:
        bounding_boxes: a dict with `"boxes"` of shape `(N, 4)` or `(batch, N, 4)` and,
            optionally, `"labels"` of shape `(N,)` or `(batch, N)`.
        height: the image height; needed for an absolute format.
        width: the image width; needed for an absolute format.
        bounding_box_format: the format of the boxes. Defaults to `"xyxy"`. A relative
            format is clipped to `[0, 1]`.

    Returns:
        A new dict (the other entries of `bounding_boxes` kept) with clipped `"boxes"`, in
        `bounding_box_format`, and `"labels"` set to -1 where a box's area is not positive.

    Raises:
        ValueError: if `bounding_boxes` is not a dict with `"boxes"`, the format is unknown,
            or an absolute format is given without `height` and `width`.

    Example:
        >>> boxes = {"boxes": np.array([[-10, -20, 150, 160], [50, 40, 70, 40]]),
        ...          "labels": np.array([0, 1])}
        >>> out = clip_to_image_size(boxes, height=100, width=120)
        >>> out["boxes"].numpy().tolist(), out["labels"].numpy().tolist()
        ([[0, 0, 120, 100], [50, 40, 70, 40]], [0, -1])
    """
    if not isinstance(bounding_boxes, dict) or "boxes" not in bounding_boxes:
        raise ValueError(
            "clip_to_image_size(): `bounding_boxes` must be a dict with a 'boxes' entry. "
            f"Received: bounding_boxes={bounding_boxes!r}"
        )
    fmt = _standardize_format("bounding_box_format", bounding_box_format, "clip_to_image_size")
    relative = _is_relative(fmt)
    if not relative and (height is None or width is None):
        raise ValueError(
            f"clip_to_image_size() needs `height` and `width` for the absolute format {fmt!r}. "
            f"Received: height={height}, width={width}"
        )
    boxes = ops.convert_to_tensor(bounding_boxes["boxes"])
    labels = bounding_boxes.get("labels")
    base = "rel_xyxy" if relative else "xyxy"
    if fmt != base:
        # Both formats are relative, or both absolute: no image size enters the conversion.
        boxes = _convert(ops.cast(boxes, "float32"), fmt, base, None, None)
    if relative:
        high_x = high_y = 1.0
    else:
        high_x, high_y = ops.cast(width, boxes.dtype), ops.cast(height, boxes.dtype)
    x1, y1, x2, y2 = _split(boxes)
    boxes = _join(
        ops.clip(x1, 0, high_x),
        ops.clip(y1, 0, high_y),
        ops.clip(x2, 0, high_x),
        ops.clip(y2, 0, high_y),
    )
    if labels is not None:
        labels = ops.where(_xyxy_area(boxes) > 0, labels, -1)
    if fmt != base:
        boxes = _convert(boxes, base, fmt, None, None)
    result = dict(bounding_boxes)
    result["boxes"] = boxes
    if labels is not None:
        result["labels"] = labels
    return result


def _per_image(value, batch_size, dtype):
    """A transform parameter as a `(batch_size,)` tensor (a scalar applies to every image)."""
    value = ops.cast(ops.convert_to_tensor(value), dtype)
    return ops.broadcast_to(ops.reshape(value, (-1,)), (batch_size,))


def _inverse_affine_matrix(
    center_x, center_y, angle, translate_x, translate_y, scale, shear_x, shear_y, height, width
):
    """The `(batch, 3, 3)` matrix that maps output pixels to input pixels (as TF's
    `_geometry._get_inverse_affine_matrix`): angles in degrees, translations and centre as
    fractions of `width - 1` / `height - 1`."""
    angle, shear_x, shear_y = -angle, -shear_x, -shear_y
    cx = center_x * (width - 1)
    cy = center_y * (height - 1)
    rot = angle * (1.0 / 180.0 * math.pi)
    tx = -translate_x * (width - 1)
    ty = -translate_y * (height - 1)
    sx = shear_x * (1.0 / 180.0 * math.pi)
    sy = shear_y * (1.0 / 180.0 * math.pi)

    cos_sy = ops.cos(sy)
    tan_sx = ops.tan(sx)
    rot_minus_sy = rot - sy
    cx_plus_tx = cx + tx
    cy_plus_ty = cy + ty

    # Rotation and shear without the scale; det([[a, b], [c, d]]) == 1.
    a = ops.cos(rot_minus_sy) / cos_sy
    b = a * tan_sx + ops.sin(rot)
    c = -ops.sin(rot_minus_sy) / cos_sy
    d = ops.cos(rot) - c * tan_sx

    a0, a1 = d * scale, -b * scale
    b0, b1 = -c * scale, a * scale
    a2 = cx - a0 * cx_plus_tx - a1 * cy_plus_ty
    b2 = cy - b0 * cx_plus_tx - b1 * cy_plus_ty
    zeros, ones = ops.zeros_like(a0), ops.ones_like(a0)
    matrix = ops.stack([a0, a1, a2, b0, b1, b2, zeros, zeros, ones], axis=-1)
    return ops.reshape(matrix, (-1, 3, 3))


def affine_transform(
    boxes,
    angle,
    translate_x,
    translate_y,
    scale,
    shear_x,
    shear_y,
    height,
    width,
    center_x=None,
    center_y=None,
    bounding_box_format="xyxy",
):
    """Applies an affine transformation to boxes: the bounding box of each transformed box.

    The four corners of each box go through the matrix that Keras's `RandomAffine`-style
    layers build for the image (rotation about the centre, translation, scale, shear), and the
    result is the axis-aligned box around them.

    Args:
        boxes: boxes of shape `(batch, N, 4)` (or `(N, 4)`, one image).
        angle: rotation in degrees, per image `(batch,)` or one scalar for all.
        translate_x: horizontal translation, a fraction of `width - 1`.
        translate_y: vertical translation, a fraction of `height - 1`.
        scale: scale factor of the (inverse) matrix.
        shear_x: shear angle along x in degrees.
        shear_y: shear angle along y in degrees.
        height: the image height.
        width: the image width.
        center_x: the centre of the transformation, a fraction of `width - 1`. Defaults to 0.5.
        center_y: likewise along y. Defaults to 0.5.
        bounding_box_format: the format of `boxes` (and of the result). Defaults to `"xyxy"`.

    Returns:
        The transformed boxes, of the shape of `boxes`, in the dtype of `angle` when it is a
        float array, else float32.

    Example:
        >>> boxes = np.array([[[10.0, 10.0, 20.0, 30.0]]])
        >>> affine_transform(boxes, np.zeros(1), 0, 0, 1, 0, 0, 50, 50).numpy().tolist()
        [[[10.0, 10.0, 20.0, 30.0]]]
    """
    fmt = _standardize_format("bounding_box_format", bounding_box_format, "affine_transform")
    angle_t = ops.convert_to_tensor(angle)
    dtype = angle_t.dtype if "float" in str(angle_t.dtype) else config.floatx()
    boxes = ops.cast(ops.convert_to_tensor(boxes), dtype)
    unbatched = len(boxes.shape) == 2
    if unbatched:
        boxes = ops.expand_dims(boxes, 0)
    if len(boxes.shape) != 3 or boxes.shape[-1] != 4:
        raise ValueError(
            "affine_transform(): `boxes` must have shape (batch, N, 4) or (N, 4). "
            f"Received: boxes.shape={tuple(boxes.shape)}"
        )
    if fmt != "xyxy":
        boxes = convert_format(boxes, fmt, "xyxy", height, width, dtype)
    batch_size, n_boxes = boxes.shape[0], boxes.shape[1]
    params = [
        0.5 if center_x is None else center_x,
        0.5 if center_y is None else center_y,
        angle_t,
        translate_x,
        translate_y,
        scale,
        shear_x,
        shear_y,
    ]
    params = [_per_image(p, batch_size, dtype) for p in params]
    matrix = _inverse_affine_matrix(*params, height, width)
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    corners = ops.stack([x1, y1, x2, y1, x2, y2, x1, y2], axis=-1)
    corners = ops.reshape(corners, (batch_size, n_boxes, 4, 2))
    corners = ops.concatenate([corners, ops.ones_like(corners[..., :1])], axis=-1)
    transposed = ops.transpose(matrix[:, :2, :], (0, 2, 1))
    moved = ops.einsum("bnxy,byz->bnxz", corners, transposed)
    boxes = ops.concatenate([ops.amin(moved, axis=2), ops.amax(moved, axis=2)], axis=-1)
    if fmt != "xyxy":
        boxes = convert_format(boxes, "xyxy", fmt, height, width, dtype)
    return boxes[0] if unbatched else boxes


def _absolute_only(fmt, fn):
    if _is_relative(fmt):
        raise ValueError(
            f"{fn}() changes the image size, so it cannot keep relative coordinates: convert "
            f"the boxes to an absolute format first. Received: bounding_box_format={fmt!r}"
        )


def crop(boxes, top, left, height, width, bounding_box_format="xyxy"):
    """Moves boxes into a cropped region of the image and clips them to it.

    Args:
        boxes: boxes of shape `(N, 4)` or `(batch, N, 4)`.
        top: the row where the crop starts.
        left: the column where the crop starts.
        height: the height of the crop (`None`: no lower-right clipping along y).
        width: the width of the crop (`None`: likewise along x).
        bounding_box_format: an absolute format of the boxes (and of the result). Defaults to
            `"xyxy"`.

    Returns:
        The boxes in the crop's coordinates, clipped to `[0, width] x [0, height]`.

    Raises:
        ValueError: for a relative or unknown format.

    Example:
        >>> boxes = np.array([[10, 20, 50, 60], [70, 80, 100, 120]])
        >>> crop(boxes, top=10, left=20, height=40, width=30).numpy().tolist()
        [[0, 10, 30, 40], [30, 40, 30, 40]]
    """
    fmt = _standardize_format("bounding_box_format", bounding_box_format, "crop")
    _absolute_only(fmt, "crop")
    boxes = ops.convert_to_tensor(boxes)
    if fmt != "xyxy":
        boxes = convert_format(boxes, fmt, "xyxy")

    def clip(value, high):
        return ops.maximum(value, 0) if high is None else ops.clip(value, 0, high)

    x1, y1, x2, y2 = _split(boxes)
    boxes = _join(
        clip(x1 - left, width),
        clip(y1 - top, height),
        clip(x2 - left, width),
        clip(y2 - top, height),
    )
    return boxes if fmt == "xyxy" else convert_format(boxes, "xyxy", fmt)


def pad(boxes, top, left, height=None, width=None, bounding_box_format="xyxy"):
    """Moves boxes by the padding added above and to the left of the image.

    Args:
        boxes: boxes of shape `(N, 4)` or `(batch, N, 4)`.
        top: rows of padding added above the image.
        left: columns of padding added to its left.
        height: the image height (unused: padding below and to the right moves no box).
        width: the image width (likewise).
        bounding_box_format: an absolute format of the boxes (and of the result). Defaults to
            `"xyxy"`.

    Returns:
        The boxes in the padded image's coordinates.

    Raises:
        ValueError: for a relative or unknown format.

    Example:
        >>> pad(np.array([[1, 2, 3, 4]]), top=10, left=5).numpy().tolist()
        [[6, 12, 8, 14]]
    """
    fmt = _standardize_format("bounding_box_format", bounding_box_format, "pad")
    _absolute_only(fmt, "pad")
    boxes = ops.convert_to_tensor(boxes)
    if fmt != "xyxy":
        boxes = convert_format(boxes, fmt, "xyxy")
    x1, y1, x2, y2 = _split(boxes)
    boxes = _join(x1 + left, y1 + top, x2 + left, y2 + top)
    return boxes if fmt == "xyxy" else convert_format(boxes, "xyxy", fmt)


def _variance(variance, fn):
    if variance is None:
        return None
    variance = ops.convert_to_tensor(variance, "float32")
    if len(variance.shape) == 0 or variance.shape[-1] != 4:
        raise ValueError(
            f"{fn}(): `variance` must have 4 values. Received: variance={variance.numpy()}"
        )
    return variance


def _encoding(name, value, fn):
    if value not in ("center_xywh", "center_yxhw"):
        raise ValueError(
            f"{fn}(): `{name}` must be 'center_xywh' or 'center_yxhw'. Received: {name}={value!r}"
        )


def _image_size(image_shape):
    if image_shape is None:
        return None, None
    height, width, _ = image_shape
    return height, width


def encode_box_to_deltas(
    anchors,
    boxes,
    anchor_format,
    box_format,
    encoding_format="center_yxhw",
    variance=None,
    image_shape=None,
):
    """Encodes boxes as deltas from their anchors (centre offsets and log size ratios).

    Both are converted to `encoding_format`; the deltas are `(box_centre - anchor_centre) /
    anchor_size` and `log(box_size / anchor_size)`, sizes floored at `keratron.config.epsilon()`,
    divided by `variance` when one is given.

    Args:
        anchors: anchor boxes, `(N, 4)`.
        boxes: boxes to encode, `(N, 4)` or `(batch, N, 4)`.
        anchor_format: the format of `anchors`.
        box_format: the format of `boxes`.
        encoding_format: `"center_yxhw"` (default) or `"center_xywh"`, the layout of the
            deltas.
        variance: 4 factors that divide the deltas. Defaults to `None`.
        image_shape: `(height, width, channels)`, needed for relative formats.

    Returns:
        The deltas, of the shape of `boxes`.

    Raises:
        ValueError: if `variance` does not have 4 values or `encoding_format` is not a centre
            format.

    Example:
        >>> anchors = np.array([[0.0, 0.0, 10.0, 10.0]])
        >>> deltas = encode_box_to_deltas(anchors, anchors + 1, "xyxy", "xyxy")
        >>> print(deltas.numpy())
        [[0.1 0.1 0.  0. ]]
    """
    variance = _variance(variance, "encode_box_to_deltas")
    _encoding("encoding_format", encoding_format, "encode_box_to_deltas")
    height, width = _image_size(image_shape)
    anchors = convert_format(anchors, anchor_format, encoding_format, height, width)
    boxes = convert_format(boxes, box_format, encoding_format, height, width)
    anchor_sizes = ops.maximum(anchors[..., 2:], config.epsilon())
    box_sizes = ops.maximum(boxes[..., 2:], config.epsilon())
    deltas = ops.concatenate(
        [(boxes[..., :2] - anchors[..., :2]) / anchor_sizes, ops.log(box_sizes / anchor_sizes)],
        axis=-1,
    )
    return deltas if variance is None else deltas / variance


def decode_deltas_to_boxes(
    anchors,
    boxes_delta,
    anchor_format,
    box_format,
    encoded_format="center_yxhw",
    variance=None,
    image_shape=None,
):
    """Decodes deltas from anchors back to boxes (the inverse of `encode_box_to_deltas`).

    Args:
        anchors: anchor boxes `(N, 4)`, or a dict of them keyed by feature level.
        boxes_delta: deltas `(N, 4)` or `(batch, N, 4)`, or a dict with the keys of `anchors`.
        anchor_format: the format of `anchors`.
        box_format: the format of the decoded boxes.
        encoded_format: `"center_yxhw"` (default) or `"center_xywh"`, the layout of the
            deltas.
        variance: 4 factors that multiply the deltas. Defaults to `None`.
        image_shape: `(height, width, channels)`, needed for relative formats.

    Returns:
        The boxes in `box_format` (a dict of them per level for dict inputs).

    Raises:
        ValueError: if `variance` does not have 4 values or `encoded_format` is not a centre
            format.

    Example:
        >>> anchors = np.array([[0.0, 0.0, 10.0, 10.0]])
        >>> deltas = np.array([[0.1, 0.1, 0.0, 0.0]])
        >>> decode_deltas_to_boxes(anchors, deltas, "xyxy", "xyxy").numpy().tolist()
        [[1.0, 1.0, 11.0, 11.0]]
    """
    variance = _variance(variance, "decode_deltas_to_boxes")
    _encoding("encoded_format", encoded_format, "decode_deltas_to_boxes")
    height, width = _image_size(image_shape)

    def decode_level(anchor, delta):
        anchor = convert_format(anchor, anchor_format, encoded_format, height, width)
        delta = ops.convert_to_tensor(delta)
        if variance is not None:
            delta = delta * variance
        box = ops.concatenate(
            [
                delta[..., :2] * anchor[..., 2:] + anchor[..., :2],
                ops.exp(delta[..., 2:]) * anchor[..., 2:],
            ],
            axis=-1,
        )
        return convert_format(box, encoded_format, box_format, height, width)

    if isinstance(anchors, dict) and isinstance(boxes_delta, dict):
        return {level: decode_level(a, boxes_delta[level]) for level, a in anchors.items()}
    return decode_level(anchors, boxes_delta)


def _rank(boxes, name, fn):
    if len(ops.shape(boxes)) not in (2, 3):
        raise ValueError(
            f"{fn}(): `{name}` must be unbatched (N, 4) or batched (batch, N, 4). "
            f"Received: {name}.shape={tuple(ops.shape(boxes))}"
        )


def _relative_size(bounding_box_format, image_shape, fn):
    if "rel" in bounding_box_format.lower() and image_shape is None:
        raise ValueError(
            f"{fn}() needs `image_shape` for the relative format {bounding_box_format!r}. "
            f"Received: image_shape={image_shape}"
        )
    return _image_size(image_shape)


def compute_iou(
    boxes1, boxes2, bounding_box_format, use_masking=False, mask_val=-1, image_shape=None
):
    """The pairwise intersection over union of two sets of boxes.

    Ranks may differ: `(M, 4)` and `(N, 4)` give `(M, N)`; when either is batched
    (`(batch, M, 4)`), the result is `(batch, M, N)`.

    Args:
        boxes1: boxes, unbatched or batched.
        boxes2: boxes, unbatched or batched.
        bounding_box_format: the format of both.
        use_masking: set the IoU of a pair to `mask_val` where either box has all its
            coordinates negative (padding boxes). Defaults to `False`.
        mask_val: the value of masked pairs. Defaults to -1.
        image_shape: `(height, width, channels)`, needed for relative formats.

    Returns:
        A float32 tensor of IoUs (`intersection / (union + epsilon)`).

    Raises:
        ValueError: for boxes of rank other than 2 or 3, or a relative format without
            `image_shape`.

    Example:
        >>> a = np.array([[0.0, 0.0, 10.0, 10.0]])
        >>> b = np.array([[0.0, 0.0, 10.0, 5.0], [20.0, 20.0, 30.0, 30.0]])
        >>> np.round(compute_iou(a, b, "xyxy").numpy(), 4).tolist()
        [[0.5, 0.0]]
    """
    _rank(boxes1, "boxes1", "compute_iou")
    _rank(boxes2, "boxes2", "compute_iou")
    height, width = _relative_size(bounding_box_format, image_shape, "compute_iou")
    boxes1 = convert_format(boxes1, bounding_box_format, "yxyx", height, width)
    boxes2 = convert_format(boxes2, bounding_box_format, "yxyx", height, width)

    y_min1, x_min1, y_max1, x_max1 = _split(boxes1)  # (..., M, 1)
    y_min2, x_min2, y_max2, x_max2 = (ops.swapaxes(c, -1, -2) for c in _split(boxes2))
    zero = ops.cast(0, boxes1.dtype)
    intersect_h = ops.maximum(zero, ops.minimum(y_max1, y_max2) - ops.maximum(y_min1, y_min2))
    intersect_w = ops.maximum(zero, ops.minimum(x_max1, x_max2) - ops.maximum(x_min1, x_min2))
    intersection = intersect_h * intersect_w

    area1 = (y_max1 - y_min1) * (x_max1 - x_min1)  # (..., M, 1)
    area2 = (y_max2 - y_min2) * (x_max2 - x_min2)  # (..., 1, N)
    union = area1 + area2 - intersection
    iou = intersection / (union + config.epsilon())
    if not use_masking:
        return iou
    mask1 = ops.less(ops.max(boxes1, axis=-1, keepdims=True), 0.0)
    mask2 = ops.swapaxes(ops.less(ops.max(boxes2, axis=-1, keepdims=True), 0.0), -1, -2)
    masked = ops.logical_or(mask1, mask2)
    return ops.where(masked, ops.cast(mask_val, iou.dtype) * ops.ones_like(iou), iou)


def compute_ciou(boxes1, boxes2, bounding_box_format, image_shape=None):
    """The Complete IoU of matching boxes: IoU less a centre-distance and an aspect term.

    `boxes1` and `boxes2` are paired element by element (broadcast as arrays), not all pairs.
    The result is `iou - (d^2 / c^2 + alpha * v)`, with `d` the distance between the centres,
    `c` the diagonal of the smallest box around both, `v` the squared difference of their
    aspect-ratio angles (times 4 / pi^2) and `alpha = v / (v - iou + 1)`.

    Args:
        boxes1: boxes, `(..., 4)`.
        boxes2: boxes, `(..., 4)`.
        bounding_box_format: the format of both.
        image_shape: `(height, width, channels)`, needed for relative formats.

    Returns:
        A float32 tensor of shape `boxes1.shape[:-1]` (broadcast with `boxes2`).

    Raises:
        ValueError: for a relative format without `image_shape`.

    Example:
        >>> a = np.array([[0.0, 0.0, 10.0, 10.0]])
        >>> np.round(compute_ciou(a, a, "xyxy").numpy(), 4).tolist()
        [1.0]
    """
    height, width = _relative_size(bounding_box_format, image_shape, "compute_ciou")
    boxes1 = convert_format(boxes1, bounding_box_format, "xyxy", height, width)
    boxes2 = convert_format(boxes2, bounding_box_format, "xyxy", height, width)
    eps = config.epsilon()
    x_min1, y_min1, x_max1, y_max1 = _split(boxes1)
    x_min2, y_min2, x_max2, y_max2 = _split(boxes2)

    width_1 = x_max1 - x_min1
    height_1 = y_max1 - y_min1 + eps
    width_2 = x_max2 - x_min2
    height_2 = y_max2 - y_min2 + eps

    intersection = ops.maximum(
        ops.minimum(x_max1, x_max2) - ops.maximum(x_min1, x_min2), 0
    ) * ops.maximum(ops.minimum(y_max1, y_max2) - ops.maximum(y_min1, y_min2), 0)
    union = width_1 * height_1 + width_2 * height_2 - intersection + eps
    iou = ops.squeeze(intersection / (union + eps), axis=-1)

    convex_width = ops.maximum(x_max1, x_max2) - ops.minimum(x_min1, x_min2)
    convex_height = ops.maximum(y_max1, y_max2) - ops.minimum(y_min1, y_min2)
    convex_diagonal_squared = ops.squeeze(convex_width**2 + convex_height**2 + eps, axis=-1)
    centers_distance_squared = ops.squeeze(
        ((x_min1 + x_max1) / 2 - (x_min2 + x_max2) / 2) ** 2
        + ((y_min1 + y_max1) / 2 - (y_min2 + y_max2) / 2) ** 2,
        axis=-1,
    )
    v = ops.squeeze(
        (4 / math.pi**2)
        * ops.power(ops.arctan(width_2 / height_2) - ops.arctan(width_1 / height_1), 2),
        axis=-1,
    )
    alpha = v / (v - iou + (1 + eps))
    return iou - (centers_distance_squared / convex_diagonal_squared + v * alpha)
