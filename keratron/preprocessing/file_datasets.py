"""Datasets of text and audio files in class folders, as Keras makes them
(`keras.utils.text_dataset_from_directory`, `keras.utils.audio_dataset_from_directory`),
returned as `keratron.data.Dataset`s that `fit` reads.

Files are indexed as Keras indexes them (class folders in sorted order, hidden folders
skipped, files sorted within each folder, the list shuffled with `np.random.RandomState(seed)`
before a validation split is cut from its end), so the same seed gives the same training and
validation files as in Keras. Files are read when a batch is drawn.
"""

from __future__ import annotations

import os
import wave

import numpy as np

from keratron.data import Dataset
from keratron.utils.io_utils import print_msg

__all__ = ["audio_dataset_from_directory", "text_dataset_from_directory"]

AUDIO_FORMATS = (".wav",)


def _check_labels(labels, label_mode, class_names, what):
    if labels not in ("inferred", None):
        if not isinstance(labels, (list, tuple)):
            raise ValueError(
                f"{what}: the `labels` argument should be a list/tuple of integer labels, of the "
                "same size as the number of files in the target directory, 'inferred' (labels "
                f"from the subdirectory names) or None (no labels). Received: labels={labels}"
            )
        if class_names:
            raise ValueError(
                f'{what}: you can only pass `class_names` if `labels="inferred"`. Received: '
                f"labels={labels}, and class_names={class_names}"
            )
    if label_mode not in {"int", "categorical", "binary", None}:
        raise ValueError(
            f'{what}: `label_mode` argument must be one of "int", "categorical", "binary", or '
            f"None. Received: label_mode={label_mode}"
        )


def _check_validation_split_arg(validation_split, subset, shuffle, seed):
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(
            f"`validation_split` must be between 0 and 1, received: {validation_split}"
        )
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and inversely.")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(
            f'`subset` must be either "training", "validation" or "both", received: {subset}'
        )
    if validation_split and shuffle and seed is None:
        raise ValueError(
            "If using `validation_split` and shuffling the data, you must provide a `seed` "
            "argument, to make sure that there is no overlap between the training and "
            "validation subset."
        )


def _valid_files(directory, follow_links, formats):
    for root, _, files in sorted(os.walk(directory, followlinks=follow_links), key=lambda w: w[0]):
        for name in sorted(files):
            if name.lower().endswith(formats):
                yield os.path.join(root, name)


def index_directory(directory, labels, formats, class_names, shuffle, seed, follow_links, verbose):
    """Returns `(file_paths, labels, class_names)` for the files of `directory` with one of
    `formats`, in Keras's order (see the module docstring)."""
    if not os.path.isdir(directory):
        raise ValueError(f"Directory {directory!r} does not exist or is not a directory.")
    if labels == "inferred":
        folders = [
            d
            for d in sorted(os.listdir(directory))
            if os.path.isdir(os.path.join(directory, d)) and not d.startswith(".")
        ]
        if class_names is not None:
            if not set(class_names) <= set(folders):
                raise ValueError(
                    "The `class_names` passed did not match the names of the subdirectories of "
                    f"the target directory. Expected: {folders} (or a subset of it), but "
                    f"received: class_names={class_names}"
                )
            folders = list(class_names)
    else:
        folders = [""]
        if class_names is not None:
            raise ValueError(
                "When `labels=None` (no labels), argument `class_names` cannot be specified."
                if labels is None
                else "When argument `labels` is specified, argument `class_names` cannot be "
                "specified (the `class_names` will be the sorted list of labels)."
            )
    paths, found_labels = [], []
    for index, folder in enumerate(folders):
        found = list(_valid_files(os.path.join(directory, folder), follow_links, formats))
        paths += found
        found_labels += [index] * len(found)
    if labels == "inferred":
        labels = np.asarray(found_labels, dtype="int32")
        class_names = folders
    elif labels is None:
        class_names = None
    else:
        if len(labels) != len(paths):
            raise ValueError(
                "Expected the lengths of `labels` to match the number of files in the target "
                f"directory. len(labels) is {len(labels)} while we found {len(paths)} files in "
                f"directory {directory}."
            )
        class_names = [str(label) for label in sorted(set(labels))]
        labels = np.asarray(labels)
    if verbose:
        if labels is None:
            print_msg(f"Found {len(paths)} files.")
        else:
            print_msg(f"Found {len(paths)} files belonging to {len(class_names)} classes.")
    if shuffle:
        np.random.RandomState(seed).shuffle(paths)
        if labels is not None:
            np.random.RandomState(seed).shuffle(labels)
    return paths, labels, class_names


