"""Replay buffers alone, side by side: rlfast's device buffer against Stable-Baselines3's numpy ReplayBuffer.

Atari-shaped data (84x84 uint8 frames, 4-frame stacks, Discrete(6)) from ``num_envs`` streams with
random episode ends: each contender is filled with the same steps, then sampled at each batch size,
every sample ending as torch tensors on ``--device`` (what a DQN update consumes). Printed: add and
sample throughput in transitions/s and the bytes held. The contenders:

  rlfast          rlfast.algos.replay.ReplayBuffer on --device: each frame stored once, stacks rebuilt per sample
  rlfast-per      rlfast.algos.prioritized.PrioritizedReplayBuffer (dqn_atari.py --prioritized): each sample drawn by
                  priority and followed by its priority update, as a gradient step does; after every add its first
                  sample also folds the valid-slot mask in (O(capacity)), which the sampling loop here, with no
                  adds, leaves out: that fold is timed apart and printed (one per vector step in a trainer)
  sb3             stable_baselines3's ReplayBuffer (obs and next_obs stacks in numpy; ``pip install stable-baselines3``)
  sb3-optimized   the same with optimize_memory_usage=True (next_obs read from the following slot)

    python3 benchmarks/bench_replay.py                                   # 100k transitions, batches 32 and 2048
    python3 benchmarks/bench_replay.py --capacity 1000000 --contenders rlfast    # the 1M-transition memory figure

Each contender runs in this process, one after another; compare the ratios of one run, not absolute
numbers across runs or machines.
"""

import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import tyro

from rlfast.algos.prioritized import PrioritizedReplayBuffer
from rlfast.algos.replay import ReplayBuffer, format_bytes

STACK, FRAME, ACTIONS = 4, (1, 84, 84), 6


@dataclass
class Args:
    capacity: int = 100_000
    """transitions each buffer holds (all envs together)"""
    num_envs: int = 8
    """env streams adding one step each per add"""
    batch_sizes: list[int] = field(default_factory=lambda: [32, 2048])
    """sample batch sizes to measure"""
    seconds: float = 2.0
    """time spent sampling per contender and batch size"""
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    """where the samples must end up (and where rlfast's buffer lives)"""
    contenders: list[str] = field(default_factory=lambda: ["rlfast", "rlfast-per", "sb3", "sb3-optimized"])
    """which buffers to measure"""
    seed: int = 0
    """seed of the generated streams"""


def streams(args: Args, steps: int) -> list[tuple]:
    """``steps`` steps of every env: (frames [N, 1, 84, 84] uint8, actions, rewards, terminated, truncated, first)."""
    g = np.random.default_rng(args.seed)
    n = args.num_envs
    frames = g.integers(0, 256, (64, n, *FRAME), dtype=np.uint8)  # a pool of frames, reused cyclically
    out = []
    for t in range(steps):
        term = g.random(n) < 0.01
        out.append((frames[t % 64], g.integers(0, ACTIONS, n), g.standard_normal(n).astype(np.float32), term,
                    np.zeros(n, dtype=bool), g.random(n) < 0.005))  # fmt: skip
    return out


def timed(fn: Callable[[], object], seconds: float, sync: Callable[[], None]) -> tuple[int, float]:
    """Calls ``fn`` until ``seconds`` have passed (at least 3 times); returns (calls, elapsed)."""
    fn()
    sync()
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < seconds:
        fn()
        calls += 1
    sync()
    return calls, time.perf_counter() - start


def bench_rlfast(args: Args, data: list[tuple], prioritized: bool = False) -> dict:
    device = torch.device(args.device)
    rb = (PrioritizedReplayBuffer if prioritized else ReplayBuffer)(args.capacity, args.num_envs, FRAME, torch.uint8,
                                                                     stack=STACK, device=device)  # fmt: skip
    pinned = device.type == "cuda"
    host = [tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in step) for step in data]
    if pinned:
        host = [tuple(x.pin_memory() for x in step) for step in host]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    for frames, actions, rewards, term, trunc, first in host:
        rb.add(frames, actions.long(), rewards, term, trunc, first)
    sync()
    add_s = time.perf_counter() - start
    result = {"bytes": rb.nbytes, "add": len(data) * args.num_envs / add_s}
    for b in args.batch_sizes:
        if prioritized:
            errors = torch.rand(b, device=device, generator=torch.Generator(device).manual_seed(b)) * 2
            calls, seconds = timed(lambda: rb.update_priorities(rb.sample(b)["indices"], errors), args.seconds, sync)
        else:
            calls, seconds = timed(lambda: rb.sample(b), args.seconds, sync)
        result[b] = calls * b / seconds
    if prioritized:
        def fold() -> None:
            rb._weights = None  # what an add does
            rb.sample_indices(1)

        calls, seconds = timed(fold, args.seconds / 2, sync)
        result["note"] = f"the fold after each add: {1e3 * seconds / calls:.2f} ms (with one draw)"
    return result


