"""PPO for Atari on rlfast's env pool: CleanRL's ``ppo_atari_envpool.py``, with frames stacked on the device.

Same Nature CNN, hyperparameters and update as CleanRL (Pong-v5, 10M steps, 8 envs x 128
steps, ``episodic_life`` and ``reward_clip``), with the envs stepped by rlfast's C++ pool,
rollout storage on the training device and a profile of where the time goes.

    python scripts/ppo_atari.py                                   # CleanRL defaults: Pong-v5, 10M steps
    python scripts/ppo_atari.py --env-id Breakout-v5 --seed 2
    python scripts/ppo_atari.py --config configs/pong_5min.toml   # 16 cores + 1 GPU (see the file)
    python scripts/ppo_atari.py --resume runs/<run>/checkpoint.pt # continue that run (same run dir)
    python scripts/evaluate.py runs/<run>/checkpoint.pt           # full games, raw scores
    tensorboard --logdir runs

Data path of a step: the pool (``stack_num=1``) writes the newest 84x84 frame of each env
into a pinned ring; one non-blocking copy takes it to the device, where ``rlfast.FrameStack``
keeps the 4-frame stacks and the uint8 rollout storage lives; the sampled actions come back
through a pinned host buffer (non-blocking copy, one sync, ``send``). With ``--overlap`` the
envs are two pools of ``num_envs / 2`` (env i keeps seed ``seed + i``): one half steps while
the policy acts on the other. Every env still gets each action from the current policy, so
the rollout is PPO's.

``charts/episodic_return`` is the raw score of a whole game (all lives, unclipped) and
``charts/episodic_length`` its agent steps, as CleanRL logs them (``rlfast/algos/atari_stats.py``);
the losses use the clipped, per-life rewards and dones, as CleanRL's. Episode ends use
next-step autoreset and CleanRL's done convention (``rlfast/algos/gae.py``).
Ctrl-C saves ``checkpoint.pt`` into the run dir, closes the pools and exits with status 130.
"""

import dataclasses
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import rlfast
from rlfast.algos.atari_stats import GameStats
from rlfast.algos.checkpoint import CheckpointSchedule, make_checkpoint, restore, save_checkpoint
from rlfast.algos.config import parse_or_resume
from rlfast.algos.distributions import categorical
from rlfast.algos.gae import gae
from rlfast.algos.ppo import LOSS_NAMES, PPOLoss, explained_variance, ppo_loss, ppo_update
from rlfast.algos.profiling import SectionTimer
from rlfast.algos.runlog import RunLog, run_dir_name

SCRIPT = "ppo_atari.py"
STACK = 4
"""frames per observation (the CNN's input channels)"""
TRAIN_ENV_KWARGS = {"episodic_life": True, "reward_clip": True, "stack_num": 1}
"""CleanRL's envpool options; stack_num=1 because the stacks are built on the device"""