def _split(paths, labels, validation_split, subset):
    if not validation_split:
        return paths, labels
    num_val = int(validation_split * len(paths))
    # Split at len - num_val (not at -num_val): a split that rounds to no validation file
    # leaves every file to training, as the message says, and none to validation.
    cut = len(paths) - num_val
    if subset == "training":
        print_msg(f"Using {cut} files for training.")
        keep = slice(None, cut)
    else:
        print_msg(f"Using {num_val} files for validation.")
        keep = slice(cut, None)
    return paths[keep], (None if labels is None else labels[keep])


def _encode_labels(labels, label_mode, num_classes):
    if label_mode == "binary":
        return labels.astype("float32")[..., None]
    if label_mode == "categorical":
        return np.eye(num_classes, dtype="float32")[labels]
    return labels.astype("int32") if labels.dtype.kind in "iub" else labels


def _files_dataset(
    paths, labels, label_mode, num_classes, read, collate, batch_size, shuffle, seed
):
    """A dataset drawing (shuffled) file indices, batching them and reading the files."""
    paths = list(paths)
    targets = None if label_mode is None else _encode_labels(labels, label_mode, num_classes)

    def load(index):
        rows = np.asarray(index.numpy() if hasattr(index, "numpy") else index).reshape(-1)
        x = collate([read(paths[i]) for i in rows])
        if batch_size is None:
            x = x[0]
        if targets is None:
            return x
        y = targets[rows]
        return x, (y if batch_size is not None else y[0])

    ds = Dataset.from_tensor_slices(np.arange(len(paths)))
    if shuffle:
        ds = ds.shuffle(buffer_size=batch_size * 8 if batch_size is not None else 1024, seed=seed)
    ds = ds.batch(batch_size if batch_size is not None else 1).map(load)
    ds.file_paths = paths
    return ds


def _from_directory(
    what,
    directory,
    labels,
    label_mode,
    class_names,
    formats,
    batch_size,
    shuffle,
    seed,
    validation_split,
    subset,
    follow_links,
    verbose,
    read,
    collate,
):
    _check_validation_split_arg(validation_split, subset, shuffle, seed)
    if seed is None:
        seed = np.random.randint(1e6)
    paths, labels, class_names = index_directory(
        directory, labels, formats, class_names, shuffle, seed, follow_links, verbose
    )
    if label_mode == "binary" and len(class_names) != 2:
        raise ValueError(
            'When passing `label_mode="binary"`, there must be exactly 2 class_names. Received: '
            f"class_names={class_names}"
        )
    num_classes = len(class_names) if class_names else 0
    subsets = ("training", "validation") if subset == "both" else (subset,)
    datasets = []
    for part in subsets:
        part_paths, part_labels = _split(paths, labels, validation_split, part)
        if not part_paths:
            kind = f" {part}" if subset == "both" else ""
            raise ValueError(
                f"No{kind} {what} files found in directory {directory}. Allowed format(s): "
                f"{formats}"
            )
        ds = _files_dataset(
            part_paths,
            part_labels,
            label_mode,
            num_classes,
            read,
            collate,
            batch_size,
            shuffle and part != "validation",
            seed,
        )
        ds.class_names = class_names
        datasets.append(ds)
    if subset != "both":
        return datasets[0]
    # Keras returns the pair as a list for text files and as a tuple for audio files.
    return list(datasets) if what == "text" else tuple(datasets)


