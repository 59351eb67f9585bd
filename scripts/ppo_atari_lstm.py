"""Recurrent PPO for Atari on rlfast's env pool: CleanRL's ``ppo_atari_lstm.py``.

CleanRL's network, hyperparameters and update (Pong-v5, 10M steps, 8 envs x 128 steps, one frame per
observation, ``episodic_life`` and ``reward_clip``): the Nature CNN, an LSTM of 128 units after it
(``RecurrentNatureCNNAgent``, rlfast/algos/nets.py; ``--recurrent gru`` for a GRU), a linear actor and critic on
its output. Each env's state lives on the training device and is zeroed before an observation that starts an
episode (a life, under episodic life, as CleanRL's ``1 - done``); the state at each rollout's start is kept, and
the update's minibatches are whole env rollouts (``--num-envs`` / ``--num-minibatches`` envs each, shuffled)
unrolled from it. Under torchrun each rank takes its own envs of each minibatch. The feed-forward trainer,
``scripts/ppo_atari.py``, shares everything else.

    python scripts/ppo_atari_lstm.py                               # CleanRL defaults: Pong-v5, 10M steps
    python scripts/ppo_atari_lstm.py --env-id Breakout-v5 --recurrent gru
    python scripts/ppo_atari_lstm.py --resume runs/<run>/checkpoint.pt
    python scripts/evaluate.py runs/<run>                          # carries the state through whole games

``charts/episodic_return`` is the raw score of a whole game, as in ``ppo_atari.py``.
"""

from dataclasses import dataclass
from typing import Callable, Literal, Optional

import gymnasium as gym
import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.distributed import World
from rlfast.algos.flags import bounded
from rlfast.algos.gae import gae
from rlfast.algos.nets import RecurrentNatureCNNAgent
from rlfast.algos.speed import set_speed
from rlfast.algos.ppo import (LOSS_NAMES, PPOArgs, PPOLoss, Rollout, adapt_lr, anneal_lr, entropy_coef,
                              explained_variance, normalize_advantages, ppo_loss, sequence_rows,
                              take_rows)  # fmt: skip
from rlfast.algos.pixels import PixelEnvs
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import OWN_FAMILIES, CNNArgs, FrameNormArgs, RunArgs, usage_error

SCRIPT = "ppo_atari_lstm.py"
TRAIN_ENV_KWARGS = {"episodic_life": True, "reward_clip": True, "stack_num": 1}
"""CleanRL's envpool options; stack_num=1 because the stacks are built on the device (rlfast/algos/pixels.py)"""
EVAL_ENV_KWARGS = {"episodic_life": False, "reward_clip": False}
"""scripts/evaluate.py's: whole games, raw scores, stacks (``Args.stack`` frames) made by the pool"""


