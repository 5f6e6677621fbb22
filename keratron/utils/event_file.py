"""TensorBoard event files, written without TensorFlow.

An event file is a sequence of `Event` protos in TFRecord framing, named
`events.out.tfevents.<time>.<host>.<pid>.<n><suffix>`, whose first event names the format
("brain.Event:2"). The `tensorboard` package's own `EventFileWriter` goes through
`tf.io.gfile`, which imports TensorFlow whenever it is installed (seconds and hundreds of MB,
and a process that also runs torch's compiler can abort on the two LLVMs); this writer uses
only the package's protos and record framing. `keratron.callbacks.TensorBoard`,
`keratron.compat.v1.summary.FileWriter` and the Estimator's summaries write through it.
"""

from __future__ import annotations

import itertools
import os
import socket
import time

_file_ids = itertools.count()


class EventFile:
    """A new event file in `logdir` that `add_event` appends serialized events to.

    Needs the optional `tensorboard` package (its callers say so when it is missing).

    Example:
        >>> import os, tempfile
        >>> from keratron.utils.event_file import EventFile
        >>> events = EventFile(tempfile.mkdtemp(), ".v2")
        >>> events.close()
        >>> os.path.basename(events.path).startswith("events.out.tfevents.")
        True
    """

    def __init__(self, logdir, filename_suffix: str = ""):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        os.makedirs(logdir, exist_ok=True)
        name = (
            f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_file_ids)}{filename_suffix or ''}"
        )
        self.path = os.path.join(os.fspath(logdir), name)
        self._record_writer = RecordWriter
        self._writer = RecordWriter(open(self.path, "wb"))
        self.closed = False
        self.add_event(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add_event(self, event) -> None:
        """Appends one `Event` proto."""
        if self.closed:
            raise RuntimeError(f"The event file {self.path} is closed.")
        self._writer.write(event.SerializeToString())

    def flush(self) -> None:
        if not self.closed:
            self._writer.flush()

    def close(self) -> None:
        if not self.closed:
            self._writer.close()
            self.closed = True

    def reopen(self) -> None:
        """Appends to the same file again after `close`."""
        if self.closed:
            self._writer = self._record_writer(open(self.path, "ab"))
            self.closed = False