def text_dataset_from_directory(
    directory,
    labels="inferred",
    label_mode="int",
    class_names=None,
    batch_size=32,
    max_length=None,
    shuffle=True,
    seed=None,
    validation_split=None,
    subset=None,
    follow_links=False,
    format="tf",
    verbose=True,
):
    """A dataset of `(texts, labels)` batches from `.txt` files in one folder per class.

    Texts are `bytes` (a `(batch,)` object array, as TensorFlow's string tensors read),
    cut to `max_length` bytes if given; labels are int32 (`label_mode="int"`), one-hot
    float32 ("categorical"), float32 of shape `(batch, 1)` ("binary"), or left out
    (`labels=None` or `label_mode=None`). The dataset's `class_names` lists the folders; with
    `subset="both"`, returns the training and the validation datasets.

    Args:
        directory: the folder holding one subfolder per class (or the files, without labels).
        labels: "inferred", None, or a list of integer labels in the files' sorted order.
        label_mode: "int", "categorical", "binary" or None.
        class_names: the class folders to use, in label order (default: all, sorted).
        batch_size: texts per batch; None yields single texts.
        max_length: the longest text kept, in bytes.
        shuffle, seed: shuffle the files (a seed is needed with `validation_split`).
        validation_split, subset: hold out the last fraction of the (shuffled) files;
            "training", "validation" or "both".
        follow_links: descend into linked folders.
        format: "tf" (Keras's default, a `tf.data.Dataset` there); keratron returns its own
            `Dataset` for it. Keras's "grain" format is refused.
        verbose: print how many files and classes were found.

    Example:
        >>> import os, shutil, tempfile
        >>> tmp = tempfile.mkdtemp()
        >>> for name, text in [("neg", "a dull film"), ("pos", "a great film")]:
        ...     os.makedirs(os.path.join(tmp, name))
        ...     for i in range(5):
        ...         with open(os.path.join(tmp, name, f"{i}.txt"), "w") as f:
        ...             _ = f.write(text)
        >>> train, val = keratron.utils.text_dataset_from_directory(
        ...     tmp, validation_split=0.2, subset="both", seed=1)
        Found 10 files belonging to 2 classes.
        Using 8 files for training.
        Using 2 files for validation.
        >>> texts, labels = next(iter(val))
        >>> train.class_names, texts.tolist(), labels.numpy().tolist()
        (['neg', 'pos'], [b'a great film', b'a great film'], [1, 1])
        >>> shutil.rmtree(tmp)
    """
    what = "text_dataset_from_directory"
    _check_labels(labels, label_mode, class_names, what)
    if format not in ("tf", "grain"):
        raise ValueError(f'`format` should be either "tf" or "grain". Received: format={format}')
    if format == "grain":
        raise ValueError(
            f'{what}: format="grain" returns a Grain dataset in Keras; keratron returns its own '
            'keratron.data.Dataset, with format="tf".'
        )
    if labels is None or label_mode is None:
        labels, label_mode = None, None

    def read(path):
        with open(path, "rb") as f:
            return f.read() if max_length is None else f.read(max_length)

    def collate(texts):
        out = np.empty(len(texts), dtype=object)
        out[:] = texts
        return out

    return _from_directory(
        "text", directory, labels, label_mode, class_names, (".txt",), batch_size, shuffle,
        seed, validation_split, subset, follow_links, verbose, read, collate,
    )  # fmt: skip


def read_wav(path, output_sequence_length=None) -> np.ndarray:
    """A 16-bit PCM WAV file as float32 `(samples, channels)` in [-1, 1), as
    `tf.audio.decode_wav` reads it: cut or zero-padded to `output_sequence_length` samples."""
    with wave.open(path, "rb") as f:
        width, channels, frames = f.getsampwidth(), f.getnchannels(), f.getnframes()
        if width != 2:
            raise ValueError(
                f"audio_dataset_from_directory: can only read 16-bit WAV files, but {path!r} "
                f"has {8 * width}-bit samples."
            )
        raw = f.readframes(frames)
    audio = np.frombuffer(raw, dtype="<i2").reshape(-1, channels).astype("float32") / 32768.0
    if output_sequence_length is not None:
        if len(audio) >= output_sequence_length:
            audio = audio[:output_sequence_length]
        else:
            audio = np.pad(audio, ((0, output_sequence_length - len(audio)), (0, 0)))
    return audio


