"""Environment throughput, side by side: rlfast's pool vs EnvPool and gymnasium's vector envs.

Every contender runs the same task with the same number of envs on the same machine in one
process run, stepping pre-drawn random actions (no policy), for a fixed wall-clock budget after
a warm-up. Throughput is env steps per second (one step = one action applied to one env);
ratios are taken inside this run only, never across runs.

    python scripts/bench_envs.py                                  # CartPole-v1, 8 envs
    python scripts/bench_envs.py --tasks CartPole-v1 Pendulum-v1 --num-envs 16 --seconds 5
    python scripts/bench_envs.py --contenders rlfast-sync envpool-sync --json out.json

Contenders (those whose package is missing are skipped with a note):
  rlfast-sync     rlfast.make(task, N), step() on all N envs
  rlfast-async    rlfast.make(task, N, batch_size=B), recv()/send() of B envs at a time
  envpool-sync    envpool.make(task, "gymnasium", N), step()
  envpool-async   envpool.make(task, "gymnasium", N, batch_size=B), recv()/send()
  gym-sync        gymnasium SyncVectorEnv (one Python loop)
  gym-async       gymnasium AsyncVectorEnv (one subprocess per env)
"""

from __future__ import annotations

import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
import tyro

import rlfast

CONTENDERS = ("rlfast-sync", "rlfast-async", "envpool-sync", "envpool-async", "gym-sync", "gym-async")


