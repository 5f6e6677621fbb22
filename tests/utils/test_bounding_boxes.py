"""keratron.utils.bounding_boxes against Keras 3's keras.utils.bounding_boxes (torch backend).

Where keratron accepts a format that Keras's function rejects (crop, pad, affine_transform and
clip_to_image_size in formats other than xyxy), the reference is Keras's own composition:
convert to xyxy, apply, convert back.
"""

import numpy as np
import pytest

import keratron as kt
from keratron.utils import bounding_boxes as bb
from tests.conftest import require

FORMATS = bb.SUPPORTED_FORMATS
HEIGHT, WIDTH = 37, 53  # irregular, and different, so x and y mix-ups show
ABSOLUTE = [f for f in FORMATS if not f.startswith("rel_")]


def _keras_bb():
    keras = require("keras")
    return keras, keras.utils.bounding_boxes


def _np(x):
    if isinstance(x, kt.Tensor):
        return x.numpy()
    return np.asarray(x.detach().cpu()) if hasattr(x, "detach") else np.asarray(x)


def _xyxy(rng, shape, height=HEIGHT, width=WIDTH):
    """Random xyxy boxes, some reaching outside the image."""
    x = rng.uniform(-0.2 * width, 1.1 * width, size=shape + (2,))
    y = rng.uniform(-0.2 * height, 1.1 * height, size=shape + (2,))
    w = rng.uniform(0.5, 0.4 * width, size=shape)
    h = rng.uniform(0.5, 0.4 * height, size=shape)
    return np.stack([x[..., 0], y[..., 0], x[..., 0] + w, y[..., 0] + h], -1).astype("float32")


def _boxes_in(rng, fmt, shape, keras_bb):
    """Random boxes in `fmt`, made by Keras from random xyxy boxes."""
    boxes = _xyxy(rng, shape)
    return _np(keras_bb.convert_format(boxes, "xyxy", fmt, height=HEIGHT, width=WIDTH))


@pytest.mark.interop
@pytest.mark.parametrize("source", FORMATS)
def test_convert_format_every_pair_matches_keras(source, rng):
    _, kbb = _keras_bb()
    for shape in [(7,), (3, 5)]:
        boxes = _boxes_in(rng, source, shape, kbb)
        for target in FORMATS:
            expected = _np(kbb.convert_format(boxes, source, target, height=HEIGHT, width=WIDTH))
            got = bb.convert_format(boxes, source, target, height=HEIGHT, width=WIDTH)
            assert isinstance(got, kt.Tensor) and got.dtype == "float32"
            np.testing.assert_allclose(
                got.numpy(), expected, rtol=1e-6, atol=1e-6, err_msg=f"{source}->{target}"
            )


@pytest.mark.interop
def test_convert_format_dict_case_dtype_and_tensor_input(rng):
    _, kbb = _keras_bb()
    boxes = rng.integers(0, 40, size=(2, 4, 4))
    labels = rng.integers(0, 3, size=(2, 4))
    expected = kbb.convert_format(
        {"boxes": boxes, "labels": labels}, "XYWH", "Center_YXHW", dtype="float64"
    )
    ours_in = {"boxes": kt.convert_to_tensor(boxes), "labels": labels}
    got = bb.convert_format(ours_in, "XYWH", "Center_YXHW", dtype="float64")
    assert got is ours_in and got["labels"] is labels  # converted in place, as Keras does
    assert got["boxes"].dtype == "float64"
    np.testing.assert_allclose(got["boxes"].numpy(), _np(expected["boxes"]), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(boxes=np.zeros((3, 5)), source="xyxy", target="xywh"), "last axis"),
        (dict(boxes=np.zeros((3, 4)), source="xyxy", target="corners"), "target"),
        (dict(boxes=np.zeros((3, 4)), source="rel_xyxy", target="xyxy", height=2), "height"),
        (dict(boxes=np.zeros((3, 4)), source="rel_xyxy", target="rel_xywh"), "height"),
    ],
)
def test_convert_format_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bb.convert_format(**kwargs)


