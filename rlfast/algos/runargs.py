"""The flags every trainer has (``RunArgs``) and the checks that stop a run before it starts
(``run_problems``); ``usage_error`` is how a bad command line ends: one ``error: ...`` line per problem.
The run layer (``rlfast/algos/run.py``) applies them; a script composes ``RunArgs`` with its algorithm's
flags, e.g. ``Args(PPOArgs, RunArgs)``."""

import importlib.util
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Sequence

import gymnasium as gym
import numpy as np
import torch

import rlfast
from rlfast.algos.distributed import World
from rlfast.algos.flags import Flags, bounded
from rlfast.algos.speed import auto_bf16, native_bf16


@dataclass
class RunArgs(Flags):
    """The flags every trainer has. A script's ``Args`` extends this, composed with its algorithm's flags
    (e.g. ``Args(PPOArgs, RunArgs)``)."""

    exp_name: str = "run"
    """the name of this experiment (part of the run dir name)"""
    seed: int = bounded(1, low=0, high=2**32, high_open=True, high_text="2**32")
    """seed of the experiment (envs get seed + env index)"""
    torch_deterministic: bool = True
    """sets `torch.backends.cudnn.deterministic`"""
    cuda: bool = True
    """train on CUDA when it is available"""
    compile: bool = False
    """torch.compile the policy forward and the loss"""
    cudagraphs: bool = False
    """CUDA graphs for inference and the loss (torch.compile mode="reduce-overhead"; implies --compile; needs CUDA)"""
    config: Optional[str] = None
    """a TOML preset (configs/*.toml) whose keys are these fields; the command line overrides it"""
    resume: Optional[str] = None
    """a checkpoint, or a run dir (its checkpoint.pt), to continue: its args are the defaults, and logs and
    checkpoints go to its run dir"""
    runs_dir: str = "runs"
    """folder holding the run dirs `{env_id}__{exp_name}__{seed}__{time}`"""
    save_interval: int = bounded(0, low=0, note="0: none")
    """also save `checkpoint_{iteration}.pt` (kept) every this many iterations (0: none)"""
    save_minutes: float = bounded(5.0, low=0, note="0: only at the end and on Ctrl-C")
    """overwrite `checkpoint.pt` with the latest state every this many minutes (0: only at the end and on
    Ctrl-C), so a crash loses at most that much training"""
    target_return: Optional[float] = bounded(None)
    """stop early at the end of an iteration where the mean return of the last 20 episodes is at least this"""
    num_threads: Optional[int] = bounded(None, low=1, note="or left out")
    """env pool worker threads (None: min(cores, num_envs))"""
    torch_threads: Optional[int] = bounded(None, low=1, note="or left out")
    """torch intra-op threads on CPU (None: torch's choice, one per core)"""
    profile_sync: bool = False
    """synchronize CUDA at profiler section boundaries (exact split, a little slower)"""
    eval_every: int = bounded(0, low=0, note="0: off")
    """every this many iterations (and after the last), play --eval-episodes greedy episodes on an evaluation pool
    of its own and log eval/episodic_return (Atari: whole games, raw score), as SB3's EvalCallback; the checkpoint
    of the best evaluation so far is kept as run_dir/best.pt"""
    eval_episodes: int = bounded(10, low=1)
    """episodes (envs, played at once) of each evaluation"""
    capture_video: bool = False
    """record one greedy episode at each evaluation (every --eval-every iterations; without it, 10 times a run) to
    run_dir/videos/ and TensorBoard (needs the video extra: pip install 'rlfast[video]')"""
    track: bool = False
    """also log the run to Weights & Biases (needs the track extra: pip install 'rlfast[track]'; WANDB_MODE=offline
    keeps it on this machine)"""
    wandb_project_name: str = "rlfast"
    """the W&B project of --track"""
    wandb_entity: Optional[str] = None
    """the W&B team of --track (None: your default)"""

    env_id: str = "CartPole-v1"
    """the task id (rlfast.list_envs())"""
    total_timesteps: int = bounded(500000, low=1)
    """total env steps of the experiment"""
    num_envs: int = bounded(4, low=1)
    """the number of parallel envs, over all ranks under torchrun (each rank steps num_envs / world size)"""
    local_num_envs: Optional[int] = bounded(None, low=1, note="or left out")
    """envs per rank (Cleanba's local_num_envs): sets --num-envs to world size x this"""

    def validate(self) -> list[str]:
        """What is wrong with these values: one sentence per problem, naming the flag. Subclasses extend it."""
        problems = super().validate()  # the declared ranges (rlfast/algos/flags.py)
        if not self.exp_name or "/" in self.exp_name or os.sep in self.exp_name:
            problems.append(f"--exp-name {self.exp_name!r} must be a non-empty name without '/'")
        return problems


