"""Scalar summaries of an Estimator run: a CSV file per run directory, and TensorBoard event
files when the optional `tensorboard` package is installed.

Training writes to `model_dir` ("loss" every `save_summary_steps`, "global_step/sec" every
`log_step_count_steps`), evaluation to `model_dir/eval` (or `eval_<name>`), as TensorFlow
lays them out. The CSV (`summaries.csv`) has one row per value: `step,tag,value,wall_time`,
so runs with different metrics share one format and resumed runs append.

Event files hold `Event` protos with `simple_value` scalars (what TensorFlow 1's Estimator
wrote), written by `keratron.utils.event_file` (tensorboard's own file writer would import
TensorFlow when it is installed).
"""

from __future__ import annotations

import csv
import os
import time

from keratron.utils.event_file import EventFile

__all__ = ["SummaryWriter", "SUMMARY_CSV"]

SUMMARY_CSV = "summaries.csv"


def _tensorboard():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
    except ImportError:
        return None
    return event_pb2, summary_pb2


class SummaryWriter:
    """Appends scalars to `<logdir>/summaries.csv` and, when possible, an event file."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        self.logdir = logdir
        self.csv_path = os.path.join(logdir, SUMMARY_CSV)
        new = not os.path.exists(self.csv_path) or os.path.getsize(self.csv_path) == 0
        self._file = open(self.csv_path, "a", newline="", encoding="utf-8")
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(["step", "tag", "value", "wall_time"])
        self._events = None
        tb = _tensorboard()
        if tb is not None:
            self._event_pb2, self._summary_pb2 = tb
            self._events = EventFile(logdir)

    def scalars(self, step: int, values: dict) -> None:
        now = time.time()
        for tag, value in values.items():
            self._csv.writerow([int(step), tag, repr(float(value)), f"{now:.3f}"])
        self._file.flush()
        if self._events is not None:
            summary = self._summary_pb2.Summary(
                value=[
                    self._summary_pb2.Summary.Value(tag=tag, simple_value=float(value))
                    for tag, value in values.items()
                ]
            )
            event = self._event_pb2.Event(wall_time=now, step=int(step), summary=summary)
            self._events.add_event(event)
            self._events.flush()

    def close(self) -> None:
        self._file.close()
        if self._events is not None:
            self._events.close()
