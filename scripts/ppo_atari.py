"""PPO for Atari on rlfast's env pool: CleanRL's ``ppo_atari_envpool.py``, with frames stacked on the device.

Same Nature CNN, hyperparameters and update as CleanRL (Pong-v5, 10M steps, 8 envs x 128
steps, ``episodic_life`` and ``reward_clip``), with the envs stepped by rlfast's C++ pool,
rollout storage on the training device and a profile of where the time goes. The run layer
(``rlfast/algos/run.py``) does what every trainer does alike.

    python scripts/ppo_atari.py                                   # CleanRL defaults: Pong-v5, 10M steps
    python scripts/ppo_atari.py --env-id Breakout-v5 --seed 2
    python scripts/ppo_atari.py --config configs/pong_5min.toml   # 16 cores + 1 GPU (see the file)
    python scripts/ppo_atari.py --recurrent lstm                  # CleanRL's ppo_atari_lstm.py
    python scripts/ppo_atari.py --resume runs/<run>/checkpoint.pt # continue that run (same run dir)
    torchrun --nproc-per-node 2 scripts/ppo_atari.py              # 2 ranks (GPUs) x 4 envs: same run as 1 x 8
    python scripts/evaluate.py runs/<run>                         # full games, raw scores
    tensorboard --logdir runs

Data path of a step: the pool (``stack_num=1``) writes the newest 84x84 frame of each env
into a pinned ring; one non-blocking copy takes it to the device, where ``rlfast.FrameStack``
keeps the 4-frame stacks and the uint8 rollout storage lives; the sampled actions come back
through a pinned host buffer (non-blocking copy, one sync, ``send``). With ``--overlap`` the
envs are two pools of ``num_envs / 2`` (env i keeps seed ``seed + i``): one half steps while
the policy acts on the other. Every env still gets each action from the current policy, so
the rollout is PPO's.

``--recurrent lstm`` (or ``gru``) is CleanRL's ``ppo_atari_lstm.py``: an LSTM of 128 units after the CNN
(``RecurrentNatureCNNAgent``), its state kept per env on the device and zeroed before an observation that
starts an episode (a life, under episodic life, as CleanRL's), the state at each rollout's start stored, and
minibatches of whole env rollouts unrolled from it; ``--num-envs`` must split into ``--num-minibatches``.

``charts/episodic_return`` is the raw score of a whole game (all lives, unclipped) and
``charts/episodic_length`` its agent steps, as CleanRL logs them (``rlfast/algos/episodes.py``);
the losses use the clipped, per-life rewards and dones, as CleanRL's. Episode ends use
next-step autoreset and CleanRL's done convention (``rlfast/algos/gae.py``).

Your own pixel env (a gymnasium ``"module:Env-v0"`` id, a ``rlfast.load_env`` header) trains the same way if it
gives uint8 frames of shape (1, 84, 84), grayscale and resized by the env itself: the frames are stacked as the
Atari games' are, a game is an episode (from a reset to its end), and no lives or reward clipping are added.
"""

from dataclasses import dataclass
from typing import Callable, Literal, Optional

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import rlfast
from rlfast.algos.distributed import World
from rlfast.algos.episodes import Episodes, game_starts
from rlfast.algos.flags import bounded
from rlfast.algos.gae import gae
from rlfast.algos.nets import NatureCNNAgent, RecurrentNatureCNNAgent, set_speed
from rlfast.algos.ppo import (LOSS_NAMES, PPOArgs, PPOLoss, Rollout, adapt_lr, anneal_lr, explained_variance,
                              normalize_advantages, ppo_loss, sequence_rows)  # fmt: skip
from rlfast.algos.run import Run, launch
from rlfast.algos.runargs import OWN_FAMILIES, CNNArgs, RunArgs, check_frames, usage_error

SCRIPT = "ppo_atari.py"
STACK = 4
"""frames per observation (the CNN's input channels); 1 with --recurrent, as CleanRL's ppo_atari_lstm"""
TRAIN_ENV_KWARGS = {"episodic_life": True, "reward_clip": True, "stack_num": 1}
"""CleanRL's envpool options; stack_num=1 because the stacks are built on the device"""
EVAL_ENV_KWARGS = {"episodic_life": False, "reward_clip": False}
"""scripts/evaluate.py's: whole games, raw scores, stacks (``Args.stack`` frames) made by the pool"""


