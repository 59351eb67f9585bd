"""APPO's throughput against the env pool's own limit, and PPO's, at the same envs, batch and threads.

Rows, each at ``--num-envs`` envs, ``--env-batch-size`` per recv (async; default half) and ``--num-threads``:

  env-only      the pool alone: random actions through send/recv, nothing else (the limit)
  sampler-only  APPO's sampler thread with the policy acting and trajectories assembled on the device,
                the learner taking each batch and dropping it (no training): the sampler's own cost
  appo          scripts/appo.py training (subprocess): SPS of its progress line
  ppo           scripts/ppo_atari.py (Atari) or scripts/ppo.py at the same num_envs, rollouts of
                ``--batch-size / --num-envs`` steps (subprocess)
  appo-lstm, ppo-lstm  appo.py --recurrent lstm / ppo_atari_lstm.py (Atari; -gru: a GRU)
  sampler-only+OPT, appo+OPT, ppo+OPT  the same with the trainers' speed options: +cl (--channels-last),
                +compile (--compile; not for sampler-only), +bf16 (--bf16), +auto (the defaults: --auto-speed),
                one or more, e.g. ``appo+cl`` (benchmarks/speed_options.py); without any, float32 NCHW

The ratios to env-only show where the time goes: sampler-only / env-only is what acting and storage
cost, appo / sampler-only what the learner takes from the sampler (cores and the GIL, shared by
both threads: APPO's perf/sampler_* and perf/wait say which side waits).

    python3 benchmarks/bench_appo.py                                  # Pong-v5, 64 envs (32 per recv), 1M steps
    python3 benchmarks/bench_appo.py --env-id Breakout-v5 --num-envs 16 --steps 20000 --torch-threads 1

Compare ratios of one run, not figures across runs or machines; Atari frames/s are 4x these steps/s.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import torch
import tyro

import speed_options  # benchmarks/speed_options.py (this script's folder is on the path when it runs)
from trainers import SCRIPTS, load_trainer  # benchmarks/trainers.py

import rlfast
from rlfast.algos import runargs
from rlfast.algos.speed import set_speed
from rlfast.algos.appo_sampler import Sampler

appo = load_trainer("appo.py")  # its Args and agent

CONTENDERS = ("env-only", "sampler-only", "appo", "ppo", "appo-lstm", "ppo-lstm", "appo-gru", "ppo-gru")
TUNABLE = ("sampler-only", "appo", "ppo", "appo-lstm", "ppo-lstm", "appo-gru", "ppo-gru")
"""the rows that take speed-option suffixes (benchmarks/speed_options.py)"""


@dataclass
class Args:
    env_id: str = "Pong-v5"
    """the task every row runs (Atari or classic control)"""
    num_envs: int = 64
    """envs of the pool"""
    env_batch_size: Optional[int] = None
    """envs per recv (None: num_envs // 2)"""
    num_threads: Optional[int] = None
    """pool worker threads (None: min(cores, num_envs))"""
    batch_size: int = 2048
    """APPO's samples per learner batch; PPO's rollout is batch_size / num_envs steps"""
    steps: int = 1_000_000
    """env steps per row"""
    contenders: tuple[str, ...] = ("env-only", "sampler-only", "appo", "ppo")
    """which rows to run (also: the recurrent ones, appo-lstm, ppo-lstm, appo-gru, ppo-gru)"""
    cuda: bool = True
    """act and train on CUDA when it is available"""
    torch_threads: Optional[int] = None
    """torch intra-op threads on CPU for every row (default: torch's choice)"""
    seed: int = 1
    json: Optional[str] = None
    """also write the results to this JSON file"""


def device_of(args: Args) -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")


def env_kwargs(args: Args) -> dict:
    return appo.ATARI_ENV_KWARGS if rlfast.task_family(args.env_id) == "atari" else {}


def recv_batch(args: Args) -> int:
    return args.env_batch_size or max(args.num_envs // 2, 1)


def env_only(args: Args) -> float:
    """Steps/s of the pool alone: every recv answered at once with random actions."""
    with rlfast.make(args.env_id, args.num_envs, batch_size=recv_batch(args), num_threads=args.num_threads,
                     seed=args.seed, **env_kwargs(args)) as envs:  # fmt: skip
        n = int(envs.single_action_space.n)
        envs.async_reset()
        for _ in range(args.num_envs // recv_batch(args)):  # the reset results
            _, _, _, _, info = envs.recv()
            envs.send(torch.randint(n, (len(info["env_id"]),)), info["env_id"])
        steps, start = 0, time.perf_counter()
        while steps < args.steps:
            _, _, _, _, info = envs.recv()
            ids = info["env_id"]
            envs.send(torch.randint(n, (len(ids),)), ids)
            steps += len(ids)
        return steps / (time.perf_counter() - start)


def sampler_only(args: Args, name: str = "sampler-only") -> float:
    """Steps/s of APPO's sampler with the learner only taking and dropping batches; ``name``'s speed options
    (``sampler-only+cl+bf16``, ...) as appo.py would apply them to the acting network (+compile: none there)."""
    _, flags = speed_options.split(name)
    hp = appo.Args(env_id=args.env_id, num_envs=args.num_envs, env_batch_size=args.env_batch_size,
                   batch_size=args.batch_size, seed=args.seed, channels_last="--channels-last" in flags,
                   bf16="--bf16" in flags, auto_speed="--auto-speed" in flags)  # fmt: skip
    device = device_of(args)
    with rlfast.make(args.env_id, args.num_envs, batch_size=hp.recv_batch, num_threads=args.num_threads,
                     seed=args.seed, **env_kwargs(args)) as envs:  # fmt: skip
        agent = appo.make_agent(hp, envs.single_observation_space, envs.single_action_space).to(device)
        set_speed(agent, **runargs.speed_options(hp, device))
        with Sampler(envs, hp, agent, lambda *_: None, device) as sampler:
            sampler.release(sampler.next_batch())  # warm-up: the first batch
            steps, start = 0, time.perf_counter()
            while steps < args.steps:
                sampler.release(sampler.next_batch())
                steps += args.batch_size
            return steps / (time.perf_counter() - start)


def trainer_sps(name: str, args: Args) -> tuple[float, str]:
    """SPS of the final progress line of scripts/appo.py or the PPO trainer (subprocess), or (0, why not)."""
    common = ["--env-id", args.env_id, "--num-envs", str(args.num_envs), "--total-timesteps", str(args.steps),
              "--seed", str(args.seed), "--runs-dir", "runs", "--save-minutes", "0"]  # fmt: skip
    common += ["--num-threads", str(args.num_threads)] if args.num_threads else []
    common += [] if args.cuda else ["--no-cuda"]
    common += ["--torch-threads", str(args.torch_threads)] if args.torch_threads else []
    base, flags = speed_options.split(name)
    base, _, cell = base.partition("-")
    common += ["--recurrent", cell] if cell else []
    if base == "appo":
        cmd = [str(SCRIPTS / "appo.py"), *common, *flags, "--batch-size", str(args.batch_size)]
        cmd += ["--env-batch-size", str(args.env_batch_size)] if args.env_batch_size else []
    else:  # ppo.py (an MLP) has no CNN speed flags
        atari = rlfast.task_family(args.env_id) == "atari"
        pixels = "ppo_atari_lstm.py" if cell else "ppo_atari.py"
        cmd = [str(SCRIPTS / (pixels if atari else "ppo.py")), *common, *(flags if atari else []),
               "--num-steps", str(max(args.batch_size // args.num_envs, 1))]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_appo_") as tmp:
        proc = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, check=False, cwd=tmp)
    sps = re.findall(r"\|\s+([\d,]+) SPS \|", proc.stdout)
    if proc.returncode != 0 or not sps:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return 0.0, f"failed (exit {proc.returncode}): {tail[0]}"
    return float(sps[-1].replace(",", "")), ""


def main(args: Args) -> dict[str, float]:
    speed_options.check(args.contenders, CONTENDERS, TUNABLE)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    results: dict[str, float] = {}
    notes: dict[str, str] = {}
    for name in args.contenders:
        start = time.perf_counter()
        if name == "env-only":
            results[name] = env_only(args)
        elif name.split("+")[0] == "sampler-only":
            results[name] = sampler_only(args, name)
        else:
            results[name], notes[name] = trainer_sps(name, args)
        print(f"  {name}: {results[name]:,.0f} steps/s {notes.get(name, '')}({time.perf_counter() - start:.0f} s)",
              flush=True)  # fmt: skip
    device = device_of(args)
    print(f"{args.env_id}, {args.num_envs} envs ({recv_batch(args)} per recv), batch {args.batch_size}, "
          f"{args.steps:,} steps, {device}, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'row':<20}{'steps/s':>10}{'vs env-only':>13}")
    floor = results.get("env-only")
    for name, sps in results.items():
        ratio = f"{100 * sps / floor:.1f}%" if floor and sps else "-"
        print(f"{name:<20}{sps:>10,.0f}{ratio:>13}  {notes.get(name, '')}".rstrip())
    if args.json:
        payload = {"args": asdict(args), "device": str(device), "cpu_count": os.cpu_count(), "results": results}
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return results


if __name__ == "__main__":
    main(tyro.cli(Args))
