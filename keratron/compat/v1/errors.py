"""`tf.errors`: the exceptions a TF1 `Session.run` raises, with TF's names and fields."""

from __future__ import annotations

__all__ = [
    "OpError",
    "CancelledError",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "FailedPreconditionError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "ResourceExhaustedError",
    "UnknownError",
    "AbortedError",
    "DataLossError",
]


class OpError(Exception):
    """An error while running a graph: `node_def`, `op` and `message` as in TF."""

    def __init__(self, node_def, op, message, *args):
        super().__init__(message)
        self.node_def = node_def
        self.op = op
        self.message = message


class CancelledError(OpError):
    pass


class InvalidArgumentError(OpError):
    pass


class NotFoundError(OpError):
    pass


class AlreadyExistsError(OpError):
    pass


class FailedPreconditionError(OpError):
    pass


class OutOfRangeError(OpError):
    pass


class UnimplementedError(OpError):
    pass


class InternalError(OpError):
    pass


class ResourceExhaustedError(OpError):
    pass


class UnknownError(OpError):
    pass


class AbortedError(OpError):
    pass


class DataLossError(OpError):
    """Unrecoverable data loss or corruption, as a corrupt or truncated record file."""
