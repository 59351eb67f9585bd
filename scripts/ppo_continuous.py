"""PPO for MuJoCo (continuous actions) on rlfast's env pool: CleanRL's ``ppo_continuous_action.py``.

Same agent, hyperparameters, update and wrapper stack as CleanRL (HalfCheetah-v5 here: CleanRL used v4),
with rlfast's C++ pool, rollout storage and normalization on the training device, and a time profile.

    python scripts/ppo_continuous.py                                   # CleanRL defaults: HalfCheetah-v5, 1M steps
    python scripts/ppo_continuous.py --env-id Hopper-v5 --seed 2
    python scripts/ppo_continuous.py --config configs/ant_5min.toml    # 16 cores + 1 GPU (see the file)
    torchrun --nproc-per-node 2 scripts/ppo_continuous.py              # 2 ranks: the same run as one process
    python scripts/ppo_continuous.py --resume runs/<run>/checkpoint.pt # continue that run (same run dir)
    python scripts/evaluate.py runs/<run>
    tensorboard --logdir runs

CleanRL's wrappers, in torch: ``ClipAction`` (the env gets the clipped action, the rollout keeps the sampled
one), ``NormalizeObservation`` and ``NormalizeReward(gamma)``, each + clip to ±10 (``rlfast/algos/continuous.py``;
their statistics are in checkpoints), ``RecordEpisodeStatistics`` on the raw reward (``Episodes``).

Data path of a step: the pool writes float64 observations into its (pinned with CUDA) ring; one
non-blocking copy takes them to the device, where they are normalized and become float32; the
clipped actions come back through a pinned host buffer (non-blocking copy, one sync, ``send``).
Episode ends use next-step autoreset and CleanRL's done convention (``rlfast/algos/gae.py``).
"""

from dataclasses import dataclass
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.continuous import VectorEnvs, diag_normal
from rlfast.algos.distributed import World
from rlfast.algos.flags import bounded
from rlfast.algos.gae import gae
from rlfast.algos.nets import tanh_mlp
from rlfast.algos.ppo import (LOSS_NAMES, PPOArgs, PPOLoss, Rollout, adapt_lr, anneal_lr, entropy_coef,
                              explained_variance, normalize_advantages, ppo_loss)  # fmt: skip
from rlfast.algos.launch import launch
from rlfast.algos.run import Run
from rlfast.algos.runargs import EnvGroupArgs, RunArgs, parse_env_kwargs, usage_error, vector_obs_size

SCRIPT = "ppo_continuous.py"


