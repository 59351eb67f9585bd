"""PPO for discrete-action classic control (CartPole, Acrobot, MountainCar) on rlfast's env pool.

CleanRL's ``ppo.py``: same network, hyperparameters and update, with the envs stepped by
rlfast's C++ pool, rollout storage on the training device and a profile of where the time
goes. The pieces shared with the other trainers live in ``rlfast/algos``.

    python scripts/ppo.py                                    # CleanRL defaults: CartPole-v1, 500k steps
    python scripts/ppo.py --config configs/cartpole.toml --seed 2
    python scripts/ppo.py --resume runs/<run>/checkpoint.pt  # continue that run (same run dir)
    python scripts/evaluate.py runs/<run>/checkpoint.pt
    tensorboard --logdir runs

Episode ends use next-step autoreset and CleanRL's ``next_done = terminated | truncated``
convention; ``rlfast/algos/gae.py`` explains what that does to the reset step.
Ctrl-C saves ``checkpoint.pt`` into the run dir, closes the pool and exits with status 130.
"""

import dataclasses
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
from rlfast.algos.checkpoint import CheckpointSchedule, make_checkpoint, restore, save_checkpoint
from rlfast.algos.config import parse_or_resume
from rlfast.algos.distributions import categorical
from rlfast.algos.gae import gae
from rlfast.algos.ppo import LOSS_NAMES, PPOLoss, explained_variance, ppo_loss, ppo_update
from rlfast.algos.profiling import SectionTimer
from rlfast.algos.runlog import RunLog, run_dir_name

SCRIPT = "ppo.py"


@dataclass
class Args:
    exp_name: str = "ppo"
    """the name of this experiment (part of the run dir name)"""
    seed: int = 1
    """seed of the experiment (envs get seed + env index)"""
    torch_deterministic: bool = True
    """sets `torch.backends.cudnn.deterministic`"""
    cuda: bool = True
    """train on CUDA when it is available"""
    compile: bool = False
    """torch.compile the policy forward and the minibatch loss (for GPUs: on a 2-core CPU it is slower)"""
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
    """stop early once the mean return of the last 20 episodes reaches this"""
    num_threads: Optional[int] = None
    """env pool worker threads (default: min(cores, num_envs))"""
    torch_threads: Optional[int] = None
    """torch intra-op threads on CPU (default: torch's choice)"""
    profile_sync: bool = False
    """synchronize CUDA at profiler section boundaries (exact split, a little slower)"""

    env_id: str = "CartPole-v1"
    """the task id (rlfast.list_envs())"""
    total_timesteps: int = 500000
    """total env steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
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
    clip_coef: float = 0.2
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


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's separate 64-64 tanh actor and critic."""

    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )  # fmt: skip
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )  # fmt: skip

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, obs_dim] -> V(x): [N]."""
        return self.critic(x).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, obs_dim] -> (action [N], logprob [N], entropy [N], value [N]); samples when action is None."""
        action, logprob, entropy = categorical(self.actor(x), action)
        return action, logprob, entropy, self.get_value(x)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, obs_dim] -> actions [N]: argmax when greedy, else sampled (scripts/evaluate.py's hook)."""
        logits = self.actor(x)
        return logits.argmax(-1) if greedy else categorical(logits)[0]


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> Agent:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this)."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise SystemExit(
            f"error: {args.env_id} has a {type(action_space).__name__} action space; ppo.py needs Discrete"
        )
    return Agent(int(np.prod(obs_space.shape)), int(action_space.n))


