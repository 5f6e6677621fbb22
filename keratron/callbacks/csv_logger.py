"""`CSVLogger`: one CSV row of epoch logs per epoch."""

from __future__ import annotations

import collections.abc
import csv
import os

import numpy as np

from keratron.callbacks.callback import Callback

__all__ = ["CSVLogger"]


def _csv_value(value):
    if isinstance(value, str):
        return value
    if isinstance(value, collections.abc.Iterable) and not (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        # Keras writes a list-valued log as one quoted "[a, b]" cell.
        return f'"[{", ".join(map(str, value))}]"'
    return value


class CSVLogger(Callback):
    """Streams epoch results to a CSV file, as Keras does.

    The header is "epoch" then the sorted log keys; when the first epoch has no validation
    keys, a "val_" column is added for each key (filled with "NA"), so that the columns stay
    the same if validation starts later.

    Args:
        filename: path of the CSV file (str or `os.PathLike`).
        separator: the field separator. Defaults to ",".
        append: append to an existing file (writing the header only if it is empty) instead
            of overwriting it.

    Example:
        >>> import os, shutil, tempfile
        >>> model = keratron.Sequential([keratron.Input((2,)), keratron.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((4, 2)), np.zeros((4, 1))
        >>> tmp = tempfile.mkdtemp()
        >>> path = os.path.join(tmp, "training.log")
        >>> history = model.fit(x, y, epochs=2, callbacks=[keratron.callbacks.CSVLogger(path)],
        ...                     verbose=0)
        >>> with open(path) as f:
        ...     print([line.split(",")[0] for line in f])
        ['epoch', '0', '1']
        >>> shutil.rmtree(tmp)
    """

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError(
                f"CSVLogger: `separator` must be a one-character string. "
                f"Received: separator={separator!r}"
            )
        self.sep = separator
        self.filename = os.fspath(filename)
        self.append = append
        self.writer = None
        self.keys = None
        self.append_header = True
        self.csv_file = None

    def on_train_begin(self, logs=None):
        if self.append:
            if os.path.exists(self.filename):
                with open(self.filename, encoding="utf-8") as f:
                    self.append_header = not bool(len(f.readline()))
            mode = "a"
        else:
            mode = "w"
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = open(self.filename, mode, newline="", encoding="utf-8")  # noqa: SIM115
        self.writer = None
        self.keys = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs.keys())
            if self.keys and not any(k.startswith("val_") for k in self.keys):
                self.keys.extend([f"val_{k}" for k in self.keys])
        if self.writer is None:

            class _Dialect(csv.excel):
                delimiter = self.sep

            self.writer = csv.DictWriter(
                self.csv_file, fieldnames=["epoch"] + self.keys, dialect=_Dialect
            )
            if self.append_header:
                self.writer.writeheader()
        row = {"epoch": epoch}
        row.update((key, _csv_value(logs.get(key, "NA"))) for key in self.keys)
        self.writer.writerow(row)
        self.csv_file.flush()

    def on_train_end(self, logs=None):
        if self.csv_file is not None and not self.csv_file.closed:
            self.csv_file.close()
        self.writer = None
