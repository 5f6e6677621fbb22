"""Where this process sits in a data-parallel job, as torchrun's environment describes it."""

from __future__ import annotations

import os

__all__ = ["Cluster", "cluster_from_environment"]


class Cluster:
    """Where this process sits in the job, as torchrun's environment describes it.

    Attributes:
        rank: this worker's index in `[0, world_size)`; rank 0 is the chief.
        world_size: the number of worker processes (= replicas).
        local_rank: the index of this worker on its machine (selects its GPU).
        master_addr, master_port: the rendezvous address (None for a job of one).
    """

    def __init__(self, rank=0, world_size=1, local_rank=0, master_addr=None, master_port=None):
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.local_rank = int(local_rank)
        self.master_addr = master_addr
        self.master_port = None if master_port is None else int(master_port)

    @property
    def is_chief(self) -> bool:
        return self.rank == 0

    def __repr__(self):
        return (
            f"Cluster(rank={self.rank}, world_size={self.world_size}, "
            f"local_rank={self.local_rank}, master={self.master_addr}:{self.master_port})"
        )


def _env_int(env, name, default=None):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"keratron.distribute: environment variable {name} must be an integer. "
            f"Received: {name}={raw!r}"
        ) from None


def cluster_from_environment(env=None) -> Cluster:
    """Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (torchrun's names).

    Without WORLD_SIZE the process is a job of one (rank 0).

    Example:
        >>> cluster_from_environment({}).world_size
        1
    """
    env = os.environ if env is None else env
    world_size = _env_int(env, "WORLD_SIZE")
    if world_size is None:
        return Cluster()
    if world_size < 1:
        raise ValueError(
            f"keratron.distribute: WORLD_SIZE must be at least 1. Received: WORLD_SIZE={world_size}"
        )
    rank = _env_int(env, "RANK", 0 if world_size == 1 else None)
    if rank is None:
        raise ValueError(
            f"keratron.distribute: WORLD_SIZE={world_size} is set but RANK is not; launch the "
            "workers with torchrun, or set RANK (0..WORLD_SIZE-1) for each of them."
        )
    if not 0 <= rank < world_size:
        raise ValueError(
            f"keratron.distribute: RANK must be in [0, WORLD_SIZE={world_size}). "
            f"Received: RANK={rank}"
        )
    local_rank = _env_int(env, "LOCAL_RANK", rank)
    addr, port = env.get("MASTER_ADDR"), _env_int(env, "MASTER_PORT")
    if world_size > 1 and (not addr or port is None):
        raise ValueError(
            "keratron.distribute: a job of several workers needs MASTER_ADDR and MASTER_PORT "
            f"(the rendezvous address). Received: MASTER_ADDR={addr!r}, MASTER_PORT={port!r}"
        )
    return Cluster(rank, world_size, local_rank, addr, port)
