"""DQN training throughput on Atari, side by side: scripts/dqn_atari.py vs CleanRL's dqn_atari data path.

The reference is a public write-up that put CleanRL's Atari DQN on EnvPool with a PyTorch replay
buffer on the GPU and timed 500k steps of SpaceInvaders at (envs, batch size) = (1, 32), (128, 32),
(256, 128), (512, 256) and (512, 2048), scaling the gradient steps with the batch so that 8
sampled transitions per env step (CleanRL's 32 every 4 steps) hold everywhere. This script runs
those settings (``--settings ENVSxBATCH ...``) for these contenders, each in a fresh subprocess:

  rlfast        scripts/dqn_atari.py: rlfast's pool (newest frame only), frames stacked on the device,
                each frame stored once in the device replay buffer, epsilon-greedy on the device,
                actions back through a pinned buffer, the envs stepping while the gradient steps run
  cleanrl       CleanRL's dqn_atari.py loop on EnvPool (``pip install envpool``), as written there:
                Stable-Baselines3's numpy ReplayBuffer with ``optimize_memory_usage`` (4-frame stacks
                in host memory, each sample copied to the device), ``torch.Tensor(obs).to(device)``
                every step, one host coin for epsilon (all envs random, or all greedy) with
                ``action_space.sample()`` per env, ``.cpu().numpy()`` actions, and nothing overlapped.
                Its gradient steps follow the same replay ratio; it logs no episodes (which only
                flatters it). EnvPool's gymnasium API replaces the retired gym one.
  rlfast+OPT    the same with dqn_atari.py's speed options: +cl (--channels-last), +compile (--compile),
                +bf16 (--bf16), one or more, e.g. ``rlfast+cl`` (benchmarks/speed_options.py)
  env-only      rlfast's pool as dqn_atari.py makes it, random actions, no network: the floor
  envpool-only  EnvPool as the cleanrl contender makes it, random actions: its floor

Printed per setting: play fps (env steps/s before learning starts), train fps (after; for the
floors, the same split of random stepping), the total
time of all steps (set-up excluded), the replay buffer's memory, the profile split (env /
inference / train / other) and the ratios to cleanrl and to the env-only floor. Each contender
logs ``perf/*`` seconds per iteration to tensorboard as the trainers do; the phases are read from
there (an iteration that straddles ``--learning-starts`` counts in the total only).

    python3 benchmarks/bench_dqn.py                        # the write-up's table: 500k steps, all five settings
    python3 benchmarks/bench_dqn.py --steps 20000 --learning-starts 5000 --settings 1x32 128x32 512x2048

The write-up's totals include one evaluation round; these do not. Compare ratios of one run, not
absolute figures across runs or machines.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F
import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import speed_options  # benchmarks/speed_options.py (this script's folder is on the path when it runs)
from trainers import SCRIPTS, load_trainer  # benchmarks/trainers.py

import rlfast
from rlfast.algos.profiling import SectionTimer
from rlfast.algos.replay import format_bytes
from rlfast.algos.runlog import RunLog


CONTENDERS = ("rlfast", "cleanrl", "env-only", "envpool-only")
TUNABLE = ("rlfast",)
"""the contenders that take speed-option suffixes (benchmarks/speed_options.py)"""
SECTIONS = ("env", "inference", "train", "other")
WRITE_UP = {"1x32": (664, 227, "33:27"), "128x32": (5755, 630, "12:08"), "256x128": (6099, 1980, "4:51"),
            "512x256": (6317, 3025, "3:34"), "512x2048": (6427, 4440, "2:29")}  # fmt: skip
"""the write-up's EnvPool + GPU replay rows: play fps, train fps, total (4 old cores, one consumer GPU)"""


@dataclass
class Args:
    env_id: str = "SpaceInvaders-v5"
    """the Atari task every contender runs"""
    steps: int = 500_000
    """env steps per run (the write-up's 500k; fewer on a CPU)"""
    learning_starts: int = 80_000
    """env steps of play before the gradient steps start (CleanRL's 80,000)"""
    settings: tuple[str, ...] = ("1x32", "128x32", "256x128", "512x256", "512x2048")
    """ENVSxBATCH settings to run, each a row group"""
    replay_ratio: float = 8.0
    """sampled transitions per env step: gradient steps per vector step = ratio x envs / batch"""
    buffer_size: Optional[int] = None
    """replay transitions (default: --steps, at most CleanRL's 1,000,000)"""
    contenders: tuple[str, ...] = CONTENDERS
    """which contenders to run, in this order"""
    iterations: int = 50
    """about how many logged iterations a run is split into (the phases are read per iteration)"""
    cuda: bool = True
    """train on CUDA when it is available (every contender alike)"""
    torch_threads: Optional[int] = None
    """torch intra-op threads on CPU for every contender (default: torch's choice)"""
    seed: int = 1
    """seed of every contender"""
    json: Optional[str] = None
    """also write the results to this JSON file"""
    reference: Optional[str] = None
    """internal: run this contender (cleanrl, env-only, envpool-only) in this process and exit"""
    reference_setting: str = ""
    """internal: the setting the reference contender runs"""
    reference_run_dir: str = ""
    """internal: where the reference contender logs"""


