"""Up-front checks of the files that saving reads.

Writes go through `keratron.utils.io_utils.atomic_write` (temporary file, fsync, rename).
"""

from __future__ import annotations

import os

__all__ = ["check_readable"]


def check_readable(filepath, what: str) -> str:
    """The path as a string, after checking that it names an existing, non-empty file.

    Raises:
        FileNotFoundError: if nothing is there (or it is a directory).
        ValueError: if the file is empty.
    """
    filepath = os.fspath(filepath)
    if not os.path.exists(filepath):
        raise FileNotFoundError(f"{what}: no file found at '{filepath}'.")
    if os.path.isdir(filepath):
        raise FileNotFoundError(f"{what}: '{filepath}' is a directory, expected a file.")
    if os.path.getsize(filepath) == 0:
        raise ValueError(f"{what}: the file '{filepath}' is empty (0 bytes).")
    return filepath
