"""`keras.visualization`'s matplotlib galleries: images, with boxes, with segmentation masks.

matplotlib is imported when a gallery is drawn (it is optional: the `dev` extra has it). Each
gallery is one figure of `rows x cols` image axes, as Keras lays it out; with neither `path`
nor `show=False` it is shown with `plt.show()`, with `path` it is saved there and closed, and
with `show=False` it is left open as matplotlib's current figure.
"""

from __future__ import annotations

import math

import numpy as np

from keratron import config, ops
from keratron.visualization.drawing import draw_bounding_boxes, draw_segmentation_masks

__all__ = ["plot_bounding_box_gallery", "plot_image_gallery", "plot_segmentation_mask_gallery"]


def _pyplot(fn):
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            f"{fn}() draws with matplotlib, which is not installed: `pip install matplotlib`."
        ) from e
    return plt


def _batched(images, fn):
    images = ops.convert_to_numpy(images)
    if images.ndim != 4:
        raise ValueError(
            f"{fn}(): `images` must be a batched 4D tensor. Received: images.shape={images.shape}"
        )
    return images


def _to_0_255(images, value_range):
    """Maps `value_range` linearly onto [0, 255] (in float32; unchanged if already so)."""
    low, high = value_range
    if low == 0 and high == 255:
        return images
    low, high = np.float32(low), np.float32(high)
    return (images.astype("float32") - low) / (high - low) * np.float32(255)