@dataclass
class Result:
    contender: str
    setting: str
    play_fps: float = 0.0
    train_fps: float = 0.0
    total_s: float = 0.0
    memory: str = "-"
    shares: dict = field(default_factory=dict)
    """percent of the total time per profile section"""
    note: str = ""


def parse_setting(setting: str) -> tuple[int, int]:
    """``"512x2048"`` -> (512 envs, batch 2048); SystemExit naming a bad one."""
    m = re.fullmatch(r"(\d+)x(\d+)", setting)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise SystemExit(f"error: --settings {setting!r} must be ENVSxBATCH, e.g. 512x2048")
    return int(m.group(1)), int(m.group(2))


def buffer_size(args: Args) -> int:
    return args.buffer_size or min(args.steps, 1_000_000)


def num_steps(args: Args, num_envs: int) -> int:
    """Vector steps per logged iteration: about ``--iterations`` of them per run."""
    return max(1, args.steps // (num_envs * args.iterations))


def device_of(args: Args) -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")


def timed_loop(
    args: Args, num_envs: int, run_dir: Path, step: Callable[[SectionTimer, int], None], what: str
) -> None:
    """Runs ``step(timer, global_step)`` once per vector step of ``num_envs`` env steps, in iterations of
    ``num_steps`` vector steps logged like the trainers' (``perf/*`` per iteration, the profile table)."""
    T = num_steps(args, num_envs)
    iterations = args.steps // (num_envs * T)
    log = RunLog(run_dir, {"contender": what, **asdict(args)}, iterations * T * num_envs)
    timer = SectionTimer(("env", "inference", "train"))
    print(f"run dir: {run_dir}  device: {device_of(args)}  {what}", flush=True)
    global_step = 0
    for _ in range(iterations):
        timer.start_iteration()
        for _ in range(T):
            step(timer, global_step)
            global_step += num_envs
        log.scalars(timer.end_iteration(), global_step)
        log.progress(global_step)
    log.close()
    print(timer.summary(steps=global_step), flush=True)


def cleanrl_reference(args: Args, num_envs: int, batch_size: int, run_dir: Path) -> None:
    """CleanRL's dqn_atari.py training loop on EnvPool (see the module docstring), timed like dqn_atari.py."""
    import envpool
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    dqn_atari = load_trainer("dqn_atari.py")

    hp = dqn_atari.Args(env_id=args.env_id, num_envs=num_envs, batch_size=batch_size, seed=args.seed,
                        total_timesteps=args.steps, learning_starts=args.learning_starts,
                        buffer_size=buffer_size(args), replay_ratio=args.replay_ratio)  # fmt: skip
    random.seed(hp.seed)
    np.random.seed(hp.seed)
    torch.manual_seed(hp.seed)
    torch.backends.cudnn.deterministic = hp.torch_deterministic
    device = device_of(args)
    envs = envpool.make(hp.env_id, env_type="gymnasium", num_envs=num_envs, episodic_life=True, reward_clip=True,
                        seed=hp.seed)  # fmt: skip
    q_network = dqn_atari.QNetwork(int(envs.action_space.n)).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=hp.learning_rate)
    target_network = dqn_atari.QNetwork(int(envs.action_space.n)).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = SB3ReplayBuffer(hp.buffer_size, envs.observation_space, envs.action_space, device, n_envs=num_envs,
                         optimize_memory_usage=True, handle_timeout_termination=False)  # fmt: skip
    held = sum(a.nbytes for a in (rb.observations, rb.actions, rb.rewards, rb.dones, rb.timeouts))
    print(f"replay buffer: {hp.buffer_size:,} transitions, {format_bytes(held)} on host (numpy)", flush=True)
    state = {"obs": envs.reset(seed=hp.seed)[0], "due": 0.0}

    def step(timer: SectionTimer, global_step: int) -> None:
        epsilon = hp.epsilon(global_step)
        with timer("inference"):
            if random.random() < epsilon:
                actions = np.array([envs.action_space.sample() for _ in range(num_envs)])
            else:
                q_values = q_network(torch.Tensor(state["obs"]).to(device))
                actions = torch.argmax(q_values, dim=1).cpu().numpy()
        with timer("env"):
            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        real_next_obs = next_obs.copy()  # EnvPool has no final_observation: its terminal obs is next_obs itself
        rb.add(state["obs"], real_next_obs, actions, rewards, terminations, infos)
        state["obs"] = next_obs
        global_step += num_envs
        if global_step > hp.learning_starts:
            state["due"] += hp.replay_ratio * num_envs / hp.batch_size
            with timer("train"):
                for _ in range(int(state["due"])):
                    data = rb.sample(hp.batch_size)
                    with torch.no_grad():
                        target_max, _ = target_network(data.next_observations).max(dim=1)
                        td_target = data.rewards.flatten() + hp.gamma * target_max * (1 - data.dones.flatten())
                    old_val = q_network(data.observations).gather(1, data.actions).squeeze()
                    loss = F.mse_loss(td_target, old_val)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            state["due"] -= int(state["due"])
        if global_step // hp.target_network_frequency > (global_step - num_envs) // hp.target_network_frequency:
            target_network.load_state_dict(q_network.state_dict())

    timed_loop(args, num_envs, run_dir, step, f"CleanRL reference on envpool {envpool.__version__}")
    envs.close()