def _pad_batch(clips):
    longest = max(len(c) for c in clips)
    return np.stack([np.pad(c, ((0, longest - len(c)), (0, 0))) for c in clips])


def audio_dataset_from_directory(
    directory,
    labels="inferred",
    label_mode="int",
    class_names=None,
    batch_size=32,
    sampling_rate=None,
    output_sequence_length=None,
    ragged=False,
    shuffle=True,
    seed=None,
    validation_split=None,
    subset=None,
    follow_links=False,
    verbose=True,
):
    """A dataset of `(audio, labels)` batches from `.wav` files in one folder per class.

    Audio is float32 `(batch, samples, channels)` in [-1, 1) (16-bit PCM WAV, read with the
    standard library's `wave`); clips are cut or zero-padded to `output_sequence_length`, or
    else zero-padded to the longest clip of their batch. Labels are as in
    `text_dataset_from_directory`.

    Args:
        directory, labels, label_mode, class_names, batch_size, shuffle, seed,
            validation_split, subset, follow_links, verbose: as in
            `text_dataset_from_directory`.
        sampling_rate: resample to this rate; Keras needs the optional `tensorflow_io` package
            for it and raises ImportError without it.
        output_sequence_length: samples per clip.
        ragged: Keras's ragged batches; keratron has no ragged tensors, so True is refused.

    Example:
        >>> import os, shutil, tempfile, wave
        >>> tmp = tempfile.mkdtemp()
        >>> for name in ["no", "yes"]:
        ...     os.makedirs(os.path.join(tmp, name))
        ...     with wave.open(os.path.join(tmp, name, "0.wav"), "wb") as f:
        ...         f.setparams((1, 2, 16000, 0, "NONE", None))  # mono, 16-bit, 16 kHz
        ...         f.writeframes(np.zeros(8000, np.int16).tobytes())  # half a second
        >>> ds = keratron.utils.audio_dataset_from_directory(
        ...     tmp, output_sequence_length=16000, batch_size=8)
        Found 2 files belonging to 2 classes.
        >>> audio, labels = next(iter(ds))
        >>> audio.shape  # cut or zero-padded to output_sequence_length
        (2, 16000, 1)
        >>> shutil.rmtree(tmp)
    """
    what = "audio_dataset_from_directory"
    _check_labels(labels, label_mode, class_names, what)
    if ragged and output_sequence_length is not None:
        raise ValueError("Cannot set both `ragged` and `output_sequence_length`")
    if ragged:
        raise ValueError(
            f"{what}: ragged=True yields ragged tensors, which keratron does not have; pass "
            "output_sequence_length, or ragged=False to pad each batch to its longest clip."
        )
    if sampling_rate is not None:
        if not isinstance(sampling_rate, int):
            raise ValueError(
                f"`sampling_rate` should have an integer value. Received: "
                f"sampling_rate={sampling_rate}"
            )
        if sampling_rate <= 0:
            raise ValueError(
                f"`sampling_rate` should be higher than 0. Received: sampling_rate={sampling_rate}"
            )
        import importlib.util

        if importlib.util.find_spec("tensorflow_io") is None:
            raise ImportError(
                "To use the argument `sampling_rate`, you should install tensorflow_io. You can "
                "install it via `pip install tensorflow-io`."
            )
        raise ValueError(
            f"{what}: resampling runs TensorFlow IO's resampler in Keras, which keratron does "
            "not load (TensorFlow shares no process with keratron's kernels); resample the "
            "files beforehand and pass sampling_rate=None."
        )
    if labels is None or label_mode is None:
        labels, label_mode = None, None

    def read(path):
        return read_wav(path, output_sequence_length)

    return _from_directory(
        "audio", directory, labels, label_mode, class_names, AUDIO_FORMATS, batch_size, shuffle,
        seed, validation_split, subset, follow_links, verbose, read, _pad_batch,
    )  # fmt: skip
