"""`keras.visualization.draw_bounding_boxes` and `draw_segmentation_masks`, in numpy.

Keras draws boxes with OpenCV (`cv2.rectangle`, `cv2.putText`); keratron needs no OpenCV. Its
rectangles are OpenCV's pixel for pixel: a line of thickness `t > 1` is, for each edge, the
band of half-width `(t + 1) // 2` around it plus a disc of that radius (OpenCV's integer
midpoint circle) at each corner; thickness 0 or 1 is the one-pixel outline, a negative one
fills the box. Labels are drawn with Pillow's default font (OpenCV's Hershey font is not
available without OpenCV) at OpenCV's text origin and about its size, without antialiasing,
so label pixels are the box colour as OpenCV's are, but glyph shapes differ.
"""

from __future__ import annotations

import numpy as np

from keratron import config, ops
from keratron.utils.bounding_boxes import convert_format

__all__ = ["draw_bounding_boxes", "draw_segmentation_masks"]


def _data_format(data_format, fn):
    data_format = data_format or config.image_data_format()
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            f"{fn}(): `data_format` must be 'channels_last' or 'channels_first'. "
            f"Received: data_format={data_format!r}"
        )
    return data_format


def _batched_images(images, fn):
    images = ops.convert_to_numpy(images)
    if images.ndim != 4:
        raise ValueError(
            f"{fn}(): `images` must be a batched 4D tensor. Received: images.shape={images.shape}"
        )
    return images


def _to_uint8(images):
    """Keras's conversion: floats in [0, 1] are scaled to [0, 255], others clipped to it."""
    if images.dtype.kind == "f" and images.size > 0:
        images = np.clip(images, 0, 1) * 255 if images.max() <= 1.0 else np.clip(images, 0, 255)
    return images.astype("uint8")


def _pixel_color(color, channels):
    """A colour as OpenCV writes it into `channels` channels: its first values, rounded and
    saturated, zeros after the fourth."""
    values = np.zeros(channels, dtype="float64")
    given = np.asarray(color, dtype="float64").reshape(-1)[:channels]
    values[: given.size] = given
    return np.clip(np.rint(values), 0, 255).astype("uint8")


def _fill(image, top, bottom, left, right, color):
    """Sets the pixels of rows `top..bottom` and columns `left..right` (inclusive, clipped)."""
    height, width = image.shape[:2]
    top, left = max(top, 0), max(left, 0)
    bottom, right = min(bottom, height - 1), min(right, width - 1)
    if top <= bottom and left <= right:
        image[top : bottom + 1, left : right + 1] = color


def _circle_spans(radius):
    """{row offset: half width} of OpenCV's filled circle (its midpoint-algorithm spans)."""
    spans = {}
    err, dx, dy, plus, minus = 0, radius, 0, 1, 2 * radius - 1
    while dx >= dy:
        spans[dy] = max(spans.get(dy, 0), dx)
        spans[dx] = max(spans.get(dx, 0), dy)
        dy += 1
        err += plus
        plus += 2
        if err > 0:
            err -= minus
            dx -= 1
            minus -= 2
    return spans


def _rectangle(image, x1, y1, x2, y2, color, thickness):
    left, right, top, bottom = min(x1, x2), max(x1, x2), min(y1, y2), max(y1, y2)
    if thickness < 0:
        _fill(image, top, bottom, left, right, color)
        return
    half = (thickness + 1) // 2 if thickness > 1 else 0
    _fill(image, top - half, top + half, left, right, color)
    _fill(image, bottom - half, bottom + half, left, right, color)
    _fill(image, top, bottom, left - half, left + half, color)
    _fill(image, top, bottom, right - half, right + half, color)
    if half:
        spans = _circle_spans(half)
        for cx, cy in ((left, top), (right, top), (left, bottom), (right, bottom)):
            for dy, span in spans.items():
                _fill(image, cy - dy, cy - dy, cx - span, cx + span, color)
                _fill(image, cy + dy, cy + dy, cx - span, cx + span, color)


def _text_location(x, y, font_scale, thickness):
    """Keras's label origin (text baseline, left): above the box if it fits, else inside."""
    font_height = int(font_scale * 12)
    if y - 8 - 2 * font_height > 0:
        return x, y - 8
    return x + 3, y + 2 * font_height + thickness + 3


