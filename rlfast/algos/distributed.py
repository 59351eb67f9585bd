"""Data-parallel training over torch.distributed: one process (rank) per GPU or CPU share, started by torchrun.

    torchrun --nproc_per_node 2 scripts/ppo.py --num-envs 8          # 2 ranks x 4 envs, same learning as 1 x 8

Every rank owns an env pool with its share of the envs (``World.shard``) and its own copy of the
model. ``World`` is the only data-parallel interface the trainers see: rank, world size and local
(per machine) rank/size from torchrun's environment, and the few collectives that keep the copies
identical, each a no-op (or the identity) in the world of one process without torchrun, so the
update code calls them and never tests the world size:

- ``world.minibatches(perm, size, num_envs)``: this rank's rows of each global minibatch and their share;
- ``world.sync_grads(params)``: every gradient summed over the ranks (one flat collective);
- ``world.sum(t)``, ``world.mean_std(x, n)``: sums and a global minibatch's statistics;
- ``world.broadcast(flag)``, ``world.gather_columns(...)``, ``world.check_in_sync(params)``: rank 0's
  decisions, the episode log in global env order, and a checksum of the copies after every update.

Every collective runs in ``world.comm()``, the profiler section the run layer gives it ("all_reduce").
``init_process_group`` joins the ranks: NCCL between GPUs, gloo on CPU; the rank's GPU is ``cuda:LOCAL_RANK``.

Sameness across world sizes comes from symmetry: every rank seeds torch, numpy and random with the
global seed and makes every random draw at the global batch's size (the action noise of all envs,
the minibatch permutation of all rows), keeping its own rows. So the ranks' generators stay in
lockstep, and a run on W ranks draws exactly the numbers one process would.
"""

