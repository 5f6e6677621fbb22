"""Datasets of windows of an array and of image files in class folders, as Keras makes them
(`keras.utils.timeseries_dataset_from_array`, `keras.utils.image_dataset_from_directory`),
returned as `keratron.data.Dataset`s that `fit` reads."""

from __future__ import annotations

import os

import numpy as np

from keratron import ops
from keratron.config import image_data_format
from keratron.data import Dataset
from keratron.utils.image_utils import img_to_array, load_img
from keratron.utils.io_utils import print_msg

__all__ = ["timeseries_dataset_from_array", "image_dataset_from_directory"]

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


def _positive(name, value, length):
    if value <= 0:
        raise ValueError(f"`{name}` must be higher than 0. Received: {name}={value}")
    if value >= length:
        raise ValueError(
            f"`{name}` must be lower than the length of the data. Received: {name}={value}, "
            f"for data of length {length}"
        )


def _as_numpy(x):
    return x.numpy() if hasattr(x, "numpy") and not isinstance(x, np.ndarray) else np.asarray(x)


def timeseries_dataset_from_array(
    data,
    targets,
    sequence_length,
    sequence_stride=1,
    sampling_rate=1,
    batch_size=128,
    shuffle=False,
    seed=None,
    start_index=None,
    end_index=None,
) -> Dataset:
    """A dataset of sliding windows over `data` (with the target of each window's first step).

    Window `i` holds `data[start + p, start + p + sampling_rate, ...]` (`sequence_length`
    steps) where `p = i * sequence_stride`; its target is `targets[start + p]`.

    Args:
        data: array or Tensor whose first axis is time.
        targets: array of targets aligned with `data`, or None for windows only.
        sequence_length: steps per window.
        sequence_stride: steps between the starts of consecutive windows.
        sampling_rate: steps between the steps of a window.
        batch_size: windows per batch (None: unbatched windows).
        shuffle, seed: shuffle the windows.
        start_index, end_index: the part of `data` to use (end excluded).

    Example:
        >>> ds = keratron.utils.timeseries_dataset_from_array(
        ...     np.arange(10), None, sequence_length=3, batch_size=8)
        >>> next(iter(ds)).shape
        (8, 3)
    """
    data = _as_numpy(data)
    n = len(data)
    if start_index:
        if start_index < 0:
            raise ValueError(f"`start_index` must be 0 or greater. Received: {start_index}")
        if start_index >= n:
            raise ValueError(
                "`start_index` must be lower than the length of the data. Received: "
                f"start_index={start_index}, for data of length {n}"
            )
    if end_index:
        if start_index and end_index <= start_index:
            raise ValueError(
                "`end_index` must be higher than `start_index`. Received: "
                f"start_index={start_index}, and end_index={end_index}"
            )
        if end_index >= n:
            raise ValueError(
                "`end_index` must be lower than the length of the data. Received: "
                f"end_index={end_index}, for data of length {n}"
            )
    _positive("sampling_rate", sampling_rate, n)
    _positive("sequence_stride", sequence_stride, n)
    start_index = start_index or 0
    end_index = end_index or n
    data = data[start_index:end_index]
    num_seqs = end_index - start_index - (sequence_length - 1) * sampling_rate
    if targets is not None:
        targets = _as_numpy(targets)[start_index:end_index]
        num_seqs = min(num_seqs, len(targets))
    starts = np.arange(0, max(num_seqs, 0), sequence_stride)
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        np.random.RandomState(seed).shuffle(starts)
    steps = np.arange(sequence_length) * sampling_rate

    def windows(index):
        positions = starts[np.asarray(_as_numpy(index))]
        x = data[positions[..., None] + steps]
        return x if targets is None else (x, targets[positions])

    ds = Dataset.from_tensor_slices(np.arange(len(starts)))
    if shuffle:
        ds = ds.shuffle(buffer_size=(batch_size or 128) * 8, seed=seed)
    if batch_size is not None:
        ds = ds.batch(batch_size)
    return ds.map(windows)