@dataclass
class CNNArgs(Flags):
    """The Nature CNN's speed flags, for the trainers that have one (``Args(PPOArgs, CNNArgs, RunArgs)``); the run
    layer reads them (``speed_options``, ``flushes_denormals``) and trainers without them run float32 NCHW."""

    ADDED: ClassVar[dict[str, Any]] = {"auto_speed": False}
    """runs checkpointed before --auto-speed existed resume as they ran"""
    AUTO_SPEED: ClassVar[tuple[str, ...]] = ("channels_last", "bf16", "flush_denormals")
    """the flags --auto-speed turns on: turning one off needs --no-auto-speed (config.check_auto_off says so)"""
    channels_last: bool = False
    """keep the CNN's weights and activations channels-last (NHWC), which oneDNN's
    CPU convolutions run faster (speed.FrameNet)"""
    bf16: bool = False
    """run the CNN under a bfloat16 autocast, its output and the losses float32
    (fast on a CPU with AVX512-BF16 or AMX and on bf16 GPUs; elsewhere bfloat16's numerics at float32's speed:
    float32 kernels on values rounded to bfloat16, speed.FrameNet.round_bf16; a note says so)"""
    flush_denormals: bool = False
    """treat float32 values below 1.2e-38 as 0 on the CPU (FTZ/DAZ, speed.flush_denormals): Adam's moments of
    weights whose gradient stays 0 decay into that range, where each costs the CPU a microcode assist"""
    auto_speed: bool = True
    """Atari (Nature CNN) trainers on a CPU: also turn on what pays there and learns the same (docs/performance/
    cpu.md): --channels-last, --flush-denormals, and --bf16 with AMX or with AVX512-BF16 on an AMD CPU (an Intel
    CPU without AMX stays in float32). Turned off, only the options given apply (float32 NCHW without any:
    CleanRL's numerics). No effect on CUDA"""


@dataclass
class FrameNormArgs(Flags):
    """``--normalize-frames``, for the trainers whose Nature CNN takes it (``scripts/ppo_atari.py``,
    ``scripts/ppo_atari_lstm.py``, ``scripts/appo.py``, ``scripts/dqn_atari.py``): the trainer observes the statistics
    (``FrameNet.observe``); the PPO trainers normalize each update's batch once (``FrameNet.normalized``)."""

    normalize_frames: bool = False
    """each pixel as (value - running mean) / running std, clipped to [-5, 5], instead of value / 255 (rl_games'
    normalize_input: the static background goes to 0, the ball and paddles stand out); the statistics are the
    newest frames': PPO adds each rollout's after its update (a rollout and its update see the same ones), APPO
    each batch's before its update (the sampler gets them with the weights), DQN each step's as it comes (the
    target network gets them at its updates)"""


@dataclass
class EnvGroupArgs(Flags):
    """``--env-groups``, for the trainers whose rollout takes turns between groups of envs
    (``rlfast.algos.envgroups.EnvGroups``: ``scripts/ppo_atari.py``, ``scripts/ppo_continuous.py``)."""

    env_groups: int = bounded(1, low=1)
    """split the envs into this many groups, each its own pool with its share of --num-threads (at least one
    thread): while one group's envs step, the next group's actions are computed (each env's trajectory the one it
    has in one pool; acting on smaller batches rounds differently, and ppo_continuous.py's observation statistics
    take each group's observations as they come; configs/pong_cpu.toml: 2, for a 2-core CPU, where acting for
    one group beside the other's stepping hides most of acting)"""

    def validate(self) -> list[str]:
        problems = super().validate()
        envs = getattr(self, "local_num_envs", None) or getattr(self, "num_envs", 1)  # each rank's envs are split
        if not problems and envs % self.env_groups:
            problems.append(f"--env-groups {self.env_groups} does not divide the {envs} envs into equal groups")
        return problems


