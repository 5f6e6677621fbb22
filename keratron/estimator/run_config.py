"""`RunConfig`: where an Estimator writes and how often it checkpoints, logs and summarises."""

from __future__ import annotations

import copy
import os

from keratron.distribute.cluster import cluster_from_environment

__all__ = ["RunConfig"]

_USE_DEFAULT = object()
_DEFAULT_CHECKPOINT_SECS = 600


def _check_positive(name, value, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(
            f"RunConfig: `{name}` must be a positive number{' or None' if allow_none else ''}. "
            f"Received: {name}={value!r}"
        )
    return value


class RunConfig:
    """Run-time settings of an Estimator, with TensorFlow's names and defaults.

    Checkpoints are saved every `save_checkpoints_secs` seconds (600 when neither interval is
    given) or every `save_checkpoints_steps` steps, never both, plus once when training starts
    and once when it ends.

    Args:
        model_dir: directory for checkpoints, summaries and exports.
        tf_random_seed: when set, the random seed is fixed before the model is built, so
            initial weights (and dropout) repeat from run to run.
        save_summary_steps: write the training loss to the summaries every this many steps.
        save_checkpoints_steps: checkpoint every this many global steps.
        save_checkpoints_secs: checkpoint every this many seconds.
        session_config: accepted for TensorFlow compatibility; unused.
        keep_checkpoint_max: the number of most recent checkpoints kept (None or 0: all).
        keep_checkpoint_every_n_hours: accepted for TensorFlow compatibility; unused.
        log_step_count_steps: log the loss and steps/second every this many steps.
        train_distribute, eval_distribute: a `keratron.distribute` strategy to train /
            evaluate data-parallel with. Under torchrun's environment (WORLD_SIZE > 1)
            without one, a `MultiWorkerMirroredStrategy` is used; `is_chief`, `task_id` and
            `num_worker_replicas` come from that environment.
        device_fn, protocol, experimental_distribute, experimental_max_worker_delay_secs,
        session_creation_timeout_secs, checkpoint_save_graph_def: accepted for TensorFlow
            compatibility; unused.

    Raises:
        ValueError: if both checkpoint intervals are set, or a count is not positive.

    Example:
        >>> config = keratron.estimator.RunConfig(save_checkpoints_steps=50,
        ...                                       keep_checkpoint_max=3)
        >>> config.save_checkpoints_secs is None
        True
    """

    def __init__(
        self,
        model_dir=None,
        tf_random_seed=None,
        save_summary_steps=100,
        save_checkpoints_steps=_USE_DEFAULT,
        save_checkpoints_secs=_USE_DEFAULT,
        session_config=None,
        keep_checkpoint_max=5,
        keep_checkpoint_every_n_hours=10000,
        log_step_count_steps=100,
        train_distribute=None,
        device_fn=None,
        protocol=None,
        eval_distribute=None,
        experimental_distribute=None,
        experimental_max_worker_delay_secs=None,
        session_creation_timeout_secs=7200,
        checkpoint_save_graph_def=True,
    ):
        steps_given = save_checkpoints_steps is not _USE_DEFAULT
        secs_given = save_checkpoints_secs is not _USE_DEFAULT
        steps = save_checkpoints_steps if steps_given else None
        secs = save_checkpoints_secs if secs_given else None
        if steps is not None and secs is not None:
            raise ValueError(
                "RunConfig: `save_checkpoints_steps` and `save_checkpoints_secs` cannot both be "
                f"set. Received: save_checkpoints_steps={steps}, save_checkpoints_secs={secs}"
            )
        if not steps_given and not secs_given:
            secs = _DEFAULT_CHECKPOINT_SECS
        if tf_random_seed is not None and (
            isinstance(tf_random_seed, bool) or not isinstance(tf_random_seed, int)
        ):
            raise ValueError(
                f"RunConfig: `tf_random_seed` must be an int or None. "
                f"Received: tf_random_seed={tf_random_seed!r}"
            )
        if keep_checkpoint_max is not None and (
            isinstance(keep_checkpoint_max, bool)
            or not isinstance(keep_checkpoint_max, int)
            or keep_checkpoint_max < 0
        ):
            raise ValueError(
                "RunConfig: `keep_checkpoint_max` must be a non-negative int or None. "
                f"Received: keep_checkpoint_max={keep_checkpoint_max!r}"
            )
        self._model_dir = None if model_dir is None else os.fspath(model_dir)
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = _check_positive("save_summary_steps", save_summary_steps)
        self._save_checkpoints_steps = _check_positive("save_checkpoints_steps", steps)
        self._save_checkpoints_secs = _check_positive("save_checkpoints_secs", secs)
        self._session_config = session_config
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = _check_positive("log_step_count_steps", log_step_count_steps)
        self._train_distribute = train_distribute
        self._eval_distribute = eval_distribute
        self._device_fn = device_fn
        self._protocol = protocol
        self._experimental_distribute = experimental_distribute
        self._experimental_max_worker_delay_secs = experimental_max_worker_delay_secs
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._checkpoint_save_graph_def = checkpoint_save_graph_def
        # The cluster, from torchrun's environment (RANK, WORLD_SIZE): one worker per replica.
        self._cluster = cluster_from_environment()

    # ------------------------------------------------------------------ properties
    model_dir = property(lambda self: self._model_dir)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda self: self._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    device_fn = property(lambda self: self._device_fn)
    protocol = property(lambda self: self._protocol)
    session_creation_timeout_secs = property(lambda self: self._session_creation_timeout_secs)
    checkpoint_save_graph_def = property(lambda self: self._checkpoint_save_graph_def)

    # The cluster properties TensorFlow exposes; worker 0 is the chief (it writes).
    is_chief = property(lambda self: self._cluster.is_chief)
    master = property(
        lambda self: (
            ""
            if self._cluster.world_size == 1
            else f"{self._cluster.master_addr}:{self._cluster.master_port}"
        )
    )
    evaluation_master = property(lambda self: "")
    num_ps_replicas = property(lambda self: 0)
    num_worker_replicas = property(lambda self: self._cluster.world_size)
    task_type = property(lambda self: "worker")
    task_id = property(lambda self: self._cluster.rank)
    global_id_in_cluster = property(lambda self: self._cluster.rank)
    cluster_spec = property(lambda self: None)
    service = property(lambda self: None)

    _REPLACEABLE = (
        "model_dir",
        "tf_random_seed",
        "save_summary_steps",
        "save_checkpoints_steps",
        "save_checkpoints_secs",
        "session_config",
        "keep_checkpoint_max",
        "keep_checkpoint_every_n_hours",
        "log_step_count_steps",
        "train_distribute",
        "device_fn",
        "protocol",
        "eval_distribute",
        "experimental_distribute",
        "experimental_max_worker_delay_secs",
        "session_creation_timeout_secs",
        "checkpoint_save_graph_def",
    )

    def replace(self, **kwargs) -> RunConfig:
        """A copy with some settings changed (checkpoint intervals follow the constructor's
        rule: giving one clears the other).

        Example:
            >>> config = keratron.estimator.RunConfig().replace(model_dir="/tmp/m")
        """
        unknown = sorted(set(kwargs) - set(self._REPLACEABLE))
        if unknown:
            raise ValueError(
                f"RunConfig.replace: unknown properties {unknown}; replaceable properties are "
                f"{list(self._REPLACEABLE)}."
            )
        args = {name: getattr(self, "_" + name) for name in self._REPLACEABLE}
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs:
            args["save_checkpoints_secs"] = None
        if "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs:
            args["save_checkpoints_steps"] = None
        args.update(kwargs)
        return RunConfig(**args)

    def __deepcopy__(self, memo):
        return self.replace()

    def __copy__(self):
        return copy.deepcopy(self)

    def __repr__(self):
        items = ", ".join(f"{n}={getattr(self, '_' + n)!r}" for n in self._REPLACEABLE[:9])
        return f"RunConfig({items})"
