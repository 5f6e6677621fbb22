"""Keras's legacy `ImageDataGenerator`, its batch iterators and the random image transforms
(`keras.preprocessing.image` in tf.keras scripts).

The affine warp reproduces `scipy.ndimage.affine_transform` (which Keras calls per channel) in
numpy, for spline orders 0 and 1 and the fill modes "constant", "nearest", "reflect" and "wrap",
with scipy's own boundary conventions ("wrap" repeats with period `n - 1`, "reflect" reflects
a coordinate once, the interpolation window is clamped to the edge samples) and its order of
floating-point operations, so the values agree with scipy's to the bit. Random parameters are
drawn from numpy's global generator in Keras's order, so a seed gives Keras's transforms.

Example:
    >>> gen = keratron.preprocessing.image.ImageDataGenerator(rotation_range=10, rescale=1 / 255)
    >>> x, y = np.zeros((5, 8, 8, 3)), np.arange(5)
    >>> batches = gen.flow(x, y, batch_size=2, shuffle=False)
    >>> [batches[i][0].shape for i in range(len(batches))]
    [(2, 8, 8, 3), (2, 8, 8, 3), (1, 8, 8, 3)]
"""

from __future__ import annotations

import math
import os
import threading
import warnings

import numpy as np

from keratron import config
from keratron.utils.image_utils import array_to_img, img_to_array, load_img
from keratron.utils.io_utils import print_msg
from keratron.utils.py_dataset import PyDataset

__all__ = [
    "DirectoryIterator",
    "ImageDataGenerator",
    "Iterator",
    "NumpyArrayIterator",
    "apply_affine_transform",
    "apply_brightness_shift",
    "apply_channel_shift",
    "random_brightness",
    "random_channel_shift",
    "random_rotation",
    "random_shear",
    "random_shift",
    "random_zoom",
]

FILL_MODES = ("constant", "nearest", "reflect", "wrap")


# ---------------------------------------------------------------------------------------------
# The affine warp (scipy.ndimage.affine_transform, orders 0 and 1)
# ---------------------------------------------------------------------------------------------


def _map_coordinate(c, n, mode):
    """Maps input coordinates outside [0, n - 1] back inside, as scipy's interpolation does
    (one reflection or wrap, not an iterated one); -1 marks a constant-filled sample."""
    low, high = c < 0, c > n - 1
    if mode == "nearest":
        return c  # the interpolation window is clamped to the edge instead
    if mode == "constant":
        return np.where(low | high, -1.0, c)
    if n <= 1:
        return np.where(low | high, 0.0, c)
    if mode == "reflect":
        period = 2 * n
        lo = np.where(c < -period, period * np.trunc(-c / period) + c, c)
        lo = np.where(lo < -n, lo + period, -lo - 1)
        hi = c - period * np.trunc(c / period)
        hi = np.where(hi >= n, period - hi - 1, hi)
    else:  # "wrap": scipy's period is n - 1 (the first and last samples coincide)
        period = n - 1
        lo = c + period * (np.trunc(-c / period) + 1)
        hi = c - period * np.trunc(c / period)
    return np.where(low, lo, np.where(high, hi, c))


def _cast_like(t, dtype):
    """Casts interpolated float64 values to `dtype`, rounding integers half away from zero
    (unsigned ones clamp negatives to 0) as scipy stores them."""
    if np.issubdtype(dtype, np.floating):
        return t.astype(dtype)
    if dtype == np.bool_:
        return t != 0
    info = np.iinfo(dtype)
    if np.issubdtype(dtype, np.unsignedinteger):
        t = np.where(t > 0, t + 0.5, 0.0)
    else:
        t = np.where(t > 0, t + 0.5, t - 0.5)
    return np.trunc(np.clip(t, info.min, info.max)).astype(dtype)


def _warp_planes(planes, matrix, offset, order, mode, cval):
    """Samples each 2-D plane of `planes` (channels, n0, n1) at `matrix @ (i0, i1) + offset`
    for every output index, as `scipy.ndimage.affine_transform` does per plane."""
    n0, n1 = planes.shape[1:]
    i0, i1 = np.meshgrid(
        np.arange(n0, dtype=np.float64), np.arange(n1, dtype=np.float64), indexing="ij"
    )
    # scipy's sum, in its order (the offset first), so the coordinates agree to the bit.
    coords = [offset[k] + i0 * matrix[k, 0] + i1 * matrix[k, 1] for k in (0, 1)]
    coords = [_map_coordinate(c, n, mode) for c, n in zip(coords, (n0, n1))]
    constant = ~((coords[0] > -1.0) & (coords[1] > -1.0)) & (mode != "nearest")
    coords = [np.where(constant, 0.0, c) for c in coords]
    flat = planes.astype(np.float64, copy=False).reshape(planes.shape[0], -1)

    def gather(i, j):  # the samples at rows i, columns j of every plane
        return np.take(flat, i * n1 + j, axis=1)

    if order == 0:
        i, j = [
            np.clip(np.floor(c + 0.5).astype(np.int64), 0, n - 1) for c, n in zip(coords, (n0, n1))
        ]
        t = gather(i, j)
    else:
        starts = [np.floor(c) for c in coords]
        # scipy's weights: 1 - x for the lower sample, then 1 minus that for the upper one.
        w_low = [1.0 - (c - s) for c, s in zip(coords, starts)]
        weights = [(w, 1.0 - w) for w in w_low]
        idx = [
            [np.clip(s.astype(np.int64) + k, 0, n - 1) for k in (0, 1)]
            for s, n in zip(starts, (n0, n1))
        ]
        # scipy's order: each sample times the row weight, times the column weight, summed
        # over (0, 0), (0, 1), (1, 0), (1, 1).
        t = np.zeros((planes.shape[0], n0, n1), np.float64)
        for a in (0, 1):
            for b in (0, 1):
                t += gather(idx[0][a], idx[1][b]) * weights[0][a] * weights[1][b]
    t = np.where(constant, float(cval), t)
    return _cast_like(t, planes.dtype)


def _offset_center(matrix, h, w):
    """Conjugates `matrix` by a shift to the image centre, so it acts about the centre."""
    o_h, o_w = float(h) / 2 - 0.5, float(w) / 2 - 0.5
    to_center = np.array([[1, 0, o_h], [0, 1, o_w], [0, 0, 1]])
    from_center = np.array([[1, 0, -o_h], [0, 1, -o_w], [0, 0, 1]])
    return np.dot(np.dot(to_center, matrix), from_center)


