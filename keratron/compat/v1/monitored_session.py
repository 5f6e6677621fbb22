"""`tf.train.MonitoredTrainingSession` (TF1): a session that initializes or restores the
variables, starts the queue runners, runs hooks around each `run`, saves checkpoints and
summaries, and ends cleanly at the end of input.

Hooks see every `run`: `before_run` may add fetches and feeds (`SessionRunArgs`), `after_run`
receives their values and may `request_stop()`. An `OutOfRangeError` from `run` (the end of a
queue or dataset) stops the session; leaving the `with` block then raises nothing, as in TF.

Example:
    >>> import keratron.compat.v1 as tf
    >>> with tf.Graph().as_default():
    ...     train_op = tf.assign_add(tf.train.get_or_create_global_step(), 1)
    ...     hooks = [tf.train.StopAtStepHook(last_step=3)]
    ...     with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
    ...         while not sess.should_stop():
    ...             n = sess.run(train_op)
    >>> int(n)
    3
"""

from __future__ import annotations

import os
import time
from collections import namedtuple

import numpy as np

from keratron.compat.v1 import errors, queues, summary
from keratron.compat.v1 import tf_logging as logging
from keratron.compat.v1 import variables as variables_lib
from keratron.compat.v1.framework import GraphKeys, get_collection, get_default_graph
from keratron.compat.v1.saver import Saver, latest_checkpoint
from keratron.compat.v1.session import Session

__all__ = [
    "SessionRunHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunValues",
    "StopAtStepHook",
    "NanTensorHook",
    "NanLossDuringTrainingError",
    "LoggingTensorHook",
    "StepCounterHook",
    "CheckpointSaverHook",
    "SummarySaverHook",
    "Scaffold",
    "MonitoredSession",
    "SingularMonitoredSession",
    "MonitoredTrainingSession",
]

_USE_DEFAULT = object()


def _global_step(graph=None):
    g = graph if graph is not None else get_default_graph()
    found = g.get_collection(GraphKeys.GLOBAL_STEP)
    return found[0] if found else None


# ---------------------------------------------------------------------------- hook protocol
class SessionRunHook:
    """A hook of a monitored session; every method is optional."""

    def begin(self) -> None:
        """Called once before the graph is finalized: create ops here."""

    def after_create_session(self, session, coord) -> None:
        """Called once the session is created and its variables initialized or restored."""

    def before_run(self, run_context):
        """Returns a `SessionRunArgs` of fetches and feeds to add to the run, or None."""
        return None

    def after_run(self, run_context, run_values) -> None:
        """Receives the added fetches' values in `run_values.results`."""

    def end(self, session) -> None:
        """Called once when the session ends without error."""


