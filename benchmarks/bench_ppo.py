"""PPO training throughput, side by side: scripts/ppo_atari.py vs CleanRL's ppo_atari_envpool.py data path.

Both contenders train the same Nature CNN with the same hyperparameters (ppo_atari.py's defaults,
which are CleanRL's: 128 steps per env, 4 epochs x 4 minibatches, ...) on the same task, each in a
fresh subprocess, for one warm-up iteration plus ``--iterations`` measured ones. Agent steps per
second (SPS) count from the end of the warm-up iteration, as both scripts' ``charts/SPS``; the
profile split (env / inference / train / other) covers every iteration. Rounds are interleaved so
that load from other processes hits every contender alike; the best SPS of each is kept.

    python benchmarks/bench_ppo.py                              # Pong-v5, 8 envs (CleanRL's default)
    python benchmarks/bench_ppo.py --num-envs 8 64 --iterations 3 --rounds 2
    python benchmarks/bench_ppo.py --contenders rlfast cleanrl --json ppo.json
    python benchmarks/bench_ppo.py --contenders rlfast+auto rlfast-lstm+auto   # feed-forward vs recurrent

Contenders:
  rlfast          scripts/ppo_atari.py: rlfast's C++ pool (newest frame only, stacks on the device),
                  uint8 rollout storage, actions back through a pinned buffer, no per-step host reads
  rlfast-lstm     ppo_atari_lstm.py (CleanRL's ppo_atari_lstm: one frame, an LSTM of 128 after the
                  CNN, minibatches of whole env rollouts); rlfast-gru the same with a GRU
  rlfast...+OPT   either of the two with ppo_atari.py's speed options, one or more: +cl (--channels-last),
                  +compile (--compile), +bf16 (--bf16), e.g. ``rlfast+cl+compile``; the first iteration,
                  where torch.compile compiles, is the unmeasured warm-up
  cleanrl         CleanRL's ppo_atari_envpool.py loop on EnvPool (needs ``pip install envpool``), as
                  written there: numpy observations converted with ``torch.Tensor(obs).to(device)``
                  every step, float32 rollout storage, ``action.cpu().numpy()``, a per-env Python loop
                  over episode ends, ``torch.distributions.Categorical``, ``np.random.shuffle`` minibatch
                  indices and one ``.item()`` per minibatch (the clip fraction). EnvPool's gymnasium
                  API replaces the retired gym one. The loss arithmetic is rlfast.algos.ppo.ppo_loss,
                  the same operations as CleanRL's inline loss.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import tyro
from torch.distributions import Categorical

import speed_options  # benchmarks/speed_options.py (this script's folder is on the path when it runs)
from trainers import SCRIPTS, load_trainer  # benchmarks/trainers.py

from rlfast.algos.gae import gae
from rlfast.algos.ppo import ppo_loss
from rlfast.algos.profiling import SectionTimer
from rlfast.algos.runlog import RunLog


CONTENDERS = ("rlfast", "rlfast-lstm", "rlfast-gru", "cleanrl")
TUNABLE = ("rlfast", "rlfast-lstm", "rlfast-gru")
"""the contenders that take speed-option suffixes (benchmarks/speed_options.py)"""
SECTIONS = ("env", "inference", "train", "other")


@dataclass
class Args:
    env_id: str = "Pong-v5"
    """the Atari task both contenders train on"""
    num_envs: tuple[int, ...] = (8,)
    """env counts to measure, each a separate set of runs (CleanRL's default is 8)"""
    num_steps: int = 128
    """steps per env per rollout (ppo_atari.py's and CleanRL's default: 128)"""
    iterations: int = 2
    """measured iterations per run, after one warm-up iteration"""
    rounds: int = 1
    """runs of every contender, interleaved; the best SPS is kept"""
    contenders: tuple[str, ...] = ("rlfast", "cleanrl")
    """which contenders to run, in this order (rlfast, rlfast-lstm, rlfast-gru, cleanrl; rlfast ones with +cl, +compile,
    +bf16 suffixes: see the module docstring)"""
    cuda: bool = True
    """train on CUDA when it is available (both contenders alike)"""
    torch_threads: Optional[int] = None
    """torch intra-op threads on CPU for both contenders (default: torch's choice)"""
    seed: int = 1
    """seed of both contenders"""
    json: Optional[str] = None
    """also write the results to this JSON file"""
    reference_run_dir: Optional[str] = None
    """internal: run the CleanRL reference loop in this process, logging to this dir, and exit"""


@dataclass
class Result:
    contender: str
    num_envs: int
    sps: float = 0.0
    shares: Optional[dict] = None
    """percent of the run's wall time per profile section"""
    note: str = ""


def cleanrl_reference(args: Args, num_envs: int, run_dir: Path) -> None:
    """CleanRL's ppo_atari_envpool.py training loop on EnvPool (see the module docstring), timed like ppo_atari.py."""
    import envpool

    ppo_atari = load_trainer("ppo_atari.py")

    hp = ppo_atari.Args(env_id=args.env_id, num_envs=num_envs, num_steps=args.num_steps, seed=args.seed)
    num_iterations = 1 + args.iterations
    T, B = hp.num_steps, hp.num_envs
    np.random.seed(hp.seed)
    torch.manual_seed(hp.seed)
    torch.backends.cudnn.deterministic = hp.torch_deterministic
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = envpool.make(hp.env_id, env_type="gymnasium", num_envs=B, episodic_life=True, reward_clip=True,
                        seed=hp.seed)  # fmt: skip
    obs_shape = envs.observation_space.shape
    agent = ppo_atari.Agent(obs_shape[0], int(envs.action_space.n)).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=hp.learning_rate, eps=1e-5)

    obs = torch.zeros((T, B, *obs_shape)).to(device)
    actions, logprobs, rewards, dones, values = (torch.zeros((T, B)).to(device) for _ in range(5))
    ep_return, ep_length = np.zeros(B, dtype=np.float32), np.zeros(B, dtype=np.int32)
    log = RunLog(run_dir, asdict(hp), num_iterations * T * B)
    timer = SectionTimer(("env", "inference", "train"))

    def policy(x: torch.Tensor, action: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, ...]:
        hidden = agent.hidden(x)
        probs = Categorical(logits=agent.actor(hidden))
        action = probs.sample() if action is None else action
        return action, probs.log_prob(action), probs.entropy(), agent.critic(hidden).view(-1)

    global_step = 0
    next_obs = torch.Tensor(envs.reset()[0]).to(device)
    next_done = torch.zeros(B).to(device)
    print(f"run dir: {run_dir}  device: {device}  CleanRL reference on envpool {envpool.__version__}", flush=True)
    for iteration in range(1, num_iterations + 1):
        timer.start_iteration()
        optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * hp.learning_rate
        for step in range(T):
            global_step += B
            obs[step] = next_obs
            dones[step] = next_done
            with timer("inference"), torch.no_grad():
                action, logprob, _, value = policy(next_obs)
                values[step] = value
            actions[step] = action
            logprobs[step] = logprob
            with timer("env"):
                o, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
                done = np.logical_or(terminated, truncated)
                rewards[step] = torch.tensor(reward).to(device).view(-1)
                next_obs, next_done = torch.Tensor(o).to(device), torch.Tensor(done).to(device)
            # CleanRL's RecordEpisodeStatistics (whole games: lives == 0) and its per-env logging loop.
            ep_return += info["reward"]
            ep_length += 1
            for idx, d in enumerate(done):
                if d and info["lives"][idx] == 0:
                    log.episodes(torch.ones(1, 1, dtype=torch.bool), torch.tensor([[ep_return[idx]]]),
                                 torch.tensor([[ep_length[idx]]]), global_step - B)  # fmt: skip
            game_over = info["lives"] == 0
            ep_return *= 1 - game_over
            ep_length *= 1 - game_over

        with timer("train"):
            with torch.no_grad():
                next_value = agent.get_value(next_obs)
                advantages, returns = gae(rewards, values, dones, next_value, next_done, hp.gamma, hp.gae_lambda)
            b_obs = obs.reshape((-1, *obs_shape))
            b_logprobs, b_actions, b_advantages = logprobs.reshape(-1), actions.reshape(-1), advantages.reshape(-1)
            b_returns, b_values = returns.reshape(-1), values.reshape(-1)
            b_inds = np.arange(hp.batch_size)
            minibatch_size = hp.batch_size // hp.num_minibatches
            clipfracs = []
            for _ in range(hp.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, hp.batch_size, minibatch_size):
                    mb = b_inds[start : start + minibatch_size]
                    _, newlogprob, entropy, newvalue = policy(b_obs[mb], b_actions.long()[mb])
                    out = ppo_loss(
                        newlogprob, b_logprobs[mb], b_advantages[mb], newvalue, b_values[mb], b_returns[mb], entropy,
                        clip_coef=hp.clip_coef, ent_coef=hp.ent_coef, vf_coef=hp.vf_coef,
                        clip_vloss=hp.clip_vloss, norm_adv=hp.norm_adv,
                    )  # fmt: skip
                    clipfracs.append(out.clipfrac.item())
                    optimizer.zero_grad()
                    out.loss.backward()
                    torch.nn.utils.clip_grad_norm_(agent.parameters(), hp.max_grad_norm)
                    optimizer.step()
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        log.scalars(
            {"charts/learning_rate": optimizer.param_groups[0]["lr"], "losses/value_loss": out.value_loss.item(),
             "losses/policy_loss": out.policy_loss.item(), "losses/entropy": out.entropy.item(),
             "losses/clipfrac": float(np.mean(clipfracs)), "losses/explained_variance": explained_var,
             **timer.end_iteration()},
            global_step,
        )  # fmt: skip
        log.progress(global_step, final=iteration == num_iterations)
    log.close()
    envs.close()
    print(timer.summary(steps=global_step))