def plot_image_gallery(
    images,
    y_true=None,
    y_pred=None,
    label_map=None,
    rows=None,
    cols=None,
    value_range=(0, 255),
    scale=2,
    path=None,
    show=None,
    transparent=True,
    dpi=60,
    legend_handles=None,
    data_format=None,
):
    """Shows a batch of images in a grid, titled with their labels and predictions.

    Args:
        images: a batch of images, `(batch, height, width, channels)` (or channels first).
        y_true: class ids of the images, titled `"Label: <name>"`. Defaults to `None`.
        y_pred: predicted class ids, titled `"Pred: <name>"`. Defaults to `None`.
        label_map: a dict from class id to name; required with `y_true` or `y_pred`.
        rows: grid rows. Defaults to `ceil(sqrt(batch))`.
        cols: grid columns. Defaults to `batch // rows` (Keras's rule: the grid may show
            fewer images than the batch has).
        value_range: the range of the image values, mapped to [0, 255]. Defaults to (0, 255).
        scale: inches per grid cell. Defaults to 2.
        path: save the figure there (and close it) instead of showing it.
        show: `plt.show()` the figure. Defaults to `True` without `path`.
        transparent: save with a transparent background. Defaults to `True`.
        dpi: the resolution of the saved figure. Defaults to 60.
        legend_handles: matplotlib artists for a legend at the bottom. Defaults to `None`.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to the config's.

    Raises:
        ValueError: if both `path` and `show` are set, `images` is not 4D, or labels come
            without `label_map`.
        ImportError: if matplotlib is not installed.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> plot_image_gallery(np.zeros((4, 8, 8, 3)), show=False)
        >>> len(matplotlib.pyplot.gcf().axes)
        4
    """
    plt = _pyplot("plot_image_gallery")
    if path is not None and show:
        raise ValueError(
            "plot_image_gallery(): pass `path` (save the figure) or `show=True`, not both. "
            f"Received: path={path!r}, show={show}"
        )
    if (y_true is not None or y_pred is not None) and label_map is None:
        raise ValueError(
            "plot_image_gallery(): `y_true` or `y_pred` needs a `label_map` to name classes."
        )
    show = show if show is not None else path is None
    data_format = data_format or config.image_data_format()
    images = _batched(images, "plot_image_gallery")
    batch_size = images.shape[0]
    rows = rows or int(math.ceil(math.sqrt(batch_size)))
    cols = cols or int(math.ceil(batch_size // rows))
    images = images[: min(rows * cols, batch_size)]
    if data_format == "channels_first":
        images = np.transpose(images, (0, 2, 3, 1))

    fig, axes = plt.subplots(
        nrows=rows,
        ncols=cols,
        figsize=(cols * scale, rows * scale),
        frameon=False,
        layout="tight",
        squeeze=False,
        sharex="row",
        sharey="col",
    )
    fig.subplots_adjust(wspace=0, hspace=0)
    if legend_handles is not None:
        fig.legend(handles=legend_handles, loc="lower center")

    images = _to_0_255(images, value_range)
    y_true = None if y_true is None else ops.convert_to_numpy(y_true)
    y_pred = None if y_pred is None else ops.convert_to_numpy(y_pred)
    for row in range(rows):
        for col in range(cols):
            index = row * cols + col
            axis = axes[row, col]
            axis.axis("off")
            if index >= len(images):  # a grid larger than the batch leaves cells empty
                continue
            axis.imshow(images[index].astype("uint8"))
            axis.margins(x=0, y=0)
            title = []
            if y_true is not None and index < len(y_true):
                title.append(f"Label: {label_map.get(y_true[index], 'Unknown')}")
            if y_pred is not None and index < len(y_pred):
                title.append(f"Pred: {label_map.get(y_pred[index], 'Unknown')}")
            if title:
                axis.set_title("  ".join(title), fontsize=8)

    if path is not None:
        plt.savefig(fname=path, pad_inches=0, bbox_inches="tight", transparent=transparent, dpi=dpi)
        plt.close()
    elif show:
        plt.show()
        plt.close()


def plot_bounding_box_gallery(
    images,
    bounding_box_format,
    y_true=None,
    y_pred=None,
    value_range=(0, 255),
    true_color=(0, 188, 212),
    pred_color=(255, 235, 59),
    line_thickness=2,
    font_scale=1.0,
    text_thickness=None,
    class_mapping=None,
    ground_truth_mapping=None,
    prediction_mapping=None,
    legend=False,
    legend_handles=None,
    rows=None,
    cols=None,
    data_format=None,
    **kwargs,
):
    """Shows a batch of images with their ground-truth and predicted boxes drawn on.

    Ground-truth boxes (`y_true`) are drawn first in `true_color`, then predictions
    (`y_pred`) in `pred_color`, by `draw_bounding_boxes`; the images then go to
    `plot_image_gallery`.

    Args:
        images: a batch of images, `(batch, height, width, channels)` (or channels first).
        bounding_box_format: the format of the boxes.
        y_true: a dict of ground-truth `"boxes"` and `"labels"` (as `draw_bounding_boxes`
            takes). Defaults to `None`.
        y_pred: a dict of predicted boxes, likewise. Defaults to `None`.
        value_range: the range of the image values. Defaults to (0, 255).
        true_color: RGB of ground-truth boxes. Defaults to (0, 188, 212).
        pred_color: RGB of predicted boxes. Defaults to (255, 235, 59).
        line_thickness: box line thickness. Defaults to 2.
        font_scale: label size. Defaults to 1.0.
        text_thickness: label thickness. Defaults to `line_thickness`.
        class_mapping: class names for both sets of boxes. Defaults to `None`.
        ground_truth_mapping: class names for `y_true`, instead of `class_mapping`.
        prediction_mapping: class names for `y_pred`, instead of `class_mapping`.
        legend: add a "Ground Truth" / "Prediction" legend. Defaults to `False`.
        legend_handles: matplotlib artists for a legend of one's own (not with `legend`).
        rows: grid rows (see `plot_image_gallery`).
        cols: grid columns.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to the config's.
        **kwargs: passed on to `plot_image_gallery` (`path`, `show`, `scale`, ...).

    Raises:
        ValueError: if `images` is not 4D, or both `legend` and `legend_handles` are given.
        ImportError: if matplotlib is not installed.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> boxes = {"boxes": np.array([[[2, 2, 6, 6]]] * 2), "labels": np.zeros((2, 1))}
        >>> plot_bounding_box_gallery(np.zeros((2, 8, 8, 3)), "xyxy", y_true=boxes, show=False)
        >>> len(matplotlib.pyplot.gcf().axes)
        2
    """
    _pyplot("plot_bounding_box_gallery")  # fails before any drawing without matplotlib
    prediction_mapping = prediction_mapping or class_mapping
    ground_truth_mapping = ground_truth_mapping or class_mapping
    data_format = data_format or config.image_data_format()
    images = _batched(images, "plot_bounding_box_gallery")
    if data_format == "channels_first":
        images = np.transpose(images, (0, 2, 3, 1))
    if legend and legend_handles:
        raise ValueError(
            "plot_bounding_box_gallery(): pass `legend` or `legend_handles`, not both."
        )
    common = dict(
        bounding_box_format=bounding_box_format,
        line_thickness=line_thickness,
        text_thickness=text_thickness,
        font_scale=font_scale,
        data_format="channels_last",
    )
    if y_true is not None:
        images = draw_bounding_boxes(
            images, y_true, color=true_color, class_mapping=ground_truth_mapping, **common
        )
    if y_pred is not None:
        images = draw_bounding_boxes(
            images, y_pred, color=pred_color, class_mapping=prediction_mapping, **common
        )
    if legend:
        from matplotlib import patches

        legend_handles = [
            patches.Patch(color=np.array(true_color) / 255.0, label="Ground Truth"),
            patches.Patch(color=np.array(pred_color) / 255.0, label="Prediction"),
        ]
    return plot_image_gallery(
        images,
        value_range=value_range,
        legend_handles=legend_handles,
        rows=rows,
        cols=cols,
        data_format="channels_last",
        **kwargs,
    )


def plot_segmentation_mask_gallery(
    images,
    num_classes,
    value_range=(0, 255),
    y_true=None,
    y_pred=None,
    color_mapping=None,
    blend=True,
    alpha=0.8,
    ignore_index=-1,
    data_format=None,
    **kwargs,
):
    """Shows each image beside its ground-truth and predicted masks, one row per image.

    Args:
        images: a batch of images, `(batch, height, width, channels)` (or channels first).
        num_classes: the number of classes.
        value_range: the range of the image values. Defaults to (0, 255).
        y_true: ground-truth masks, `(batch, height, width[, 1])`. Defaults to `None`.
        y_pred: predicted masks, likewise. Defaults to `None`.
        color_mapping: a dict from class id to RGB colour. Defaults to a generated palette.
        blend: blend the masks with the images. Defaults to `True`.
        alpha: the opacity of the masks. Defaults to 0.8.
        ignore_index: the class id left undrawn. Defaults to -1.
        data_format: `"channels_last"` or `"channels_first"`. Defaults to the config's.
        **kwargs: passed on to `plot_image_gallery` (`path`, `show`, `scale`, ...).

    Raises:
        ValueError: if `images` is not 4D.
        ImportError: if matplotlib is not installed.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> masks = np.zeros((2, 8, 8, 1), "int32")
        >>> plot_segmentation_mask_gallery(np.zeros((2, 8, 8, 3)), 2, y_true=masks, show=False)
        >>> len(matplotlib.pyplot.gcf().axes)
        4
    """
    _pyplot("plot_segmentation_mask_gallery")
    data_format = data_format or config.image_data_format()
    images = _batched(images, "plot_segmentation_mask_gallery")
    if data_format == "channels_first":
        images = np.transpose(images, (0, 2, 3, 1))

    def drawn(masks):
        masks = ops.convert_to_numpy(masks)
        if data_format == "channels_first":
            masks = np.transpose(masks, (0, 2, 3, 1)) if masks.ndim == 4 else masks
        return draw_segmentation_masks(
            images,
            masks.astype("int32"),
            num_classes=num_classes,
            color_mapping=color_mapping,
            alpha=alpha,
            blend=blend,
            ignore_index=ignore_index,
            data_format="channels_last",
        )

    columns = [images]
    if y_true is not None:
        columns.append(drawn(y_true))
    if y_pred is not None:
        columns.append(drawn(y_pred))
    # One row per image: the image, then its drawn masks.
    gallery = np.stack([column[i] for i in range(images.shape[0]) for column in columns])
    return plot_image_gallery(
        gallery,
        value_range=value_range,
        rows=images.shape[0],
        cols=len(columns),
        data_format="channels_last",
        **kwargs,
    )