def apply_affine_transform(
    x,
    theta=0,
    tx=0,
    ty=0,
    shear=0,
    zx=1,
    zy=1,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    order=1,
):
    """Rotates, shifts, shears and zooms one image about its centre (Keras's legacy function).

    Each output pixel samples the input at the transformed position, with
    `scipy.ndimage.affine_transform`'s conventions (reproduced in numpy, no scipy needed).

    Args:
        x: 3-D array, one image.
        theta: rotation angle in degrees.
        tx: shift in pixels; ty: shift in pixels; zx, zy: zoom factors (above 1 shows less
            of the image). As in Keras, when the column axis comes after the row axis (in
            both layouts) tx and zx act along the columns and ty and zy along the rows.
        row_axis, col_axis, channel_axis: the axes of `x` (channels first or last).
        fill_mode: "constant", "nearest", "reflect" or "wrap", for points outside the input.
        cval: the value "constant" fills with.
        order: spline order, 0 (nearest sample) or 1 (bilinear).

    Returns:
        The transformed image, of `x`'s shape and dtype (`x` itself when nothing is to do).

    Raises:
        ValueError: for axes that are not a permutation of 0, 1, 2 with the channels first or
            last, an array that is not 3-D, or an unsupported `fill_mode` or `order`.

    Example:
        >>> x = np.arange(9.0).reshape(3, 3, 1)
        >>> keratron.preprocessing.image.apply_affine_transform(
        ...     x, tx=1, row_axis=0, col_axis=1, channel_axis=2)[..., 0]
        array([[1., 2., 2.],
               [4., 5., 5.],
               [7., 8., 8.]])
    """
    if sorted((row_axis, col_axis, channel_axis)) != [0, 1, 2]:
        raise ValueError(
            "apply_affine_transform: `row_axis`, `col_axis` and `channel_axis` must be 0, 1 "
            f"and 2 in some order. Received: row_axis={row_axis}, col_axis={col_axis}, "
            f"channel_axis={channel_axis}"
        )
    if np.ndim(x) != 3:
        raise ValueError(
            "apply_affine_transform: expected one image, a 3-D array. "
            f"Received an array of shape {np.shape(x)}"
        )
    if channel_axis not in (0, 2):
        raise ValueError(
            "apply_affine_transform: the channels must be the first or last axis. "
            f"Received: channel_axis={channel_axis}"
        )
    if fill_mode not in FILL_MODES:
        raise ValueError(
            f"apply_affine_transform: `fill_mode` must be one of {FILL_MODES}. "
            f"Received: fill_mode={fill_mode!r}"
        )
    if order not in (0, 1):
        raise ValueError(
            "apply_affine_transform: keratron interpolates with spline order 0 or 1. "
            f"Received: order={order}"
        )
    # The factors compose in this order: rotation, shift, shear, zoom.
    factors = []
    if theta != 0:
        t = np.deg2rad(theta)
        factors.append(np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]]))
    if tx != 0 or ty != 0:
        factors.append(np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]]))
    if shear != 0:
        s = np.deg2rad(shear)
        factors.append(np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]]))
    if zx != 1 or zy != 1:
        factors.append(np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]))
    if not factors:
        return x
    matrix = factors[0]
    for factor in factors[1:]:
        matrix = np.dot(matrix, factor)
    matrix = _offset_center(matrix, x.shape[row_axis], x.shape[col_axis])
    if col_axis > row_axis:
        # The planes below are (rows, cols), the matrix's first coordinate is the row one.
        matrix[:, [0, 1]] = matrix[:, [1, 0]]
        matrix[[0, 1]] = matrix[[1, 0]]
    planes = np.moveaxis(np.asarray(x), channel_axis, 0)
    out = _warp_planes(planes, matrix[:2, :2], matrix[:2, 2], order, fill_mode, cval)
    return np.moveaxis(out, 0, channel_axis)


def _flip(x, axis):
    return np.flip(np.asarray(x), axis)


def _warp_one(x, row_axis, col_axis, channel_axis, fill_mode, cval, order, **params):
    """`apply_affine_transform` of one image with a `random_*` function's arguments."""
    return apply_affine_transform(
        x,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=order,
        **params,
    )