def env_only(args: Args, num_envs: int, run_dir: Path, peer: bool) -> None:
    """Random actions on rlfast's pool as dqn_atari.py makes it (or EnvPool's as cleanrl's): no network."""
    random.seed(args.seed)
    if peer:
        import envpool

        envs = envpool.make(args.env_id, env_type="gymnasium", num_envs=num_envs, episodic_life=True,
                            reward_clip=True, seed=args.seed)  # fmt: skip
        envs.reset()
        n = int(envs.action_space.n)

        def step(timer: SectionTimer, global_step: int) -> None:
            with timer("env"):
                envs.step(np.random.randint(n, size=num_envs))

        timed_loop(args, num_envs, run_dir, step, f"EnvPool {envpool.__version__}, random actions")
    else:
        dqn_atari = load_trainer("dqn_atari.py")

        envs = rlfast.make(args.env_id, num_envs, seed=args.seed, **dqn_atari.TRAIN_ENV_KWARGS)
        envs.reset()
        n = int(envs.single_action_space.n)

        def step(timer: SectionTimer, global_step: int) -> None:
            with timer("env"):
                envs.send(torch.randint(n, (num_envs,)))
                envs.recv()

        timed_loop(args, num_envs, run_dir, step, f"{envs!r}, random actions")
    envs.close()


def contender_command(name: str, args: Args, setting: str, run_dir: Path) -> list[str]:
    """The subprocess command line of one run of ``name``."""
    num_envs, batch_size = parse_setting(setting)
    common = [] if args.cuda else ["--no-cuda"]
    common += ["--torch-threads", str(args.torch_threads)] if args.torch_threads else []
    base, flags = speed_options.split(name)
    if base != "rlfast":
        return [sys.executable, __file__, "--env-id", args.env_id, "--steps", str(args.steps),
                "--learning-starts", str(args.learning_starts), "--replay-ratio", str(args.replay_ratio),
                "--buffer-size", str(buffer_size(args)), "--iterations", str(args.iterations),
                "--seed", str(args.seed), "--reference", name, "--reference-setting", setting,
                "--reference-run-dir", str(run_dir), *common]  # fmt: skip
    return [sys.executable, str(SCRIPTS / "dqn_atari.py"), "--env-id", args.env_id, "--num-envs", str(num_envs),
            "--batch-size", str(batch_size), "--replay-ratio", str(args.replay_ratio),
            "--total-timesteps", str(args.steps), "--learning-starts", str(args.learning_starts),
            "--buffer-size", str(buffer_size(args)), "--num-steps", str(num_steps(args, num_envs)),
            "--seed", str(args.seed), "--runs-dir", str(run_dir), "--exp-name", "bench", "--save-minutes", "0",
            *common, *flags]  # fmt: skip


def read_result(name: str, setting: str, args: Args, run_dir: Path, stdout: str) -> Result:
    """Phase rates and section shares from the run's ``perf/*`` scalars; memory from its replay line."""
    dirs = list(run_dir.rglob("events.out.tfevents.*"))
    if not dirs:
        return Result(name, setting, note="no tensorboard log")
    acc = EventAccumulator(str(dirs[0].parent), size_guidance={"scalars": 0})
    acc.Reload()
    per_section = {s: {e.step: e.value for e in acc.Scalars(f"perf/{s}")} for s in SECTIONS}
    ends = sorted(per_section["env"])
    seconds = {end: sum(per_section[s][end] for s in SECTIONS) for end in ends}
    num_envs = parse_setting(setting)[0]
    size = num_envs * num_steps(args, num_envs)
    play = [end for end in ends if end <= args.learning_starts]
    train = [end for end in ends if end - size >= args.learning_starts]

    def rate(phase: list[int]) -> float:
        return len(phase) * size / sum(seconds[e] for e in phase) if phase else 0.0

    total = sum(seconds.values())
    memory = re.search(r"^replay buffer: [\d,]+ transitions, ([\d.]+ [kMGT]?B)", stdout, re.M)
    shares = {s: 100 * sum(per_section[s].values()) / total for s in SECTIONS}
    return Result(name, setting, rate(play), rate(train), total, memory.group(1) if memory else "-", shares)


