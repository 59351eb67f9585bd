"""Python (gymnasium) envs in parallel, side by side: rlfast's process pool vs gymnasium's and SB3's vector envs.

Every contender runs the same gymnasium env, stepping pre-drawn random actions, each in a fresh forked
process (benchmarks/bench_envs.py's ``run_in_child``), for a fixed wall-clock budget after a warm-up:

  single        one env stepped in a plain loop in one process: the env's own step rate on one core
  loop-per-core the N envs split over min(cores, N) processes, each stepping its share in a plain loop,
                nothing passed between processes: what any multi-process vector env could reach here
  rlfast        rlfast.make_from(env, N): worker processes (one per core), all N envs per send/recv
  rlfast-async  the same with batch_size = N / 2 (half the envs step while the other half is handed back)
  gym-sync      gymnasium SyncVectorEnv: every env in the calling process, one after the other
  gym-async     gymnasium AsyncVectorEnv(shared_memory=True): one process per env, pipes for the rest
  sb3-subproc   stable-baselines3 SubprocVecEnv (one process per env, pickled pipes), if installed

Printed: env steps/s per contender and N, rlfast's ratio to gym-async, and its efficiency: its steps/s as a
share of ``single`` x the cores it used (min(cores, N) workers) and as a share of ``loop-per-core``.

    python3 benchmarks/bench_pyenvs.py                     # CartPole-v1, LunarLander-v3, HalfCheetah-v5
    python3 benchmarks/bench_pyenvs.py --tasks CartPole-v1 --num-envs 8 64 --seconds 3
"""

from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
import tyro
# benchmarks/bench_envs.py (this folder is on the path when the script runs)
from bench_envs import Stepper, draw_actions, measure, run_in_child, single_stepper

import rlfast

CONTENDERS = ("single", "loop-per-core", "rlfast", "rlfast-async", "gym-sync", "gym-async", "sb3-subproc")


@dataclass
class Args:
    tasks: tuple[str, ...] = ("CartPole-v1", "LunarLander-v3", "HalfCheetah-v5")
    """gymnasium ids, run as gymnasium's own Python envs (LunarLander-v3: Box2D, needs the box2d and pygame
    packages of the bench extra, skipped without them; HalfCheetah-v5: gymnasium's MuJoCo env)"""
    num_envs: tuple[int, ...] = (8, 64, 256)
    """the vector sizes N"""
    contenders: tuple[str, ...] = CONTENDERS
    """which contenders to run (see the docstring)"""
    seconds: float = 4.0
    """measured wall-clock seconds per contender and N"""
    warmup: float = 1.0
    """unmeasured seconds before that"""
    seed: int = 0


def make_env(task: str) -> gym.Env:
    return gym.make(task)


def close_env(task: str) -> None:
    """Makes and closes one env of ``task``: raises gymnasium's DependencyNotInstalled where a package is missing."""
    make_env(task).close()


def stepper(name: str, task: str, n: int, seed: int) -> Stepper:
    """Contender ``name`` with ``n`` envs of ``task``, reset and ready to step."""
    cores = len(os.sched_getaffinity(0))
    if name == "single":
        env = make_env(task)
        env.reset(seed=seed)
        return single_stepper(env, draw_actions(env.action_space, 1, seed))
    if name.startswith("rlfast"):
        batch = n // 2 if name == "rlfast-async" else n
        pool = rlfast.make_from(make_env, n, task_id=task, batch_size=batch, seed=seed, env_kwargs_per_env=[
            {"task": task}] * n)  # fmt: skip
        acts = draw_actions(pool.single_action_space, batch, seed)
        pool.async_reset()
        ids = pool.recv()[-1]["env_id"]
        i = 0

        def pooled() -> int:
            nonlocal i, ids
            pool.send(acts[i % len(acts)], ids if batch < n else None)
            ids = pool.recv()[-1]["env_id"]
            i += 1
            return batch

        return Stepper(pooled, pool.close, n, batch, min(cores, n))
    fns = [partial(make_env, task)] * n
    if name == "sb3-subproc":
        from stable_baselines3.common.vec_env import SubprocVecEnv  # optional peer

        venv: Any = SubprocVecEnv(fns, start_method="fork")  # its default, forkserver, imports torch per env
        venv.seed(seed)
        venv.reset()
        acts = draw_actions(venv.action_space, n, seed)
        step: Callable[[np.ndarray], Any] = venv.step
    else:
        if name == "gym-async":
            venv = gym.vector.AsyncVectorEnv(fns, shared_memory=True)
        else:
            venv = gym.vector.SyncVectorEnv(fns)
        venv.reset(seed=seed)
        acts = draw_actions(venv.single_action_space, n, seed)
        step = venv.step
    i = 0

    def vector() -> int:
        nonlocal i
        step(acts[i % len(acts)])
        i += 1
        return n

    return Stepper(vector, venv.close, n, n, 1 if name == "gym-sync" else n)