@pytest.mark.interop
@pytest.mark.parametrize("fmt", FORMATS)
def test_clip_to_image_size_matches_keras(fmt, rng):
    _, kbb = _keras_bb()
    rel = fmt.startswith("rel_")
    base = "rel_xyxy" if rel else "xyxy"
    for shape in [(9,), (2, 6)]:
        xyxy = _xyxy(rng, shape)
        xyxy[..., 0, 2] = xyxy[..., 0, 0]  # a zero-width box loses its label
        boxes = _np(kbb.convert_format(xyxy, "xyxy", fmt, height=HEIGHT, width=WIDTH))
        labels = rng.integers(0, 5, size=shape)
        base_boxes = kbb.convert_format(boxes, fmt, base, height=HEIGHT, width=WIDTH)
        expected = kbb.clip_to_image_size(
            {"boxes": base_boxes, "labels": labels},
            height=HEIGHT,
            width=WIDTH,
            bounding_box_format=base,
        )
        expected_boxes = kbb.convert_format(
            expected["boxes"], base, fmt, height=HEIGHT, width=WIDTH
        )
        got = bb.clip_to_image_size(
            {"boxes": boxes, "labels": labels, "extra": "kept"},
            height=None if rel else HEIGHT,
            width=None if rel else WIDTH,
            bounding_box_format=fmt,
        )
        assert got["extra"] == "kept"
        np.testing.assert_allclose(got["boxes"].numpy(), _np(expected_boxes), atol=2e-5)
        np.testing.assert_array_equal(got["labels"].numpy(), _np(expected["labels"]))
        assert (got["labels"].numpy()[..., 0] == -1).all()


@pytest.mark.interop
def test_clip_to_image_size_integer_boxes_without_labels():
    _, kbb = _keras_bb()
    boxes = np.array([[-10, -20, 150, 160], [50, 40, 70, 80]])
    expected = kbb.clip_to_image_size({"boxes": boxes}, height=100, width=120)
    got = bb.clip_to_image_size({"boxes": boxes}, height=100, width=120)
    assert "labels" not in got and got["boxes"].dtype == "int64"
    np.testing.assert_array_equal(got["boxes"].numpy(), _np(expected["boxes"]))


def test_clip_to_image_size_errors():
    with pytest.raises(ValueError, match="height"):
        bb.clip_to_image_size({"boxes": np.zeros((1, 4))})
    with pytest.raises(ValueError, match="dict"):
        bb.clip_to_image_size(np.zeros((1, 4)), height=1, width=1)


def _affine_params(rng, batch):
    return dict(
        angle=rng.uniform(-40, 40, batch).astype("float32"),
        translate_x=rng.uniform(-0.3, 0.3, batch).astype("float32"),
        translate_y=rng.uniform(-0.3, 0.3, batch).astype("float32"),
        scale=rng.uniform(0.6, 1.5, batch).astype("float32"),
        shear_x=rng.uniform(-20, 20, batch).astype("float32"),
        shear_y=rng.uniform(-20, 20, batch).astype("float32"),
        center_x=rng.uniform(0.2, 0.8, batch).astype("float32"),
        center_y=rng.uniform(0.2, 0.8, batch).astype("float32"),
    )