class SessionRunArgs(namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    """What a hook adds to a run: `fetches`, `feed_dict`."""

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


SessionRunValues = namedtuple("SessionRunValues", ["results", "options", "run_metadata"])


class SessionRunContext:
    """The run being made: its `original_args`, the `session`, and `request_stop()`."""

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    @property
    def original_args(self):
        return self._original_args

    @property
    def session(self):
        return self._session

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def request_stop(self) -> None:
        self._stop_requested = True


# ---------------------------------------------------------------------------- hooks
def _need_global_step(hook):
    step = _global_step()
    if step is None:
        raise RuntimeError(f"Global step should be created to use {type(hook).__name__}.")
    return step


class _Every:
    """TF's SecondOrStepTimer: fires on the first check, then every `steps` or `secs`."""

    def __init__(self, secs=None, steps=None):
        if (secs is None) == (steps is None):
            raise ValueError("Exactly one of every_secs and every_steps should be provided.")
        self._secs, self._steps = secs, steps
        self._last_time = self._last_step = None

    def should_trigger(self, step) -> bool:
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._secs is not None:
            return time.time() >= self._last_time + self._secs
        return step >= self._last_step + self._steps

    def update(self, step):
        now = time.time()
        elapsed = (
            None if self._last_time is None else (now - self._last_time, step - self._last_step)
        )
        self._last_time, self._last_step = now, step
        return elapsed


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches `last_step` (or `num_steps` more).

    Raises:
        ValueError: neither or both of `num_steps` and `last_step`, or a negative one.
    """

    def __init__(self, num_steps=None, last_step=None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("One of num_steps or last_step must be specified.")
        if (num_steps or 0) < 0 or (last_step or 0) < 0:
            raise ValueError(
                f"StopAtStepHook: steps must be non-negative. Received: num_steps={num_steps}, "
                f"last_step={last_step}"
            )
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        self._global_step_tensor = _need_global_step(self)

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step_tensor))
        if self._last_step is None:
            self._last_step = step + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        # The fetched step is the one before this run's train op incremented it.
        if int(run_values.results) + 1 >= self._last_step:
            if int(run_context.session.run(self._global_step_tensor)) >= self._last_step:
                run_context.request_stop()


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Raises `NanLossDuringTrainingError` (or requests a stop) when `loss_tensor` is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results):
            message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                logging.error(message)
                raise NanLossDuringTrainingError
            logging.warning(message)
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Logs the values of `tensors` (a list or a dict of name -> tensor) every N runs or
    seconds, at INFO level."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
                 formatter=None):  # fmt: skip
        if not at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "Either every_n_iter or every_n_secs should be provided (exactly one), or "
                "at_end should be True."
            )
        if isinstance(tensors, dict):
            self._tag_order = list(tensors)
            self._tensors = dict(tensors)
        else:
            items = list(tensors)
            self._tag_order = [getattr(t, "name", t) for t in items]
            self._tensors = dict(zip(self._tag_order, items))
        self._timer = (
            None
            if at_end and every_n_iter is None and every_n_secs is None
            else (_Every(every_n_secs, every_n_iter))
        )
        self._at_end = at_end
        self._formatter = formatter

    def begin(self):
        self._iter = 0
        self._current = {}

    def before_run(self, run_context):
        self._should_log = self._timer is not None and self._timer.should_trigger(self._iter)
        return SessionRunArgs(self._tensors) if self._should_log else None

    def _log(self, values):
        if self._formatter is not None:
            logging.info(self._formatter(values))
        else:
            logging.info(", ".join(f"{tag} = {values[tag]}" for tag in self._tag_order))

    def after_run(self, run_context, run_values):
        if self._should_log:
            self._timer.update(self._iter)
            self._log(run_values.results)
        self._iter += 1

    def end(self, session):
        if self._at_end:
            self._log(session.run(self._tensors))


class StepCounterHook(SessionRunHook):
    """Logs `global_step/sec` every `every_n_steps` steps (and writes it as a summary when
    given `output_dir` or `summary_writer`)."""

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None,
                 summary_writer=None):  # fmt: skip
        if every_n_secs is not None:
            every_n_steps = None
        self._timer = _Every(every_n_secs, every_n_steps)
        self._output_dir, self._writer = output_dir, summary_writer

    def begin(self):
        self._global_step_tensor = _need_global_step(self)
        if self._writer is None and self._output_dir:
            self._writer = summary.FileWriter(self._output_dir)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        step = int(run_values.results) + 1
        if self._timer.should_trigger(step):
            elapsed = self._timer.update(step)
            if elapsed is not None and elapsed[0] > 0:
                rate = elapsed[1] / elapsed[0]
                logging.info("global_step/sec: %g", rate)
                if self._writer is not None:
                    self._writer.add_summary(_scalar_summary("global_step/sec", rate), step)


def _scalar_summary(tag, value) -> bytes:
    summary_pb2 = summary._protos()[1]
    return summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(value))]
    ).SerializeToString()


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint `<checkpoint_dir>/model.ckpt-<step>` when the session starts, every
    `save_secs` or `save_steps`, and at the end.

    Raises:
        ValueError: neither or both of `save_secs` and `save_steps`.
    """

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None):  # fmt: skip
        self._dir = os.fspath(checkpoint_dir)
        self._path = os.path.join(self._dir, checkpoint_basename)
        self._timer = _Every(save_secs, save_steps)
        self._saver, self._scaffold = saver, scaffold

    def begin(self):
        self._global_step_tensor = _need_global_step(self)
        if self._saver is None and self._scaffold is None:
            self._saver = Saver()

    def _get_saver(self):
        return self._saver if self._saver is not None else self._scaffold.saver

    def _save(self, session, step):
        logging.info("Saving checkpoints for %d into %s.", step, self._path)
        self._get_saver().save(session, self._path, global_step=step)
        self._timer.update(step)

    def after_create_session(self, session, coord):
        self._save(session, int(session.run(self._global_step_tensor)))

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        step = int(run_context.session.run(self._global_step_tensor))
        if self._timer.should_trigger(step):
            self._save(run_context.session, step)

    def end(self, session):
        step = int(session.run(self._global_step_tensor))
        if step != self._timer._last_step:
            self._save(session, step)


