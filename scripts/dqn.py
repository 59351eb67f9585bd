"""DQN for discrete-action classic control (CartPole, Acrobot, MountainCar) on rlfast's env pool.

CleanRL's ``dqn.py`` (its network and defaults: CartPole-v1, 500k steps, one env, a 10k buffer,
a batch of 128 every 10 steps, hard target updates every 500 steps, epsilon 1 -> 0.05 over half
the run), with the replay buffer on the training device (``rlfast/algos/replay.py``), epsilon-greedy
decided there, and ``--num-envs`` / ``--replay-ratio`` to scale it. The run layer
(``rlfast/algos/run.py``) does what every trainer does alike.

    python scripts/dqn.py                                    # CleanRL defaults
    python scripts/dqn.py --config configs/cartpole_dqn.toml # CartPole in about a minute on 2 cores
    python scripts/evaluate.py runs/<run>                    # greedy; --sample: epsilon 0.01

A vector step: the Q-network picks the actions on the device, ``send`` starts the envs, the
gradient steps that are due run while they step, then ``recv`` collects the results into the
buffer. So the action of a step comes from the network as it was before that step's updates
(CleanRL's order too); the transition it produces is sampleable from the next step on.
Truncated episodes bootstrap; terminated ones do not (``dones`` = terminated).
"""

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.dqn import DQNArgs, ReplayRatio, anneal_lr, epsilon_greedy, replay_buffer, soft_update, td_loss
from rlfast.algos.episodes import Episodes
from rlfast.algos.replay import ReplayBuffer
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import RunArgs, usage_error, vector_obs_size

SCRIPT = "dqn.py"
EVAL_EPSILON = 0.01
"""the exploration of a sampled (non-greedy) evaluation"""


@dataclass
class Args(DQNArgs, RunArgs):
    """CleanRL's dqn.py: DQNArgs' defaults (rlfast/algos/dqn.py) on CartPole-v1."""

    exp_name: str = "dqn"
    env_id: str = "CartPole-v1"
    """the task id: a classic control task with discrete actions (rlfast.list_envs())"""
    total_timesteps: int = 500000


class QNetwork(nn.Module):
    """CleanRL's 120-84 ReLU MLP: one Q-value per action."""

    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.network = nn.Sequential(
            nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, num_actions)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, obs_dim] -> Q-values [N, A]."""
        return self.network(x)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, obs_dim] -> actions [N]: argmax when greedy, else epsilon-greedy at EVAL_EPSILON (evaluate.py)."""
        return epsilon_greedy(self, x, 0.0 if greedy else EVAL_EPSILON, self.num_actions)


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> QNetwork:
    """The Q-network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this)."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise usage_error(f"{args.env_id} has a {type(action_space).__name__} action space; dqn.py needs Discrete")
    return QNetwork(vector_obs_size("dqn.py", args.env_id, obs_space), int(action_space.n))


def update(q_network: nn.Module, target_network: nn.Module, optimizer: torch.optim.Optimizer,
           loss_fn: Callable[..., tuple[torch.Tensor, ...]], rb: ReplayBuffer, args: Args,
           steps: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``steps`` gradient steps, CleanRL's: the TD loss (``td_loss``, maybe compiled) of a sampled batch, Adam;
    with --prioritized the batch is drawn by priority and its TD errors become its priorities. Returns the last
    step's (loss, mean Q-value)."""
    for _ in range(steps):
        batch = rb.sample(args.batch_size)
        loss, q_mean, td_errors = loss_fn(q_network, target_network, batch, args.double_dqn, args.huber)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if args.prioritized:
            rb.update_priorities(batch["indices"], td_errors)
    return loss.detach(), q_mean


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    run = Run(args, SCRIPT, ckpt, iterations=args.num_iterations, steps_per_iteration=args.steps_per_iteration,
              families=("classic_control", "python", "custom"))  # fmt: skip
    device, timer = run.device, run.timer
    envs = run.make_env(args.num_envs, num_threads=args.num_threads)
    obs_space, action_space = envs.single_observation_space, envs.single_action_space
    q_network = make_agent(args, obs_space, action_space).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=args.adam_eps, fused=True)
    target_network = make_agent(args, obs_space, action_space).to(device)
    target_network.load_state_dict(q_network.state_dict())
    run.track(models={"agent": q_network, "target": target_network}, optimizers={"optimizer": optimizer})

    N, T = args.num_envs, args.num_steps
    rb = replay_buffer(args, obs_space.shape, torch.float32, device, run.save_with_checkpoint, run.resumed)
    episodes = Episodes(N, atari=False, rows=T)
    obs = torch.zeros((N, *obs_space.shape), device=device)  # the observations the next actions are chosen from
    view, _ = envs.reset()
    obs.copy_(view)
    global_step = run.global_step
    schedule, loss_fn = ReplayRatio(args, global_step), run.compile(td_loss)
    losses = {"losses/td_loss": torch.zeros((), device=device), "losses/q_values": torch.zeros((), device=device)}

    with run:
        for _ in run.iterations():
            for step in range(T):
                epsilon = args.epsilon(global_step)
                with timer("inference"), torch.no_grad():
                    actions = epsilon_greedy(q_network, obs, epsilon, q_network.num_actions)
                with timer("env"):
                    envs.send(actions)
                global_step += N
                with timer("train"):  # while the envs step
                    if steps := schedule.gradient_steps(global_step, N, len(rb)):
                        anneal_lr(optimizer, args, global_step)
                        if args.prioritized:
                            rb.beta = args.beta(global_step)
                        loss, q_mean = update(q_network, target_network, optimizer, loss_fn, rb, args, steps)
                        losses = {"losses/td_loss": loss, "losses/q_values": q_mean}
                    if schedule.target_update(global_step):
                        soft_update(target_network, q_network, args.tau)
                with timer("env"):
                    o, r, terminated, truncated, info = envs.recv()
                    # o, r, terminated, truncated are views into the pool's ring, valid until the second recv
                    # after this one: add() copies them (non-blocking) before then.
                    rb.add(obs, actions, r, terminated, truncated)
                    obs.copy_(o, non_blocking=True)
                    episodes.record(step, terminated, truncated, info)

            scalars = {**losses, "charts/epsilon": epsilon, "charts/learning_rate": args.lr(global_step)}
            run.end_iteration(N * T, scalars, episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