def minibatch_loss(agent: Agent, args: Args, mb: dict[str, torch.Tensor]) -> PPOLoss:
    """The PPO loss of one minibatch (rows [M, ...] of the flattened rollout)."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(
        newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
        clip_coef=args.clip_coef, ent_coef=args.ent_coef, vf_coef=args.vf_coef,
        clip_vloss=args.clip_vloss, norm_adv=args.norm_adv,
    )  # fmt: skip


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    if args.num_iterations < 1:
        raise SystemExit(f"error: total_timesteps {args.total_timesteps} < one rollout of {args.batch_size} steps")
    if args.batch_size % args.num_minibatches:
        raise SystemExit(
            f"error: batch size {args.batch_size} is not divisible by num_minibatches {args.num_minibatches}"
        )
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
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    start_iteration = ckpt["iteration"] if ckpt else 0
    global_step = ckpt["global_step"] if ckpt else 0
    # A resumed run cannot restore the envs' state (the pool does not export it): it starts
    # fresh episodes from seeds it has not used yet.
    env_seed = args.seed + start_iteration * args.num_envs
    envs = rlfast.make(args.env_id, args.num_envs, num_threads=args.num_threads, seed=env_seed)
    agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if ckpt is not None:
        restore(ckpt, {"agent": agent}, {"optimizer": optimizer})
    policy = torch.compile(agent.get_action_and_value) if args.compile else agent.get_action_and_value
    loss_fn = torch.compile(minibatch_loss) if args.compile else minibatch_loss
    total_steps = args.num_iterations * args.batch_size
    log = RunLog(run_dir, dataclasses.asdict(args), total_steps, start_step=global_step)

    def checkpoint(name: str, iteration: int, global_step: int) -> Path:
        state = make_checkpoint(
            script=SCRIPT, env_id=args.env_id, args=dataclasses.asdict(args), global_step=global_step,
            iteration=iteration, models={"agent": agent}, optimizers={"optimizer": optimizer},
        )  # fmt: skip
        return save_checkpoint(run_dir / name, state)

    # Rollout storage on the training device; episode stats stay on the host, where they arrive.
    T, B = args.num_steps, args.num_envs
    obs_shape = envs.single_observation_space.shape
    obs = torch.zeros((T, B, *obs_shape), device=device)
    actions = torch.zeros((T, B), dtype=torch.long, device=device)
    logprobs = torch.zeros((T, B), device=device)
    rewards = torch.zeros((T, B), device=device)
    dones = torch.zeros((T, B), device=device)
    values = torch.zeros((T, B), device=device)
    ep_done = torch.zeros((T, B), dtype=torch.bool)
    ep_return = torch.zeros((T, B))
    ep_length = torch.zeros((T, B), dtype=torch.int32)

    next_obs = torch.zeros((B, *obs_shape), device=device)
    next_done = torch.zeros(B, device=device)
    view, _ = envs.reset()
    next_obs.copy_(view)

    timer = SectionTimer(("env", "inference", "train"), sync_cuda=args.profile_sync)
    start_step = global_step
    completed = (start_iteration, global_step)
    schedule = CheckpointSchedule(args.save_interval, args.save_minutes)
    print(f"run dir: {run_dir}  device: {device}  {envs}")
    try:
        for iteration in range(start_iteration + 1, args.num_iterations + 1):
            timer.start_iteration()
            iteration_step = global_step
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            for step in range(T):
                obs[step] = next_obs
                dones[step] = next_done
                with timer("inference"), torch.no_grad():
                    action, logprob, _, value = policy(next_obs)
                    values[step] = value
                    actions[step] = action
                    logprobs[step] = logprob
                with timer("env"):
                    o, r, terminated, truncated, info = envs.step(action)
                    # o, r, info are views into the pool's ring, valid until the second step after this
                    # one; the next step's action.cpu() waits for these (stream-ordered) copies.
                    next_obs.copy_(o, non_blocking=True)
                    rewards[step].copy_(r, non_blocking=True)
                    torch.logical_or(terminated, truncated, out=ep_done[step])
                    next_done.copy_(ep_done[step], non_blocking=True)
                    ep_return[step].copy_(info["episode_return"])
                    ep_length[step].copy_(info["episode_length"])
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
                stats = ppo_update(
                    lambda mb: loss_fn(agent, args, mb), optimizer, agent.parameters(), batch,
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
        envs.close()
        log.close()
        return 130

    log.close()
    path = checkpoint("checkpoint.pt", *completed)
    print(timer.summary(steps=global_step - start_step))
    print(f"{global_step - start_step:,} steps in {log.elapsed():.1f} s; saved {path}")
    envs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*parse_or_resume(Args, SCRIPT)))