@pytest.mark.interop
@pytest.mark.parametrize("centre", [True, False])
def test_affine_transform_matches_keras(centre, rng):
    keras, kbb = _keras_bb()
    boxes = _xyxy(rng, (3, 7))
    params = _affine_params(rng, 3)
    if not centre:
        del params["center_x"], params["center_y"]
    kparams = {k: keras.ops.convert_to_tensor(v) for k, v in params.items()}
    expected = kbb.affine_transform(boxes, height=HEIGHT, width=WIDTH, **kparams)
    got = bb.affine_transform(boxes, height=HEIGHT, width=WIDTH, **params)
    assert got.shape == (3, 7, 4) and got.dtype == "float32"
    np.testing.assert_allclose(got.numpy(), _np(expected), rtol=1e-5, atol=1e-3)


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ["center_yxhw", "rel_xywh"])
def test_affine_transform_unbatched_scalars_and_other_formats(fmt, rng):
    keras, kbb = _keras_bb()
    xyxy = _xyxy(rng, (5,))
    boxes = _np(kbb.convert_format(xyxy, "xyxy", fmt, height=HEIGHT, width=WIDTH))
    scalars = dict(angle=25.0, translate_x=0.1, translate_y=-0.2, scale=1.2, shear_x=5.0)
    batched = {k: keras.ops.convert_to_tensor([v], "float32") for k, v in scalars.items()}
    batched["shear_y"] = keras.ops.convert_to_tensor([-3.0])
    moved = kbb.affine_transform(xyxy[None], height=HEIGHT, width=WIDTH, **batched)
    expected = kbb.convert_format(moved[0], "xyxy", fmt, height=HEIGHT, width=WIDTH)
    got = bb.affine_transform(
        boxes, **scalars, shear_y=-3, height=HEIGHT, width=WIDTH, bounding_box_format=fmt
    )
    assert got.shape == (5, 4)
    np.testing.assert_allclose(got.numpy(), _np(expected), rtol=1e-5, atol=1e-4)


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ABSOLUTE)
def test_crop_and_pad_match_keras(fmt, rng):
    _, kbb = _keras_bb()
    for shape in [(6,), (2, 5)]:
        xyxy = _xyxy(rng, shape)
        boxes = _np(kbb.convert_format(xyxy, "xyxy", fmt))

        cropped = kbb.crop(xyxy, top=4, left=7, height=21, width=30)
        expected = kbb.convert_format(cropped, "xyxy", fmt)
        got = bb.crop(boxes, top=4, left=7, height=21, width=30, bounding_box_format=fmt)
        np.testing.assert_allclose(got.numpy(), _np(expected), atol=1e-5)

        padded = kbb.pad(xyxy, top=3, left=11)
        expected = kbb.convert_format(padded, "xyxy", fmt)
        got = bb.pad(boxes, top=3, left=11, bounding_box_format=fmt)
        np.testing.assert_allclose(got.numpy(), _np(expected), atol=1e-5)


@pytest.mark.interop
def test_crop_and_pad_keep_integer_boxes():
    _, kbb = _keras_bb()
    boxes = np.array([[10, 20, 50, 60], [70, 80, 100, 120]])
    for ours, theirs in [
        (bb.crop(boxes, 10, 20, 40, 30), kbb.crop(boxes, 10, 20, 40, 30)),
        (bb.pad(kt.convert_to_tensor(boxes), 5, 2), kbb.pad(boxes, 5, 2)),
    ]:
        assert ours.dtype == "int64"
        np.testing.assert_array_equal(ours.numpy(), _np(theirs))


def test_crop_without_size_only_clips_at_zero_and_rejects_relative():
    got = bb.crop(np.array([[5.0, 5.0, 90.0, 70.0]]), top=10, left=2, height=None, width=None)
    np.testing.assert_array_equal(got.numpy(), [[3.0, 0.0, 88.0, 60.0]])
    with pytest.raises(ValueError, match="relative"):
        bb.crop(np.zeros((1, 4)), 1, 1, 5, 5, bounding_box_format="rel_xyxy")
    with pytest.raises(ValueError, match="relative"):
        bb.pad(np.zeros((1, 4)), 1, 1, bounding_box_format="rel_xywh")