class SummarySaverHook(SessionRunHook):
    """Runs the merged summaries (`summary_op`, or every summary of the graph) every
    `save_steps` steps or `save_secs` seconds and writes them to `output_dir`."""

    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
                 scaffold=None, summary_op=None):  # fmt: skip
        self._timer = _Every(save_secs, save_steps)
        self._output_dir, self._writer = output_dir, summary_writer
        self._summary_op = summary_op

    def begin(self):
        self._global_step_tensor = _need_global_step(self)
        if self._summary_op is None:
            self._summary_op = summary.merge_all()
        if self._writer is None and self._output_dir:
            self._writer = summary.FileWriter(self._output_dir)

    def before_run(self, run_context):
        fetches = {"global_step": self._global_step_tensor}
        self._request = self._summary_op is not None and self._writer is not None
        if self._request:
            fetches["summary"] = self._summary_op
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        step = int(run_values.results["global_step"])
        if self._request and self._timer.should_trigger(step):
            self._timer.update(step)
            self._writer.add_summary(run_values.results["summary"], step)

    def end(self, session):
        if self._writer is not None:
            self._writer.flush()


# ---------------------------------------------------------------------------- sessions
class Scaffold:
    """What a monitored session builds before finalizing the graph: `init_op` (global
    variables), `local_init_op` (local variables) and `saver`."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None,
                 saver=None, copy_from_scaffold=None):  # fmt: skip
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.local_init_op, self.summary_op, self.saver = local_init_op, summary_op, saver

    def finalize(self):
        if self.init_op is None:
            self.init_op = variables_lib.global_variables_initializer()
        if self.local_init_op is None:
            self.local_init_op = variables_lib.group(
                variables_lib.local_variables_initializer(), variables_lib.tables_initializer()
            )
        if self.summary_op is None:
            self.summary_op = summary.merge_all()
        if self.saver is None:
            savers = get_collection(GraphKeys.SAVERS)
            self.saver = savers[0] if savers else Saver()
        get_default_graph().finalize()
        return self


class MonitoredSession:
    """A session run through hooks, with queue runners and a clean end at the end of input.

    Args:
        session_creator: None, or a `ChiefSessionCreator`-like object (its `scaffold` and
            `checkpoint_dir` are used).
        hooks: `SessionRunHook`s.
        stop_grace_period_secs: how long `close` waits for the queue-runner threads.
    """

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120,
                 scaffold=None, checkpoint_dir=None):  # fmt: skip
        self._hooks = list(hooks or [])
        self._graph = get_default_graph()
        for h in self._hooks:
            h.begin()
        if session_creator is not None:
            scaffold = getattr(session_creator, "scaffold", scaffold)
            checkpoint_dir = getattr(session_creator, "checkpoint_dir", checkpoint_dir)
        self._scaffold = (scaffold or Scaffold()).finalize()
        self._grace = stop_grace_period_secs
        self._sess = Session(graph=self._graph)
        self._restore_or_init(checkpoint_dir)
        self._coord = queues.Coordinator()
        self._threads = queues.start_queue_runners(self._sess, self._coord)
        for h in self._hooks:
            h.after_create_session(self._sess, self._coord)
        self._should_stop = False
        self._closed = False

    def _restore_or_init(self, checkpoint_dir):
        path = latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
        if path is not None:
            self._scaffold.saver.restore(self._sess, path)
        else:
            self._sess.run(self._scaffold.init_op, feed_dict=self._scaffold.init_feed_dict)
            if self._scaffold.init_fn is not None:
                self._scaffold.init_fn(self._scaffold, self._sess)
        self._sess.run(self._scaffold.local_init_op)

    @property
    def graph(self):
        return self._graph

    def should_stop(self) -> bool:
        return self._should_stop or self._coord.should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs `fetches` with the hooks' added fetches and feeds; returns `fetches`' values.

        Raises:
            RuntimeError: the session was closed.
            ValueError: a hook feeds a tensor that the caller or another hook feeds.
        """
        if self._closed or self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        actual = {"caller": fetches}
        feeds = dict(feed_dict or {})
        for h in self._hooks:
            request = h.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                actual[h] = request.fetches
            for k, v in (request.feed_dict or {}).items():
                if k in feeds:
                    raise ValueError(f"Same tensor is fed by two hooks or by the caller: {k}")
                feeds[k] = v
        try:
            out = self._sess.run(actual, feed_dict=feeds)
        except errors.OutOfRangeError:
            self._should_stop = True
            self._coord.request_stop()
            raise
        for h in self._hooks:
            h.after_run(context, SessionRunValues(out.get(h), options, run_metadata))
        self._should_stop = self._should_stop or context.stop_requested
        return out["caller"]

    def run_step_fn(self, step_fn):
        class _StepContext:
            def __init__(ctx, session):
                ctx.session = session

            def run_with_hooks(ctx, *args, **kwargs):
                return self.run(*args, **kwargs)

            def request_stop(ctx):
                self._should_stop = True

        return step_fn(_StepContext(self._sess))

    def _close(self, ended_cleanly):
        if self._closed:
            return
        self._closed = True
        try:
            if ended_cleanly:
                for h in self._hooks:
                    h.end(self._sess)
        finally:
            self._coord.request_stop()
            try:
                self._coord.join(self._threads, stop_grace_period_secs=self._grace)
            except errors.OutOfRangeError:
                pass
            finally:
                self._sess.close()

    def close(self) -> None:
        self._close(True)

    def __enter__(self):
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        clean = exc_type is None or issubclass(exc_type, (errors.OutOfRangeError, StopIteration))
        try:
            self._close(clean)
        finally:
            self._graph_ctx.__exit__(None, None, None)
        return clean and exc_type is not None