@dataclass
class Args:
    tasks: tuple[str, ...] = ("CartPole-v1",)
    """task ids to benchmark (each must exist in rlfast; peers that lack it are skipped)"""
    num_envs: int = 8
    """number of envs N for every contender"""
    batch_size: Optional[int] = None
    """async batch size B (default N // 2)"""
    num_threads: Optional[int] = None
    """worker threads for rlfast and EnvPool (default min(cores, N))"""
    seconds: float = 3.0
    """measured wall-clock budget per contender, after warm-up"""
    warmup: float = 0.5
    """warm-up seconds per contender (not measured)"""
    contenders: tuple[str, ...] = CONTENDERS
    """which contenders to run, in this order"""
    json: Optional[str] = None
    """also write the results to this JSON file"""
    seed: int = 0
    """seed for envs and the pre-drawn actions"""

    @property
    def async_batch(self) -> int:
        return self.batch_size if self.batch_size is not None else max(1, self.num_envs // 2)

    @property
    def threads(self) -> int:
        return self.num_threads if self.num_threads is not None else min(os.cpu_count() or 1, self.num_envs)


@dataclass
class Result:
    task: str
    contender: str
    num_envs: int
    batch_size: int
    threads: int
    steps: int
    seconds: float
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


class Stepper:
    """One contender ready to run: `advance()` does one call and returns the env steps it made."""

    def __init__(self, advance: Callable[[], int], close: Callable[[], None], batch: int, threads: int):
        self.advance, self.close, self.batch, self.threads = advance, close, batch, threads


def draw_actions(space: gym.Space, n: int, seed: int, count: int = 64) -> list[np.ndarray]:
    """`count` pre-drawn batches of n random actions, cycled through during the run."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(0, space.n, size=n).astype(np.int32) for _ in range(count)]
    return [rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32) for _ in range(count)]


def make_rlfast(task: str, args: Args, async_mode: bool) -> Stepper:
    n, b = args.num_envs, (args.async_batch if async_mode else args.num_envs)
    pool = rlfast.make(task, num_envs=n, batch_size=b, num_threads=args.threads, seed=args.seed)
    acts = draw_actions(pool.single_action_space, b, args.seed)
    i = 0
    if not async_mode:
        pool.reset()

        def advance() -> int:
            nonlocal i
            pool.step(acts[i % len(acts)])
            i += 1
            return n

    else:
        pool.async_reset()

        def advance() -> int:
            nonlocal i
            info = pool.recv()[4]
            pool.send(acts[i % len(acts)], info["env_id"])
            i += 1
            return b

    return Stepper(advance, pool.close, b, args.threads)


def make_envpool(task: str, args: Args, async_mode: bool) -> Stepper:
    import envpool  # optional peer

    if task not in envpool.list_all_envs():
        raise LookupError(f"envpool has no {task}")
    n, b = args.num_envs, (args.async_batch if async_mode else args.num_envs)
    env = envpool.make(task, env_type="gymnasium", num_envs=n, batch_size=b, num_threads=args.threads, seed=args.seed)
    acts = draw_actions(env.action_space, b, args.seed)
    i = 0
    if not async_mode:
        env.reset()

        def advance() -> int:
            nonlocal i
            env.step(acts[i % len(acts)])
            i += 1
            return n

    else:
        env.async_reset()

        def advance() -> int:
            nonlocal i
            info = env.recv()[4]
            env.send(acts[i % len(acts)], info["env_id"])
            i += 1
            return b

    return Stepper(advance, env.close, b, args.threads)


def make_gym(task: str, args: Args, async_mode: bool) -> Stepper:
    mode = "async" if async_mode else "sync"
    env = gym.make_vec(task, num_envs=args.num_envs, vectorization_mode=mode)
    env.reset(seed=args.seed)
    acts = draw_actions(env.single_action_space, args.num_envs, args.seed)
    i = 0

    def advance() -> int:
        nonlocal i
        env.step(acts[i % len(acts)])
        i += 1
        return args.num_envs

    threads = args.num_envs if async_mode else 1
    return Stepper(advance, env.close, args.num_envs, threads)


FACTORIES: dict[str, Callable[[str, Args], Stepper]] = {
    "rlfast-sync": lambda t, a: make_rlfast(t, a, False),
    "rlfast-async": lambda t, a: make_rlfast(t, a, True),
    "envpool-sync": lambda t, a: make_envpool(t, a, False),
    "envpool-async": lambda t, a: make_envpool(t, a, True),
    "gym-sync": lambda t, a: make_gym(t, a, False),
    "gym-async": lambda t, a: make_gym(t, a, True),
}


def measure(stepper: Stepper, warmup: float, seconds: float) -> tuple[int, float]:
    """Runs `warmup` seconds unmeasured, then counts env steps over `seconds` of wall clock."""
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        stepper.advance()
    steps, start = 0, time.perf_counter()
    end = start + seconds
    while True:
        steps += stepper.advance()
        now = time.perf_counter()
        if now >= end:
            return steps, now - start


def run_one(task: str, name: str, args: Args) -> Result:
    try:
        stepper = FACTORIES[name](task, args)
    except (ImportError, LookupError, gym.error.Error) as e:
        return Result(task, name, args.num_envs, 0, 0, 0, 0.0, note=f"skipped: {e}")
    try:
        steps, secs = measure(stepper, args.warmup, args.seconds)
    finally:
        stepper.close()
    return Result(task, name, args.num_envs, stepper.batch, stepper.threads, steps, secs)


def ratio(results: dict[str, Result], a: str, b: str) -> Optional[float]:
    ra, rb = results.get(a), results.get(b)
    if ra is None or rb is None or ra.steps == 0 or rb.steps == 0:
        return None
    return ra.steps_per_s / rb.steps_per_s


def format_table(task: str, results: dict[str, Result]) -> str:
    base = "gym-sync" if results.get("gym-sync") and results["gym-sync"].steps else None
    lines = [
        f"\n{task}: steps/s (env steps; N={next(iter(results.values())).num_envs}, {os.cpu_count()} cores)",
        f"{'contender':<15}{'batch':>6}{'threads':>8}{'steps/s':>14}{'vs gym-sync':>13}",
    ]
    for name, r in results.items():
        if not r.steps:
            lines.append(f"{name:<15}{r.note:>41}")
            continue
        rel = f"{ratio(results, name, base):.1f}x" if base else "-"
        lines.append(f"{name:<15}{r.batch_size:>6}{r.threads:>8}{r.steps_per_s:>14,.0f}{rel:>13}")
    for ours, peer in [
        ("rlfast-sync", "envpool-sync"),
        ("rlfast-async", "envpool-async"),
        ("rlfast-sync", "gym-sync"),
        ("rlfast-async", "gym-async"),
    ]:
        x = ratio(results, ours, peer)
        if x is not None:
            lines.append(f"  {ours} / {peer}: {x:.2f}x")
    return "\n".join(lines)


def main(args: Args) -> dict[str, dict[str, Result]]:
    unknown = [c for c in args.contenders if c not in FACTORIES]
    if unknown:
        raise SystemExit(f"unknown contender(s) {unknown}; choose from {list(FACTORIES)}")
    everything: dict[str, dict[str, Result]] = {}
    for task in args.tasks:
        rlfast.envpool.check_task_id(task)
        results = {name: run_one(task, name, args) for name in args.contenders}
        everything[task] = results
        print(format_table(task, results), flush=True)
    if args.json:
        payload = {
            "args": {k: v for k, v in asdict(args).items()},
            "cpu_count": os.cpu_count(),
            "results": {
                t: {n: {**asdict(r), "steps_per_s": r.steps_per_s} for n, r in rs.items()}
                for t, rs in everything.items()
            },
        }
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    return everything


if __name__ == "__main__":
    # EnvPool's first space conversion warns about float64 bounds cast to float32; harmless here.
    warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32.*")
    main(tyro.cli(Args))