@dataclass
class Args(PPOArgs, EnvGroupArgs, RunArgs):
    """CleanRL's ppo_continuous_action.py: PPOArgs' defaults (rlfast/algos/ppo.py) but for these."""

    exp_name: str = "ppo_continuous"
    env_id: str = "HalfCheetah-v5"
    """the task id: a MuJoCo or other Box-action task (rlfast.list_envs())"""
    total_timesteps: int = 1000000
    num_envs: int = 1
    # One thread: these MLPs are too small to gain from more, and OpenMP's spinning threads slow
    # them down badly when the env workers need the same cores.
    torch_threads: Optional[int] = 1
    learning_rate: float = 3e-4
    num_steps: int = 2048
    num_minibatches: int = 32
    update_epochs: int = 10
    ent_coef: float = 0.0
    hidden_size: int = bounded(64, low=0, low_open=True)
    """width of the two tanh hidden layers of the actor and of the critic (CleanRL: 64)"""
    obs_clip: float = bounded(10.0, low=0, low_open=True)
    """normalized observations are clipped to [-obs_clip, obs_clip]"""
    reward_clip: float = bounded(10.0, low=0, low_open=True)
    """scaled rewards are clipped to [-reward_clip, reward_clip]"""
    init_logstd: float = bounded(0.0, low=-10, high=2)
    """initial log standard deviation of the Gaussian policy (CleanRL: 0, i.e. std 1)"""
    final_logstd: Optional[float] = bounded(None, low=-10, high=2)
    """a schedule instead of a learned std: the log std goes linearly from --init-logstd (first iteration) to this
    (the last iteration of --logstd-steps), the same for every state (None: learned, CleanRL)"""
    logstd_steps: Optional[int] = bounded(None, low=1)
    """env steps over which --final-logstd's schedule runs, held at --final-logstd after (None: the whole run,
    --total-timesteps)"""
    env_kwargs: tuple[str, ...] = ()
    """the task's options as name=value (e.g. include_cfrc_ext_in_observation=false ctrl_cost_weight=0.1; a
    preset: env_kwargs = ["..."]), for training and for evaluate.py (docs/environments lists each task's)"""

    def validate(self) -> list[str]:
        problems = super().validate()
        try:
            parse_env_kwargs(self.env_kwargs)
        except ValueError as e:
            problems.append(f"--env-kwargs: {e}")
        if self.logstd_steps is not None and self.final_logstd is None:
            problems.append(f"--logstd-steps {self.logstd_steps} times --final-logstd's schedule: set --final-logstd")
        return problems

    def scheduled_logstd(self, iteration: int) -> float:
        """--final-logstd's schedule: the log std of 1-based ``iteration``."""
        last = self.num_iterations if self.logstd_steps is None else self.logstd_steps // max(self.batch_size, 1)
        frac = min((iteration - 1) / max(last - 1, 1), 1.0)
        return self.init_logstd + frac * (self.final_logstd - self.init_logstd)


