"""PPO for discrete-action classic control (CartPole, Acrobot, MountainCar) on rlfast's env pool.

CleanRL's ``ppo.py``: same network, hyperparameters and update, with the envs stepped by
rlfast's C++ pool, rollout storage on the training device and a profile of where the time
goes. The run layer (``rlfast/algos/run.py``) does what every trainer does alike: flags and
their checks, seeding, device, run dir, tensorboard, checkpoints, --resume, Ctrl-C.

    python scripts/ppo.py                                    # CleanRL defaults: CartPole-v1, 500k steps
    python scripts/ppo.py --config configs/cartpole.toml --seed 2
    python scripts/ppo.py --resume runs/<run>/checkpoint.pt  # continue that run (same run dir)
    torchrun --nproc-per-node 2 scripts/ppo.py               # 2 ranks x 2 envs: the same run as 1 x 4
    python scripts/evaluate.py runs/<run>
    tensorboard --logdir runs

Episode ends use next-step autoreset and CleanRL's ``next_done = terminated | truncated``
convention; ``rlfast/algos/gae.py`` explains what that does to the reset step.
"""

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.distributed import World
from rlfast.algos.episodes import Episodes
from rlfast.algos.gae import gae
from rlfast.algos.nets import MLPAgent
from rlfast.algos.ppo import (LOSS_NAMES, PPOArgs, PPOLoss, Rollout, adapt_lr, anneal_lr, entropy_coef,
                              explained_variance, normalize_advantages, ppo_loss)  # fmt: skip
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import RunArgs, usage_error, vector_obs_size

SCRIPT = "ppo.py"


@dataclass
class Args(PPOArgs, RunArgs):
    """CleanRL's ppo.py: PPOArgs' defaults (rlfast/algos/ppo.py) on CartPole-v1 with 4 envs."""

    exp_name: str = "ppo"
    env_id: str = "CartPole-v1"
    """the task id: a classic control task with discrete actions (rlfast.list_envs())"""
    total_timesteps: int = 500000
    num_envs: int = 4


Agent = MLPAgent
"""CleanRL's separate 64-64 tanh actor and critic (rlfast/algos/nets.py)."""


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> Agent:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this)."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise usage_error(f"{args.env_id} has a {type(action_space).__name__} action space; ppo.py needs Discrete "
                          "(scripts/ppo_continuous.py trains Box actions)")  # fmt: skip
    return Agent(vector_obs_size("ppo.py", args.env_id, obs_space), int(action_space.n))


def minibatch_loss(agent: Agent, args: Args, mb: dict[str, torch.Tensor], ent_coef: torch.Tensor) -> PPOLoss:
    """PPO's loss on one minibatch (rows of ``Rollout.batch``, advantages already normalized); ``ent_coef``: the
    entropy bonus's weight this update (a tensor: a schedule does not recompile a compiled loss)."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
                    clip_coef=args.clip_coef, ent_coef=ent_coef, vf_coef=args.vf_coef, clip_vloss=args.clip_vloss,
                    kl_coef=args.kl_coef, norm_adv=False)  # fmt: skip


def update(agent: Agent, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., PPOLoss], rollout: Rollout,
           next_obs: torch.Tensor, next_done: torch.Tensor, next_terminated: torch.Tensor, args: Args,
           world: World = World(), ent_coef: Optional[float] = None) -> dict[str, float]:  # fmt: skip
    """One iteration's update, CleanRL's: GAE advantages (with ``--bootstrap-truncated``, GAE tells terminations,
    ``rollout.terminations`` and ``next_terminated``, from time limits), then ``update_epochs`` passes of shuffled
    minibatches. ``loss_fn`` is ``minibatch_loss`` (maybe compiled). Under torchrun a minibatch is global: ``world``
    gives this rank's rows of it and their share, and sums the gradients (rlfast/algos/distributed.py). ``ent_coef``:
    the entropy weight (``entropy_coef``; None: ``args.ent_coef``)."""
    bootstrap = (rollout.terminations, next_terminated) if args.bootstrap_truncated else ()
    with torch.no_grad():
        next_value = agent.get_value(next_obs)
        advantages, returns = gae(rollout.rewards, rollout.values, rollout.dones, next_value, next_done, args.gamma,
                                  args.gae_lambda, *bootstrap)  # fmt: skip
    batch = rollout.batch(advantages, returns)
    rows = advantages.numel() * world.world_size
    size = rows // args.num_minibatches
    ent_coef = args.ent_coef if ent_coef is None else ent_coef
    ent_weight = torch.full((), ent_coef, device=advantages.device)  # a fill: no copy from the host
    stats = []
    for _ in range(args.update_epochs):
        perm = torch.randperm(rows, device=advantages.device)
        for mb_rows, share in world.minibatches(perm, size, num_envs=advantages.shape[1]):
            mb = {key: v.index_select(0, mb_rows) for key, v in batch.items()}
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
              families=("classic_control", "python", "custom"), data_parallel=True)  # fmt: skip
    device, timer = run.device, run.timer
    envs = run.make_env(run.local_num_envs, num_threads=args.num_threads)
    agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer})
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)

    T, B = args.num_steps, run.local_num_envs  # this rank's envs (all of them without torchrun)
    num_actions = int(envs.single_action_space.n)
    obs_shape = envs.single_observation_space.shape
    rollout = Rollout(T, B, obs_shape, device=device)
    episodes = Episodes(B, atari=False, rows=T)  # on the host, where the pool writes them
    next_obs = torch.zeros((B, *obs_shape), device=device)
    next_done = torch.zeros(B, device=device)
    next_terminated = torch.zeros(B, device=device)  # the part of next_done that is not a time limit
    view, _ = envs.reset()
    next_obs.copy_(view)

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            for step in range(T):
                with timer("inference"), torch.no_grad():
                    action, logprob, _, value = policy(next_obs, None, run.action_noise(num_actions))
                    rollout.store(step, obs=next_obs, dones=next_done, terminations=next_terminated, actions=action,
                                  logprobs=logprob, values=value)  # fmt: skip
                with timer("env"):
                    o, r, terminated, truncated, info = envs.step(action)
                    # o, r, info are views into the pool's ring, valid until the second step after this
                    # one; the next step's action.cpu() waits for these (stream-ordered) copies.
                    next_obs.copy_(o, non_blocking=True)
                    rollout.store(step, rewards=r)
                    ended = episodes.record(step, terminated, truncated, info)
                    next_done.copy_(ended, non_blocking=True)
                    next_terminated.copy_(terminated, non_blocking=True)

            with timer("train"):
                scalars = update(agent, optimizer, loss_fn, rollout, next_obs, next_done, next_terminated, args,
                                 run.world, entropy_coef(args, (iteration - 1) * args.batch_size))  # fmt: skip
            run.end_iteration(args.batch_size, scalars, episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
