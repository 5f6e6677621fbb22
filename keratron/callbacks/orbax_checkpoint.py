"""`keras.callbacks.OrbaxCheckpoint`, which keratron does not provide.

Example:
    >>> from keratron.callbacks import OrbaxCheckpoint
"""


class OrbaxCheckpoint:
    """Not available: Orbax checkpoints JAX state, and keratron has no JAX backend.

    Use `keratron.callbacks.ModelCheckpoint` or `BackupAndRestore` instead.
    """

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "keras.callbacks.OrbaxCheckpoint is not available in keratron: it checkpoints JAX "
            "state with Orbax and keratron has no JAX backend; use ModelCheckpoint or "
            "BackupAndRestore."
        )