@pytest.mark.interop
@pytest.mark.parametrize("encoding", ["center_yxhw", "center_xywh"])
@pytest.mark.parametrize(
    "anchor_format,box_format,variance",
    [("xyxy", "xywh", None), ("rel_yxyx", "rel_center_xywh", [0.1, 0.1, 0.2, 0.2])],
)
def test_encode_and_decode_deltas_match_keras(anchor_format, box_format, variance, encoding, rng):
    keras, kbb = _keras_bb()
    shape = (HEIGHT, WIDTH, 3)
    anchors = _boxes_in(rng, anchor_format, (11,), kbb)
    boxes = _boxes_in(rng, box_format, (2, 11), kbb)
    args = (anchor_format, box_format, encoding, variance, shape)
    expected = _np(kbb.encode_box_to_deltas(anchors, boxes, *args))
    deltas = bb.encode_box_to_deltas(anchors, boxes, *args)
    np.testing.assert_allclose(deltas.numpy(), expected, rtol=1e-5, atol=1e-5)

    # Keras's decoding needs its own tensors (a numpy array times a torch tensor fails).
    expected = keras.ops.convert_to_tensor(expected)
    expected = _np(kbb.decode_deltas_to_boxes(anchors, expected, *args))
    decoded = bb.decode_deltas_to_boxes(anchors, deltas, *args)
    np.testing.assert_allclose(decoded.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(decoded.numpy(), boxes, rtol=1e-4, atol=1e-4)


@pytest.mark.interop
def test_decode_deltas_per_level_dict(rng):
    keras, kbb = _keras_bb()
    anchors = {"P3": _xyxy(rng, (6,)), "P4": _xyxy(rng, (3,))}
    deltas = {k: rng.normal(0, 0.3, (2,) + v.shape).astype("float32") for k, v in anchors.items()}
    kdeltas = {k: keras.ops.convert_to_tensor(v) for k, v in deltas.items()}
    expected = kbb.decode_deltas_to_boxes(anchors, kdeltas, "xyxy", "yxyx")
    got = bb.decode_deltas_to_boxes(anchors, deltas, "xyxy", "yxyx")
    assert set(got) == {"P3", "P4"}
    for level in anchors:
        np.testing.assert_allclose(got[level].numpy(), _np(expected[level]), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fn", [bb.encode_box_to_deltas, bb.decode_deltas_to_boxes])
def test_deltas_errors(fn):
    box = np.zeros((1, 4))
    with pytest.raises(ValueError, match="variance"):
        fn(box, box, "xyxy", "xyxy", "center_yxhw", [1.0, 1.0])
    with pytest.raises(ValueError, match="center_xywh"):
        fn(box, box, "xyxy", "xyxy", "xyxy")


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ["xyxy", "center_xywh", "rel_yxyx"])
@pytest.mark.parametrize("shapes", [((7,), (5,)), ((2, 7), (2, 5)), ((2, 7), (5,)), ((7,), (2, 5))])
def test_compute_iou_matches_keras(fmt, shapes, rng):
    _, kbb = _keras_bb()
    boxes1 = _boxes_in(rng, fmt, shapes[0], kbb)
    boxes2 = _boxes_in(rng, fmt, shapes[1], kbb)
    boxes2[..., :2, :] = boxes1.reshape(-1, 4)[:2]  # some overlapping pairs
    image_shape = (HEIGHT, WIDTH, 3)
    expected = _np(kbb.compute_iou(boxes1, boxes2, fmt, image_shape=image_shape))
    got = bb.compute_iou(boxes1, boxes2, fmt, image_shape=image_shape)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert got.numpy().max() > 0.99  # the copied boxes


@pytest.mark.interop
@pytest.mark.parametrize("batched", [False, True])
def test_compute_iou_masking_matches_keras(batched, rng):
    _, kbb = _keras_bb()
    lead = (2,) if batched else ()
    boxes1 = _xyxy(rng, lead + (6,))
    boxes2 = _xyxy(rng, lead + (4,))
    boxes1[..., 1, :] = -1.0
    boxes2[..., 3, :] = -1.0
    expected = _np(kbb.compute_iou(boxes1, boxes2, "xyxy", use_masking=True, mask_val=-7))
    got = bb.compute_iou(boxes1, boxes2, "xyxy", use_masking=True, mask_val=-7)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert (got.numpy()[..., 1, :] == -7).all()


@pytest.mark.interop
def test_compute_iou_masking_with_mixed_ranks(rng):
    # Keras's masking fails for mixed ranks; keratron gives Keras's batched result.
    _, kbb = _keras_bb()
    boxes1, boxes2 = _xyxy(rng, (6,)), _xyxy(rng, (2, 4))
    boxes1[1] = -1.0
    boxes2[0, 3] = -1.0
    batched1 = np.broadcast_to(boxes1, (2, 6, 4))
    expected = _np(kbb.compute_iou(batched1, boxes2, "xyxy", use_masking=True))
    got = bb.compute_iou(boxes1, boxes2, "xyxy", use_masking=True)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)
    expected = _np(kbb.compute_iou(boxes2, batched1, "xyxy", use_masking=True))
    got = bb.compute_iou(boxes2, boxes1, "xyxy", use_masking=True)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_compute_iou_errors():
    with pytest.raises(ValueError, match="boxes1"):
        bb.compute_iou(np.zeros((4,)), np.zeros((2, 4)), "xyxy")
    with pytest.raises(ValueError, match="image_shape"):
        bb.compute_iou(np.zeros((1, 4)), np.zeros((2, 4)), "rel_xyxy")