@dataclass
class Args(PPOArgs, CNNArgs, RunArgs):
    """CleanRL's ppo_atari_envpool.py: PPOArgs' defaults (rlfast/algos/ppo.py) but for these."""

    exp_name: str = "ppo_atari"
    env_id: str = "Pong-v5"
    """the Atari task id (rlfast.list_envs()), or your own env giving uint8 (1, 84, 84) frames"""
    total_timesteps: int = 10000000
    num_envs: int = 8
    clip_coef: float = 0.1
    target_return: Optional[float] = None
    """stop early once the mean raw game score of the last 20 games reaches this"""
    num_threads: Optional[int] = None
    """env pool worker threads in all, split between the two pools with --overlap (None: min(cores, num_envs))"""
    overlap: bool = False
    """two pools of num_envs/2: one half steps while the policy acts on the other (num_envs must be even)"""
    recurrent: Literal["none", "lstm", "gru"] = "none"
    """a recurrent core after the CNN (lstm: CleanRL's ppo_atari_lstm, 128 units); minibatches are then whole env
    rollouts, num_envs / num_minibatches envs each"""
    frame_stack: Optional[int] = bounded(None, low=1, note="or left out")
    """frames per observation (None: 4, or 1 with --recurrent, as CleanRL's ppo_atari_lstm)"""

    @property
    def stack(self) -> int:
        return self.frame_stack or (1 if self.recurrent != "none" else STACK)

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.overlap and self.num_envs % 2:
            problems.append(f"--overlap splits the envs in two halves: --num-envs {self.num_envs} must be even")
        if self.recurrent != "none" and self.num_envs % self.num_minibatches:
            problems.append(f"--recurrent trains on whole env rollouts: --num-envs {self.num_envs} must split into "
                            f"--num-minibatches {self.num_minibatches}")  # fmt: skip
        return problems


