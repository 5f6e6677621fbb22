"""draw_bounding_boxes and draw_segmentation_masks against Keras 3.

Keras draws boxes with OpenCV, not a test dependency: its outputs for 29 cases are stored in
data/ (see make_keras_references.py) and compared with here; where cv2 is importable, more
random cases are compared live. draw_segmentation_masks needs no OpenCV and runs live.
"""

import json
import os

import numpy as np
import pytest

import keratron as kt
from keratron.visualization import draw_bounding_boxes, draw_segmentation_masks
from tests.conftest import require

DATA = os.path.join(os.path.dirname(__file__), "data", "keras_draw_bounding_boxes.npz")


def _stored_cases():
    with np.load(DATA) as data:
        arrays = {k: data[k] for k in data.files}
    count = len({k.split("/")[0] for k in arrays})
    return [
        {k.split("/")[1]: v for k, v in arrays.items() if k.startswith(f"{i}/")}
        for i in range(count)
    ]


CASES = _stored_cases()


def _draw(case, **override):
    args = json.loads(str(case["args"]))
    if "class_mapping" in args:
        args["class_mapping"] = {int(k): v for k, v in args["class_mapping"].items()}
    args.update(override)
    boxes = {k: case[k] for k in ("boxes", "labels", "confidences") if k in case}
    return draw_bounding_boxes(case["images"], boxes, **args)


@pytest.mark.parametrize("i", [i for i, c in enumerate(CASES) if "unlabelled" not in c])
def test_boxes_equal_keras_opencv_pixels(i):
    case = CASES[i]
    got = _draw(case)
    assert got.dtype == np.uint8 and got.shape == case["expected"].shape
    np.testing.assert_array_equal(got, case["expected"])


def test_stored_cases_cover_formats_thicknesses_and_image_kinds():
    args = [json.loads(str(c["args"])) for c in CASES]
    assert {a["bounding_box_format"] for a in args} == set(
        kt.utils.bounding_boxes.SUPPORTED_FORMATS
    )
    assert {a.get("line_thickness", 2) for a in args} >= {-1, 0, 1, 2, 3, 4, 5}
    # uint8 and float images, floats in [0, 1] (scaled) and beyond (clipped), 1, 3, 4 channels
    kinds = {(c["images"].dtype.kind, float(c["images"].max()) > 1) for c in CASES}
    assert kinds == {("u", True), ("f", False), ("f", True)}
    assert {c["images"].shape[-1] for c in CASES} == {1, 3, 4}


@pytest.mark.parametrize("i", [i for i, c in enumerate(CASES) if "unlabelled" in c])
def test_labels_are_drawn_where_keras_draws_them(i):
    """Glyphs differ (Pillow's font, not OpenCV's Hershey font); everything but the label
    pixels is Keras's, and the labels take the box colour over about the same area."""
    case = CASES[i]
    got = _draw(case)
    background = case["unlabelled"]
    keras_text = (case["expected"] != background).any(-1)
    our_text = (got != background).any(-1)
    np.testing.assert_array_equal(got[~our_text], background[~our_text])
    color = np.array(json.loads(str(case["args"]))["color"], "uint8")
    assert (got[our_text] == color).all()
    for b in range(got.shape[0]):
        theirs, ours = np.argwhere(keras_text[b]), np.argwhere(our_text[b])
        np.testing.assert_allclose(ours.min(0), theirs.min(0), atol=3)
        np.testing.assert_allclose(ours.max(0), theirs.max(0), atol=7)
        assert 0.4 < len(ours) / len(theirs) < 1.5


@pytest.mark.interop
def test_live_against_keras_when_opencv_is_installed(rng):
    require("cv2")  # Keras draws with OpenCV (the interop extra installs it)
    keras = require("keras")
    for _ in range(40):
        height, width = (int(v) for v in rng.integers(5, 40, 2))
        images = rng.integers(0, 256, (2, height, width, 3)).astype("uint8")
        xy = rng.uniform(-10, max(height, width) + 10, (2, 3, 4)).astype("float32")
        bb = {"boxes": xy, "labels": rng.integers(-1, 2, (2, 3))}
        args = dict(color=tuple(int(v) for v in rng.integers(0, 256, 3)))
        args["line_thickness"] = int(rng.integers(-1, 8))
        expected = keras.visualization.draw_bounding_boxes(images, dict(bb), "xyxy", **args)
        np.testing.assert_array_equal(
            draw_bounding_boxes(images, dict(bb), "xyxy", **args), expected
        )


