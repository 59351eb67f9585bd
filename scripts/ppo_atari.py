"""PPO for Atari on rlfast's env pool: CleanRL's ``ppo_atari_envpool.py``, with frames stacked on the device.

Same Nature CNN, hyperparameters and update as CleanRL (Pong-v5, 10M steps, 8 envs x 128
steps, ``episodic_life`` and ``reward_clip``), with the envs stepped by rlfast's C++ pool,
rollout storage on the training device and a profile of where the time goes. The run layer
(``rlfast/algos/run.py``) does what every trainer does alike. The recurrent variant, CleanRL's
``ppo_atari_lstm.py``, is ``scripts/ppo_atari_lstm.py``.

    python scripts/ppo_atari.py                                   # CleanRL defaults: Pong-v5, 10M steps
    python scripts/ppo_atari.py --env-id Breakout-v5 --seed 2
    python scripts/ppo_atari.py --config configs/pong_5min.toml   # 16 cores + 1 GPU (see the file)
    python scripts/ppo_atari.py --resume runs/<run>/checkpoint.pt # continue that run (same run dir)
    torchrun --nproc-per-node 2 scripts/ppo_atari.py              # 2 ranks (GPUs) x 4 envs: same run as 1 x 8
    python scripts/evaluate.py runs/<run>                         # full games, raw scores
    tensorboard --logdir runs

Data path of a step (``rlfast/algos/pixels.py``): the pool writes the newest 84x84 frame of each env into a
pinned ring; one non-blocking copy takes it to the device, where ``rlfast.FrameStack`` keeps the 4-frame stacks
and the uint8 rollout storage lives; the sampled actions go back to the pool's ``send`` (one sync).

``charts/episodic_return`` is the raw score of a whole game (all lives, unclipped) and
``charts/episodic_length`` its agent steps, as CleanRL logs them (``rlfast/algos/episodes.py``);
the losses use the clipped, per-life rewards and dones, as CleanRL's. Episode ends use
next-step autoreset and CleanRL's done convention (``rlfast/algos/gae.py``).

Your own pixel env (a gymnasium ``"module:Env-v0"`` id, a ``rlfast.load_env`` header) trains the same way if it
gives uint8 frames of shape (1, 84, 84), grayscale and resized by the env itself: the frames are stacked as the
Atari games' are, a game is an episode (from a reset to its end), and no lives or reward clipping are added.
"""

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.distributed import World
from rlfast.algos.flags import bounded
from rlfast.algos.gae import gae
from rlfast.algos.nets import NatureCNNAgent
from rlfast.algos.speed import set_speed
from rlfast.algos.ppo import (LOSS_NAMES, PPOArgs, PPOLoss, Rollout, adapt_lr, anneal_lr, entropy_coef,
                              explained_variance, normalize_advantages, ppo_loss, take_rows)  # fmt: skip
from rlfast.algos.pixels import PixelEnvs
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import OWN_FAMILIES, CNNArgs, EnvGroupArgs, FrameNormArgs, RunArgs, usage_error

SCRIPT = "ppo_atari.py"
TRAIN_ENV_KWARGS = {"episodic_life": True, "reward_clip": True, "stack_num": 1}
"""CleanRL's envpool options; stack_num=1 because the stacks are built on the device (rlfast/algos/pixels.py)"""
EVAL_ENV_KWARGS = {"episodic_life": False, "reward_clip": False}
"""scripts/evaluate.py's: whole games, raw scores, stacks (``Args.stack`` frames) made by the pool"""


@dataclass
class Args(PPOArgs, CNNArgs, FrameNormArgs, EnvGroupArgs, RunArgs):
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
    """env pool worker threads (None: min(cores, num_envs))"""
    frame_stack: Optional[int] = bounded(None, low=1, note="or left out")
    """frames per observation (None: 4, CleanRL's)"""
    cnn_width: float = bounded(1.0, low=0, low_open=True)
    """scale the Nature CNN's channels and hidden units (1: CleanRL's 32-64-64-512; 0.5: 16-32-32-256, about a
    third of the multiply-adds, for a CPU: configs/pong_cpu.toml)"""
    frame_size: int = bounded(84, low=36)
    """frames resized to this square (84: CleanRL's; 64: the CNN's last feature map 4x4 instead of 7x7, about
    half its multiply-adds); an env of your own must give frames of this size"""

    @property
    def stack(self) -> int:
        return self.frame_stack or 4


Agent = NatureCNNAgent
"""CleanRL's Nature CNN trunk shared by a linear actor and critic (rlfast/algos/nets.py)."""


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """``Agent`` for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this); ``obs_space``:
    (``args.stack``, size, size) uint8 stacks of ``args.frame_size``-square frames."""
    size = args.frame_size
    if tuple(obs_space.shape) != (args.stack, size, size):
        raise usage_error(f"{args.env_id} observations are {tuple(obs_space.shape)}; the Nature CNN needs "
                          f"({args.stack}, {size}, {size}) (grayscale {size}x{size} frames, {args.stack} "
                          "stacked)")  # fmt: skip
    return Agent(args.stack, int(action_space.n), width=args.cnn_width, frame_size=size,
                 normalize=args.normalize_frames)