def bench_sb3(args: Args, data: list[tuple], optimize: bool) -> dict:
    import gymnasium as gym
    from stable_baselines3.common.buffers import ReplayBuffer as SB3Buffer

    n = args.num_envs
    obs_space = gym.spaces.Box(0, 255, (STACK, *FRAME[1:]), np.uint8)
    rb = SB3Buffer(args.capacity, obs_space, gym.spaces.Discrete(ACTIONS), device=args.device, n_envs=n,
                   optimize_memory_usage=optimize, handle_timeout_termination=not optimize)  # fmt: skip
    stacks = np.zeros((n, STACK, *FRAME[1:]), dtype=np.uint8)  # the acting side's stacks (as SB3 users keep them)
    infos = [{} for _ in range(n)]
    start = time.perf_counter()
    for frames, actions, rewards, term, trunc, first in data:
        next_stacks = np.concatenate([stacks[:, 1:], frames], axis=1)
        next_stacks[first] = np.repeat(frames[first], STACK, axis=1)
        rb.add(stacks, next_stacks, actions, rewards, term | trunc, infos)
        stacks = next_stacks
    add_s = time.perf_counter() - start
    arrays = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    nbytes = sum(getattr(rb, a).nbytes for a in arrays if getattr(rb, a, None) is not None)  # optimized: no next_obs
    result = {"bytes": nbytes, "add": len(data) * n / add_s}
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for b in args.batch_sizes:
        calls, seconds = timed(lambda: rb.sample(b), args.seconds, sync)
        result[b] = calls * b / seconds
    return result


CONTENDERS = {
    "rlfast": bench_rlfast,
    "rlfast-per": lambda args, data: bench_rlfast(args, data, prioritized=True),
    "sb3": lambda args, data: bench_sb3(args, data, optimize=False),
    "sb3-optimized": lambda args, data: bench_sb3(args, data, optimize=True),
}


def main(args: Args) -> dict[str, dict]:
    unknown = sorted(set(args.contenders) - set(CONTENDERS))
    if unknown:
        raise SystemExit(f"error: unknown contenders {', '.join(unknown)}; known: {', '.join(CONTENDERS)}")
    if args.capacity < args.num_envs * (STACK + 2) or min(args.batch_sizes) < 1:
        raise SystemExit("error: --capacity must hold 6 steps per env and --batch-sizes must be >= 1")
    steps = args.capacity // args.num_envs + 10  # fills every ring and wraps it
    data = streams(args, steps)
    print(f"{args.capacity:,} transitions of {args.num_envs} Atari-shaped streams, samples on {args.device}")
    samples = "".join(f" {f'sample@{b}/s':>14}" for b in args.batch_sizes)
    header = f"{'contender':<14} {'memory':>10} {'add/s':>12}{samples}"
    print(header + "\n" + "-" * len(header))
    results = {}
    for name in args.contenders:
        try:
            r = CONTENDERS[name](args, data)
        except ImportError as e:
            print(f"{name:<14} skipped: {e} (pip install stable-baselines3)")
            continue
        results[name] = r
        print(f"{name:<14} {format_bytes(r['bytes']):>10} {r['add']:>12,.0f}" +
              "".join(f" {r[b]:>14,.0f}" for b in args.batch_sizes) +
              (f"   ({r['note']})" if "note" in r else ""), flush=True)  # fmt: skip
    if "rlfast" in results:
        for name, r in results.items():
            if name != "rlfast":
                ratios = ", ".join(f"sample@{b} {results['rlfast'][b] / r[b]:.2f}x" for b in args.batch_sizes)
                print(f"rlfast / {name}: memory {r['bytes'] / results['rlfast']['bytes']:.1f}x less, "
                      f"add {results['rlfast']['add'] / r['add']:.2f}x, {ratios}")  # fmt: skip
    return results


if __name__ == "__main__":
    main(tyro.cli(Args))
    sys.exit(0)
