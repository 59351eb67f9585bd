"""APPO: asynchronous PPO with V-trace (Sample Factory's algorithm) on rlfast's async pool.

A sampler thread steps the pool in async mode (``--env-batch-size`` envs per ``recv``, half of
``--num-envs`` by default, so one half steps while the policy acts on the other), writes each
env's steps into device trajectories of ``--trajectory-length`` steps and hands complete ones to the learner
``--batch-size`` samples at a time through a bounded queue. The learner (this thread) computes
V-trace targets under its current weights and takes ``--num-minibatches`` PPO-clipped SGD steps
per batch, publishing the weights to the sampler after each; every sample keeps the version
that chose it, and the policy lag is logged (``charts/policy_lag_mean`` / ``_max``, SGD steps).
``--deterministic`` is Cleanba's arrangement instead: a sync pool, and sampler and learner
alternating through queues of one so the learner always learns from the second-latest weights:
the same seed gives the same losses. Pieces: ``rlfast/algos/appo.py`` (the loss), ``rlfast/algos/appo_sampler.py``
(the sampling side), ``rlfast/algos/vtrace.py``;
the run layer (``rlfast/algos/run.py``) does what every trainer does alike.

    python scripts/appo.py                                     # Pong-v5, 64 envs, Nature CNN
    python scripts/appo.py --config configs/cartpole_appo.toml # CartPole (MLP) in about a minute
    python scripts/appo.py --env-id Breakout-v5 --deterministic --num-envs 64 --batch-size 2048
    python scripts/appo.py --recurrent lstm                    # an LSTM core after the CNN
    python scripts/appo.py --env-id my_pkg:MyEnv-v0            # your own env (worker processes)
    python scripts/evaluate.py runs/<run>

Your own envs (gymnasium ``"module:Env-v0"`` ids, ``rlfast.load_env`` headers) train as the built-in ones: with
discrete actions, a Box of numbers through the MLP, or uint8 frames of shape (C, 84, 84) through the Nature CNN
(the env does its own preprocessing: no lives, reward clipping or frame stack is added).

``--recurrent lstm`` (or ``gru``): the Nature CNN with an LSTM of 128 units (``RecurrentNatureCNNAgent``, as
CleanRL's ppo_atari_lstm); for a Dict env, Sample Factory's whole Doom network, convnet_simple into a core of 512
units (``RecurrentConvSimpleAgent``; ``gru`` is Sample Factory's default). The sampler keeps each env's state on the
device by env id (the async pool returns envs in any order) and the policy zeroes it before an observation that
starts an episode; each trajectory carries the state its first step acted from, and the learner unrolls it over the
trajectory for V-trace.

Profile: the learner's ``wait`` (for a batch) and ``train``; the sampler's ``env`` (recv and
send), ``inference`` and ``storage`` are logged as ``perf/sampler_*``. For Atari,
``charts/episodic_return`` is the raw score of a whole game; learning uses clipped per-life rewards.
"""

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from typing import Callable, Literal, Optional

import gymnasium as gym
import numpy as np
import rlfast  # (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
from torch import nn

from rlfast.algos.appo import APPOArgs, appo_loss, taken_logprobs, update_kl
from rlfast.algos.episodes import Episodes
from rlfast.algos.nets import (ConvSimpleAgent, MLPAgent, NatureCNNAgent, RecurrentConvSimpleAgent,
                               RecurrentNatureCNNAgent)
from rlfast.algos.speed import set_speed
from rlfast.algos.ppo import LOSS_NAMES, PPOLoss, adapt_lr
from rlfast.algos.launch import launch
from rlfast.algos.pbt import PBTArgs, Population, Step, adopt, tuned, with_hparams
from rlfast.algos.run import Run
from rlfast.algos.runargs import CNNArgs, FrameNormArgs, RunArgs, usage_error, vector_obs_size
from rlfast.algos.appo_sampler import PublishedWeights, Sampler
from rlfast.algos.appo_trajectories import Trajectories

SCRIPT = "appo.py"
ATARI_ENV_KWARGS = {"episodic_life": True, "reward_clip": True}
"""Atari training: lives as episodes, clipped rewards (CleanRL's and Sample Factory's wrappers); 4 stacked frames"""
ATARI_EVAL_ENV_KWARGS = {"episodic_life": False, "reward_clip": False}
"""scripts/evaluate.py's: whole games, raw scores"""