def random_rotation(
    x,
    rg,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    """Rotates one image by an angle drawn uniformly from [-rg, rg] degrees.

    Args:
        x: 3-D array, one image (channels first by default: `channel_axis=0`).
        rg: the largest rotation, in degrees.
        row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order: as for
            `apply_affine_transform` (`interpolation_order` is its `order`).

    Returns:
        The rotated image.

    Example:
        >>> keratron.preprocessing.image.random_rotation(np.ones((1, 4, 4)), 30).shape
        (1, 4, 4)
    """
    theta = np.random.uniform(-rg, rg)
    return _warp_one(
        x, row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order, theta=theta
    )


def random_shift(
    x,
    wrg,
    hrg,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    """Shifts one image by random fractions of its height and width.

    Args:
        x: 3-D array, one image.
        wrg: the largest shift along the width, as a fraction of it.
        hrg: the largest shift along the height, as a fraction of it.
        row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order: as for
            `random_rotation`.

    Returns:
        The shifted image.

    Example:
        >>> keratron.preprocessing.image.random_shift(np.ones((1, 4, 4)), 0.2, 0.2).shape
        (1, 4, 4)
    """
    h, w = x.shape[row_axis], x.shape[col_axis]
    tx = np.random.uniform(-hrg, hrg) * h
    ty = np.random.uniform(-wrg, wrg) * w
    return _warp_one(
        x, row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order, tx=tx, ty=ty
    )


def random_shear(
    x,
    intensity,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    """Shears one image by an angle drawn uniformly from [-intensity, intensity] degrees.

    Args:
        x: 3-D array, one image.
        intensity: the largest shear angle, in degrees.
        row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order: as for
            `random_rotation`.

    Returns:
        The sheared image.

    Example:
        >>> keratron.preprocessing.image.random_shear(np.ones((1, 4, 4)), 20).shape
        (1, 4, 4)
    """
    shear = np.random.uniform(-intensity, intensity)
    return _warp_one(
        x, row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order, shear=shear
    )


def random_zoom(
    x,
    zoom_range,
    row_axis=1,
    col_axis=2,
    channel_axis=0,
    fill_mode="nearest",
    cval=0.0,
    interpolation_order=1,
):
    """Zooms one image by factors drawn independently, per axis, from `zoom_range`.

    Args:
        x: 3-D array, one image.
        zoom_range: (lowest, highest) zoom factor.
        row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order: as for
            `random_rotation`.

    Returns:
        The zoomed image.

    Raises:
        ValueError: if `zoom_range` does not hold two numbers.

    Example:
        >>> keratron.preprocessing.image.random_zoom(np.ones((1, 4, 4)), (0.8, 1.2)).shape
        (1, 4, 4)
    """
    if len(zoom_range) != 2:
        raise ValueError(
            f"random_zoom: `zoom_range` must be two numbers. Received: zoom_range={zoom_range}"
        )
    if zoom_range[0] == 1 and zoom_range[1] == 1:
        zx, zy = 1, 1
    else:
        zx, zy = np.random.uniform(zoom_range[0], zoom_range[1], 2)
    return _warp_one(
        x, row_axis, col_axis, channel_axis, fill_mode, cval, interpolation_order, zx=zx, zy=zy
    )


def apply_channel_shift(x, intensity, channel_axis=0):
    """Adds `intensity` to every channel, clipped to the image's own [min, max].

    Args:
        x: 3-D array, one image.
        intensity: the value to add.
        channel_axis: accepted for Keras compatibility (every channel gets the same shift).

    Returns:
        The shifted image.

    Example:
        >>> keratron.preprocessing.image.apply_channel_shift(np.array([[[0.0, 5.0]]]), 2.0)
        array([[[2., 5.]]])
    """
    x = np.asarray(x)
    return np.clip(x + intensity, np.min(x), np.max(x))


def random_channel_shift(x, intensity_range, channel_axis=0):
    """Adds to every channel a value drawn uniformly from [-intensity_range, intensity_range].

    Args:
        x: 3-D array, one image.
        intensity_range: the largest shift.
        channel_axis: the channel axis of `x`.

    Returns:
        The shifted image.

    Example:
        >>> keratron.preprocessing.image.random_channel_shift(np.ones((4, 4, 3)), 0.5).shape
        (4, 4, 3)
    """
    intensity = np.random.uniform(-intensity_range, intensity_range)
    return apply_channel_shift(x, intensity, channel_axis=channel_axis)


def apply_brightness_shift(x, brightness, scale=True):
    """Changes the brightness of one channels-last image with PIL's `ImageEnhance.Brightness`.

    The image goes through an 8-bit PIL image, as in Keras: values are stretched to [0, 255]
    when `scale` is true or when they fall outside [0, 255], and stretched back to their
    range when `scale` is false.

    Args:
        x: 3-D array, one image with 1, 3 or 4 channels last.
        brightness: the enhancement factor (1 leaves the image as it is, 0 makes it black).
        scale: stretch the values to [0, 255] and leave them so.

    Returns:
        The image as a float array.

    Example:
        >>> x = np.full((2, 2, 3), 100.0)
        >>> keratron.preprocessing.image.apply_brightness_shift(x, 0.5, scale=False)[0, 0]
        array([50., 50., 50.], dtype=float32)
    """
    try:
        from PIL import ImageEnhance
    except ImportError as e:
        raise ImportError(
            "apply_brightness_shift needs Pillow, which is not installed: `pip install pillow`."
        ) from e

    x_min, x_max = np.min(x), np.max(x)
    out_of_range = bool((x_min < 0) or (x_max > 255))
    img = array_to_img(x, scale=out_of_range or scale)
    x = img_to_array(ImageEnhance.Brightness(img).enhance(brightness))
    if not scale and out_of_range:
        x = x / 255 * (x_max - x_min) + x_min
    return x


def random_brightness(x, brightness_range, scale=True):
    """Changes the brightness of one image by a factor drawn from `brightness_range`.

    Args:
        x: 3-D array, one channels-last image.
        brightness_range: (lowest, highest) brightness factor.
        scale: as for `apply_brightness_shift`.

    Returns:
        The image as a float array.

    Raises:
        ValueError: if `brightness_range` does not hold two numbers.

    Example:
        >>> x = np.full((2, 2, 3), 100.0)
        >>> keratron.preprocessing.image.random_brightness(x, (0.5, 1.5)).shape
        (2, 2, 3)
    """
    if len(brightness_range) != 2:
        raise ValueError(
            "random_brightness: `brightness_range` must be two numbers. "
            f"Received: brightness_range={brightness_range}"
        )
    factor = np.random.uniform(brightness_range[0], brightness_range[1])
    return apply_brightness_shift(x, factor, scale)


# ---------------------------------------------------------------------------------------------
# Iterators
# ---------------------------------------------------------------------------------------------


class Iterator(PyDataset):
    """Base class of the generator's batch iterators: batch `i` of an epoch, or `next()`.

    Subclasses define `_get_batches_of_transformed_samples(index_array)`. With a `seed`,
    numpy's global generator is reseeded with `seed + batches seen so far` before each batch,
    as in Keras, so the shuffling and the random transforms repeat from run to run. Iterating
    (`for batch in iterator`) never ends, as in Keras; `fit` reads `len(iterator)` batches an
    epoch and reshuffles between epochs.

    Args:
        n: the number of samples.
        batch_size: samples per batch.
        shuffle: visit the samples in a new random order every epoch.
        seed: optional int seed.
        **kwargs: `workers`, `use_multiprocessing`, `max_queue_size` of `PyDataset`.

    Example:
        >>> class Indices(keratron.preprocessing.image.Iterator):
        ...     def _get_batches_of_transformed_samples(self, index_array):
        ...         return index_array
        >>> it = Indices(5, batch_size=2, shuffle=False, seed=None)
        >>> len(it), it[2], [next(it).tolist() for _ in range(4)]
        (3, array([4]), [[0, 1], [2, 3], [4], [0, 1]])
    """

    white_list_formats = ("png", "jpg", "jpeg", "bmp", "ppm", "tif", "tiff")

    def __init__(self, n, batch_size, shuffle, seed, **kwargs):
        super().__init__(**kwargs)
        self.n = n
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.batch_index = 0
        self.total_batches_seen = 0
        self.lock = threading.Lock()
        self.index_array = None
        self.index_generator = self._flow_index()

    def _set_index_array(self):
        self.index_array = np.arange(self.n)
        if self.shuffle:
            self.index_array = np.random.permutation(self.n)

    def _reseed(self):
        if self.seed is not None:
            np.random.seed(self.seed + self.total_batches_seen)

    def __getitem__(self, idx):
        if idx >= len(self):
            raise ValueError(
                f"{type(self).__name__}: asked for batch {idx}, but there are {len(self)} batches."
            )
        self._reseed()
        self.total_batches_seen += 1
        if self.index_array is None:
            self._set_index_array()
        batch = self.index_array[self.batch_size * idx : self.batch_size * (idx + 1)]
        return self._get_batches_of_transformed_samples(batch)

    def __len__(self):
        return -(-self.n // self.batch_size)

    def on_epoch_end(self):
        self._set_index_array()

    def reset(self):
        """Restarts `next()` at the first batch of an epoch."""
        self.batch_index = 0

    def _flow_index(self):
        self.reset()
        while True:
            self._reseed()
            if self.batch_index == 0:
                self._set_index_array()
            start = (self.batch_index * self.batch_size) % self.n if self.n else 0
            # The last batch of an epoch may be short; the next one starts a new epoch.
            self.batch_index = self.batch_index + 1 if self.n > start + self.batch_size else 0
            self.total_batches_seen += 1
            yield self.index_array[start : start + self.batch_size]

    def __iter__(self):
        return self

    def __next__(self):
        with self.lock:
            index_array = next(self.index_generator)
        return self._get_batches_of_transformed_samples(index_array)

    def _get_batches_of_transformed_samples(self, index_array):
        raise TypeError(
            f"{type(self).__name__} must define `_get_batches_of_transformed_samples"
            "(index_array)`, returning the batch of those samples."
        )


def _save_batch(batch_x, index_array, data_format, save_to_dir, prefix, file_format, hash_range):
    for i, j in enumerate(index_array):
        img = array_to_img(batch_x[i], data_format, scale=True)
        name = f"{prefix}_{j}_{np.random.randint(hash_range)}.{file_format}"
        img.save(os.path.join(save_to_dir, name))


class NumpyArrayIterator(Iterator):
    """Batches of augmented images from a numpy array (`ImageDataGenerator.flow`).

    A batch is `x`, `(x, y)` or `(x, y, sample_weight)`; with `x` given as `(images, other)`
    the batch's first element is `[images, *others]`.

    Args:
        x: images, a rank-4 array, or a tuple `(images, array or list of arrays)`.
        y: labels, or None.
        image_data_generator: the `ImageDataGenerator` that transforms each image.
        batch_size, shuffle, seed: as for `Iterator`.
        sample_weight: per-sample weights, or None.
        data_format: "channels_last" or "channels_first" (default from the config).
        save_to_dir: a directory to save every augmented image into, for a look at them.
        save_prefix, save_format: the saved files' name prefix and format.
        subset: "training" or "validation", the share of `x` the generator's
            `validation_split` gives (validation is the first part).
        ignore_class_split: allow a split whose two parts hold different sets of classes.
        dtype: the dtype of the image batches (default floatx).
        **kwargs: `workers`, `use_multiprocessing`, `max_queue_size` of `PyDataset`.

    Raises:
        ValueError: for lengths that differ, an unknown `subset`, a split whose parts hold
            different classes, or images that are not rank 4.

    Example:
        >>> gen = keratron.preprocessing.image.ImageDataGenerator(validation_split=0.25)
        >>> it = keratron.preprocessing.image.NumpyArrayIterator(
        ...     np.zeros((8, 4, 4, 3)), np.arange(8) % 2, gen, batch_size=3, subset="training")
        >>> len(it), it[0][1]
        (2, array([0, 1, 0]))
    """

    def __init__(
        self,
        x,
        y,
        image_data_generator,
        batch_size=32,
        shuffle=False,
        sample_weight=None,
        seed=None,
        data_format=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        subset=None,
        ignore_class_split=False,
        dtype=None,
        **kwargs,
    ):
        data_format = data_format or config.image_data_format()
        self.dtype = dtype or config.floatx()
        x_misc = []
        if isinstance(x, (tuple, list)):
            others = x[1] if isinstance(x[1], list) else [x[1]]
            x, x_misc = x[0], [np.asarray(o) for o in others]
            for other in x_misc:
                if len(other) != len(x):
                    raise ValueError(
                        "NumpyArrayIterator: all the arrays of `x` must have the same length. "
                        f"Received lengths {len(x)} and {len(other)}"
                    )
        for name, other in (("y", y), ("sample_weight", sample_weight)):
            if other is not None and len(other) != len(x):
                raise ValueError(
                    f"NumpyArrayIterator: `x` and `{name}` must have the same length. "
                    f"Received: x.shape={np.shape(x)}, {name}.shape={np.shape(other)}"
                )
        if subset is not None:
            if subset not in ("training", "validation"):
                raise ValueError(
                    "NumpyArrayIterator: `subset` must be 'training' or 'validation'. "
                    f"Received: subset={subset!r}"
                )
            split = int(len(x) * image_data_generator._validation_split)
            if (
                y is not None
                and not ignore_class_split
                and not np.array_equal(np.unique(y[:split]), np.unique(y[split:]))
            ):
                raise ValueError(
                    "NumpyArrayIterator: the training and validation subsets hold different "
                    "classes after the split; shuffle arrays sorted by label first, or pass "
                    "`ignore_class_split=True`."
                )
            part = slice(None, split) if subset == "validation" else slice(split, None)
            x = x[part]
            x_misc = [np.asarray(o[part]) for o in x_misc]
            y = y[part] if y is not None else None
            if sample_weight is not None:
                # Keras leaves sample_weight whole here, which misaligns it with x.
                sample_weight = sample_weight[part]
        self.x = np.asarray(x, dtype=self.dtype)
        self.x_misc = x_misc
        if self.x.ndim != 4:
            raise ValueError(
                "NumpyArrayIterator: the images must be an array of rank 4. "
                f"Received an array of shape {self.x.shape}"
            )
        channels_axis = 3 if data_format == "channels_last" else 1
        if self.x.shape[channels_axis] not in (1, 3, 4):
            warnings.warn(
                f"NumpyArrayIterator: with data_format={data_format!r} the channels are axis "
                f"{channels_axis}, which should hold 1, 3 or 4 of them; the images have shape "
                f"{self.x.shape}.",
                stacklevel=2,
            )
        self.y = np.asarray(y) if y is not None else None
        self.sample_weight = np.asarray(sample_weight) if sample_weight is not None else None
        self.image_data_generator = image_data_generator
        self.data_format = data_format
        self.save_to_dir = save_to_dir
        self.save_prefix = save_prefix
        self.save_format = save_format
        super().__init__(self.x.shape[0], batch_size, shuffle, seed, **kwargs)

    def _get_batches_of_transformed_samples(self, index_array):
        gen = self.image_data_generator
        batch_x = np.zeros((len(index_array),) + self.x.shape[1:], dtype=self.dtype)
        for i, j in enumerate(index_array):
            params = gen.get_random_transform(self.x[j].shape)
            batch_x[i] = gen.standardize(gen.apply_transform(self.x[j].astype(self.dtype), params))
        if self.save_to_dir:
            _save_batch(
                batch_x,
                index_array,
                self.data_format,
                self.save_to_dir,
                self.save_prefix,
                self.save_format,
                10**4,
            )
        inputs = [batch_x] + [o[index_array] for o in self.x_misc] if self.x_misc else batch_x
        if self.y is None:
            return inputs
        if self.sample_weight is None:
            return inputs, self.y[index_array]
        return inputs, self.y[index_array], self.sample_weight[index_array]


def _list_class_files(directory, formats, split, follow_links):
    """The image files under one class folder, in Keras's order: folders sorted by path (walked
    recursively), then file names sorted within each; `split` keeps a fraction of them."""
    files = []
    for root, _, names in sorted(os.walk(directory, followlinks=follow_links), key=lambda w: w[0]):
        for name in sorted(names):
            if name.lower().endswith(".tiff"):
                warnings.warn(
                    "flow_from_directory: '.tiff' files with more than 4 bands are read "
                    "distorted; check the images.",
                    stacklevel=3,
                )
            if name.lower().endswith(formats):
                files.append(os.path.join(root, name))
    if split:
        files = files[int(split[0] * len(files)) : int(split[1] * len(files))]
    base = os.path.basename(directory)
    return [os.path.join(base, os.path.relpath(f, directory)) for f in files]


class DirectoryIterator(Iterator):
    """Batches of augmented images read from class folders (`flow_from_directory`).

    `directory` holds one folder per class (sorted by name unless `classes` is given); the
    images inside each, in any depth of subfolders, are its samples.

    Args:
        directory: the folder of class folders.
        image_data_generator: the `ImageDataGenerator` that transforms each image (or None).
        target_size: (height, width) every image is resized to.
        color_mode: "grayscale", "rgb" or "rgba".
        classes: optional list of class folder names (and their order).
        class_mode: "categorical" (one-hot labels), "binary" or "sparse" (class indices as
            floats), "input" (the images themselves) or None (images alone).
        batch_size, shuffle, seed: as for `Iterator`.
        data_format: "channels_last" or "channels_first" (default from the config).
        save_to_dir, save_prefix, save_format: as for `NumpyArrayIterator`.
        follow_links: follow symbolic links to folders.
        subset: "training" or "validation": the share of each class's files the generator's
            `validation_split` gives (validation is the first part).
        interpolation: PIL resampling used to resize, e.g. "nearest" or "bilinear".
        keep_aspect_ratio: crop the centre to the target aspect ratio before resizing.
        dtype: the dtype of the batches (default floatx).
        **kwargs: `workers`, `use_multiprocessing`, `max_queue_size` of `PyDataset`.

    Raises:
        ValueError: for an unknown `color_mode`, `class_mode` or `subset`.

    Example:
        >>> import os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> for name in ("cat", "dog"):
        ...     os.makedirs(os.path.join(root, name))
        ...     keratron.utils.save_img(os.path.join(root, name, "1.png"), np.ones((5, 5, 3)))
        >>> it = keratron.preprocessing.image.DirectoryIterator(
        ...     root, None, target_size=(4, 4), class_mode="binary", shuffle=False)
        Found 2 images belonging to 2 classes.
        >>> it.filenames, it[0][1]
        (['cat/1.png', 'dog/1.png'], array([0., 1.], dtype=float32))
    """

    allowed_class_modes = {"categorical", "binary", "sparse", "input", None}

    def __init__(
        self,
        directory,
        image_data_generator,
        target_size=(256, 256),
        color_mode="rgb",
        classes=None,
        class_mode="categorical",
        batch_size=32,
        shuffle=True,
        seed=None,
        data_format=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        follow_links=False,
        subset=None,
        interpolation="nearest",
        keep_aspect_ratio=False,
        dtype=None,
        **kwargs,
    ):
        self.data_format = data_format or config.image_data_format()
        self.dtype = dtype or config.floatx()
        self.image_data_generator = image_data_generator
        self.target_size = tuple(target_size)
        self.keep_aspect_ratio = keep_aspect_ratio
        channels = {"grayscale": 1, "rgb": 3, "rgba": 4}
        if color_mode not in channels:
            raise ValueError(
                "flow_from_directory: `color_mode` must be 'grayscale', 'rgb' or 'rgba'. "
                f"Received: color_mode={color_mode!r}"
            )
        self.color_mode = color_mode
        if self.data_format == "channels_last":
            self.image_shape = self.target_size + (channels[color_mode],)
        else:
            self.image_shape = (channels[color_mode],) + self.target_size
        if class_mode not in self.allowed_class_modes:
            raise ValueError(
                "flow_from_directory: `class_mode` must be one of 'categorical', 'binary', "
                f"'sparse', 'input' or None. Received: class_mode={class_mode!r}"
            )
        self.class_mode = class_mode
        self.save_to_dir = save_to_dir
        self.save_prefix = save_prefix
        self.save_format = save_format
        self.interpolation = interpolation
        if subset not in (None, "training", "validation"):
            raise ValueError(
                "flow_from_directory: `subset` must be 'training' or 'validation'. "
                f"Received: subset={subset!r}"
            )
        fraction = image_data_generator._validation_split if subset else None
        self.split = {None: None, "validation": (0, fraction), "training": (fraction, 1)}[subset]
        self.subset = subset
        self.directory = directory
        if not classes:
            classes = [
                d
                for d in sorted(os.listdir(directory))
                if os.path.isdir(os.path.join(directory, d))
            ]
        self.num_classes = len(classes)
        self.class_indices = dict(zip(classes, range(len(classes))))
        self.filenames = []
        labels = []
        for name in classes:
            files = _list_class_files(
                os.path.join(directory, name), self.white_list_formats, self.split, follow_links
            )
            self.filenames += files
            labels += [self.class_indices[name]] * len(files)
        self.samples = len(self.filenames)
        self.classes = np.asarray(labels, dtype="int32")
        print_msg(f"Found {self.samples} images belonging to {self.num_classes} classes.")
        self._filepaths = [os.path.join(directory, f) for f in self.filenames]
        super().__init__(self.samples, batch_size, shuffle, seed, **kwargs)

    @property
    def filepaths(self):
        """The image files' paths (`directory` joined with each of `filenames`)."""
        return self._filepaths

    @property
    def labels(self):
        """The class index of every sample."""
        return self.classes

    @property
    def sample_weight(self):
        return None

    def _get_batches_of_transformed_samples(self, index_array):
        gen = self.image_data_generator
        batch_x = np.zeros((len(index_array),) + self.image_shape, dtype=self.dtype)
        for i, j in enumerate(index_array):
            img = load_img(
                self._filepaths[j],
                color_mode=self.color_mode,
                target_size=self.target_size,
                interpolation=self.interpolation,
                keep_aspect_ratio=self.keep_aspect_ratio,
            )
            x = img_to_array(img, data_format=self.data_format)
            img.close()
            if gen:
                x = gen.standardize(gen.apply_transform(x, gen.get_random_transform(x.shape)))
            batch_x[i] = x
        if self.save_to_dir:
            _save_batch(
                batch_x,
                index_array,
                self.data_format,
                self.save_to_dir,
                self.save_prefix,
                self.save_format,
                10**7,
            )
        if self.class_mode is None:
            return batch_x
        if self.class_mode == "input":
            return batch_x, batch_x.copy()
        if self.class_mode == "categorical":
            batch_y = np.zeros((len(batch_x), self.num_classes), dtype=self.dtype)
            batch_y[np.arange(len(batch_x)), self.classes[index_array]] = 1.0
        else:
            batch_y = self.classes[index_array].astype(self.dtype)
        return batch_x, batch_y


# ---------------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------------


def _draw_shift(spec, size):
    """One shift, in pixels, drawn as Keras draws it: a float range gives a uniform draw in
    [-spec, spec]; an int or a list gives one of its values with a random sign. Values below 1
    are fractions of `size`."""
    try:
        shift = np.random.choice(spec) * np.random.choice([-1, 1])
    except ValueError:  # numpy's choice takes no float: a continuous range
        shift = np.random.uniform(-spec, spec)
    if np.max(spec) < 1:
        shift *= size
    return shift


class ImageDataGenerator:
    """Augments and normalises batches of images on the fly (Keras's legacy generator).

    Each image gets a random affine transform (rotation, shifts, shear, zoom), flips, a
    channel shift and a brightness change, then `standardize` (rescaling, then sample-wise and
    feature-wise normalisation or ZCA whitening, with statistics from `fit`). `flow` and
    `flow_from_directory` return `PyDataset`s that `model.fit` reads.

    Args:
        featurewise_center: subtract the per-channel mean that `fit` measured.
        samplewise_center: subtract each image's own mean.
        featurewise_std_normalization: divide by the per-channel std that `fit` measured.
        samplewise_std_normalization: divide each image by its own std.
        zca_whitening: apply the ZCA whitening matrix that `fit` computes.
        zca_epsilon: added to the singular values before inverting them.
        rotation_range: largest rotation, in degrees.
        width_shift_range: float (fraction of the width below 1, else pixels), int or list
            of pixel shifts.
        height_shift_range: the same, for the height.
        brightness_range: (lowest, highest) brightness factor, or None.
        shear_range: largest shear angle, in degrees.
        zoom_range: float `z` for [1 - z, 1 + z], or (lowest, highest).
        channel_shift_range: largest value added to the channels.
        fill_mode: "constant", "nearest", "reflect" or "wrap", for points outside the input.
        cval: the value "constant" fills with.
        horizontal_flip: flip half of the images left-right.
        vertical_flip: flip half of the images upside down.
        rescale: factor the images are multiplied by first (e.g. 1 / 255), or None.
        preprocessing_function: function applied to each image before everything else in
            `standardize`.
        data_format: "channels_last" or "channels_first" (default from the config).
        validation_split: fraction of the data `subset="validation"` takes.
        interpolation_order: spline order of the affine warp, 0 or 1.
        dtype: dtype of the batches (default floatx).

    Raises:
        ValueError: for a bad `data_format`, `validation_split`, `zoom_range` or
            `brightness_range`.

    Example:
        >>> gen = keratron.preprocessing.image.ImageDataGenerator(featurewise_center=True)
        >>> x = np.random.default_rng(0).uniform(size=(10, 4, 4, 3))
        >>> gen.fit(x)
        >>> np.allclose(gen.standardize(x.copy()).mean(axis=(0, 1, 2)), 0, atol=1e-6)
        True
    """

    def __init__(
        self,
        featurewise_center=False,
        samplewise_center=False,
        featurewise_std_normalization=False,
        samplewise_std_normalization=False,
        zca_whitening=False,
        zca_epsilon=1e-6,
        rotation_range=0,
        width_shift_range=0.0,
        height_shift_range=0.0,
        brightness_range=None,
        shear_range=0.0,
        zoom_range=0.0,
        channel_shift_range=0.0,
        fill_mode="nearest",
        cval=0.0,
        horizontal_flip=False,
        vertical_flip=False,
        rescale=None,
        preprocessing_function=None,
        data_format=None,
        validation_split=0.0,
        interpolation_order=1,
        dtype=None,
    ):
        data_format = data_format or config.image_data_format()
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(
                "ImageDataGenerator: `data_format` must be 'channels_last' or "
                f"'channels_first'. Received: data_format={data_format!r}"
            )
        if validation_split and not 0 < validation_split < 1:
            raise ValueError(
                "ImageDataGenerator: `validation_split` must be strictly between 0 and 1. "
                f"Received: validation_split={validation_split}"
            )
        if isinstance(zoom_range, (float, int)):
            zoom_range = [1 - zoom_range, 1 + zoom_range]
        elif len(zoom_range) == 2 and all(isinstance(z, (float, int)) for z in zoom_range):
            zoom_range = [zoom_range[0], zoom_range[1]]
        else:
            raise ValueError(
                "ImageDataGenerator: `zoom_range` must be a float or two floats. "
                f"Received: zoom_range={zoom_range}"
            )
        if brightness_range is not None and (
            not isinstance(brightness_range, (tuple, list)) or len(brightness_range) != 2
        ):
            raise ValueError(
                "ImageDataGenerator: `brightness_range` must be a tuple or list of two floats. "
                f"Received: brightness_range={brightness_range}"
            )
        self.featurewise_center = featurewise_center
        self.samplewise_center = samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.zca_whitening = zca_whitening
        self.zca_epsilon = zca_epsilon
        self.rotation_range = rotation_range
        self.width_shift_range = width_shift_range
        self.height_shift_range = height_shift_range
        self.brightness_range = brightness_range
        self.shear_range = shear_range
        self.zoom_range = zoom_range
        self.channel_shift_range = channel_shift_range
        self.fill_mode = fill_mode
        self.cval = cval
        self.horizontal_flip = horizontal_flip
        self.vertical_flip = vertical_flip
        self.rescale = rescale
        self.preprocessing_function = preprocessing_function
        self.data_format = data_format
        self.interpolation_order = interpolation_order
        self.dtype = dtype or config.floatx()
        self._validation_split = validation_split
        # Axes of a batch; an image's are one less.
        if data_format == "channels_first":
            self.channel_axis, self.row_axis, self.col_axis = 1, 2, 3
        else:
            self.channel_axis, self.row_axis, self.col_axis = 3, 1, 2
        self.mean = None
        self.std = None
        self.zca_whitening_matrix = None
        # Settings that imply others, as Keras resolves them.
        if zca_whitening:
            if not featurewise_center:
                self.featurewise_center = True
                warnings.warn(
                    "ImageDataGenerator: `zca_whitening` turns `featurewise_center` on.",
                    stacklevel=2,
                )
            if featurewise_std_normalization:
                self.featurewise_std_normalization = False
                warnings.warn(
                    "ImageDataGenerator: `zca_whitening` turns "
                    "`featurewise_std_normalization` off.",
                    stacklevel=2,
                )
        if featurewise_std_normalization and not featurewise_center:
            self.featurewise_center = True
            warnings.warn(
                "ImageDataGenerator: `featurewise_std_normalization` turns "
                "`featurewise_center` on.",
                stacklevel=2,
            )
        if samplewise_std_normalization and not samplewise_center:
            self.samplewise_center = True
            warnings.warn(
                "ImageDataGenerator: `samplewise_std_normalization` turns `samplewise_center` on.",
                stacklevel=2,
            )

    def flow(
        self,
        x,
        y=None,
        batch_size=32,
        shuffle=True,
        sample_weight=None,
        seed=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        ignore_class_split=False,
        subset=None,
    ):
        """Batches of augmented images from arrays, a `NumpyArrayIterator`.

        Args:
            x: images, a rank-4 array (or a tuple `(images, other arrays)`).
            y: labels, or None.
            batch_size: samples per batch.
            shuffle: reshuffle the samples every epoch.
            sample_weight: per-sample weights, or None.
            seed: optional int seed for the shuffling and the transforms.
            save_to_dir, save_prefix, save_format: save every augmented image there.
            ignore_class_split: allow a split whose parts hold different classes.
            subset: "training" or "validation" (with `validation_split`).

        Returns:
            A `NumpyArrayIterator` of `(x, y)` batches (`x` alone without `y`, and
            `(x, y, sample_weight)` with weights).

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(horizontal_flip=True)
            >>> batches = gen.flow(np.zeros((10, 8, 8, 1)), np.arange(10), batch_size=4)
            >>> len(batches), batches[0][0].shape
            (3, (4, 8, 8, 1))
        """
        return NumpyArrayIterator(
            x,
            y,
            self,
            batch_size=batch_size,
            shuffle=shuffle,
            sample_weight=sample_weight,
            seed=seed,
            data_format=self.data_format,
            save_to_dir=save_to_dir,
            save_prefix=save_prefix,
            save_format=save_format,
            ignore_class_split=ignore_class_split,
            subset=subset,
            dtype=self.dtype,
        )

    def flow_from_directory(
        self,
        directory,
        target_size=(256, 256),
        color_mode="rgb",
        classes=None,
        class_mode="categorical",
        batch_size=32,
        shuffle=True,
        seed=None,
        save_to_dir=None,
        save_prefix="",
        save_format="png",
        follow_links=False,
        subset=None,
        interpolation="nearest",
        keep_aspect_ratio=False,
    ):
        """Batches of augmented images read from class folders, a `DirectoryIterator`.

        Args:
            directory: a folder with one subfolder of images per class.
            target_size: (height, width) to resize the images to.
            color_mode: "grayscale", "rgb" or "rgba".
            classes: optional list of the class folders to read, in label order.
            class_mode: "categorical", "binary", "sparse", "input" or None.
            batch_size: samples per batch.
            shuffle: reshuffle the samples every epoch.
            seed: optional int seed for the shuffling and the transforms.
            save_to_dir, save_prefix, save_format: save every augmented image there.
            follow_links: follow symbolic links to folders.
            subset: "training" or "validation" (with `validation_split`).
            interpolation: PIL resampling used to resize.
            keep_aspect_ratio: crop the centre to the target aspect ratio before resizing.

        Returns:
            A `DirectoryIterator`.

        Example:
            >>> import os, tempfile
            >>> root = tempfile.mkdtemp()
            >>> os.makedirs(os.path.join(root, "cats"))
            >>> keratron.utils.save_img(os.path.join(root, "cats", "a.png"), np.zeros((4, 4, 3)))
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(rescale=1 / 255)
            >>> it = gen.flow_from_directory(root, target_size=(8, 8), batch_size=1)
            Found 1 images belonging to 1 classes.
            >>> it.class_indices, it[0][0].shape
            ({'cats': 0}, (1, 8, 8, 3))
        """
        return DirectoryIterator(
            directory,
            self,
            target_size=target_size,
            color_mode=color_mode,
            keep_aspect_ratio=keep_aspect_ratio,
            classes=classes,
            class_mode=class_mode,
            data_format=self.data_format,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            save_to_dir=save_to_dir,
            save_prefix=save_prefix,
            save_format=save_format,
            follow_links=follow_links,
            subset=subset,
            interpolation=interpolation,
            dtype=self.dtype,
        )

    def standardize(self, x):
        """Normalises an image or a batch, in place where the dtype allows (as in Keras).

        Applies, in order: `preprocessing_function`, `rescale`, sample-wise centring and
        scaling, then the feature-wise mean, std and ZCA whitening that `fit` measured.

        Args:
            x: an image or a batch of images (float).

        Returns:
            The normalised array (pass `np.copy(x)` to keep `x`).

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(rescale=0.5)
            >>> gen.standardize(np.full((1, 1, 1), 4.0))
            array([[[2.]]])
        """
        if self.preprocessing_function:
            x = self.preprocessing_function(x)
        if self.rescale:
            x *= self.rescale
        if self.samplewise_center:
            x -= np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x /= np.std(x, keepdims=True) + 1e-6
        unfitted = []
        if self.featurewise_center:
            if self.mean is None:
                unfitted.append("featurewise_center")
            else:
                x -= self.mean
        if self.featurewise_std_normalization:
            if self.std is None:
                unfitted.append("featurewise_std_normalization")
            else:
                x /= self.std + 1e-6
        if self.zca_whitening:
            if self.zca_whitening_matrix is None:
                unfitted.append("zca_whitening")
            else:
                flat = x.reshape(-1, math.prod(x.shape[-3:]))
                x = np.reshape(flat @ self.zca_whitening_matrix, x.shape)
        for name in unfitted:
            warnings.warn(
                f"ImageDataGenerator: `{name}` is set but the generator was not fit on data; "
                "call `.fit(numpy_data)` first.",
                stacklevel=2,
            )
        return x

    def get_random_transform(self, img_shape, seed=None):
        """Draws the parameters of one random transform, from numpy's global generator.

        Args:
            img_shape: shape of the image it is for.
            seed: optional int; reseeds numpy's global generator first.

        Returns:
            A dict with "theta", "tx", "ty", "shear", "zx", "zy", "flip_horizontal",
            "flip_vertical", "channel_shift_intensity" and "brightness".

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(rotation_range=0)
            >>> gen.get_random_transform((8, 8, 3), seed=0)["theta"]
            0
        """
        if seed is not None:
            np.random.seed(seed)
        theta, tx, ty, shear = 0, 0, 0, 0
        if self.rotation_range:
            theta = np.random.uniform(-self.rotation_range, self.rotation_range)
        if self.height_shift_range:
            tx = _draw_shift(self.height_shift_range, img_shape[self.row_axis - 1])
        if self.width_shift_range:
            ty = _draw_shift(self.width_shift_range, img_shape[self.col_axis - 1])
        if self.shear_range:
            shear = np.random.uniform(-self.shear_range, self.shear_range)
        if self.zoom_range[0] == 1 and self.zoom_range[1] == 1:
            zx, zy = 1, 1
        else:
            zx, zy = np.random.uniform(self.zoom_range[0], self.zoom_range[1], 2)
        # Both draws happen whether or not flips are on, so the stream stays Keras's.
        flip_horizontal = (np.random.random() < 0.5) * self.horizontal_flip
        flip_vertical = (np.random.random() < 0.5) * self.vertical_flip
        channel_shift_intensity = None
        if self.channel_shift_range != 0:
            channel_shift_intensity = np.random.uniform(
                -self.channel_shift_range, self.channel_shift_range
            )
        brightness = None
        if self.brightness_range is not None:
            brightness = np.random.uniform(self.brightness_range[0], self.brightness_range[1])
        return {
            "theta": theta,
            "tx": tx,
            "ty": ty,
            "shear": shear,
            "zx": zx,
            "zy": zy,
            "flip_horizontal": flip_horizontal,
            "flip_vertical": flip_vertical,
            "channel_shift_intensity": channel_shift_intensity,
            "brightness": brightness,
        }

    def apply_transform(self, x, transform_parameters):
        """Applies the transform that `transform_parameters` describes to one image.

        Args:
            x: 3-D array, one image.
            transform_parameters: dict as `get_random_transform` returns (missing keys mean
                no change).

        Returns:
            The transformed image.

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator()
            >>> gen.apply_transform(np.arange(3.0).reshape(1, 3, 1), {"flip_horizontal": True})
            array([[[2.],
                    [1.],
                    [0.]]])
        """
        rows, cols, channels = self.row_axis - 1, self.col_axis - 1, self.channel_axis - 1
        p = transform_parameters
        x = apply_affine_transform(
            x,
            p.get("theta", 0),
            p.get("tx", 0),
            p.get("ty", 0),
            p.get("shear", 0),
            p.get("zx", 1),
            p.get("zy", 1),
            row_axis=rows,
            col_axis=cols,
            channel_axis=channels,
            fill_mode=self.fill_mode,
            cval=self.cval,
            order=self.interpolation_order,
        )
        if p.get("channel_shift_intensity") is not None:
            x = apply_channel_shift(x, p["channel_shift_intensity"], channels)
        if p.get("flip_horizontal", False):
            x = _flip(x, cols)
        if p.get("flip_vertical", False):
            x = _flip(x, rows)
        if p.get("brightness") is not None:
            x = apply_brightness_shift(x, p["brightness"], False)
        return x

    def random_transform(self, x, seed=None):
        """One image under a random transform (`get_random_transform`, then `apply_transform`).

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(zoom_range=0.2)
            >>> gen.random_transform(np.ones((6, 6, 3)), seed=1).shape
            (6, 6, 3)
        """
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def fit(self, x, augment=False, rounds=1, seed=None):
        """Measures the feature-wise statistics (mean, std, ZCA matrix) on sample images.

        Only needed with `featurewise_center`, `featurewise_std_normalization` or
        `zca_whitening`. `rescale` is applied to the samples first.

        Args:
            x: sample images, a rank-4 array.
            augment: measure on randomly transformed copies of the samples.
            rounds: how many transformed copies of each sample, with `augment`.
            seed: optional int seed for those transforms.

        Raises:
            ValueError: if `x` is not of rank 4.

        Example:
            >>> gen = keratron.preprocessing.image.ImageDataGenerator(
            ...     featurewise_center=True, featurewise_std_normalization=True)
            >>> gen.fit(np.arange(32.0).reshape(2, 4, 4, 1))
            >>> gen.mean.shape, gen.std.shape
            ((1, 1, 1), (1, 1, 1))
        """
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 4:
            raise ValueError(
                "ImageDataGenerator.fit: expected images, an array of rank 4. "
                f"Received an array of shape {x.shape}"
            )
        if x.shape[self.channel_axis] not in (1, 3, 4):
            warnings.warn(
                f"ImageDataGenerator.fit: with data_format={self.data_format!r} the channels "
                f"are axis {self.channel_axis}, which should hold 1, 3 or 4 of them; the "
                f"images have shape {x.shape}.",
                stacklevel=2,
            )
        if seed is not None:
            np.random.seed(seed)
        x = np.copy(x)
        if self.rescale:
            x *= self.rescale
        if augment:
            augmented = np.zeros((rounds * x.shape[0],) + x.shape[1:], dtype=self.dtype)
            for r in range(rounds):
                for i in range(x.shape[0]):
                    augmented[i + r * x.shape[0]] = self.random_transform(x[i])
            x = augmented
        per_channel = [1, 1, 1]
        per_channel[self.channel_axis - 1] = x.shape[self.channel_axis]
        axes = (0, self.row_axis, self.col_axis)
        if self.featurewise_center:
            self.mean = np.reshape(np.mean(x, axis=axes), per_channel)
            x -= self.mean
        if self.featurewise_std_normalization:
            self.std = np.reshape(np.std(x, axis=axes), per_channel)
            x /= self.std + 1e-6
        if self.zca_whitening:
            n = len(x)
            u, s, _ = np.linalg.svd(np.reshape(x, (n, -1)).T, full_matrices=False)
            inverse = np.sqrt(n) / (s + self.zca_epsilon)
            self.zca_whitening_matrix = (u * inverse).dot(u.T)