import datetime
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Iterable, Iterator, Optional, Sequence

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class World:
    """This process's place among the ranks (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    comm: Callable[[], ContextManager] = field(default=nullcontext, compare=False, repr=False)
    """the profiler section the collectives run in (``Run`` gives its "all_reduce" timer section)"""

    @classmethod
    def from_env(cls, environ: Optional[dict] = None) -> "World":
        """The world torchrun describes in the environment; the world of one without it. ValueError for
        values that do not describe a world (a rank outside it, a local world larger than the world)."""
        env = os.environ if environ is None else environ
        if "WORLD_SIZE" not in env:
            return cls()
        try:
            world = cls(*(int(env.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0),
                                                          ("LOCAL_WORLD_SIZE", 1))))  # fmt: skip
        except ValueError:
            raise ValueError(f"torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE must be integers, got "
                             f"{[env.get(k) for k in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE')]}"
                             ) from None  # fmt: skip
        if not (0 <= world.rank < world.world_size and 0 <= world.local_rank < world.local_world_size
                and world.local_world_size <= world.world_size):  # fmt: skip
            raise ValueError(f"inconsistent torchrun environment: {world}")
        return world

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that prints, writes tensorboard and saves checkpoints."""
        return self.rank == 0

    def shard(self, n: int) -> slice:
        """This rank's contiguous share of ``n`` items (``n`` divisible by the world size)."""
        if n % self.world_size:
            raise ValueError(f"{n} items cannot be shared evenly by {self.world_size} ranks")
        size = n // self.world_size
        return slice(self.rank * size, (self.rank + 1) * size)

    def cpu_share(self, cores: Optional[int] = None) -> int:
        """This rank's share of the machine's cores (at least 1): its ranks split them evenly."""
        return max((cores or os.cpu_count() or 1) // self.local_world_size, 1)

    # The collectives: the identity in one process.

    def sum(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` summed over the ranks (in place; returned)."""
        if self.distributed:
            with self.comm():
                dist.all_reduce(t)
        return t

    def sync_grads(self, params: Iterable[torch.Tensor]) -> None:
        """Replaces every parameter's gradient by its sum over the ranks (one collective over a flat buffer;
        a parameter without a gradient counts as zeros). The loss of each rank's rows is weighted by their
        share of the global minibatch, so the sum is the gradient of the global minibatch's mean."""
        if not self.distributed:
            return
        params = [p for p in params if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        with self.comm():
            dist.all_reduce(flat)
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            p.grad = flat[offset : offset + n].view_as(g)
            offset += n

    def minibatches(
        self, perm: torch.Tensor, size: int, num_envs: Optional[int] = None
    ) -> Iterator[tuple[torch.Tensor, float]]:
        """(this rank's rows of each global minibatch of ``size`` rows of ``perm``, their share of it).

        ``perm`` permutes the rows of the whole rollout, [T, num_envs x world_size] flattened, every rank
        drawing the same one; a rank holds rows [T, num_envs] of its own envs. In one process: consecutive
        slices of ``perm``, share 1. A rank may own none of a minibatch's rows (share 0): it still takes
        part in the minibatch's collectives."""
        if not self.distributed:
            for start in range(0, perm.numel() - size + 1, size):
                yield perm[start : start + size], 1.0
            return
        if num_envs is None:
            raise ValueError("a data-parallel update needs num_envs, this rank's number of envs")
        envs = num_envs * self.world_size
        step, env = perm // envs, perm % envs - self.rank * num_envs
        mine = (env >= 0) & (env < num_envs)
        which = torch.arange(perm.numel(), device=perm.device) // size
        rows, which = (step * num_envs + env)[mine], which[mine]
        counts = torch.bincount(which, minlength=perm.numel() // size)[: perm.numel() // size].tolist()
        for chunk, count in zip(rows.split(counts), counts):
            yield chunk, count / size

    def mean_std(self, x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (unbiased) std of the ``n`` values that ``x`` holds this rank's share of: ``x.mean()``
        and ``x.std()`` in one process; over the ranks from float64 sums otherwise."""
        if not self.distributed:
            return x.mean(), x.std()
        sums = self.sum(torch.stack([x.double().sum(), x.double().square().sum()]))
        mean = sums[0] / n
        std = ((sums[1] - n * mean * mean) / max(n - 1, 1)).clamp(min=0).sqrt()
        return mean.to(x.dtype), std.to(x.dtype)

    def broadcast(self, flag: bool, device: torch.device) -> bool:
        """Rank 0's ``flag`` on every rank: decisions only rank 0 can make (e.g. --target-return reached)."""
        if not self.distributed:
            return flag
        t = torch.tensor([int(flag)], device=device)
        with self.comm():
            dist.broadcast(t, 0)
        return bool(t.item())

    def gather_columns(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Each [T, B_local] tensor concatenated over the ranks along dim 1, in rank order: [T, B_global]
        (the global env order). On every rank; bool tensors travel as uint8."""
        if not self.distributed:
            return list(tensors)
        out = []
        for t in tensors:
            wire = t.to(torch.uint8) if t.dtype == torch.bool else t
            parts = [torch.empty_like(wire) for _ in range(self.world_size)]
            with self.comm():
                dist.all_gather(parts, wire.contiguous())
            out.append(torch.cat(parts, dim=1).to(t.dtype))
        return out

    def check_in_sync(self, params: Iterable[torch.Tensor], what: str = "parameters") -> None:
        """Raises OutOfSync on every rank unless every rank's ``params`` have the same checksum as rank 0's
        (ranks apply the same summed gradients with the same optimizer, so the copies are bit-identical)."""
        if not self.distributed:
            return
        mine = parameter_checksum(params)
        sums = [torch.empty_like(mine) for _ in range(self.world_size)]
        with self.comm():
            dist.all_gather(sums, mine)
        bad = [r for r, s in enumerate(sums) if not torch.equal(s, sums[0])]
        if bad:
            raise OutOfSync(f"the {what} of rank(s) {bad} differ from rank 0's (checksums "
                            f"{[s.tolist() for s in sums]})")  # fmt: skip


_joined = False
"""whether this process ever joined a process group (its backend's threads may outlive the group)"""


def init_process_group(world: World, device: torch.device, timeout_s: float = 600.0) -> None:
    """Joins the ranks (NCCL for CUDA devices, gloo otherwise) when ``world`` has more than one."""
    global _joined
    if not world.distributed or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    _joined = True


def joined() -> bool:
    """Whether this process joined a process group: ``launch.finish`` then ends it without finalizing Python."""
    return _joined


def destroy_process_group() -> None:
    """Leaves the group at the end of a run: every rank waits for the others first.

    Without the barrier a rank that finished early (not rank 0, which still saves the checkpoint)
    tore down its gloo connections while its peer was still using them. The barrier does not stop gloo's
    threads from freeing the last collectives' tensors afterwards, which needs the GIL: ``launch.finish``
    ends such a process without finalizing the interpreter, where taking the GIL aborts the process.
    """
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def parameter_checksum(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """[2] float64: sum and sum of absolute values of every parameter (bit-identical copies, equal sums)."""
    flat = torch.cat([p.detach().reshape(-1).double() for p in params])
    return torch.stack([flat.sum(), flat.abs().sum()])


class OutOfSync(RuntimeError):
    """The ranks' parameters differ: the data-parallel update did not keep the copies identical."""