def run_one(name: str, args: Args, setting: str) -> Result:
    if name in ("cleanrl", "envpool-only"):
        try:
            import envpool  # noqa: F401
        except ImportError as e:
            return Result(name, setting, note=f"skipped: {e} (pip install envpool)")
    with tempfile.TemporaryDirectory(prefix="bench_dqn_") as tmp:
        run_dir = Path(tmp) / "run"
        proc = subprocess.run(contender_command(name, args, setting, run_dir), capture_output=True, text=True,
                              check=False, cwd=tmp)  # fmt: skip
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return Result(name, setting, note=f"failed (exit {proc.returncode}): {tail[0]}")
        return read_result(name, setting, args, run_dir, proc.stdout)


def format_minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def format_table(args: Args, setting: str, results: dict[str, Result], device: torch.device) -> str:
    num_envs, batch = parse_setting(setting)
    head = (f"{args.env_id} DQN, {num_envs} envs, batch {batch}, {args.steps:,} steps (learning from "
            f"{args.learning_starts:,}), replay ratio {args.replay_ratio:g}, {device}, {os.cpu_count()} cores")
    header = (f"{'contender':<22}{'play fps':>10}{'train fps':>11}{'total':>10}{'replay':>11}"
              + "".join(f"{s[:5]:>8}" for s in SECTIONS) + f"{'vs cleanrl':>12}{'vs floor':>10}")  # fmt: skip
    lines = [head, header]
    base, floor = results.get("cleanrl"), results.get("env-only")
    for name, r in results.items():
        if not r.total_s:
            lines.append(f"{name:<22} {r.note}")
            continue
        vs_base = f"{base.total_s / r.total_s:.2f}x" if base and base.total_s else "-"
        vs_floor = f"{r.total_s / floor.total_s:.2f}x" if floor and floor.total_s else "-"
        play = f"{r.play_fps:,.0f}" if r.play_fps else "-"
        train = f"{r.train_fps:,.0f}" if r.train_fps else "-"
        cells = "".join(f"{r.shares[s]:>7.1f}%" for s in SECTIONS)
        lines.append(f"{name:<22}{play:>10}{train:>11}{format_minutes(r.total_s):>10}{r.memory:>11}{cells}"
                     f"{vs_base:>12}{vs_floor:>10}")  # fmt: skip
    if setting in WRITE_UP:
        play, train, total = WRITE_UP[setting]
        lines.append(f"{'write-up':<22}{play:>10,}{train:>11,}{total:>10}  (EnvPool + GPU replay, 4 cores + GPU)")
    return "\n".join(lines)


def main(args: Args) -> dict[str, dict[str, Result]]:
    speed_options.check(args.contenders, CONTENDERS, TUNABLE)
    for setting in args.settings:
        num_envs, batch = parse_setting(setting)
        if args.learning_starts < batch or args.learning_starts >= args.steps:
            raise SystemExit(f"error: --learning-starts {args.learning_starts:,} must be in [batch {batch}, --steps "
                             f"{args.steps:,})")  # fmt: skip
        if args.steps < num_envs * num_steps(args, num_envs):
            raise SystemExit(f"error: --steps {args.steps:,} is less than one vector step of {setting}")
    device = device_of(args)
    everything: dict[str, dict[str, Result]] = {}
    for setting in args.settings:
        results: dict[str, Result] = {}
        for name in args.contenders:
            start = time.perf_counter()
            r = results[name] = run_one(name, args, setting)
            print(f"  {name} {setting}: {format_minutes(r.total_s)} {r.note} ({time.perf_counter() - start:.0f} s)",
                  flush=True)  # fmt: skip
        everything[setting] = results
        print(format_table(args, setting, results, device), flush=True)
    if args.json:
        payload = {"args": asdict(args), "device": str(device), "cpu_count": os.cpu_count(),
                   "results": {s: {k: asdict(r) for k, r in rs.items()} for s, rs in everything.items()}}  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return everything


if __name__ == "__main__":
    cli = tyro.cli(Args)
    if cli.reference is None:
        main(cli)
    else:
        if cli.torch_threads:
            torch.set_num_threads(cli.torch_threads)
        envs_n, batch_n = parse_setting(cli.reference_setting)
        run_path = Path(cli.reference_run_dir)
        if cli.reference == "cleanrl":
            cleanrl_reference(cli, envs_n, batch_n, run_path)
        else:
            env_only(cli, envs_n, run_path, peer=cli.reference == "envpool-only")