@dataclass
class Args(PPOArgs, CNNArgs, FrameNormArgs, RunArgs):
    """CleanRL's ppo_atari_lstm.py: PPOArgs' defaults (rlfast/algos/ppo.py) but for these."""

    exp_name: str = "ppo_atari_lstm"
    env_id: str = "Pong-v5"
    """the Atari task id (rlfast.list_envs()), or your own env giving uint8 (1, 84, 84) frames"""
    total_timesteps: int = 10000000
    num_envs: int = 8
    clip_coef: float = 0.1
    target_return: Optional[float] = None
    """stop early once the mean raw game score of the last 20 games reaches this"""
    num_threads: Optional[int] = None
    """env pool worker threads (None: min(cores, num_envs))"""
    recurrent: Literal["lstm", "gru"] = "lstm"
    """the recurrent core after the CNN, 128 units (lstm: CleanRL's)"""
    frame_stack: Optional[int] = bounded(None, low=1, note="or left out")
    """frames per observation (None: 1, as CleanRL's ppo_atari_lstm)"""

    @property
    def stack(self) -> int:
        return self.frame_stack or 1

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.num_envs % self.num_minibatches:
            problems.append(f"minibatches are whole env rollouts: --num-envs {self.num_envs} must split into "
                            f"--num-minibatches {self.num_minibatches}")  # fmt: skip
        return problems


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this); ``obs_space``:
    (``args.stack``, 84, 84) uint8 (the CNN's Linear(3136) fixes 84x84)."""
    if tuple(obs_space.shape) != (args.stack, 84, 84):
        raise usage_error(f"{args.env_id} observations are {tuple(obs_space.shape)}; the Nature CNN needs "
                          f"({args.stack}, 84, 84) (grayscale 84x84 frames, {args.stack} stacked)")  # fmt: skip
    return RecurrentNatureCNNAgent(args.stack, int(action_space.n), cell=args.recurrent,
                                   normalize=args.normalize_frames)


def minibatch_loss(agent: nn.Module, args: Args, mb: dict[str, torch.Tensor], ent_coef: torch.Tensor) -> PPOLoss:
    """PPO's loss on one minibatch: whole env rollouts, time-major, unrolled from their ``state`` at the rollout's
    start with their episode ``starts`` (advantages already normalized); ``ent_coef``: this update's entropy weight."""
    _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(mb["obs"], mb["state"], mb["starts"],
                                                                     mb["actions"])  # fmt: skip
    return ppo_loss(newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
                    clip_coef=args.clip_coef, ent_coef=ent_coef, vf_coef=args.vf_coef, clip_vloss=args.clip_vloss,
                    kl_coef=args.kl_coef, norm_adv=False)  # fmt: skip


def update(agent: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., PPOLoss], rollout: Rollout,
           memory: dict[str, torch.Tensor], next_obs: torch.Tensor, next_done: torch.Tensor,
           next_terminated: torch.Tensor, args: Args, world: World = World(),
           ent_coef: Optional[float] = None) -> dict[str, float]:  # fmt: skip
    """One iteration's update, CleanRL's: GAE advantages, then ``update_epochs`` passes over shuffled envs, each
    minibatch their whole rollouts (a rank takes its own envs of each). ``memory``: ``state`` [B, S, H] at the
    rollout's start, ``first_start`` [B] (whether its first observation starts an episode) and ``next_state`` of
    ``next_obs``; an observation starts an episode where the one before it was done (``rollout.dones``).
    ``ent_coef``: the entropy weight (``entropy_coef``; None: ``args.ent_coef``)."""
    T, B = rollout.rewards.shape
    bootstrap = (rollout.terminations, next_terminated) if args.bootstrap_truncated else ()  # time limits: V(final)
    with torch.no_grad():
        next_value = agent.get_value(next_obs, memory["next_state"], rollout.dones[-1].bool())
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, next_value, next_done, args.gamma,
                                  args.gae_lambda, *bootstrap)  # fmt: skip
    batch = rollout.batch(advantages, returns)
    batch["starts"] = torch.cat((memory["first_start"][None], rollout.dones[:-1].bool())).reshape(-1)
    if args.normalize_frames:  # once for the epochs (the statistics change after the update)
        batch["obs"] = agent.network.normalized(batch["obs"])
    units = B * world.world_size  # what is shuffled: envs
    size = units // args.num_minibatches
    ent_coef = args.ent_coef if ent_coef is None else ent_coef
    ent_weight = torch.full((), ent_coef, device=advantages.device)  # a fill: no copy from the host
    stats = []
    for _ in range(args.update_epochs):
        perm = torch.randperm(units, device=advantages.device)
        for mb_envs, share in world.minibatches(perm, size, num_envs=B):
            mb = {key: take_rows(v, sequence_rows(mb_envs, T, B)) for key, v in batch.items()}
            mb["state"] = memory["state"].index_select(0, mb_envs)
            if args.norm_adv:  # per minibatch, as CleanRL (over all ranks' rows of it)
                adv = mb["advantages"]
                mb["advantages"] = normalize_advantages(adv, mean_std=world.mean_std(adv, size * T))
            optimizer.zero_grad(set_to_none=True)
            if share > 0:
                out = loss_fn(agent, args, mb, ent_weight)
                (out.loss * share).backward()
                mb_stats = torch.stack(out[1:]).detach() * share
            else:  # torchrun: this rank holds none of the minibatch's envs, but joins its collectives
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
                     args.num_threads, rows=T)
    agent = make_agent(args, envs.observation_space, envs.action_space).to(device)
    set_speed(agent, **run.speed)  # the CNN's speed options (the recurrent core stays float32)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer},
              env_kwargs=envs.env_kwargs, eval_env_kwargs=envs.eval_env_kwargs)  # fmt: skip
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)  # torch.compile: --compile

    rollout = Rollout(T, B, envs.observation_space.shape, obs_dtype=torch.uint8, device=device,
                      obs_memory_format=envs.memory_format)
    next_obs = envs.reset()
    if args.normalize_frames and ckpt is None:  # the first rollout's statistics: the frames at the reset
        agent.network.observe(next_obs, run.world.sum)
    next_done = torch.zeros(B, dtype=torch.bool, device=device)
    next_terminated = torch.zeros(B, dtype=torch.bool, device=device)  # the part of next_done that is no time limit
    # Each env's state before next_obs; the states at the rollout's start, and whether next_obs starts an episode.
    memory = {"next_state": agent.initial_state(B, device), "state": agent.initial_state(B, device),
              "first_start": torch.ones(B, dtype=torch.bool, device=device)}  # fmt: skip

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            memory["state"].copy_(memory["next_state"])  # the state each env's rollout starts from
            for step in range(T):
                noise = run.action_noise(int(envs.action_space.n))  # the step's sampling noise (Run.action_noise)
                with timer("inference"), torch.no_grad():
                    # the state goes on from each env's last step, zeroed where next_obs follows an episode's end
                    start = rollout.dones[step - 1].bool() if step else memory["first_start"]
                    action, logprob, _, value, state = policy(next_obs, memory["next_state"], start, None, noise)
                    memory["next_state"][:] = state
                    rollout.store(step, obs=next_obs, dones=next_done, actions=action, logprobs=logprob, values=value,
                                  terminations=next_terminated)  # fmt: skip
                with timer("env"):
                    envs.send(action)
                    next_obs, reward, next_done, next_terminated = envs.recv(step)
                    rollout.store(step, rewards=reward)

            with timer("train"):
                scalars = update(agent, optimizer, loss_fn, rollout, memory, next_obs, next_done, next_terminated,
                                 args, run.world, entropy_coef(args, (iteration - 1) * args.batch_size))  # fmt: skip
                if args.normalize_frames:  # the next rollout and update normalize with these frames counted
                    agent.network.observe(rollout.obs, run.world.sum)
            memory["first_start"].copy_(rollout.dones[-1])  # the next rollout's first obs follows this one's last
            run.end_iteration(args.batch_size, scalars, envs.episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