def loops_per_core(task: str, n: int, args: Args) -> tuple[int, float]:
    """``loop-per-core``: min(cores, n) forked processes, each stepping its share of the n envs in a plain loop
    for the same warm-up and seconds, started together; (their steps, seconds)."""
    ctx = mp.get_context("fork")
    procs = min(len(os.sched_getaffinity(0)), n)
    start, results = ctx.Barrier(procs), ctx.Queue()

    def run(k: int) -> None:
        envs = [make_env(task) for _ in range(n // procs + (1 if k < n % procs else 0))]
        for j, env in enumerate(envs):
            env.reset(seed=args.seed + k * n + j)
        acts = draw_actions(envs[0].action_space, len(envs), args.seed + k)
        i = 0

        def step() -> int:
            nonlocal i
            for j, env in enumerate(envs):
                _, _, term, trunc, _ = env.step(acts[i % len(acts)][j])
                if term or trunc:
                    env.reset()
            i += 1
            return len(envs)

        start.wait()
        results.put(measure(Stepper(step, lambda: None, len(envs), len(envs), 1), args.warmup, args.seconds))

    workers = [ctx.Process(target=run, args=(k,), daemon=True) for k in range(procs)]
    for w in workers:
        w.start()
    got = [results.get(timeout=args.warmup + args.seconds + 300) for _ in workers]
    for w in workers:
        w.join()
    return sum(steps / secs for steps, secs in got), 1.0


def measure_one(name: str, task: str, n: int, args: Args) -> tuple[int, float]:
    if name == "loop-per-core":
        return loops_per_core(task, n, args)
    s = stepper(name, task, n, args.seed)
    try:
        return measure(s, args.warmup, args.seconds)
    finally:
        s.close()


def main(args: Args) -> dict[str, dict[str, dict[int, Optional[float]]]]:
    cores = len(os.sched_getaffinity(0))
    print(f"Python envs, {cores} cores; env steps/s (random actions), each contender in a fresh process", flush=True)
    out: dict[str, dict[str, dict[int, Optional[float]]]] = {}
    for task in args.tasks:
        try:  # in a child, as every contender: the parent never imports an env's packages (bench_envs.run_in_child)
            run_in_child(partial(close_env, task), 300)
        except gym.error.DependencyNotInstalled as e:
            print(f"{task}: skipped ({e})", flush=True)
            continue
        rates: dict[str, dict[int, Optional[float]]] = {}
        for name in args.contenders:
            sizes = (1,) if name == "single" else args.num_envs
            rates[name] = {}
            for n in sizes:
                try:
                    timeout = args.warmup + args.seconds + 300
                    steps, secs = run_in_child(partial(measure_one, name, task, n, args), timeout)
                    rates[name][n] = steps / secs
                except ImportError as e:
                    print(f"  {name}: skipped ({e})", flush=True)
                    rates[name][n] = None
                    break
                print(f"  {task} {name} N={n}: {rates[name][n]:,.0f} steps/s", flush=True)
        out[task] = rates
        print(format_table(task, rates, args.num_envs, cores))
    return out


def format_table(task: str, rates: dict[str, dict[int, Optional[float]]], sizes: tuple[int, ...], cores: int) -> str:
    single = rates.get("single", {}).get(1)
    lines = [f"\n{task}" + (f" (one env alone in one process: {single:,.0f} steps/s)" if single else ""),
             "| contender | " + " | ".join(f"N = {n}" for n in sizes) + " |",
             "| --- | " + " | ".join("---" for _ in sizes) + " |"]  # fmt: skip
    for name, by_n in rates.items():
        if name == "single":
            continue
        cells = [f"{by_n[n]:,.0f}" if by_n.get(n) else "-" for n in sizes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name in ("rlfast", "rlfast-async"):
        if name not in rates:
            continue
        if "gym-async" in rates:
            ref = rates["gym-async"]
            cells = [f"{rates[name][n] / ref[n]:.2f}x" if rates[name].get(n) and ref.get(n) else "-" for n in sizes]
            lines.append(f"| {name} / gym-async | " + " | ".join(cells) + " |")
        if single:
            cells = [f"{rates[name][n] / (single * min(cores, n)):.0%}" if rates[name].get(n) else "-" for n in sizes]
            lines.append(f"| {name} / (single x cores used) | " + " | ".join(cells) + " |")
        if "loop-per-core" in rates:
            ref = rates["loop-per-core"]
            cells = [f"{rates[name][n] / ref[n]:.0%}" if rates[name].get(n) and ref.get(n) else "-" for n in sizes]
            lines.append(f"| {name} / loop-per-core | " + " | ".join(cells) + " |")
    if single and "loop-per-core" in rates:
        ref = rates["loop-per-core"]
        cells = [f"{ref[n] / (single * min(cores, n)):.0%}" if ref.get(n) else "-" for n in sizes]
        lines.append("| loop-per-core / (single x cores used) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main(tyro.cli(Args))