def test_draw_bounding_boxes_channels_first_and_tensor_inputs():
    images = np.zeros((1, 3, 12, 14), "float32")
    bb = {"boxes": kt.convert_to_tensor([[[2.0, 3.0, 10.0, 9.0]]]), "labels": np.array([[1]])}
    got = draw_bounding_boxes(
        kt.convert_to_tensor(images), bb, "xyxy", color=(9, 8, 7), data_format="channels_first"
    )
    last = draw_bounding_boxes(images.transpose(0, 2, 3, 1), bb, "xyxy", color=(9, 8, 7))
    assert got.shape == (1, 3, 12, 14)
    np.testing.assert_array_equal(got.transpose(0, 2, 3, 1), last)
    assert last[0, 3, 6].tolist() == [9, 8, 7] and last[0, 6, 6].tolist() == [0, 0, 0]


def test_draw_bounding_boxes_errors():
    bb = {"boxes": np.zeros((1, 1, 4)), "labels": np.zeros((1, 1))}
    with pytest.raises(ValueError, match="4D"):
        draw_bounding_boxes(np.zeros((4, 4, 3)), bb, "xyxy")
    with pytest.raises(TypeError, match="dict"):
        draw_bounding_boxes(np.zeros((1, 4, 4, 3)), np.zeros((1, 1, 4)), "xyxy")
    with pytest.raises(ValueError, match="labels"):
        draw_bounding_boxes(np.zeros((1, 4, 4, 3)), {"boxes": bb["boxes"]}, "xyxy")


def _masks_case(rng, channels=3):
    images = rng.uniform(0, 255, (2, 13, 17, channels)).astype("float32")
    masks = rng.integers(-1, 5, (2, 13, 17, 1)).astype("int32")
    return images, masks


@pytest.mark.interop
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_classes=5),
        dict(num_classes=5, alpha=0.35),
        dict(num_classes=6, ignore_index=2),
        dict(num_classes=5, color_mapping={i: (40 * i, 255 - 30 * i, 7 * i) for i in range(5)}),
    ],
)
def test_draw_segmentation_masks_matches_keras(kwargs, rng):
    keras = require("keras")
    images, masks = _masks_case(rng)
    expected = keras.visualization.draw_segmentation_masks(images, masks, **kwargs)
    got = draw_segmentation_masks(images, masks, **kwargs)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, expected)


@pytest.mark.interop
def test_draw_segmentation_masks_default_num_classes_colours_every_id(rng):
    # Keras infers max(masks) classes, which its torch backend's one_hot rejects when that
    # id is present; keratron infers max(masks) + 1, as Keras with that number.
    keras = require("keras")
    images, masks = _masks_case(rng)
    expected = keras.visualization.draw_segmentation_masks(images, masks, num_classes=5)
    np.testing.assert_array_equal(draw_segmentation_masks(images, masks), expected)


@pytest.mark.interop
def test_draw_segmentation_masks_without_blending_matches_keras(rng):
    keras = require("keras")
    images, masks = _masks_case(rng)
    expected = keras.ops.convert_to_numpy(
        keras.visualization.draw_segmentation_masks(images, masks, num_classes=5, blend=False)
    )
    got = draw_segmentation_masks(kt.convert_to_tensor(images), masks, num_classes=5, blend=False)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.interop
def test_draw_segmentation_masks_channels_first_and_rank_3_masks(rng):
    keras = require("keras")
    images, masks = _masks_case(rng)
    expected = keras.visualization.draw_segmentation_masks(images, masks, num_classes=5)
    got = draw_segmentation_masks(
        images.transpose(0, 3, 1, 2),
        masks.transpose(0, 3, 1, 2),
        num_classes=5,
        data_format="channels_first",
    )
    np.testing.assert_array_equal(got.transpose(0, 2, 3, 1), expected)
    np.testing.assert_array_equal(draw_segmentation_masks(images, masks[..., 0], 5), expected)


def test_draw_segmentation_masks_errors():
    with pytest.raises(TypeError, match="integer"):
        draw_segmentation_masks(np.zeros((1, 2, 2, 3)), np.zeros((1, 2, 2, 1)), 2)
    with pytest.raises(ValueError, match="4D"):
        draw_segmentation_masks(np.zeros((2, 2, 3)), np.zeros((2, 2, 1), int), 2)
