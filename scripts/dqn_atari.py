"""DQN for Atari on rlfast's env pool: CleanRL's ``dqn_atari.py``, with frames stored once on the device.

CleanRL's Nature-CNN Q-network and defaults (10M steps, a 1M-transition buffer, batches of 32 every
4 steps, target copies every 1,000 steps, epsilon 1 -> 0.01 over the first 10%, learning from step
80,000, ``episodic_life`` and ``reward_clip``), on Breakout-v5, with ``--num-envs`` and
``--replay-ratio`` to scale it. The run layer (``rlfast/algos/run.py``) does what every trainer does alike.

    python scripts/dqn_atari.py                                   # CleanRL defaults: Breakout-v5, 10M steps
    python scripts/dqn_atari.py --env-id Pong-v5 --num-envs 128 --batch-size 256 --replay-ratio 8
    python scripts/evaluate.py runs/<run> --sample                # whole games, raw scores, epsilon 0.01

Data path of a step: the pool (``stack_num=1``) writes each env's newest 84x84 frame into a pinned
ring; one non-blocking copy takes it to the device, where ``rlfast.FrameStack`` keeps the 4-frame
stacks the Q-network acts on, and the replay buffer (``rlfast/algos/replay.py``) stores that one
frame per step and rebuilds the same stacks when it samples: 1M transitions take 7.07 GB. Actions are
chosen on the device (epsilon-greedy), go back through a pinned buffer, and the envs step while the
gradient steps that are due run (``send``, update, ``recv``).

``charts/episodic_return`` is the raw score of a whole game (all lives), as CleanRL logs it; learning
uses the clipped, per-life rewards and ends.

Your own pixel env (a gymnasium ``"module:Env-v0"`` id, a ``rlfast.load_env`` header) trains the same way if it
gives uint8 frames of shape (1, 84, 84), grayscale and resized by the env itself: the frames are stacked and
stored as the Atari games' are, a game is an episode (from a reset to its end), and no lives or reward clipping
are added.
"""

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
import rlfast  # (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.dqn import DQNArgs, ReplayRatio, anneal_lr, epsilon_greedy, replay_buffer, soft_update, td_loss
from rlfast.algos.episodes import Episodes, game_starts
from rlfast.algos.flags import bounded
from rlfast.algos.nets import nature_widths
from rlfast.algos.speed import FrameNet, set_speed
from rlfast.algos.replay import ReplayBuffer
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import OWN_FAMILIES, CNNArgs, FrameNormArgs, RunArgs, check_frames, usage_error

SCRIPT = "dqn_atari.py"
STACK = 4
"""frames per observation (the CNN's input channels)"""
TRAIN_ENV_KWARGS = {"episodic_life": True, "reward_clip": True, "stack_num": 1}
"""CleanRL's wrappers' options; stack_num=1 because the stacks are built on the device"""
EVAL_ENV_KWARGS = {"episodic_life": False, "reward_clip": False, "stack_num": STACK}
"""scripts/evaluate.py's: whole games, raw scores, stacks made by the pool"""
EVAL_EPSILON = 0.01
"""the exploration of a sampled (non-greedy) evaluation"""


@dataclass
class Args(DQNArgs, CNNArgs, FrameNormArgs, RunArgs):
    """CleanRL's dqn_atari.py: DQNArgs' defaults (rlfast/algos/dqn.py) but for these."""

    exp_name: str = "dqn_atari"
    env_id: str = "Breakout-v5"
    """the Atari task id (rlfast.list_envs()), or your own env giving uint8 (1, 84, 84) frames"""
    total_timesteps: int = 10000000
    target_return: Optional[float] = None
    """stop early once the mean raw game score of the last 20 games reaches this"""
    learning_rate: float = 1e-4
    buffer_size: int = 1000000
    target_network_frequency: int = 1000
    batch_size: int = 32
    end_e: float = 0.01
    exploration_fraction: float = 0.10
    learning_starts: int = 80000
    replay_ratio: float = 8.0
    cnn_width: float = bounded(1.0, low=0, low_open=True)
    """scales the Nature CNN's channels and hidden units (0.5: 16-32-32-256, about a third of the multiply-adds
    per frame, for a CPU)"""
    dueling: bool = False
    """a dueling head (Wang et al. 2016): a value and an advantage stream, each its own hidden layer, Q = V + A -
    mean(A); off: CleanRL's one linear head"""