@pytest.mark.interop
@pytest.mark.parametrize("fmt", ["xyxy", "yxyx", "xywh", "center_yxhw"])
def test_compute_ciou_matches_keras(fmt, rng):
    _, kbb = _keras_bb()
    boxes1 = _boxes_in(rng, fmt, (3, 8), kbb)
    boxes2 = _boxes_in(rng, fmt, (3, 8), kbb)
    boxes2[:, 0] = boxes1[:, 0]
    expected = _np(kbb.compute_ciou(boxes1, boxes2, fmt))
    got = bb.compute_ciou(boxes1, boxes2, fmt)
    assert got.shape == (3, 8)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.numpy()[:, 0], 1.0, atol=1e-5)


@pytest.mark.interop
def test_compute_ciou_relative_with_image_shape(rng):
    # Keras rejects relative formats even with `image_shape`; keratron scales them by it.
    _, kbb = _keras_bb()
    boxes1, boxes2 = _xyxy(rng, (6,)), _xyxy(rng, (6,))
    expected = _np(kbb.compute_ciou(boxes1, boxes2, "xyxy"))
    rel = [_np(kbb.convert_format(b, "xyxy", "rel_xywh", HEIGHT, WIDTH)) for b in (boxes1, boxes2)]
    got = bb.compute_ciou(*rel, "rel_xywh", image_shape=(HEIGHT, WIDTH, 3))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="image_shape"):
        bb.compute_ciou(*rel, "rel_xywh")


@pytest.mark.interop
@pytest.mark.parametrize("fn", ["compute_ciou", "compute_iou"])
def test_gradients_match_keras_under_torch_autograd(fn, rng):
    """The losses built on these (CIoU, IoU) train boxes: keratron's tape against torch's
    autograd through Keras's function."""
    _, kbb = _keras_bb()
    torch = require("torch")
    boxes1, boxes2 = _xyxy(rng, (5,)), _xyxy(rng, (5,))
    boxes2[:2] = boxes1[:2] + 1.5  # overlapping pairs, so every term has a gradient

    theirs = torch.tensor(boxes1, requires_grad=True)
    torch.sum(getattr(kbb, fn)(theirs, torch.tensor(boxes2), "xywh")).backward()

    ours = kt.Variable(boxes1)
    with kt.GradientTape() as tape:
        loss = kt.ops.sum(getattr(bb, fn)(ours, boxes2, "xywh"))
    np.testing.assert_allclose(
        tape.gradient(loss, ours).numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-6
    )