def _font(font_scale):
    try:
        from PIL import ImageFont
    except ImportError as e:
        raise ImportError(
            "draw_bounding_boxes() draws `class_mapping` labels with Pillow, which is not "
            "installed: `pip install pillow` (or pass no `class_mapping`)."
        ) from e
    # OpenCV's Hershey simplex font at scale 1 has capitals 21 pixels tall; Pillow's default
    # font has them at about 0.7 of its size.
    size = max(1, round(30 * font_scale))
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # Pillow < 10.1, or no FreeType: bitmap font
        return ImageFont.load_default()


def _text(image, text, origin, font, color, thickness, font_scale):
    from PIL import Image, ImageDraw

    height, width = image.shape[:2]
    mask = Image.new("1", (width, height), 0)  # mode "1": no antialiasing, as OpenCV's LINE_8
    draw = ImageDraw.Draw(mask)
    # OpenCV strokes are 1 pixel wide at thickness 1 and 2 * ((t + 1) // 2) + 1 above; the
    # font's own stems are about 2.5 * font_scale pixels: the outline makes up the difference.
    stroke_width = 1 if thickness <= 1 else 2 * ((thickness + 1) // 2) + 1
    stroke = max(0, round((stroke_width - 2.5 * font_scale) / 2))
    draw.text(origin, text, fill=1, font=font, anchor="ls", stroke_width=stroke, stroke_fill=1)
    image[np.asarray(mask, dtype=bool)] = color


def draw_bounding_boxes(
    images,
    bounding_boxes,
    bounding_box_format,
    class_mapping=None,
    color=(128, 128, 128),
    line_thickness=2,
    text_thickness=1,
    font_scale=1.0,
    data_format=None,
):
    """Draws bounding boxes (and optionally class labels) on a batch of images.

    Args:
        images: a batch of images, `(batch, height, width, channels)` (or channels first).
            Floats whose maximum is at most 1 are taken as [0, 1] and scaled to [0, 255].
        bounding_boxes: a dict with `"boxes"` `(batch, num_boxes, 4)`, `"labels"`
            `(batch, num_boxes)` (boxes labelled -1 are not drawn) and optionally
            `"confidences"` `(batch, num_boxes)`.
        bounding_box_format: the format of the boxes (see
            `keratron.utils.bounding_boxes.convert_format`).
        class_mapping: a dict from class id to name; boxes whose class is in it get a label
            (`"name | 0.93"` with confidences). Defaults to no labels.
        color: the RGB colour of boxes and labels. Defaults to `(128, 128, 128)`.
        line_thickness: the box line thickness in pixels. Defaults to 2.
        text_thickness: the label stroke thickness (falsy: `line_thickness`). Defaults to 1.
        font_scale: the label size, 1.0 for capitals about 21 pixels tall. Defaults to 1.0.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to the config's.

    Returns:
        A uint8 numpy array of the annotated images, in the layout of `images`.

    Raises:
        ValueError: if `images` is not 4D or `bounding_boxes` lacks `"boxes"` or `"labels"`.
        TypeError: if `bounding_boxes` is not a dict.
        ImportError: if a label is to be drawn and Pillow is not installed.

    Example:
        >>> images = np.zeros((1, 20, 30, 3), "uint8")
        >>> boxes = {"boxes": np.array([[[5, 4, 25, 15]]]), "labels": np.array([[0]])}
        >>> draw_bounding_boxes(images, boxes, "xyxy", color=(255, 0, 0))[0, 4, 10]
        array([255,   0,   0], dtype=uint8)
    """
    class_mapping = class_mapping or {}
    text_thickness = text_thickness or line_thickness
    data_format = _data_format(data_format, "draw_bounding_boxes")
    images = _batched_images(images, "draw_bounding_boxes")
    if not isinstance(bounding_boxes, dict):
        raise TypeError(
            "draw_bounding_boxes(): `bounding_boxes` must be a dict. "
            f"Received: bounding_boxes={bounding_boxes!r} of type {type(bounding_boxes)}"
        )
    if "boxes" not in bounding_boxes or "labels" not in bounding_boxes:
        raise ValueError(
            "draw_bounding_boxes(): `bounding_boxes` must have 'boxes' and 'labels' entries. "
            f"Received: keys {sorted(bounding_boxes)}"
        )
    if data_format == "channels_first":
        images = np.transpose(images, (0, 2, 3, 1))
    height, width = images.shape[1], images.shape[2]
    boxes = convert_format(bounding_boxes["boxes"], bounding_box_format, "xyxy", height, width)
    boxes = ops.convert_to_numpy(boxes)
    labels = ops.convert_to_numpy(bounding_boxes["labels"])
    confidences = bounding_boxes.get("confidences")
    if confidences is not None:
        confidences = ops.convert_to_numpy(confidences)

    images = np.ascontiguousarray(_to_uint8(images))
    pixel = _pixel_color(color, images.shape[-1])
    font = None
    for i in range(images.shape[0]):
        for j in range(boxes.shape[1]):
            x1, y1, x2, y2 = (int(v) for v in boxes[i, j].astype("int32"))
            label = int(np.asarray(labels[i, j]).astype("int32"))
            if label == -1:
                continue
            _rectangle(images[i], x1, y1, x2, y2, pixel, line_thickness)
            if label in class_mapping:
                text = str(class_mapping[label])
                if confidences is not None:
                    text = f"{text} | {confidences[i][j]:.2f}"
                font = font or _font(font_scale)
                origin = _text_location(x1, y1, font_scale, text_thickness)
                _text(images[i], text, origin, font, pixel, text_thickness, font_scale)
    if data_format == "channels_first":
        images = np.transpose(images, (0, 3, 1, 2))
    return images


def _color_palette(num_classes):
    palette = np.array([2**25 - 1, 2**15 - 1, 2**21 - 1])
    return [((i * palette) % 255).tolist() for i in range(num_classes)]


def draw_segmentation_masks(
    images,
    segmentation_masks,
    num_classes=None,
    color_mapping=None,
    alpha=0.8,
    blend=True,
    ignore_index=-1,
    data_format=None,
):
    """Overlays segmentation masks on a batch of images.

    Each pixel of class `k` (for `0 <= k < num_classes`) takes the colour of class `k`; with
    `blend`, that colour is mixed with the image as `image * (1 - alpha) + colour * alpha`,
    and pixels equal to `ignore_index` keep the image.

    Args:
        images: a batch of images, `(batch, height, width, channels)` (or channels first).
        segmentation_masks: integer class ids, `(batch, height, width, 1)` or
            `(batch, height, width)` (channels first: `(batch, 1, height, width)`).
        num_classes: the number of classes; ids from `num_classes` up are left uncoloured.
            Defaults to the largest id in the masks plus one, so that every id is coloured
            (Keras takes the largest id itself, which its torch backend rejects and its
            TensorFlow and JAX backends leave uncoloured).
        color_mapping: a dict from each class id `0..num_classes - 1` to an RGB colour.
            Defaults to Keras's generated palette.
        alpha: the opacity of the colours when blending. Defaults to 0.8.
        blend: mix colours with the image (returns uint8); `False` returns the coloured
            images as float32 with no mixing. Defaults to `True`.
        ignore_index: the class id left undrawn when blending. Defaults to -1.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to the config's.

    Returns:
        A numpy array of the images with the masks drawn, in the layout of `images`.

    Raises:
        ValueError: if `images` is not 4D.
        TypeError: if `segmentation_masks` is not of an integer dtype.

    Example:
        >>> images = np.zeros((1, 2, 2, 3), "float32")
        >>> masks = np.array([[[[1], [0]], [[0], [-1]]]], "int32")
        >>> out = draw_segmentation_masks(images, masks, num_classes=2, alpha=1.0,
        ...                               color_mapping={0: (0, 0, 0), 1: (255, 0, 0)})
        >>> out[0, 0, 0].tolist()
        [255, 0, 0]
    """
    data_format = _data_format(data_format, "draw_segmentation_masks")
    images = _batched_images(images, "draw_segmentation_masks").astype("float32")
    masks = ops.convert_to_numpy(segmentation_masks)
    if masks.dtype.kind not in "iu":
        raise TypeError(
            "draw_segmentation_masks(): `segmentation_masks` must have an integer dtype. "
            f"Received: segmentation_masks.dtype={masks.dtype}"
        )
    if data_format == "channels_first":
        images = np.transpose(images, (0, 2, 3, 1))
        if masks.ndim == 4:
            masks = np.transpose(masks, (0, 2, 3, 1))
    if masks.ndim == 4:
        masks = masks[..., 0]
    if num_classes is None:
        num_classes = int(masks.max()) + 1
    if color_mapping is None:
        colors = _color_palette(num_classes)
    else:
        colors = [color_mapping[i] for i in range(num_classes)]

    colored = images.copy()
    for k, color in enumerate(colors):
        colored[masks == k] = np.asarray(color, dtype="float32")
    outputs = colored
    if blend:
        outputs = images * (1 - alpha) + colored * alpha
        outputs = np.where((masks != ignore_index)[..., None], outputs, images)
        outputs = outputs.astype("uint8")
    if data_format == "channels_first":
        outputs = np.transpose(outputs, (0, 3, 1, 2))
    return outputs