@dataclass
class Args(APPOArgs, PBTArgs, CNNArgs, FrameNormArgs, RunArgs):
    """APPOArgs' defaults (rlfast/algos/appo.py) on Pong-v5."""

    exp_name: str = "appo"
    env_id: str = "Pong-v5"
    """the task id: an Atari game, a classic control task with discrete actions (rlfast.list_envs()), or your own
    env with discrete actions (a gymnasium "module:Env-v0" id, a rlfast.load_env header)"""
    total_timesteps: int = 10000000
    recurrent: Literal["none", "lstm", "gru"] = "none"
    """a recurrent core after the CNN: stacked frames, 128 units (lstm: CleanRL's ppo_atari_lstm); a Dict env's
    frames, 512 units (gru: Sample Factory's Doom network); not for vector observations"""

    def validate(self) -> list[str]:
        problems = super().validate()
        P = self.pbt_population
        if P > 1 and self.num_envs % P:
            problems.append(f"--num-envs {self.num_envs} does not split evenly into --pbt-population {P} members")
        elif P > 1 and self.env_batch_size is not None and self.env_batch_size > self.num_envs // P:
            problems.append(f"--env-batch-size {self.env_batch_size} is a member's pool's (--num-envs / "
                            f"--pbt-population = {self.num_envs // P} envs)")  # fmt: skip
        if P > 1 and self.deterministic:
            problems.append("--deterministic runs one learner: it cannot be used with --pbt-population")
        return problems


