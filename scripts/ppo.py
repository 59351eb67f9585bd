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

import sys
from dataclasses import dataclass
from typing import Optional

import gymnasium as gym
import numpy as np
import torch

from rlfast.algos.config import parse_or_resume
from rlfast.algos.nets import MLPAgent
from rlfast.algos.ppo import PPOArgs, Rollout, anneal_lr, learn, minibatch_loss
from rlfast.algos.run import Run, fail

SCRIPT = "ppo.py"


@dataclass
class Args(PPOArgs):
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
        raise fail(f"{args.env_id} has a {type(action_space).__name__} action space; ppo.py needs Discrete "
                   "(scripts/ppo_continuous.py trains Box actions)")  # fmt: skip
    return Agent(int(np.prod(obs_space.shape)), int(action_space.n))


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    run = Run(args, SCRIPT, ckpt, iterations=args.num_iterations, steps_per_iteration=args.batch_size,
              families=("classic_control",), data_parallel=True)  # fmt: skip
    device, timer = run.device, run.timer
    envs = run.make_env(run.local_num_envs, num_threads=args.num_threads)
    agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer})
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)

    T, B = args.num_steps, run.local_num_envs  # this rank's envs (all of them without torchrun)
    num_actions = int(envs.single_action_space.n)
    obs_shape = envs.single_observation_space.shape
    rollout = Rollout(T, B, obs_shape, device=device)
    next_obs = torch.zeros((B, *obs_shape), device=device)
    next_done = torch.zeros(B, device=device)
    view, _ = envs.reset()
    next_obs.copy_(view)

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            for step in range(T):
                with timer("inference"), torch.no_grad():
                    action, logprob, _, value = policy(next_obs, None, run.action_noise(num_actions))
                    rollout.store(step, obs=next_obs, dones=next_done, actions=action, logprobs=logprob, values=value)
                with timer("env"):
                    o, r, terminated, truncated, info = envs.step(action)
                    # o, r, info are views into the pool's ring, valid until the second step after this
                    # one; the next step's action.cpu() waits for these (stream-ordered) copies.
                    next_obs.copy_(o, non_blocking=True)
                    rollout.store(step, rewards=r)
                    rollout.store_episodes(step, terminated, truncated, info)
                    next_done.copy_(rollout.ep_done[step], non_blocking=True)

            with timer("train"):
                scalars = learn(agent, optimizer, loss_fn, rollout, next_obs, next_done, args, run.world, run.comm)
            run.end_iteration(args.batch_size, scalars, rollout.episodes)
    return run.exit_code


if __name__ == "__main__":
    sys.exit(main(*parse_or_resume(Args, SCRIPT)))
