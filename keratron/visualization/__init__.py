"""`keras.visualization`: boxes and segmentation masks drawn on images, and image galleries.

The drawing functions need only numpy (labels on boxes: Pillow); the galleries need
matplotlib, imported when one is drawn.

Example:
    >>> images = np.zeros((2, 16, 16, 3), "uint8")
    >>> boxes = {"boxes": np.array([[[2, 2, 12, 12]]] * 2), "labels": np.zeros((2, 1), int)}
    >>> keratron.visualization.draw_bounding_boxes(images, boxes, "xyxy").shape
    (2, 16, 16, 3)
"""

from keratron.visualization.drawing import draw_bounding_boxes, draw_segmentation_masks
from keratron.visualization.galleries import (
    plot_bounding_box_gallery,
    plot_image_gallery,
    plot_segmentation_mask_gallery,
)

__all__ = [
    "draw_bounding_boxes",
    "draw_segmentation_masks",
    "plot_bounding_box_gallery",
    "plot_image_gallery",
    "plot_segmentation_mask_gallery",
]
