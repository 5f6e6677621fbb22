"""Keras's auto-naming: per-prefix counters ("dense", "dense_1", ...) and snake_case names.

As `keras.src.utils.naming`. The counters are per thread and reset by
`keratron.backend.clear_session()`.
"""

from __future__ import annotations

import collections
import contextlib
import re
import threading

__all__ = [
    "clear_session",
    "fresh_uids",
    "get_uid",
    "reset_uids",
    "to_snake_case",
    "uid_counters",
    "unique_object_name",
]

_names = threading.local()


def uid_counters() -> collections.defaultdict:
    """This thread's counts per prefix (the dict itself, to save and restore)."""
    c = getattr(_names, "counters", None)
    if c is None:
        c = _names.counters = collections.defaultdict(int)
    return c


def get_uid(prefix: str = "") -> int:
    """Returns 1, 2, 3, ... for successive calls with the same prefix (per session)."""
    c = uid_counters()
    c[prefix] += 1
    return c[prefix]


def reset_uids() -> None:
    """Forgets every prefix's count: the next "dense" is "dense" again."""
    uid_counters().clear()


def clear_session(free_memory: bool = True) -> None:
    """Resets auto-naming (the next Dense is "dense" again), as Keras does.

    Also `keratron.backend.clear_session` and `keratron.utils.clear_session`.
    """
    del free_memory  # keratron holds no other per-session state to free
    reset_uids()


@contextlib.contextmanager
def fresh_uids():
    """Names start afresh inside the scope ("dense" again); the counts are restored after."""
    counters = uid_counters()
    saved = dict(counters)
    counters.clear()
    try:
        yield
    finally:
        counters.clear()
        counters.update(saved)


def unique_object_name(base: str) -> str:
    """Keras auto-naming: "dense", then "dense_1", "dense_2", ..."""
    n = get_uid(base)
    return base if n == 1 else f"{base}_{n - 1}"


def to_snake_case(name: str) -> str:
    """ "MyLayer" -> "my_layer"; a name that would start with "_" gets the prefix "private"."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if not s.startswith("_") else "private" + s