Agent = NatureCNNAgent
"""CleanRL's Nature CNN trunk shared by a linear actor and critic (rlfast/algos/nets.py)."""


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this).

    ``obs_space``: the stacked observations, (``args.stack``, 84, 84) uint8 (the CNN's Linear(3136) fixes 84x84).
    """
    stack = args.stack
    if tuple(obs_space.shape) != (stack, 84, 84):
        raise usage_error(f"{args.env_id} observations are {tuple(obs_space.shape)}; the Nature CNN needs "
                          f"({stack}, 84, 84) (grayscale 84x84 frames, {stack} stacked)")  # fmt: skip
    if args.recurrent != "none":
        return RecurrentNatureCNNAgent(stack, int(action_space.n), cell=args.recurrent)
    return Agent(stack, int(action_space.n))


@dataclass
class EnvGroup:
    """One pool and the device/host state of its envs (rows ``envs`` of the rollout)."""

    pool: rlfast.EnvPool
    envs: slice
    stack: rlfast.FrameStack
    ids: torch.Tensor
    """[n] env ids on the device (a sync pool returns its envs in id order)"""


def make_groups(run: Run, args: Args, env_kwargs: dict) -> list[EnvGroup]:
    """The rank's envs as one sync pool, or two of half the envs (``--overlap``); env i gets ``env_seed + i``."""
    halves = 2 if args.overlap else 1
    n = run.local_num_envs // halves
    threads = args.num_threads or min(run.world.cpu_share(), run.local_num_envs)
    split = [(threads + 1) // 2, max(threads // 2, 1)] if halves == 2 else [threads]
    groups = []
    for k in range(halves):
        pool = run.make_env(n, num_threads=min(split[k], n), seed=run.env_seed + k * n, **env_kwargs)
        stack = rlfast.FrameStack(n, args.stack, pool.single_observation_space.shape, device=run.device)
        ids = torch.arange(n, device=run.device)
        groups.append(EnvGroup(pool, slice(k * n, (k + 1) * n), stack, ids))
    return groups


def minibatch_loss(agent: nn.Module, args: Args, mb: dict[str, torch.Tensor]) -> PPOLoss:
    """PPO's loss on one minibatch (rows of ``Rollout.batch``, advantages already normalized; recurrent: whole env
    rollouts, time-major, with their ``state`` at the rollout's start and episode ``starts``)."""
    if args.recurrent != "none":
        _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(mb["obs"], mb["state"], mb["starts"],
                                                                         mb["actions"])  # fmt: skip
    else:
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
                    clip_coef=args.clip_coef, ent_coef=args.ent_coef, vf_coef=args.vf_coef, clip_vloss=args.clip_vloss,
                    kl_coef=args.kl_coef, norm_adv=False)  # fmt: skip


def update(agent: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., PPOLoss], rollout: Rollout,
           next_obs: torch.Tensor, next_done: torch.Tensor, next_terminated: torch.Tensor, args: Args,
           world: World = World(), memory: Optional[dict[str, torch.Tensor]] = None) -> dict[str, float]:  # fmt: skip
    """One iteration's update, CleanRL's: GAE advantages, then ``update_epochs`` passes of shuffled minibatches.
    ``loss_fn`` is ``minibatch_loss`` (maybe compiled). Under torchrun a minibatch is global: ``world`` gives
    this rank's rows of it and their share, and sums the gradients (rlfast/algos/distributed.py).

    ``memory`` (recurrent): ``state`` [B, S, H] at the rollout's start, ``first_start`` [B] (whether its first
    observation starts an episode) and ``next_state`` of ``next_obs``; an observation starts an episode where the one
    before it was done (``rollout.dones``). Minibatches are then shuffled envs, each with all T steps (CleanRL's
    ppo_atari_lstm), a rank taking its own envs of each."""
    T, B = rollout.rewards.shape
    bootstrap = (rollout.terminations, next_terminated) if args.bootstrap_truncated else ()  # time limits: V(final)
    with torch.no_grad():
        if memory is None:
            next_value = agent.get_value(next_obs)
        else:
            next_value = agent.get_value(next_obs, memory["next_state"], rollout.dones[-1].bool())
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, next_value, next_done, args.gamma,
                                  args.gae_lambda, *bootstrap)  # fmt: skip
    batch = rollout.batch(advantages, returns)
    if memory is not None:
        batch["starts"] = torch.cat((memory["first_start"][None], rollout.dones[:-1].bool())).reshape(-1)
    units = (B if memory is not None else T * B) * world.world_size  # what is shuffled: envs or samples
    size = units // args.num_minibatches
    stats = []
    for _ in range(args.update_epochs):
        perm = torch.randperm(units, device=advantages.device)
        for mb_units, share in world.minibatches(perm, size, num_envs=B):
            mb_rows = mb_units if memory is None else sequence_rows(mb_units, T, B)
            mb = {key: v.index_select(0, mb_rows) for key, v in batch.items()}
            if memory is not None:
                mb["state"] = memory["state"].index_select(0, mb_units)
            if args.norm_adv:  # per minibatch, as CleanRL (over all ranks' rows of it)
                adv = mb["advantages"]
                mb["advantages"] = normalize_advantages(adv, mean_std=world.mean_std(adv, size * (T if memory else 1)))
            optimizer.zero_grad(set_to_none=True)
            if share > 0:
                out = loss_fn(agent, args, mb)
                (out.loss * share).backward()
                mb_stats = torch.stack(out[1:]).detach() * share
            else:  # torchrun: this rank holds none of the minibatch's rows, but joins its collectives
                mb_stats = torch.zeros(len(LOSS_NAMES), device=advantages.device)
            world.sync_grads(agent.parameters())
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
            stats.append(mb_stats)
        kl = torch.stack(stats[-args.num_minibatches :])[:, LOSS_NAMES.index("approx_kl")]
        if args.kl_adaptive_lr is not None:  # rl_games: the rate follows the epoch's mean KL
            adapt_lr(optimizer, world.sum(kl.mean()).item(), args.kl_adaptive_lr, args.lr_max)
        if args.target_kl is not None and world.sum(kl[-1].clone()).item() > args.target_kl:
            break  # CleanRL's early stop on the last minibatch's KL
    losses = world.sum(torch.stack(stats).mean(0)).tolist()
    explained = explained_variance(batch["values"], batch["returns"], world).item()
    scalars = {f"losses/{k}": v for k, v in zip(LOSS_NAMES, losses)}
    return {"charts/learning_rate": optimizer.param_groups[0]["lr"], **scalars, "losses/explained_variance": explained}


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    run = Run(args, SCRIPT, ckpt, iterations=args.num_iterations, steps_per_iteration=args.batch_size,
              families=("atari", *OWN_FAMILIES), data_parallel=True)  # fmt: skip
    device, timer = run.device, run.timer
    atari = rlfast.task_family(args.env_id) == "atari"  # else your own pixel env: its frames, its episodes
    env_kwargs = TRAIN_ENV_KWARGS if atari else {}
    groups = make_groups(run, args, env_kwargs)
    frame_shape = check_frames(SCRIPT, args.env_id, groups[0].pool.single_observation_space)
    obs_space = gym.spaces.Box(0, 255, (args.stack * frame_shape[0], *frame_shape[1:]), np.uint8)
    num_actions = int(groups[0].pool.single_action_space.n)
    agent = make_agent(args, obs_space, groups[0].pool.single_action_space).to(device)
    set_speed(agent, **run.speed)  # the CNN's speed options: the flags and --auto-speed's picks
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    # scripts/evaluate.py's envs: whole games on stacks the pool makes; your env's frames it stacks itself
    eval_kwargs = {**EVAL_ENV_KWARGS, "stack_num": args.stack} if atari else {"frame_stack": args.stack}
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer},
              env_kwargs=env_kwargs, eval_env_kwargs=eval_kwargs)  # fmt: skip
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)

    # Rollout storage on the training device (observations as uint8); whole games on the host, where they arrive.
    T, B = args.num_steps, run.local_num_envs  # this rank's envs (all of them without torchrun)
    rollout = Rollout(T, B, obs_space.shape, obs_dtype=torch.uint8, device=device)
    episodes = Episodes(B, atari=atari, rows=T)
    next_obs = torch.zeros((B, *obs_space.shape), dtype=torch.uint8, device=device)
    next_done = torch.zeros(B, dtype=torch.bool, device=device)
    next_terminated = torch.zeros(B, dtype=torch.bool, device=device)  # the part of next_done that is no time limit
    for group in groups:
        frames, info = group.pool.reset()
        next_obs[group.envs] = group.stack.update(frames.to(device), group.ids, game_starts(info).to(device))
    memory = None  # --recurrent: each env's state before next_obs, and at the rollout's start with whether it starts there
    if args.recurrent != "none":
        memory = {"next_state": agent.initial_state(B, device), "state": agent.initial_state(B, device),
                  "first_start": torch.ones(B, dtype=torch.bool, device=device)}  # fmt: skip

    def act(group: EnvGroup, step: int, noise: torch.Tensor) -> None:
        """Stores the group's current obs at ``step``, samples its actions (with the step's ``noise`` of the rank's
        envs, ``Run.action_noise``) and sends them to its pool."""
        x = next_obs[group.envs]
        with timer("inference"), torch.no_grad():
            if memory is None:
                action, logprob, _, value = policy(x, None, noise[group.envs])
            else:  # the state goes on from each env's last step, zeroed where x follows an episode's last obs
                start = rollout.dones[step - 1, group.envs].bool() if step else memory["first_start"][group.envs]
                action, logprob, _, value, state = policy(x, memory["next_state"][group.envs], start, None,
                                                          noise[group.envs])  # fmt: skip
                memory["next_state"][group.envs] = state
            rollout.store((step, group.envs), obs=x, dones=next_done[group.envs], actions=action, logprobs=logprob,
                          values=value, terminations=next_terminated[group.envs])  # fmt: skip
        with timer("env"):
            group.pool.send(action)

    def receive(group: EnvGroup, step: int) -> None:
        """Collects the results of the group's actions of ``step``: reward, done, next obs, game stats."""
        with timer("env"):
            # o, r, term, trunc, info are views into the pool's ring, valid until its second recv after
            # this one; the copies below are queued first and the next act() synchronizes before send.
            o, r, term, trunc, info = group.pool.recv()
            rollout.store((step, group.envs), rewards=r)
            torch.logical_or(term.to(device, non_blocking=True), trunc.to(device, non_blocking=True),
                             out=next_done[group.envs])  # fmt: skip
            next_terminated[group.envs] = term.to(device, non_blocking=True)
            new_game = game_starts(info)
            frames = o.to(device, non_blocking=True)
            next_obs[group.envs] = group.stack.update(frames, group.ids, new_game.to(device, non_blocking=True))
            episodes.record(step, term, trunc, info, group.envs)

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            if memory is not None:  # the state each env's rollout starts from: the update unrolls from it
                memory["state"].copy_(memory["next_state"])
            # With two groups, one group's envs step while the other group is received and acted on.
            for step in range(T):
                noise = run.action_noise(num_actions)
                for group in groups:
                    if step > 0:
                        receive(group, step - 1)
                    act(group, step, noise)
            for group in groups:
                receive(group, T - 1)

            with timer("train"):
                scalars = update(agent, optimizer, loss_fn, rollout, next_obs, next_done, next_terminated, args,
                                 run.world, memory)  # fmt: skip
            if memory is not None:  # the next rollout's first obs follows this one's last
                memory["first_start"].copy_(rollout.dones[-1])
            run.end_iteration(args.batch_size, scalars, episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
