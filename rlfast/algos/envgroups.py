"""A trainer's envs split into groups that take turns (``--env-groups``): one group acts while the one before it steps.

``EnvGroups`` splits a rank's ``num_envs`` envs into ``groups`` equal groups, each a sync pool of its own with its
share of the worker threads. A trainer sends one group's actions and computes the next group's while the first
steps: EnvPool's async mode, but with fixed groups in a fixed order, so each env's trajectory is the one it has in
a single pool. Env i is seeded ``run.env_seed + i`` either way. On a 2-core CPU the acting (and whatever the
trainer does with a group's results) then runs beside the other group's stepping instead of leaving a core idle.

Subclasses add the observation path: ``rlfast.algos.pixels.PixelEnvs`` (stacked frames on the device) and
``rlfast.algos.continuous.VectorEnvs`` (vector observations).
"""

from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch

import rlfast
from rlfast.algos.run import Run


class EnvGroups:
    """This rank's ``num_envs`` envs of ``run.args.env_id`` in ``groups`` equal sync pools (env i seeded
    ``run.env_seed + i``), each with its share of ``num_threads`` (None: one per core of this rank's share, at
    most one per env) and at least one; ``env_kwargs`` go to every pool. ``groups`` lists the envs of each group
    as slices, in the order a trainer acts and steps them (one group: all of them)."""

    def __init__(self, run: Run, num_envs: int, groups: int = 1, num_threads: Optional[int] = None,
                 **env_kwargs: Any) -> None:  # fmt: skip
        if groups < 1 or num_envs % groups:
            raise ValueError(f"{num_envs} envs do not split into {groups} equal groups")
        threads = num_threads or min(run.world.cpu_share(), num_envs)
        n = num_envs // groups
        self.group_threads = max(1, min(threads // groups, n))  # each group's pool's worker threads
        self.pools = [run.make_env(n, num_threads=self.group_threads, seed=run.env_seed + g * n, **env_kwargs)
                      for g in range(groups)]  # fmt: skip
        self.groups = [slice(g * n, (g + 1) * n) for g in range(groups)]
        self.device = run.device

    def pool(self, group: Optional[slice] = None) -> rlfast.EnvPool:
        """The pool of ``group`` (one of ``groups``; None: the only one, with one group)."""
        if group is None and len(self.pools) > 1:
            raise ValueError(f"name the group: the envs are in {len(self.pools)} groups ({type(self).__name__}.groups)")
        return self.pools[0 if group is None else self.groups.index(group)]

    def send(self, action: torch.Tensor, group: Optional[slice] = None) -> None:
        """Steps the envs of ``group`` (None: all, with one group) with ``action`` [n, ...]."""
        self.pool(group).send(action)

    @contextmanager
    def acting_threads(self) -> Iterator[None]:
        """With more than one group on the CPU, torch runs on the threads a stepping group's pool leaves free
        within it (its threads less the pool's, at least one), so acting does not crowd out the envs it overlaps;
        afterwards (the update) torch has them all back."""
        if len(self.groups) == 1 or self.device.type != "cpu":
            yield
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, threads - self.group_threads))
        try:
            yield
        finally:
            torch.set_num_threads(threads)