RUN_COMPLETE = "iterations asked for; raise --total-timesteps to continue it"
"""how the refusal to resume a run that holds every iteration asked for ends (benchmarks/bench_learning.py reads
it in a trainer's log)"""


def run_problems(
    args: RunArgs,
    script: str,
    families: Sequence[str],
    iterations: int,
    steps_per_iteration: int,
    start: int,
    world: World = World(),
    data_parallel: bool = True,
    ckpt_world_size: Optional[int] = None,
) -> list[str]:
    """What stops a run before it starts: the flags' own problems first, then (when they are fine) a task
    outside ``families``, no whole iteration in --total-timesteps, --cudagraphs without CUDA, a resumed
    run whose checkpoint already holds ``start`` >= ``iterations`` iterations, and under torchrun: a trainer
    without ``data_parallel`` support, envs that the ranks cannot share evenly, and a resumed run trained
    on another number of ranks (``ckpt_world_size``)."""
    problems = args.validate()
    if problems:
        return problems
    if world.distributed:
        if not data_parallel:
            return [f"{script} runs on one rank: start it without torchrun (or with --nproc-per-node 1)"]
        if args.num_envs % world.world_size:
            problems.append(f"--num-envs {args.num_envs} is not divisible by the {world.world_size} ranks "
                            "(or use --local-num-envs, the envs per rank)")  # fmt: skip
    if ckpt_world_size is not None and ckpt_world_size != world.world_size:
        problems.append(f"{args.resume} was trained on {ckpt_world_size} rank(s), this run has "
                        f"{world.world_size}: resume it with the same number of ranks (torchrun "
                        f"--nnodes x --nproc-per-node = {ckpt_world_size}); a different one is refused")  # fmt: skip
    if families:
        try:
            family = rlfast.task_family(args.env_id)
        except ValueError as e:
            return [f"--env-id: {e}"]
        if family not in families:
            builtin = [f for f in families if f not in OWN_FAMILIES]
            own = " and your own envs (gymnasium 'module:Env-v0' ids, rlfast.load_env headers)" if any(
                f in OWN_FAMILIES for f in families) else ""  # fmt: skip
            problems.append(f"{script} trains {' or '.join(builtin)} tasks{own}; {args.env_id} is from the {family} "
                            "family")  # fmt: skip
    if iterations < 1:
        problems.append(f"--total-timesteps {args.total_timesteps:,} is less than one iteration of "
                        f"{steps_per_iteration:,} steps")  # fmt: skip
    if args.cudagraphs and not (args.cuda and torch.cuda.is_available()):
        problems.append("--cudagraphs needs a CUDA device (none available, or --no-cuda); run without it")
    if start >= iterations >= 1:
        problems.append(f"{args.resume} already holds {start} of the {iterations} {RUN_COMPLETE}")
    for flag, wanted, module, extra in (("--capture-video", args.capture_video, "imageio_ffmpeg", "video"),
                                        ("--track", args.track, "wandb", "track")):  # fmt: skip
        if wanted and importlib.util.find_spec(module) is None:
            problems.append(f"{flag} needs {module}: pip install 'rlfast[{extra}]'")
    return problems


def speed_options(args: Any, device: torch.device) -> dict[str, bool]:
    """The CNN speed options a run uses (``speed.set_speed``'s keywords): the flags given, and with
    ``--auto-speed`` on a CPU channels-last, plus bfloat16 where it pays (``auto_bf16``: with AMX, or AVX512-BF16 on
    an AMD CPU; not on an Intel CPU without AMX); ``--bf16`` on a device without native bfloat16 (``native_bf16``)
    runs bfloat16's numerics in float32 (``FrameNet.round_bf16``)."""
    if not isinstance(args, CNNArgs):
        return {"channels_last": False, "bf16": False, "round_bf16": False}
    auto = args.auto_speed and device.type == "cpu"
    native = native_bf16(device)
    bf16 = args.bf16 or (auto and auto_bf16(device))
    return {"channels_last": args.channels_last or auto, "bf16": bf16, "round_bf16": bf16 and not native}


