"""Crash-safe file writes and Keras's overwrite prompt (as `keras.src.utils.io_utils`).

`atomic_write` writes to a temporary file in the target's directory, flushes, fsyncs and
renames it over the target (`os.replace` is atomic on POSIX and Windows), and fsyncs the
directory entry too: a process killed at any moment leaves either the previous file untouched
or the new one complete, never a mixture. Saving, checkpoints and callbacks all write this way.
A killed write leaves its temporary file behind; the next completed write of the same target
removes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile

from keratron.config import is_interactive_logging_enabled

__all__ = [
    "ask_to_proceed_with_overwrite",
    "atomic_write",
    "fsync_path",
    "print_msg",
    "remove_stale_temporaries",
]


def fsync_path(path: str) -> None:
    """Flushes a file's (or a directory's) data to disk."""
    flags = os.O_RDONLY
    if os.path.isdir(path) and hasattr(os, "O_DIRECTORY"):
        flags |= os.O_DIRECTORY
    try:
        fd = os.open(path, flags)
    except OSError:
        return  # some platforms cannot open directories; the rename is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_write(filepath):
    """Yields a temporary path beside `filepath`; on a clean exit the file written there is
    fsynced and renamed over `filepath`, on an exception it is removed.

    Example:
        >>> import os, shutil, tempfile
        >>> from keratron.utils.io_utils import atomic_write
        >>> tmp = tempfile.mkdtemp()
        >>> with atomic_write(os.path.join(tmp, "notes.txt")) as partial:
        ...     with open(partial, "w") as f:
        ...         _ = f.write("done")
        >>> os.listdir(tmp)
        ['notes.txt']
        >>> shutil.rmtree(tmp)
    """
    filepath = os.fspath(filepath)
    directory = os.path.dirname(os.path.abspath(filepath)) or "."
    os.makedirs(directory, exist_ok=True)
    base = os.path.basename(filepath)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.{os.getpid()}-", suffix=".tmp", dir=directory)
    os.close(fd)
    started = os.stat(tmp).st_mtime_ns
    try:
        yield tmp
        fsync_path(tmp)
        if os.path.exists(filepath):
            # mkstemp creates files readable by the owner only; keep the old file's mode.
            os.chmod(tmp, os.stat(filepath).st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, filepath)
        fsync_path(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    remove_stale_temporaries(filepath, started)


# `.<name>.<pid>-XXXXXXXX.tmp` as atomic_write names them; `.<name>.XXXXXXXX.tmp` from before
# the writer's pid was part of the name.
_TEMP_PATTERN = r"\.{base}\.(?:(\d+)-)?[a-z0-9_]{{8}}\.tmp"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # it exists (another user's), or we cannot tell: keep its file
    return True


def remove_stale_temporaries(filepath, before_ns: int) -> list:
    """Removes the temporary files that interrupted `atomic_write`s of `filepath` left: only
    files named as atomic_write names them for this target, last written before `before_ns`
    (the start of the current write), and whose writing process is gone. Returns their paths.

    Example:
        >>> import os, shutil, tempfile, time
        >>> from keratron.utils.io_utils import remove_stale_temporaries
        >>> tmp = tempfile.mkdtemp()
        >>> # The temporary file of a write of notes.txt that was killed:
        >>> open(os.path.join(tmp, ".notes.txt.k3x9q2ab.tmp"), "w").close()
        >>> removed = remove_stale_temporaries(os.path.join(tmp, "notes.txt"), time.time_ns())
        >>> [os.path.basename(path) for path in removed]
        ['.notes.txt.k3x9q2ab.tmp']
        >>> shutil.rmtree(tmp)
    """
    import re

    filepath = os.fspath(filepath)
    directory = os.path.dirname(os.path.abspath(filepath)) or "."
    pattern = re.compile(_TEMP_PATTERN.format(base=re.escape(os.path.basename(filepath))))
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = pattern.fullmatch(name)
        if match is None:
            continue
        path = os.path.join(directory, name)
        try:
            stat = os.lstat(path)
        except OSError:
            continue
        if not os.path.isfile(path) or os.path.islink(path) or stat.st_mtime_ns >= before_ns:
            continue
        if match.group(1) is not None and _pid_alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.remove(path)
            removed.append(path)
    return removed


def ask_to_proceed_with_overwrite(filepath) -> bool:
    """Asks on the terminal whether an existing file may be overwritten (Keras's prompt)."""
    overwrite = input(f"[WARNING] {filepath} already exists - overwrite? [y/n]").strip().lower()
    while overwrite not in ("y", "n"):
        overwrite = input('Enter "y" (overwrite) or "n" (cancel).').strip().lower()
    if overwrite == "n":
        return False
    print("[TIP] Next time specify overwrite=True!")
    return True


def print_msg(message, line_break: bool = True) -> None:
    """Writes `message` to stdout, or logs it (logger "keratron", INFO) once
    `keratron.config.disable_interactive_logging()` was called, as Keras's `print_msg`.

    Example:
        >>> print_msg("Epoch 1/3")
        Epoch 1/3
    """
    message = str(message)
    if not is_interactive_logging_enabled():
        logging.getLogger("keratron").info(message)
        return
    message = f"{message}\n" if line_break else message
    try:
        sys.stdout.write(message)
    except UnicodeEncodeError:
        # A terminal without the bar's glyph gets Keras 2's "=" (as Keras does).
        encoding = sys.stdout.encoding or "utf-8"
        message = message.replace("\u2501", "=").encode(encoding, errors="ignore")
        sys.stdout.write(message.decode(encoding))
    sys.stdout.flush()