class Agent(nn.Module):
    """CleanRL's separate tanh MLPs for the action mean and the value, and a state-independent log std."""

    def __init__(
        self, obs_dim: int, action_space: gym.spaces.Box, hidden: int = 64, obs_clip: float = 10.0,
        init_logstd: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        action_dim = int(np.prod(action_space.shape))
        self.critic = tanh_mlp(obs_dim, hidden, 1, out_std=1.0)
        self.actor_mean = tanh_mlp(obs_dim, hidden, action_dim, out_std=0.01)
        self.actor_logstd = nn.Parameter(torch.full((1, action_dim), float(init_logstd)))
        # The action bounds (ClipAction) move with the module but are not part of its state_dict.
        low = torch.as_tensor(action_space.low, dtype=torch.float32).reshape(action_dim)
        high = torch.as_tensor(action_space.high, dtype=torch.float32).reshape(action_dim)
        self.register_buffer("action_low", low, persistent=False)
        self.register_buffer("action_high", high, persistent=False)
        self.obs_clip = obs_clip

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, obs_dim] -> V(x): [N]."""
        return self.critic(x).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None, noise: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, obs_dim] -> (action [N, A], logprob [N], entropy [N], value [N]); samples when action is None
        (with ``noise`` [N, A] standard normal, see ``diag_normal``).

        Sampled actions are unclipped: ``clip_action`` makes them valid for the env.
        """
        mean = self.actor_mean(x)
        action, logprob, entropy = diag_normal(mean, self.actor_logstd.expand_as(mean), action, noise)
        return action, logprob, entropy, self.get_value(x)

    def clip_action(self, action: torch.Tensor) -> torch.Tensor:
        """[N, A] -> the same actions clipped to the action space's bounds (gymnasium's ClipAction)."""
        return torch.clamp(action, self.action_low, self.action_high)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, obs_dim] normalized observations -> valid actions [N, A]: the mean when greedy, else sampled.

        evaluate.py's Policy contract: it applies the frozen ObsNormalizer; the float32 cast and the
        clip to ±obs_clip of training are done here.
        """
        x = x.to(torch.float32).clamp(-self.obs_clip, self.obs_clip)
        mean = self.actor_mean(x)
        action = mean if greedy else diag_normal(mean, self.actor_logstd.expand_as(mean))[0]
        return self.clip_action(action)


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> Agent:
    """The network for these spaces (scripts/evaluate.py rebuilds it from a checkpoint with this)."""
    if not isinstance(action_space, gym.spaces.Box):
        raise usage_error(f"{args.env_id} has a {type(action_space).__name__} action space; ppo_continuous.py needs "
                          "Box (scripts/ppo.py trains Discrete actions)")  # fmt: skip
    return Agent(vector_obs_size("ppo_continuous.py", args.env_id, obs_space), action_space, args.hidden_size,
                 args.obs_clip, args.init_logstd)


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
    """One iteration's update, as ppo_atari.py's (see there), but with ``--bootstrap-truncated`` GAE tells
    terminations (``rollout.terminations``, ``next_terminated``) from time limits."""
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
              families=("mujoco", "classic_control", "python", "custom"), data_parallel=True)  # fmt: skip
    device, timer = run.device, run.timer
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    T, B = args.num_steps, run.local_num_envs  # this rank's envs (all of them without torchrun)
    # the envs behind CleanRL's wrappers (normalized observations, scaled rewards), in --env-groups that take turns
    envs = VectorEnvs(run, B, args.env_groups, args.num_threads, rows=T, gamma=args.gamma, obs_clip=args.obs_clip,
                      reward_clip=args.reward_clip, **env_kwargs)  # fmt: skip
    agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
    if args.final_logstd is not None:  # scheduled, not learned (set at each iteration below)
        agent.actor_logstd.requires_grad_(False)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
    obs_shape, action_shape = envs.single_observation_space.shape, envs.single_action_space.shape
    run.track(models={"agent": agent}, optimizers={"optimizer": optimizer}, normalizers=envs.norm.normalizers(),
              env_kwargs=env_kwargs)  # fmt: skip
    if run.resumed:
        envs.norm.new_episodes()  # the statistics carry over; the envs' discounted returns start again
    policy, loss_fn = run.compile(agent.get_action_and_value), run.compile(minibatch_loss)

    # Rollout storage on the training device; episode stats stay on the host, where they arrive.
    rollout = Rollout(T, B, obs_shape, action_shape, action_dtype=torch.float32, device=device)
    next_obs = envs.reset()
    next_done = torch.zeros(B, device=device)
    next_terminated = torch.zeros(B, device=device)  # the part of next_done that is not a time limit

    def receive(step: int, g: slice) -> None:
        """The results of the envs ``g``'s step ``step``: their rewards into the rollout, their next observations.
        The wrappers' work (normalization) is counted as env time, as it is part of CleanRL's env.step."""
        next_obs[g], rollout.rewards[step, g], next_done[g], next_terminated[g] = envs.recv(step, g)

    with run:
        for iteration in run.iterations():
            anneal_lr(optimizer, args, iteration)
            if args.final_logstd is not None:
                agent.actor_logstd.fill_(args.scheduled_logstd(iteration))
            with envs.acting_threads():
                for step in range(T):
                    noise = run.action_noise(*action_shape, normal=True)  # the step's sampling noise
                    for g in envs.groups:  # slices of the envs (--env-groups): a group acts while the one before steps
                        if step > 0:
                            with timer("env"):
                                receive(step - 1, g)
                        with timer("inference"), torch.no_grad():
                            action, logprob, _, value = policy(next_obs[g], None, noise[g])
                            rollout.store((step, g), obs=next_obs[g], dones=next_done[g],
                                          terminations=next_terminated[g], actions=action, logprobs=logprob,
                                          values=value)  # fmt: skip
                        with timer("env"):
                            envs.send(agent.clip_action(action), g)
                with timer("env"):
                    for g in envs.groups:
                        receive(T - 1, g)

            with timer("train"):
                scalars = update(agent, optimizer, loss_fn, rollout, next_obs, next_done, next_terminated, args,
                                 run.world, entropy_coef(args, (iteration - 1) * args.batch_size))  # fmt: skip
            run.end_iteration(args.batch_size, scalars, envs.episodes.table)
    return run.exit_code


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
