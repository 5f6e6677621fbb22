"""`tf.logging`: TensorFlow 1's logging functions over Python's `logging` ("tensorflow" logger).

Example:
    >>> import logging
    >>> import keratron.compat.v1 as tf
    >>> logger = logging.getLogger("tensorflow")
    >>> previous = logger.level
    >>> tf.logging.set_verbosity(tf.logging.INFO)
    >>> tf.logging.info("step %d", 10)
    >>> logger.level == tf.logging.get_verbosity() == logging.INFO
    True
    >>> logger.setLevel(previous)
"""

from __future__ import annotations

import logging as _logging

__all__ = ["DEBUG", "INFO", "WARN", "ERROR", "FATAL", "debug", "info", "warn", "warning",
           "error", "fatal", "log", "set_verbosity", "get_verbosity"]  # fmt: skip

DEBUG, INFO, WARN, ERROR, FATAL = 10, 20, 30, 40, 50
_logger = _logging.getLogger("tensorflow")


def set_verbosity(v) -> None:
    _logger.setLevel(v)


def get_verbosity() -> int:
    return _logger.getEffectiveLevel()


def log(level, msg, *args, **kwargs) -> None:
    _logger.log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    _logger.debug(msg, *args, **kwargs)


def info(msg, *args, **kwargs) -> None:
    _logger.info(msg, *args, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    _logger.warning(msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    _logger.error(msg, *args, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    _logger.critical(msg, *args, **kwargs)