@dataclass
class Args:
    exp_name: str = "ppo_atari"
    """the name of this experiment (part of the run dir name)"""
    seed: int = 1
    """seed of the experiment (envs get seed + env index)"""
    torch_deterministic: bool = True
    """sets `torch.backends.cudnn.deterministic`"""
    cuda: bool = True
    """train on CUDA when it is available"""
    compile: bool = False
    """torch.compile the policy forward and the minibatch loss. Off until proven equal and faster: no GPU
    was available to measure it; on a 2-core CPU it only adds compile time"""
    cudagraphs: bool = False
    """CUDA graphs for inference and the minibatch loss (torch.compile mode="reduce-overhead"; implies
    --compile; needs CUDA). Off until proven equal and faster: it has never run on a GPU"""
    overlap: bool = False
    """two pools of num_envs/2: one half steps while the policy acts on the other (num_envs must be even).
    Off by default: measured slower on 2 CPU cores, no GPU (defaults, 20480 steps, seed 1, back to back:
    474 SPS on vs 488 off; halved inference batches cost more than the overlap saves when the policy
    and the envs share two cores). Unmeasured on a GPU machine, where inference leaves the cores free"""
    config: Optional[str] = None
    """a TOML preset (configs/*.toml) whose keys are these fields; the command line overrides it"""
    resume: Optional[str] = None
    """a checkpoint to continue: its args are the defaults, and logs and checkpoints go to its run dir"""
    runs_dir: str = "runs"
    """folder holding the run dirs `{env_id}__{exp_name}__{seed}__{time}`"""
    save_interval: int = 0
    """also save `checkpoint_{iteration}.pt` (kept) every this many iterations (0: none)"""
    save_minutes: float = 5.0
    """overwrite `checkpoint.pt` with the latest state every this many minutes (0: only at the end and on
    Ctrl-C), so a crash loses at most that much training"""
    target_return: Optional[float] = None
    """stop early once the mean raw game score of the last 20 games reaches this"""
    num_threads: Optional[int] = None
    """env pool worker threads in all (default: min(cores, num_envs)), split between the two pools"""
    torch_threads: Optional[int] = None
    """torch intra-op threads on CPU (default: torch's choice)"""
    profile_sync: bool = False
    """synchronize CUDA at profiler section boundaries (exact split, a little slower)"""

    env_id: str = "Pong-v5"
    """the Atari task id (rlfast.list_envs())"""
    total_timesteps: int = 10000000
    """total env steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel envs"""
    num_steps: int = 128
    """steps per env per rollout"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for generalized advantage estimation"""
    num_minibatches: int = 4
    """the number of minibatches per epoch"""
    update_epochs: int = 4
    """the number of epochs over each rollout"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss as in the PPO paper's code"""
    ent_coef: float = 0.01
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = 0.5
    """the maximum norm for gradient clipping"""
    target_kl: Optional[float] = None
    """stop an update's epochs early once the approx KL exceeds this"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's Nature CNN (Mnih et al. 2015) trunk shared by a linear actor and critic."""

    def __init__(self, in_channels: int, num_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )  # fmt: skip
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, 4, 84, 84] uint8 frames -> [N, 512] features (scaled to [0, 1] here)."""
        return self.network(x / 255.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, 4, 84, 84] uint8 -> V(x): [N]."""
        return self.critic(self.hidden(x)).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, 4, 84, 84] uint8 -> (action [N], logprob [N], entropy [N], value [N]); samples when action is None."""
        hidden = self.hidden(x)
        action, logprob, entropy = categorical(self.actor(hidden), action)
        return action, logprob, entropy, self.critic(hidden).squeeze(-1)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, 4, 84, 84] uint8 -> actions [N]: argmax when greedy, else sampled (scripts/evaluate.py's hook)."""
        logits = self.actor(self.hidden(x))
        return logits.argmax(-1) if greedy else categorical(logits)[0]


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> Agent:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this).

    ``obs_space``: the stacked observations, (4, 84, 84) uint8 (the CNN's Linear(3136) fixes 84x84).
    """
    if not isinstance(action_space, gym.spaces.Discrete):
        raise SystemExit(f"error: {args.env_id} has a {type(action_space).__name__} action space; needs Discrete")
    if tuple(obs_space.shape) != (STACK, 84, 84):
        raise SystemExit(
            f"error: {args.env_id} observations are {tuple(obs_space.shape)}; the Nature CNN needs "
            f"({STACK}, 84, 84) (grayscale 84x84 frames, {STACK} stacked)"
        )
    return Agent(STACK, int(action_space.n))


def eval_env_kwargs(args: Args) -> dict:
    """scripts/evaluate.py's env options: whole games (no episodic life), raw scores, stacks made by the pool."""
    return {"episodic_life": False, "reward_clip": False, "stack_num": STACK}


def minibatch_loss(agent: Agent, args: Args, mb: dict[str, torch.Tensor]) -> PPOLoss:
    """The PPO loss of one minibatch (rows [M, ...] of the flattened rollout)."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(
        newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
        clip_coef=args.clip_coef, ent_coef=args.ent_coef, vf_coef=args.vf_coef,
        clip_vloss=args.clip_vloss, norm_adv=args.norm_adv,
    )  # fmt: skip


@dataclass
class Part:
    """One pool and the device/host state of its envs (rows ``envs`` of the rollout)."""

    pool: rlfast.EnvPool
    envs: slice
    stack: rlfast.FrameStack
    games: GameStats
    ids: torch.Tensor
    """[n] env ids on the device (a sync pool returns its envs in id order)"""
    actions: torch.Tensor
    """[n] int64 host buffer the actions go back through (pinned with CUDA)"""


def make_parts(args: Args, env_seed: int, device: torch.device) -> list[Part]:
    """``num_envs`` envs as one sync pool, or two of half the envs (``--overlap``); env i gets ``env_seed + i``."""
    halves = 2 if args.overlap else 1
    n = args.num_envs // halves
    threads = args.num_threads or min(os.cpu_count() or 1, args.num_envs)
    split = [(threads + 1) // 2, max(threads // 2, 1)] if halves == 2 else [threads]
    parts = []
    for k in range(halves):
        pool = rlfast.make(args.env_id, n, num_threads=min(split[k], n), seed=env_seed + k * n, **TRAIN_ENV_KWARGS)
        stack = rlfast.FrameStack(n, STACK, pool.single_observation_space.shape, device=device)
        pinned = device.type == "cuda"
        parts.append(Part(pool, slice(k * n, (k + 1) * n), stack, GameStats(n), torch.arange(n, device=device),
                          torch.zeros(n, dtype=torch.int64, pin_memory=pinned)))  # fmt: skip
    return parts


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    if args.num_iterations < 1:
        raise SystemExit(f"error: total_timesteps {args.total_timesteps} < one rollout of {args.batch_size} steps")
    if args.batch_size % args.num_minibatches:
        raise SystemExit(
            f"error: batch size {args.batch_size} is not divisible by num_minibatches {args.num_minibatches}"
        )
    if args.overlap and args.num_envs % 2:
        raise SystemExit(f"error: --overlap splits the envs in two halves: num_envs {args.num_envs} must be even")
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    if args.cudagraphs and device.type != "cuda":
        raise SystemExit("error: --cudagraphs needs a CUDA device (none available, or --no-cuda); run without it")
    if ckpt is not None:
        run_dir = Path(args.resume).parent
    else:
        run_dir = Path(args.runs_dir) / run_dir_name(args.env_id, args.exp_name, args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    start_iteration = ckpt["iteration"] if ckpt else 0
    global_step = ckpt["global_step"] if ckpt else 0
    # A resumed run cannot restore the envs' state (the pool does not export it): it starts
    # fresh games from seeds it has not used yet.
    parts = make_parts(args, args.seed + start_iteration * args.num_envs, device)
    frame_shape = parts[0].pool.single_observation_space.shape
    obs_shape = (STACK * frame_shape[0], *frame_shape[1:])
    obs_space = gym.spaces.Box(0, 255, obs_shape, np.uint8)
    agent = make_agent(args, obs_space, parts[0].pool.single_action_space).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if ckpt is not None:
        restore(ckpt, {"agent": agent}, {"optimizer": optimizer})
    policy, loss_fn = agent.get_action_and_value, minibatch_loss
    if args.compile or args.cudagraphs:
        mode = "reduce-overhead" if args.cudagraphs else None
        policy, loss_fn = torch.compile(policy, mode=mode), torch.compile(loss_fn, mode=mode)
    total_steps = args.num_iterations * args.batch_size
    log = RunLog(run_dir, dataclasses.asdict(args), total_steps, start_step=global_step)

    def checkpoint(name: str, iteration: int, global_step: int) -> Path:
        state = make_checkpoint(
            script=SCRIPT, env_id=args.env_id, args=dataclasses.asdict(args), global_step=global_step,
            iteration=iteration, models={"agent": agent}, optimizers={"optimizer": optimizer},
            env_kwargs=TRAIN_ENV_KWARGS,
        )  # fmt: skip
        return save_checkpoint(run_dir / name, state)

    # Rollout storage on the training device (observations as uint8); game stats on the host, where they arrive.
    T, B = args.num_steps, args.num_envs
    obs = torch.zeros((T, B, *obs_shape), dtype=torch.uint8, device=device)
    actions = torch.zeros((T, B), dtype=torch.long, device=device)
    logprobs = torch.zeros((T, B), device=device)
    rewards = torch.zeros((T, B), device=device)
    dones = torch.zeros((T, B), device=device)
    values = torch.zeros((T, B), device=device)
    ep_done = torch.zeros((T, B), dtype=torch.bool)
    ep_return = torch.zeros((T, B))
    ep_length = torch.zeros((T, B), dtype=torch.int32)

    next_obs = torch.zeros((B, *obs_shape), dtype=torch.uint8, device=device)
    next_done = torch.zeros(B, dtype=torch.bool, device=device)
    for part in parts:
        frames, info = part.pool.reset()
        next_obs[part.envs] = part.stack.update(frames.to(device), part.ids, info["new_game"].to(device))

    def act(part: Part, step: int) -> None:
        """Stores the part's current obs at ``step``, samples its actions and sends them to its pool."""
        x = next_obs[part.envs]
        obs[step, part.envs] = x
        dones[step, part.envs] = next_done[part.envs]
        with timer("inference"), torch.no_grad():
            if args.cudagraphs:
                torch.compiler.cudagraph_mark_step_begin()
            action, logprob, _, value = policy(x)
            values[step, part.envs] = value
            actions[step, part.envs] = action
            logprobs[step, part.envs] = logprob
        with timer("env"):
            part.actions.copy_(action, non_blocking=True)
            if device.type == "cuda":
                torch.cuda.current_stream().synchronize()
            part.pool.send(part.actions)

    def receive(part: Part, step: int) -> None:
        """Collects the results of the part's actions of ``step``: reward, done, next obs, game stats."""
        with timer("env"):
            # o, r, term, trunc, info are views into the pool's ring, valid until its second recv after
            # this one; the copies below are queued first and the next act() synchronizes before send.
            o, r, term, trunc, info = part.pool.recv()
            rewards[step, part.envs].copy_(r, non_blocking=True)
            torch.logical_or(term.to(device, non_blocking=True), trunc.to(device, non_blocking=True),
                             out=next_done[part.envs])  # fmt: skip
            new_game = info["new_game"]
            frames = o.to(device, non_blocking=True)
            next_obs[part.envs] = part.stack.update(frames, part.ids, new_game.to(device, non_blocking=True))
            ended, score, length = part.games.update(info["reward"], trunc, info["game_over"], new_game)
            ep_done[step, part.envs] = ended
            ep_return[step, part.envs] = score
            ep_length[step, part.envs] = length

    timer = SectionTimer(("env", "inference", "train"), sync_cuda=args.profile_sync)
    start_step = global_step
    completed = (start_iteration, global_step)
    schedule = CheckpointSchedule(args.save_interval, args.save_minutes)
    print(f"run dir: {run_dir}  device: {device}  {' + '.join(repr(p.pool) for p in parts)}")
    try:
        for iteration in range(start_iteration + 1, args.num_iterations + 1):
            timer.start_iteration()
            iteration_step = global_step
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            # With two parts, one part's envs step while the other part is received and acted on.
            for step in range(T):
                for part in parts:
                    if step > 0:
                        receive(part, step - 1)
                    act(part, step)
            for part in parts:
                receive(part, T - 1)
            global_step += T * B

            with timer("train"):
                with torch.no_grad():
                    next_value = agent.get_value(next_obs)
                    advantages, returns = gae(
                        rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda
                    )
                batch = {
                    "obs": obs.reshape(-1, *obs_shape), "actions": actions.reshape(-1),
                    "logprobs": logprobs.reshape(-1), "advantages": advantages.reshape(-1),
                    "returns": returns.reshape(-1), "values": values.reshape(-1),
                }  # fmt: skip

                def step_loss(mb: dict[str, torch.Tensor]) -> PPOLoss:
                    if args.cudagraphs:
                        torch.compiler.cudagraph_mark_step_begin()
                    return loss_fn(agent, args, mb)

                stats = ppo_update(
                    step_loss, optimizer, agent.parameters(), batch,
                    update_epochs=args.update_epochs, num_minibatches=args.num_minibatches,
                    max_grad_norm=args.max_grad_norm, target_kl=args.target_kl,
                ).tolist()  # fmt: skip
                explained_var = explained_variance(batch["values"], batch["returns"]).item()

            log.episodes(ep_done, ep_return, ep_length, iteration_step)
            log.scalars(
                {"charts/learning_rate": optimizer.param_groups[0]["lr"],
                 **{f"losses/{k}": v for k, v in zip(LOSS_NAMES, stats)},
                 "losses/explained_variance": explained_var, **timer.end_iteration()},
                global_step,
            )  # fmt: skip
            done_now = iteration == args.num_iterations or (
                args.target_return is not None and log.window_full and log.mean_return >= args.target_return
            )
            log.progress(global_step, final=done_now)
            completed = (iteration, global_step)
            for name in schedule.due(iteration):
                checkpoint(name, *completed)
            if done_now:
                break
    except KeyboardInterrupt:
        # The latest weights (maybe mid-update) with the progress of the last completed iteration.
        path = checkpoint("checkpoint.pt", *completed)
        print(f"\ninterrupted at step {global_step:,}: saved {path}", flush=True)
        for part in parts:
            part.pool.close()
        log.close()
        return 130

    log.close()
    path = checkpoint("checkpoint.pt", *completed)
    print(timer.summary(steps=global_step - start_step))
    print(f"{global_step - start_step:,} steps in {log.elapsed():.1f} s; saved {path}")
    for part in parts:
        part.pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*parse_or_resume(Args, SCRIPT)))