def make_agent(args: Args, obs_space: gym.Space, action_space: gym.Space) -> torch.nn.Module:
    """The network for these spaces: the Nature CNN for stacked 84x84 uint8 frames, Sample Factory's convnet_simple
    for a Dict of frames and a vector (``dict_layout``), each with ``--recurrent``'s core if set, else the 64-64
    tanh MLP (scripts/evaluate.py rebuilds it from a checkpoint with this). ``--normalize-frames``: the Nature
    CNN's only."""
    nature = isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3
    if args.normalize_frames and not nature:
        shape = getattr(obs_space, "shape", None)  # a Dict has none
        raise usage_error(f"--normalize-frames normalizes the Nature CNN's stacked frames; {args.env_id} observations "
                          f"are {tuple(shape) if shape else type(obs_space).__name__}")  # fmt: skip
    if isinstance(obs_space, gym.spaces.Dict):  # convnet_simple: Discrete or MultiDiscrete actions
        frames, vector = dict_layout(args.env_id, obs_space)
        if isinstance(action_space, gym.spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
            actions = tuple(int(n) for n in action_space.nvec)
        elif isinstance(action_space, gym.spaces.Discrete):
            actions = int(action_space.n)
        else:
            raise usage_error(f"{args.env_id} has a {type(action_space).__name__} action space; appo.py needs "
                              "Discrete (or, with Dict observations, a 1-d MultiDiscrete)")  # fmt: skip
        size = int(obs_space[vector].shape[0]) if vector else 0
        if args.recurrent != "none":
            return RecurrentConvSimpleAgent(tuple(obs_space[frames].shape), actions, size, frames, vector or "",
                                            cell=args.recurrent)  # fmt: skip
        return ConvSimpleAgent(tuple(obs_space[frames].shape), actions, size, frames, vector or "")
    if not isinstance(action_space, gym.spaces.Discrete):
        raise usage_error(f"{args.env_id} has a {type(action_space).__name__} action space; appo.py needs Discrete")
    if nature:
        if tuple(obs_space.shape[1:]) != (84, 84) or obs_space.dtype != np.uint8:
            raise usage_error(f"{args.env_id} observations are {tuple(obs_space.shape)} {obs_space.dtype}; the Nature "
                              "CNN needs uint8 frames of shape (C, 84, 84)")  # fmt: skip
        if args.recurrent != "none":
            return RecurrentNatureCNNAgent(obs_space.shape[0], int(action_space.n), cell=args.recurrent,
                                           normalize=args.normalize_frames)  # fmt: skip
        return NatureCNNAgent(obs_space.shape[0], int(action_space.n), normalize=args.normalize_frames)
    size = vector_obs_size(SCRIPT, args.env_id, obs_space)  # a usage error unless a Box (a Dict, a Discrete)
    if args.recurrent != "none":
        raise usage_error(f"--recurrent {args.recurrent} has a CNN encoder: it needs stacked frames, and {args.env_id} "
                          f"observations are {tuple(obs_space.shape)}")  # fmt: skip
    return MLPAgent(size, int(action_space.n))


def dict_layout(env_id: str, space: gym.spaces.Dict) -> tuple[str, Optional[str]]:
    """The keys of a Dict env's frames (a uint8 Box (C, H, W)) and of its vector (a 1-d Box; None if it has none):
    the layout appo.py trains, a usage error naming the keys otherwise."""
    frames = [k for k, s in space.spaces.items() if isinstance(s, gym.spaces.Box) and s.dtype == np.uint8
              and len(s.shape) == 3]  # fmt: skip
    vectors = [k for k, s in space.spaces.items() if isinstance(s, gym.spaces.Box) and len(s.shape) == 1]
    if len(frames) != 1 or len(vectors) > 1 or len(frames) + len(vectors) != len(space.spaces):
        shown = ", ".join(f"{k}: {getattr(s, 'shape', s)} {getattr(s, 'dtype', '')}".strip()
                          for k, s in space.spaces.items())  # fmt: skip
        raise usage_error(f"{env_id} has Dict observations ({shown}); appo.py takes a Dict of one uint8 Box of frames "
                          "(C, H, W) and at most one 1-d Box of numbers")  # fmt: skip
    return frames[0], vectors[0] if vectors else None


def update(agent: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable[..., PPOLoss], batch: Trajectories,
           args: Args, weights: PublishedWeights, version: int,
           generator: Optional[torch.Generator] = None) -> tuple[int, dict[str, torch.Tensor]]:  # fmt: skip
    """One batch's update: ``update_epochs`` passes of ``num_minibatches`` SGD steps over shuffled whole
    trajectories, the loss ``appo_loss`` (V-trace targets under the current weights, PPO's clipped loss;
    maybe compiled), the weights published to the sampler after each step. Returns the new version (SGD
    steps so far) and the ``losses/*`` and ``charts/policy_lag_*`` scalars (tensors, not read back) and the learning
    rate; with --kl-adaptive-lr each epoch's approx KL (``--kl-reference``'s) steers the rate (``adapt_lr``)."""
    K = batch.actions.shape[0]
    size = K // args.num_minibatches
    stats, lags, kls = [], [], {}
    if args.kl_adaptive_lr is not None and args.kl_reference == "batch":  # PPO's KL: what this batch's epochs moved
        probe = batch.rows(torch.arange(size, device=batch.actions.device))
        reference = taken_logprobs(agent, probe)
    for epoch in range(args.update_epochs):
        perm = torch.randperm(K, device=batch.actions.device, generator=generator)
        for start in range(0, K, size):
            mb = batch.rows(perm[start : start + size])
            lag = (version - mb["versions"]).float()  # SGD steps since the acting weights were published
            lags.append(torch.stack((lag.mean(), lag.max())))
            out = loss_fn(agent, args, mb)
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
            version += 1
            weights.publish(agent, version, end_of_batch=start + size >= K and epoch == args.update_epochs - 1)
            stats.append(torch.stack([t.detach() for t in out[1:]]))
        if args.kl_adaptive_lr is not None:  # the epoch's KL steers the rate (one host read per epoch)
            if args.kl_reference == "batch":
                kl = kls["losses/update_kl"] = update_kl(agent, probe, reference)  # logged: the last epoch's
            else:  # the loss's approx KL to the acting policy, the epoch's mean
                kl = torch.stack(stats[-args.num_minibatches :])[:, LOSS_NAMES.index("approx_kl")].mean()
            adapt_lr(optimizer, kl.item(), args.kl_adaptive_lr, args.lr_max)
    means, lag = torch.stack(stats).mean(0), torch.stack(lags)
    scalars = {f"losses/{name}": means[i] for i, name in enumerate(LOSS_NAMES)}
    lr = optimizer.param_groups[0]["lr"]
    return version, {**scalars, **kls, "charts/learning_rate": lr, "charts/policy_lag_mean": lag[:, 0].mean(),
                     "charts/policy_lag_max": lag[:, 1].max()}  # fmt: skip


@dataclass
class Member:
    """One policy of the population (the whole run without --pbt-population): its envs, network, optimizer,
    hyperparameters (its own ``args``) and learner state."""

    args: Args
    envs: rlfast.EnvPool
    agent: nn.Module
    optimizer: torch.optim.Optimizer
    episodes: Episodes
    generator: torch.Generator
    version: int = 0
    """SGD steps taken by this process (the policy lag counts in these)"""


def main(args: Args, ckpt: Optional[dict] = None) -> int:
    P = args.pbt_population
    run = Run(args, SCRIPT, ckpt, iterations=args.total_timesteps // (args.batch_size * P),
              steps_per_iteration=args.batch_size * P, families=("classic_control", "atari", "python", "custom"),
              sections=("wait", "train"))  # fmt: skip
    device, timer = run.device, run.timer
    atari = rlfast.task_family(args.env_id) == "atari"
    env_kwargs = ATARI_ENV_KWARGS if atari else {}
    # Each member acts on its own share of the envs, with its share of the env threads.
    share = args.num_envs // P
    threads = args.num_threads if P == 1 else max((args.num_threads or os.cpu_count() or 1) // P, 1)
    members = []
    for k in range(P):
        member_args = args if P == 1 else dataclasses.replace(args, num_envs=share)
        envs = run.make_env(share, seed=run.env_seed + k * share, batch_size=member_args.recv_batch,
                            num_threads=threads, **env_kwargs)  # fmt: skip
        agent = make_agent(args, envs.single_observation_space, envs.single_action_space).to(device)
        set_speed(agent, **run.speed)  # the CNN's speed options: the flags and --auto-speed's picks
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)
        generator = torch.Generator(device=device).manual_seed(args.seed + k)  # the learner's minibatch order
        members.append(Member(member_args, envs, agent, optimizer, Episodes(share, atari), generator))
    population = Population(args, {name: getattr(args, name) for name in tuned(args)}, args.seed) if P > 1 else None
    run.track(models={member_name("agent", k): m.agent for k, m in enumerate(members)},
              optimizers={member_name("optimizer", k): m.optimizer for k, m in enumerate(members)},
              env_kwargs=env_kwargs or None, eval_env_kwargs=ATARI_EVAL_ENV_KWARGS if atari else None,
              states={"pbt": population} if population else None)  # fmt: skip
    if population:  # each member's hyperparameters (resumed: its optimizer keeps the learning rate it had)
        for m, hparams in zip(members, population.hparams):
            m.args = with_hparams(m.args, None if run.resumed else m.optimizer, hparams)
    loss_fn = run.compile(appo_loss)

    with run, contextlib.ExitStack() as stack:
        samplers = [stack.enter_context(Sampler(m.envs, m.args, m.agent, m.episodes.collect, device)) for m in members]
        for _ in run.iterations():
            scalars, episodes = {}, []
            for k, (m, sampler) in enumerate(zip(members, samplers)):  # a batch of each member in turn
                with timer("wait"):
                    batch = sampler.next_batch()
                with timer("train"):
                    if m.args.normalize_frames:  # the batch's frames counted, then learned from and published
                        m.agent.network.observe(batch.obs[:, :-1])
                    m.version, learned = update(m.agent, m.optimizer, loss_fn, batch, m.args, sampler.weights,
                                                m.version, m.generator)  # fmt: skip
                sampler.release(batch)
                episodes.append(m.episodes.take())
                learned.update(sampler.perf())
                scalars.update(learned if P == 1 else {f"policy_{k}/{name}": v for name, v in learned.items()})
            if population:  # each member's PBT step, when due: maybe another's weights, new hyperparameters
                for k, m in enumerate(members):
                    population.record(k, episodes[k][1][0].tolist())
                    if (step := population.learned(k, args.batch_size)) is not None:
                        take_pbt_step(step, members, samplers[k].weights)
                        print(step.describe(), flush=True)
                scalars.update(population.scalars())
            run.end_iteration(args.batch_size * P, scalars, tuple(torch.cat(parts, 1) for parts in zip(*episodes)))
    if population and run.exit_code == 0:
        print(population.summary(f"python scripts/evaluate.py {run.run_dir} --policy"), flush=True)
    return run.exit_code


def take_pbt_step(step: Step, members: list[Member], weights: PublishedWeights) -> None:
    """What a member's PBT step decided (rlfast/algos/pbt.py): the weights and Adam state of the member it takes them
    from, published to its sampler (``weights``), and its new hyperparameters; nothing when it was left alone."""
    if step.source is None:
        return
    m = members[step.member]
    if step.replaced:
        source = members[step.source]
        adopt(m.agent, m.optimizer, source.agent, source.optimizer)
        weights.publish(m.agent, m.version, end_of_batch=True)
    m.args = with_hparams(m.args, m.optimizer, step.after)


def member_name(name: str, k: int) -> str:
    """A member's model or optimizer in the checkpoint: ``agent`` and ``optimizer`` for member 0 (scripts/evaluate.py
    plays ``agent``, or ``agent_K`` with --policy K), ``agent_K`` / ``optimizer_K`` for the others."""
    return name if k == 0 else f"{name}_{k}"


if __name__ == "__main__":
    launch(main, Args, SCRIPT)