def contender_command(name: str, args: Args, num_envs: int, run_dir: Path) -> list[str]:
    """The subprocess command line of one run of ``name``."""
    common = ["--num-envs", str(num_envs), "--num-steps", str(args.num_steps), "--seed", str(args.seed)]
    common += [] if args.cuda else ["--no-cuda"]
    common += ["--torch-threads", str(args.torch_threads)] if args.torch_threads else []
    if name == "cleanrl":
        return [sys.executable, __file__, "--env-id", args.env_id, "--iterations", str(args.iterations),
                "--reference-run-dir", str(run_dir), *common]  # fmt: skip
    total = (1 + args.iterations) * num_envs * args.num_steps
    base, flags = speed_options.split(name)
    script, recurrent = "ppo_atari.py", []
    if base in ("rlfast-lstm", "rlfast-gru"):
        script, recurrent = "ppo_atari_lstm.py", ["--recurrent", base.split("-")[1]]
    return [sys.executable, str(SCRIPTS / script), "--env-id", args.env_id, "--total-timesteps", str(total),
            "--runs-dir", str(run_dir), "--exp-name", "bench", *common, *recurrent, *flags]  # fmt: skip


def parse_output(name: str, num_envs: int, stdout: str) -> Result:
    """SPS from the final progress line and section shares from the profile table of either contender."""
    sps = re.findall(r"\|\s+([\d,]+) SPS \|", stdout)
    shares = {s: float(m.group(1)) for s in SECTIONS if (m := re.search(rf"^{s}\s+[\d.]+\s+([\d.]+)%", stdout, re.M))}
    if not sps or len(shares) != len(SECTIONS):
        return Result(name, num_envs, note="no SPS / profile in its output")
    return Result(name, num_envs, float(sps[-1].replace(",", "")), shares)