class QNetwork(nn.Module):
    """CleanRL's Nature CNN (Mnih et al. 2015): 4 stacked 84x84 frames -> one Q-value per action; ``width``
    scales it, ``dueling`` splits its head into value and advantage streams (Wang et al. 2016); ``normalize``: each
    pixel normalized by running statistics instead of / 255 (``FrameNet.normalize``)."""

    def __init__(self, num_actions: int, width: float = 1.0, dueling: bool = False, normalize: bool = False) -> None:
        super().__init__()
        self.num_actions, self.dueling = num_actions, dueling
        c1, c2, c3, hidden = nature_widths(width)
        trunk = [nn.Conv2d(STACK, c1, 8, stride=4), nn.ReLU(),
                 nn.Conv2d(c1, c2, 4, stride=2), nn.ReLU(),
                 nn.Conv2d(c2, c3, 3, stride=1), nn.ReLU(),
                 nn.Flatten()]  # fmt: skip
        stats = (84, 84) if normalize else None
        # Q-values in float32 under --bf16 too (fp32_tail): bf16 rounds away the gaps between actions.
        if not dueling:
            self.network = FrameNet(*trunk, nn.Linear(c3 * 7 * 7, hidden), nn.ReLU(), nn.Linear(hidden, num_actions),
                                    fp32_tail=1, pixel_stats=stats)  # fmt: skip
        else:  # one hidden layer of 2 x hidden units: its halves are the two streams' own hidden layers
            self.network = FrameNet(*trunk, nn.Linear(c3 * 7 * 7, 2 * hidden), nn.ReLU(), pixel_stats=stats)
            self.value, self.advantage = nn.Linear(hidden, 1), nn.Linear(hidden, num_actions)  # float32 heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, 4, 84, 84] uint8 -> Q-values [N, A]."""
        if not self.dueling:
            return self.network(x)  # FrameNet: x / 255.0 first
        value_hidden, advantage_hidden = self.network(x).chunk(2, dim=1)
        advantage = self.advantage(advantage_hidden)
        return self.value(value_hidden) + advantage - advantage.mean(1, keepdim=True)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, 4, 84, 84] uint8 -> actions [N]: argmax when greedy, else epsilon-greedy at EVAL_EPSILON."""
        return epsilon_greedy(self, x, 0.0 if greedy else EVAL_EPSILON, self.num_actions)


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> QNetwork:
    """The Q-network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this)."""
    if tuple(obs_space.shape) != (STACK, 84, 84):
        raise usage_error(f"{args.env_id} observations are {tuple(obs_space.shape)}; the Nature CNN needs "
                          f"({STACK}, 84, 84)")  # fmt: skip
    return QNetwork(int(action_space.n), width=args.cnn_width, dueling=args.dueling, normalize=args.normalize_frames)


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
              families=("atari", *OWN_FAMILIES))  # fmt: skip
    device, timer = run.device, run.timer
    atari = rlfast.task_family(args.env_id) == "atari"  # else your own pixel env: its frames, its episodes
    env_kwargs = TRAIN_ENV_KWARGS if atari else {}
    envs = run.make_env(args.num_envs, num_threads=args.num_threads, **env_kwargs)
    frame_shape = check_frames(SCRIPT, args.env_id, envs.single_observation_space)  # (1, 84, 84)
    obs_space = gym.spaces.Box(0, 255, (STACK * frame_shape[0], *frame_shape[1:]), np.uint8)
    q_network = set_speed(make_agent(args, obs_space, envs.single_action_space).to(device), **run.speed)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=args.adam_eps, fused=True)
    target_network = set_speed(make_agent(args, obs_space, envs.single_action_space).to(device), **run.speed)
    target_network.load_state_dict(q_network.state_dict())
    run.track(models={"agent": q_network, "target": target_network}, optimizers={"optimizer": optimizer},
              env_kwargs=env_kwargs, eval_env_kwargs=EVAL_ENV_KWARGS if atari else {"frame_stack": STACK})  # fmt: skip

    N, T = args.num_envs, args.num_steps
    rb = replay_buffer(args, frame_shape, torch.uint8, device, run.save_with_checkpoint, run.resumed, stack=STACK)
    stack = rlfast.FrameStack(N, STACK, frame_shape, device=device)
    ids = torch.arange(N, device=device)
    episodes = Episodes(N, atari=atari, rows=T)
    # The frame each env's next action is chosen from, and whether it starts a game (what the buffer stores).
    frame = torch.zeros((N, *frame_shape), dtype=torch.uint8, device=device)
    first = torch.zeros(N, dtype=torch.bool, device=device)
    view, info = envs.reset()
    frame.copy_(view)
    first.copy_(game_starts(info))
    obs = stack.update(frame, ids, first)
    if args.normalize_frames and ckpt is None:  # the statistics start from the reset's frames
        q_network.network.observe(frame)
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
                    # Views into the pool's ring, valid until the second recv after this one: copied below.
                    rb.add(frame, actions, r, terminated, truncated, first)
                    frame.copy_(o, non_blocking=True)
                    first.copy_(game_starts(info), non_blocking=True)
                    obs = stack.update(frame, ids, first)
                    if args.normalize_frames:  # every frame counted as it comes (the target gets them at its update)
                        q_network.network.observe(frame)
                    episodes.record(step, terminated, truncated, info)

            scalars = {**losses, "charts/epsilon": epsilon, "charts/learning_rate": args.lr(global_step)}
            run.end_iteration(N * T, scalars, episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