def minibatch_loss(agent: nn.Module, args: Args, mb: dict[str, torch.Tensor], ent_coef: torch.Tensor) -> PPOLoss:
    """PPO's loss on one minibatch (rows of ``Rollout.batch``, advantages already normalized); ``ent_coef``: the
    entropy bonus's weight this update (a tensor: a schedule does not recompile a compiled loss)."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
                    clip_coef=args.clip_coef, ent_coef=ent_coef, vf_coef=args.vf_coef, clip_vloss=args.clip_vloss,
                    kl_coef=args.kl_coef, norm_adv=False)  # fmt: skip


def update(agent: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., PPOLoss], rollout: Rollout,
           next_obs: torch.Tensor, next_done: torch.Tensor, next_terminated: torch.Tensor, args: Args,
           world: World = World(), ent_coef: Optional[float] = None) -> dict[str, float]:  # fmt: skip
    """One iteration's update, CleanRL's: GAE advantages, then ``update_epochs`` passes of shuffled minibatches.
    ``loss_fn`` is ``minibatch_loss`` (maybe compiled). Under torchrun a minibatch is global: ``world`` gives
    this rank's rows of it and their share, and sums the gradients (rlfast/algos/distributed.py). ``ent_coef``:
    the entropy weight (``entropy_coef``; None: ``args.ent_coef``)."""
    T, B = rollout.rewards.shape
    bootstrap = (rollout.terminations, next_terminated) if args.bootstrap_truncated else ()  # time limits: V(final)
    with torch.no_grad():
        next_value = agent.get_value(next_obs)
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, next_value, next_done, args.gamma,
                                  args.gae_lambda, *bootstrap)  # fmt: skip
    batch = rollout.batch(advantages, returns)
    if args.normalize_frames:  # once for the epochs (the statistics change after the update)
        batch["obs"] = agent.network.normalized(batch["obs"])
    rows = T * B * world.world_size
    size = rows // args.num_minibatches
    ent_coef = args.ent_coef if ent_coef is None else ent_coef
    ent_weight = torch.full((), ent_coef, device=advantages.device)  # a fill: no copy from the host
    stats = []
    for _ in range(args.update_epochs):
        perm = torch.randperm(rows, device=advantages.device)
        for mb_rows, share in world.minibatches(perm, size, num_envs=B):
            mb = {key: take_rows(v, mb_rows) for key, v in batch.items()}
            if args.norm_adv:  # per minibatch, as CleanRL (over all ranks' rows of it)
                adv = mb["advantages"]
                mb["advantages"] = normalize_advantages(adv, mean_std=world.mean_std(adv, size))
            optimizer.zero_grad(set_to_none=True)
            if share > 0:
                out = loss_fn(agent, args, mb, ent_weight)
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
    return {"charts/learning_rate": optimizer.param_groups[0]["lr"], "charts/ent_coef": ent_coef, **scalars,
            "losses/explained_variance": explained}


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    run = Run(args, SCRIPT, ckpt, iterations=args.num_iterations, steps_per_iteration=args.batch_size,
              families=("atari", *OWN_FAMILIES), data_parallel=True)  # fmt: skip
    device, timer = run.device, run.timer
    T, B = args.num_steps, run.local_num_envs  # this rank's envs (all of them without torchrun)
    envs = PixelEnvs(run, SCRIPT, args.env_id, B, args.stack, TRAIN_ENV_KWARGS, EVAL_ENV_KWARGS,
                     args.num_threads, rows=T, frame_size=args.frame_size, groups=args.env_groups)
    agent = make_agent(args, envs.observation_space, envs.action_space).to(device)
    set_speed(agent, **run.speed)  # the CNN's speed options: the flags and --auto-speed's picks
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer},
              env_kwargs=envs.env_kwargs, eval_env_kwargs=envs.eval_env_kwargs)  # fmt: skip
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)  # torch.compile: --compile

    # Rollout storage on the training device (observations as uint8)
    rollout = Rollout(T, B, envs.observation_space.shape, obs_dtype=torch.uint8, device=device,
                      obs_memory_format=envs.memory_format)
    next_obs = envs.reset()
    if args.normalize_frames and ckpt is None:  # the first rollout's statistics: the frames at the reset
        agent.network.observe(next_obs, run.world.sum)
    next_done = torch.zeros(B, dtype=torch.bool, device=device)
    next_terminated = torch.zeros(B, dtype=torch.bool, device=device)  # the part of next_done that is no time limit

    def receive(step: int, g: slice) -> None:
        """The results of the envs ``g``'s step ``step``: their rewards into the rollout, their next observations."""
        next_obs[g], rollout.rewards[step, g], next_done[g], next_terminated[g] = envs.recv(step, g)

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            with envs.acting_threads():
                for step in range(T):
                    noise = run.action_noise(int(envs.action_space.n))  # the step's sampling noise (Run.action_noise)
                    for g in envs.groups:  # slices of the envs (--env-groups): a group acts while the one before steps
                        if step > 0:
                            with timer("env"):
                                receive(step - 1, g)
                        with timer("inference"), torch.no_grad():
                            action, logprob, _, value = policy(next_obs[g], None, noise[g])
                            rollout.store((step, g), obs=next_obs[g], dones=next_done[g], actions=action,
                                          logprobs=logprob, values=value, terminations=next_terminated[g])  # fmt: skip
                        with timer("env"):
                            envs.send(action, g)
                with timer("env"):
                    for g in envs.groups:
                        receive(T - 1, g)

            with timer("train"):
                scalars = update(agent, optimizer, loss_fn, rollout, next_obs, next_done, next_terminated, args,
                                 run.world, entropy_coef(args, (iteration - 1) * args.batch_size))  # fmt: skip
                if args.normalize_frames:  # the next rollout and update normalize with these frames counted
                    agent.network.observe(rollout.obs, run.world.sum)
            run.end_iteration(args.batch_size, scalars, envs.episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