def run_one(name: str, args: Args, num_envs: int) -> Result:
    if name == "cleanrl":
        try:
            import envpool  # noqa: F401
        except ImportError as e:
            return Result(name, num_envs, note=f"skipped: {e} (pip install envpool)")
    with tempfile.TemporaryDirectory(prefix="bench_ppo_") as tmp:
        cmd = contender_command(name, args, num_envs, Path(tmp) / "run")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tmp)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return Result(name, num_envs, note=f"failed (exit {proc.returncode}): {tail[0]}")
    return parse_output(name, num_envs, proc.stdout)


def format_table(args: Args, num_envs: int, results: dict[str, Result], device: str) -> str:
    base = results.get("cleanrl")
    head = (f"{args.env_id} PPO, {num_envs} envs x {args.num_steps} steps, {device}, {os.cpu_count()} cores, "
            f"best of {args.rounds} x {args.iterations} measured iterations")  # fmt: skip
    header = f"{'contender':<26}{'SPS':>9}{'env':>8}{'infer':>8}{'train':>8}{'other':>8}{'vs cleanrl':>12}"
    lines = [head, header]
    for name, r in results.items():
        if not r.sps:
            lines.append(f"{name:<26} {r.note}")
            continue
        ratio = f"{r.sps / base.sps:.2f}x" if base and base.sps else "-"
        cells = "".join(f"{r.shares[s]:>7.1f}%" for s in SECTIONS)
        lines.append(f"{name:<26}{r.sps:>9,.0f}{cells}{ratio:>12}")
    return "\n".join(lines)


def main(args: Args) -> dict[int, dict[str, Result]]:
    speed_options.check(args.contenders, CONTENDERS, TUNABLE)
    if args.iterations < 1:
        raise SystemExit(f"error: --iterations must be >= 1 (SPS is measured after the warm-up), got {args.iterations}")
    device = "cuda" if torch.cuda.is_available() and args.cuda else "cpu"
    everything: dict[int, dict[str, Result]] = {}
    for num_envs in args.num_envs:
        best: dict[str, Result] = {}
        for _ in range(args.rounds):
            for name in args.contenders:
                start = time.perf_counter()
                r = run_one(name, args, num_envs)
                print(
                    f"  {name} N={num_envs}: {r.sps:,.0f} SPS {r.note} ({time.perf_counter() - start:.0f} s)",
                    flush=True,
                )
                if name not in best or r.sps > best[name].sps:
                    best[name] = r
        everything[num_envs] = best
        print(format_table(args, num_envs, best, device), flush=True)
        for name, r in best.items():
            if name != "cleanrl" and r.sps and best.get("cleanrl") and best["cleanrl"].sps:
                print(f"  {name} / cleanrl: {r.sps / best['cleanrl'].sps:.2f}x", flush=True)
    if args.json:
        payload = {"args": asdict(args), "device": device, "cpu_count": os.cpu_count(),
                   "results": {n: {k: asdict(r) for k, r in rs.items()} for n, rs in everything.items()}}  # fmt: skip
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return everything


if __name__ == "__main__":
    cli = tyro.cli(Args)
    if cli.reference_run_dir is not None:
        cleanrl_reference(cli, cli.num_envs[0], Path(cli.reference_run_dir))
    else:
        main(cli)
