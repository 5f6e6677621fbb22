"""The plot_* galleries against Keras 3's: the same figure (size, axes, titles, legend, the
arrays each axis shows), drawn with matplotlib's Agg backend.

Keras's bounding-box gallery draws with OpenCV, not a test dependency: the images it shows for
one case are stored in data/ (see make_keras_references.py); its galleries without boxes run
live.
"""

import os

import numpy as np
import pytest

import keratron as kt
from keratron import visualization as vis
from tests.conftest import require

GALLERY = os.path.join(os.path.dirname(__file__), "data", "keras_bounding_box_gallery.npz")


@pytest.fixture(autouse=True)
def plt():
    plt = require("matplotlib.pyplot")
    plt.switch_backend("Agg")
    plt.close("all")
    yield plt
    plt.close("all")


def _figure(plt):
    """What a gallery shows: figure size, each axis's title, visibility and images, legend."""
    fig = plt.gcf()
    return dict(
        size=tuple(fig.get_size_inches()),
        axes=[
            (ax.get_title(), ax.axison, [np.asarray(im.get_array()) for im in ax.images])
            for ax in fig.axes
        ],
        legend=[t.get_text() for legend in fig.legends for t in legend.get_texts()],
    )


def _assert_same_figure(ours, theirs):
    assert ours["size"] == theirs["size"]
    assert ours["legend"] == theirs["legend"]
    assert len(ours["axes"]) == len(theirs["axes"])
    for (title, on, images), (k_title, k_on, k_images) in zip(ours["axes"], theirs["axes"]):
        assert (title, on, len(images)) == (k_title, k_on, len(k_images))
        for a, b in zip(images, k_images):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _both(plt, name, *args, keras_args=None, keras_kwargs=None, **kwargs):
    keras = require("keras")
    keras_kwargs = kwargs if keras_kwargs is None else keras_kwargs
    getattr(keras.visualization, name)(*(keras_args or args), show=False, **keras_kwargs)
    theirs = _figure(plt)
    plt.close("all")
    getattr(vis, name)(*args, show=False, **kwargs)
    return _figure(plt), theirs


@pytest.mark.interop
@pytest.mark.parametrize(
    "batch,kwargs",
    [
        (5, {}),  # Keras's grid: 3 rows of 5 // 3 = 1 column
        (7, dict(rows=2, cols=3, scale=1.5)),
        (4, dict(value_range=(0, 1))),
        (3, dict(rows=1, data_format="channels_first")),
    ],
)
def test_plot_image_gallery_matches_keras(plt, batch, kwargs, rng):
    high = 1.0 if kwargs.get("value_range") == (0, 1) else 255.0
    images = rng.uniform(0, high, (batch, 11, 14, 3)).astype("float32")
    ours_images, keras_kwargs = images, None
    if kwargs.get("data_format") == "channels_first":
        # Keras transposes channels-first images twice (a broken figure): its reference is
        # the channels-last gallery of the same images.
        ours_images = images.transpose(0, 3, 1, 2)
        keras_kwargs = {k: v for k, v in kwargs.items() if k != "data_format"}
    ours, theirs = _both(
        plt,
        "plot_image_gallery",
        ours_images,
        keras_args=(images,),
        keras_kwargs=keras_kwargs,
        **kwargs,
    )
    _assert_same_figure(ours, theirs)
    assert all(on is False for _, on, _ in ours["axes"])


@pytest.mark.interop
def test_plot_image_gallery_titles_and_legend_match_keras(plt, rng):
    patches = require("matplotlib.patches")
    images = rng.integers(0, 256, (4, 9, 10, 3)).astype("uint8")
    handles = [patches.Patch(color="red", label="mine")]
    label_map = {0: "cat", 1: "dog"}
    ours, theirs = _both(
        plt,
        "plot_image_gallery",
        kt.convert_to_tensor(images),
        keras_args=(images,),
        y_true=np.array([0, 1, 5, 1]),
        y_pred=np.array([1, 1, 0]),
        label_map=label_map,
        legend_handles=handles,
    )
    _assert_same_figure(ours, theirs)
    assert ours["axes"][2][0] == "Label: Unknown  Pred: cat" and ours["legend"] == ["mine"]


def test_plot_image_gallery_saves_to_path_and_closes(plt, tmp_path, rng):
    path = tmp_path / "gallery.png"
    vis.plot_image_gallery(rng.integers(0, 256, (4, 8, 8, 3)), path=str(path))
    assert path.stat().st_size > 0 and plt.get_fignums() == []


def test_plot_image_gallery_leaves_cells_beyond_the_batch_empty(plt):
    vis.plot_image_gallery(np.zeros((5, 4, 4, 3)), rows=2, cols=3, show=False)
    axes = plt.gcf().axes
    assert len(axes) == 6 and [len(ax.images) for ax in axes] == [1] * 5 + [0]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(path="x.png", show=True), "path"),
        (dict(y_true=np.zeros(2)), "label_map"),
    ],
)
def test_plot_image_gallery_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        vis.plot_image_gallery(np.zeros((2, 4, 4, 3)), **kwargs)


def test_plot_bounding_box_gallery_shows_what_keras_shows(plt):
    with np.load(GALLERY) as data:
        ref = {k: data[k] for k in data.files}
    boxes, labels = ref["boxes"], ref["labels"]
    vis.plot_bounding_box_gallery(
        ref["images"],
        "xyxy",
        y_true={"boxes": boxes[0], "labels": labels[0]},
        y_pred={"boxes": boxes[1], "labels": labels[1]},
        legend=True,
        show=False,
    )
    shown = np.stack([ax.images[0].get_array() for ax in plt.gcf().axes])
    np.testing.assert_array_equal(shown, ref["shown"])
    legend = [t.get_text() for t in plt.gcf().legends[0].get_texts()]
    assert legend == ["Ground Truth", "Prediction"]


@pytest.mark.interop
def test_plot_bounding_box_gallery_without_boxes_matches_keras(plt, rng):
    images = rng.uniform(0, 1, (4, 10, 12, 3)).astype("float32")
    ours, theirs = _both(
        plt, "plot_bounding_box_gallery", images, "xyxy", value_range=(0, 1), legend=True
    )
    _assert_same_figure(ours, theirs)


def test_plot_bounding_box_gallery_rejects_legend_and_handles():
    with pytest.raises(ValueError, match="legend"):
        vis.plot_bounding_box_gallery(
            np.zeros((1, 4, 4, 3)), "xyxy", legend=True, legend_handles=[object()]
        )


@pytest.mark.interop
@pytest.mark.parametrize("which", ["both", "true", "pred_channels_first"])
def test_plot_segmentation_mask_gallery_matches_keras(plt, which, rng):
    images = rng.uniform(0, 255, (3, 9, 13, 3)).astype("float32")
    y_true = rng.integers(-1, 4, (3, 9, 13, 1))
    y_pred = rng.integers(0, 4, (3, 9, 13, 1))
    kwargs = dict(num_classes=4, alpha=0.6)
    if which == "both":
        kwargs.update(y_true=y_true, y_pred=y_pred)
    elif which == "true":
        kwargs.update(y_true=y_true, ignore_index=0, scale=1)
    else:
        images = images.transpose(0, 3, 1, 2)
        kwargs.update(y_pred=y_pred.transpose(0, 3, 1, 2), data_format="channels_first")
    ours, theirs = _both(plt, "plot_segmentation_mask_gallery", images, **kwargs)
    _assert_same_figure(ours, theirs)
    columns = 1 + sum(k in kwargs for k in ("y_true", "y_pred"))
    assert len(ours["axes"]) == 3 * columns