def flushes_denormals(args: Any, device: torch.device) -> bool:
    """Whether a run flushes denormals (``speed.flush_denormals``): ``--flush-denormals``, or ``--auto-speed``
    on a CPU for an Atari task (where a CNN trains; classic control and MuJoCo keep gymnasium's numerics)."""
    if not isinstance(args, CNNArgs):
        return False
    auto = args.auto_speed and device.type == "cpu" and rlfast.task_family(args.env_id) == "atari"
    return args.flush_denormals or auto


def parse_env_kwargs(items: Sequence[str]) -> dict[str, Any]:
    """``("name=value", ...)`` -> the task's options for ``rlfast.make``: true/false -> bool, then int, float,
    else the text. ValueError naming the item that is not ``name=value`` or that repeats a name."""
    options: dict[str, Any] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not (eq and name.isidentifier() and text):
            raise ValueError(f"{item!r} is not name=value (e.g. include_cfrc_ext_in_observation=false)")
        if name in options:
            raise ValueError(f"{name} is given twice")
        value: Any = text
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            for kind in (int, float):
                try:
                    value = kind(text)
                    break
                except ValueError:
                    continue
        options[name] = value
    return options


OWN_FAMILIES = ("python", "custom")
"""task families of users' envs (rlfast.task_family): Python envs in worker processes, rlfast.load_env's C++ envs"""


def vector_obs_size(script: str, env_id: str, obs_space: gym.Space) -> int:
    """The number of values of ``env_id``'s observations for an MLP; a usage error unless they are a Box (a
    Python env's Discrete or MultiDiscrete observations need a wrapper, e.g. one-hot, first)."""
    if isinstance(obs_space, gym.spaces.Dict):  # the pool gives them (rlfast/procpool.py); no trainer takes them yet
        raise usage_error(f"{env_id} has Dict observations ({', '.join(map(str, obs_space.spaces))}); {script} needs a "
                          "Box of numbers (appo.py trains a Dict of frames and a vector; for an MLP, wrap the env "
                          "with gymnasium.wrappers.FlattenObservation)")  # fmt: skip
    if not isinstance(obs_space, gym.spaces.Box):
        raise usage_error(f"{env_id} has {type(obs_space).__name__} observations; {script} needs a Box of numbers "
                          "(wrap the env, e.g. one-hot a Discrete observation)")  # fmt: skip
    return int(np.prod(obs_space.shape))


def check_frames(script: str, env_id: str, obs_space: gym.Space, size: int = 84) -> tuple[int, ...]:
    """The shape of ``env_id``'s frames, which the Atari trainers stack for their Nature CNN: a usage error unless they
    are uint8 of shape (1, size, size), as the engine's Atari frames (a user's pixel env grays and resizes its own)."""
    want = (1, size, size)
    if isinstance(obs_space, gym.spaces.Dict):
        raise usage_error(f"{env_id} has Dict observations ({', '.join(map(str, obs_space.spaces))}); {script} "
                          f"stacks uint8 frames of shape {want} (appo.py trains a Dict of frames and a "
                          "vector)")  # fmt: skip
    if not (isinstance(obs_space, gym.spaces.Box) and obs_space.dtype == np.uint8 and obs_space.shape == want):
        shown = f"{tuple(obs_space.shape)} {obs_space.dtype}" if isinstance(obs_space, gym.spaces.Box) else obs_space
        raise usage_error(f"{env_id} observations are {shown}; {script} stacks uint8 frames of shape {want} "
                          f"(grayscale {size}x{size}, as its Atari games give them)")  # fmt: skip
    return tuple(obs_space.shape)


def usage_error(*problems: str) -> SystemExit:
    """The exit of a bad command line: one ``error: ...`` line per problem on stderr, status 1 (raise it)."""
    return SystemExit("\n".join(f"error: {p}" for p in problems))