class SingularMonitoredSession(MonitoredSession):
    """A `MonitoredSession` that also exposes its `raw_session()`."""

    def __init__(self, hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None,
                 stop_grace_period_secs=120, checkpoint_filename_with_path=None):  # fmt: skip
        super().__init__(None, hooks, stop_grace_period_secs, scaffold, checkpoint_dir)

    def raw_session(self):
        return self._sess


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None,  # noqa: N802
                             hooks=None, chief_only_hooks=None, save_checkpoint_secs=_USE_DEFAULT,
                             save_summaries_steps=_USE_DEFAULT, save_summaries_secs=_USE_DEFAULT,
                             config=None, stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=_USE_DEFAULT,
                             summary_dir=None, save_graph_def=True):  # fmt: skip
    """A `MonitoredSession` for training: restores from or initializes into `checkpoint_dir`,
    and adds TF's default hooks (step counter; summaries every 100 steps and a checkpoint every
    600 seconds when `checkpoint_dir` is given).
    """
    if save_summaries_steps is _USE_DEFAULT and save_summaries_secs is _USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    else:
        save_summaries_steps = (
            None if save_summaries_steps is _USE_DEFAULT else save_summaries_steps
        )
        save_summaries_secs = None if save_summaries_secs is _USE_DEFAULT else save_summaries_secs
    if save_checkpoint_secs is _USE_DEFAULT and save_checkpoint_steps is _USE_DEFAULT:
        save_checkpoint_secs, save_checkpoint_steps = 600, None
    else:
        save_checkpoint_secs = (
            None if save_checkpoint_secs is _USE_DEFAULT else save_checkpoint_secs
        )
        save_checkpoint_steps = (
            None if save_checkpoint_steps is _USE_DEFAULT else save_checkpoint_steps
        )
    all_hooks = list(hooks or [])
    if is_chief:
        all_hooks += list(chief_only_hooks or [])
        summary_dir = summary_dir or checkpoint_dir
        if summary_dir and log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(
                StepCounterHook(every_n_steps=log_step_count_steps, output_dir=summary_dir)
            )
        if summary_dir and (save_summaries_steps or save_summaries_secs):
            all_hooks.append(
                SummarySaverHook(save_summaries_steps, save_summaries_secs, output_dir=summary_dir)
            )
        if checkpoint_dir and (save_checkpoint_secs or save_checkpoint_steps):
            all_hooks.append(
                CheckpointSaverHook(checkpoint_dir, save_checkpoint_secs, save_checkpoint_steps)
            )
    elif log_step_count_steps and log_step_count_steps > 0:
        all_hooks.append(StepCounterHook(every_n_steps=log_step_count_steps))
    return MonitoredSession(None, all_hooks, stop_grace_period_secs, scaffold, checkpoint_dir)