def _index_directory(directory, labels, follow_links):
    """Sorted class folders and (alphanumerically ordered) image paths with their labels."""
    if not os.path.isdir(directory):
        raise ValueError(f"image_dataset_from_directory: no directory at {directory!r}")
    entries = sorted(os.listdir(directory))
    class_names = [e for e in entries if os.path.isdir(os.path.join(directory, e))]
    folders = class_names if labels == "inferred" else [""]
    paths, label_ids = [], []
    for label_id, folder in enumerate(folders):
        root = os.path.join(directory, folder)
        found = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=follow_links):
            dirnames.sort()
            for name in sorted(filenames):
                if name.lower().endswith(IMAGE_EXTENSIONS):
                    found.append(os.path.join(dirpath, name))
        found.sort()
        paths.extend(found)
        label_ids.extend([label_id] * len(found))
    if labels != "inferred":
        paths.sort()
    return class_names, paths, np.asarray(label_ids, dtype="int32")


def image_dataset_from_directory(
    directory,
    labels="inferred",
    label_mode="int",
    class_names=None,
    color_mode="rgb",
    batch_size=32,
    image_size=(256, 256),
    shuffle=True,
    seed=None,
    validation_split=None,
    subset=None,
    interpolation="bilinear",
    follow_links=False,
    crop_to_aspect_ratio=False,
    pad_to_aspect_ratio=False,
    data_format=None,
    verbose=True,
):
    """A dataset of `(images, labels)` batches from image files in one folder per class.

    Images are read when a batch is drawn, resized to `image_size` and returned as float32
    `(batch, height, width, channels)` (channels_first if so configured); labels are int32
    (`label_mode="int"`), one-hot float32 ("categorical"), float32 of shape `(batch, 1)`
    ("binary"), or left out (`labels=None` or `label_mode=None`). The dataset's
    `class_names` lists the folders. With `subset="both"`, returns the training and the
    validation datasets.

    Example:
        >>> import os, shutil, tempfile
        >>> tmp, image = tempfile.mkdtemp(), np.zeros((8, 8, 3))
        >>> for name in ["cat", "dog"]:
        ...     os.makedirs(os.path.join(tmp, name))
        ...     for i in range(5):
        ...         keratron.utils.save_img(os.path.join(tmp, name, f"{i}.png"), image)
        >>> train, val = keratron.utils.image_dataset_from_directory(
        ...     tmp, image_size=(64, 64), validation_split=0.2, subset="both", seed=1)
        Found 10 files belonging to 2 classes.
        Using 8 files for training.
        Using 2 files for validation.
        >>> images, labels = next(iter(train))
        >>> train.class_names, images.shape, labels.shape
        (['cat', 'dog'], (8, 64, 64, 3), (8,))
        >>> shutil.rmtree(tmp)
    """
    if labels not in ("inferred", None) and not isinstance(labels, (list, tuple)):
        raise ValueError(
            "`labels` argument should be a list/tuple of integer labels, of length equal to "
            f"the number of image files, or 'inferred' or None. Received: labels={labels!r}"
        )
    if label_mode not in ("int", "categorical", "binary", None):
        raise ValueError(
            '`label_mode` argument must be one of "int", "categorical", "binary", or None. '
            f"Received: label_mode={label_mode!r}"
        )
    channels = {"rgb": 3, "rgba": 4, "grayscale": 1}.get(color_mode)
    if channels is None:
        raise ValueError(
            '`color_mode` must be one of "rgb", "rgba", or "grayscale". '
            f"Received: color_mode={color_mode!r}"
        )
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    found_classes, paths, label_ids = _index_directory(directory, labels, follow_links)
    if class_names is not None:
        if labels != "inferred" or sorted(class_names) != sorted(found_classes):
            raise ValueError(
                "The `class_names` passed do not match the names of the subdirectories of "
                f"the target directory. Expected: {found_classes}, but received: {class_names}"
            )
        order = {name: i for i, name in enumerate(class_names)}
        label_ids = np.asarray([order[found_classes[i]] for i in label_ids], dtype="int32")
        found_classes = list(class_names)
    if isinstance(labels, (list, tuple)):
        if len(labels) != len(paths):
            raise ValueError(
                "Expected the lengths of `labels` to match the number of files in the target "
                f"directory. len(labels) is {len(labels)} while we found {len(paths)} files."
            )
        label_ids = np.asarray(labels, dtype="int32")
        found_classes = [str(c) for c in sorted(set(labels))]
    num_classes = len(found_classes) if labels == "inferred" else len(set(label_ids.tolist()))
    if label_mode == "binary" and num_classes != 2:
        raise ValueError(
            'When passing `label_mode="binary"`, there must be exactly 2 class_names. '
            f"Received: class_names={found_classes}"
        )
    if not paths:
        raise ValueError(
            f"No images found in directory {directory}. Allowed formats: {IMAGE_EXTENSIONS}"
        )
    if verbose:
        if labels == "inferred":
            print_msg(f"Found {len(paths)} files belonging to {len(found_classes)} classes.")
        else:
            print_msg(f"Found {len(paths)} files.")
    if shuffle:
        if seed is None:
            seed = np.random.randint(1e6)
        paths = list(paths)
        np.random.RandomState(seed).shuffle(paths)
        np.random.RandomState(seed).shuffle(label_ids)
    if subset is not None and validation_split is None:
        raise ValueError("`subset` was given without a `validation_split`.")
    data_format = data_format or image_data_format()

    def make(sub_paths, sub_labels):
        def load(index):
            rows = np.asarray(_as_numpy(index)).reshape(-1)
            images = []
            for i in rows:
                img = img_to_array(
                    load_img(sub_paths[i], color_mode=color_mode), data_format="channels_last"
                )
                if (
                    img.shape[:2] != tuple(image_size)
                    or crop_to_aspect_ratio
                    or (pad_to_aspect_ratio)
                ):
                    img = ops.image.resize(
                        img,
                        tuple(image_size),
                        interpolation=interpolation,
                        crop_to_aspect_ratio=crop_to_aspect_ratio,
                        pad_to_aspect_ratio=pad_to_aspect_ratio,
                        data_format="channels_last",
                    ).numpy()
                images.append(img.astype("float32"))
            x = np.stack(images)
            if data_format == "channels_first":
                x = x.transpose(0, 3, 1, 2)
            if batch_size is None:
                x = x[0]
            if label_mode is None:
                return x
            y = sub_labels[rows]
            if label_mode == "categorical":
                y = np.eye(num_classes, dtype="float32")[y]
            elif label_mode == "binary":
                y = y.astype("float32")[:, None]
            return x, (y if batch_size is not None else y[0])

        ds = Dataset.from_tensor_slices(np.arange(len(sub_paths)))
        if shuffle:
            ds = ds.shuffle(buffer_size=(batch_size or 32) * 8, seed=seed)
        if batch_size is not None:
            ds = ds.batch(batch_size)
        ds = ds.map(load)
        ds.class_names = found_classes
        ds.file_paths = list(sub_paths)
        return ds

    if validation_split is None:
        return make(paths, label_ids)
    num_val = int(validation_split * len(paths))
    if subset in ("training", "both"):
        print_msg(f"Using {len(paths) - num_val} files for training.")
    if subset in ("validation", "both"):
        print_msg(f"Using {num_val} files for validation.")
    train = make(paths[: len(paths) - num_val], label_ids[: len(paths) - num_val])
    val = make(paths[len(paths) - num_val :], label_ids[len(paths) - num_val :])
    if subset == "training":
        return train
    if subset == "validation":
        return val
    if subset == "both":
        return train, val
    raise ValueError(
        f'`subset` must be "training", "validation" or "both". Received: subset={subset!r}'
    )
