"""Writes data/keras_draw_bounding_boxes.npz (Keras 3's `draw_bounding_boxes` outputs) and
data/keras_bounding_box_gallery.npz (the images Keras's `plot_bounding_box_gallery` shows).

Keras draws with OpenCV, which is not a test dependency, so its outputs are stored once:
`KERAS_BACKEND=torch python -m tests.visualization.make_keras_references` with `cv2`
importable (`pip install opencv-python-headless`). Each case `i` stores its inputs
(`i/images`, `i/boxes`, `i/labels`, optionally `i/confidences`), its arguments (`i/args`, a
JSON string) and Keras's output (`i/expected`); a labelled case also stores Keras's output for
the same boxes without labels (`i/unlabelled`), which locates the label pixels.
"""

import json
import os

import numpy as np

PATH = os.path.join(os.path.dirname(__file__), "data", "keras_draw_bounding_boxes.npz")
GALLERY_PATH = os.path.join(os.path.dirname(__file__), "data", "keras_bounding_box_gallery.npz")


def _random_case(rng, fmt, keras):
    height, width = (int(v) for v in rng.integers(9, 48, 2))
    batch, n = 2, int(rng.integers(1, 6))
    channels = int(rng.choice([1, 3, 4]))
    kind = rng.choice(["uint8", "unit_float", "float"])
    # Few distinct values keep the stored file small; the float ones still need clipping
    # (below 0, above 255) and scaling ([0, 1]).
    levels = rng.integers(0, 4, (batch, height, width, channels))
    if kind == "uint8":
        images = (levels * 85).astype("uint8")
    elif kind == "unit_float":
        images = (levels / 3.0).astype("float32")
    else:
        images = (levels * 100.0 - 20.5).astype("float32")
    x = rng.uniform(-12, width + 12, (batch, n, 2))
    y = rng.uniform(-12, height + 12, (batch, n, 2))
    xyxy = np.stack([x[..., 0], y[..., 0], x[..., 1], y[..., 1]], -1).astype("float32")
    boxes = keras.ops.convert_to_numpy(
        keras.utils.bounding_boxes.convert_format(xyxy, "xyxy", fmt, height=height, width=width)
    )
    labels = rng.integers(-1, 3, (batch, n))
    args = dict(
        bounding_box_format=fmt,
        color=[int(v) for v in rng.integers(0, 256, 3)],
        line_thickness=int(rng.choice([-1, 0, 1, 2, 3, 4, 5, 6, 9])),
    )
    return dict(images=images, boxes=boxes, labels=labels), args


def _labelled_cases():
    images = np.full((2, 90, 160, 3), 30, "uint8")
    boxes = np.array(
        [[[10, 40, 120, 80], [100, 5, 150, 60]], [[20, 50, 90, 85], [5, 5, 60, 30]]], "float32"
    )
    labels = np.array([[0, 1], [1, 2]])
    confidences = np.array([[0.93, 0.5], [0.25, 0.777]], "float32")
    mapping = {"0": "cat", "1": "dog", "2": "bird"}
    for font_scale, text_thickness, with_confidences in [(1.0, 1, True), (0.5, 2, False)]:
        inputs = dict(images=images, boxes=boxes, labels=labels)
        if with_confidences:
            inputs["confidences"] = confidences
        args = dict(
            bounding_box_format="xyxy",
            color=[255, 200, 0],
            class_mapping=mapping,
            font_scale=font_scale,
            text_thickness=text_thickness,
        )
        yield inputs, args


def _call(keras, inputs, args):
    args = dict(args)
    if "class_mapping" in args:
        args["class_mapping"] = {int(k): v for k, v in args["class_mapping"].items()}
    boxes = {k: inputs[k] for k in ("boxes", "labels", "confidences") if k in inputs}
    return keras.visualization.draw_bounding_boxes(inputs["images"], boxes, **args)


def _gallery_reference(keras, rng):
    """Keras's plot_bounding_box_gallery for 4 images: the arrays its axes show."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = (rng.integers(0, 4, (4, 24, 31, 3)) * 80).astype("uint8")
    xy = rng.uniform(-4, 34, (2, 4, 3, 4)).astype("float32")
    labels = rng.integers(-1, 3, (2, 4, 3))
    keras.visualization.plot_bounding_box_gallery(
        images,
        "xyxy",
        y_true={"boxes": xy[0], "labels": labels[0]},
        y_pred={"boxes": xy[1], "labels": labels[1]},
        legend=True,
        show=False,
    )
    shown = np.stack([ax.images[0].get_array() for ax in plt.gcf().axes])
    plt.close("all")
    return dict(images=images, boxes=xy, labels=labels, shown=shown)


def main():
    import cv2  # noqa: F401  (Keras's drawing needs it: fail here, not inside Keras)
    import keras

    rng = np.random.default_rng(2024)
    formats = ["xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy", "rel_yxyx"]
    formats += ["rel_xywh", "rel_center_xywh"]
    cases = [_random_case(rng, formats[i % len(formats)], keras) for i in range(27)]
    cases += list(_labelled_cases())
    arrays = {}
    for i, (inputs, args) in enumerate(cases):
        for name, value in inputs.items():
            arrays[f"{i}/{name}"] = value
        arrays[f"{i}/args"] = np.array(json.dumps(args))
        arrays[f"{i}/expected"] = _call(keras, inputs, args)
        if "class_mapping" in args:
            plain = {k: v for k, v in args.items() if k != "class_mapping"}
            arrays[f"{i}/unlabelled"] = _call(keras, inputs, plain)
    os.makedirs(os.path.dirname(PATH), exist_ok=True)
    np.savez_compressed(PATH, **arrays)
    print(f"{len(cases)} cases written to {PATH}")
    np.savez_compressed(GALLERY_PATH, **_gallery_reference(keras, rng))
    print(f"the gallery written to {GALLERY_PATH}")


if __name__ == "__main__":
    main()
