"""Evaluates a trainer's checkpoint: N episodes on rlfast's pool, mean ± std of the return.

    python scripts/evaluate.py runs/<run>                               # its checkpoint.pt, 10 greedy episodes
    python scripts/evaluate.py runs/<run>/checkpoint_000100.pt --episodes 100 --sample
    python scripts/evaluate.py runs/<run>/best.pt                       # the best --eval-every evaluation's policy
    python scripts/evaluate.py runs/<run> --save-policy policy.pt      # and write its weights alone, to share

Works for any trainer that writes ``rlfast.algos.checkpoint`` checkpoints and whose script
(named in the checkpoint, looked up next to this file) keeps the contract written down there
as ``TrainerScript`` and ``Policy``: an ``Args`` dataclass built from the checkpoint's
``args``, ``make_agent(args, obs_space, action_space)`` whose ``state_dict`` is the
checkpoint's ``models["agent"]``, and ``agent.act(obs, greedy)``. A script that lacks any of
it is named with what it lacks. The envs get the checkpoint's ``eval_env_kwargs`` (e.g.
ppo_atari.py's whole games with raw scores, on stacks made by the pool), but for ``frame_stack``: k, which
stacks k of the env's frames here as the Atari trainers do on the device (a user's pixel env).

An ``ObsNormalizer`` saved as ``normalizers["obs"]`` is applied, frozen. Each of the
``--episodes`` envs contributes its first episode (so short episodes are not over-counted).
"""

import dataclasses
import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import rlfast  # noqa: F401  (before torch: how long torch's idle threads spin, rlfast/_omp.py)
import torch
import tyro

from rlfast.algos.checkpoint import checkpoint_path, load_checkpoint, policy_only, save_checkpoint, trainer_of
from rlfast.algos.contract import contract_problems
from rlfast.algos.evaluation import Videos, evaluate, make_eval_envs
from rlfast.algos.normalize import ObsNormalizer

SCRIPTS = Path(__file__).resolve().parent


@dataclass
class Args:
    checkpoint: tyro.conf.Positional[str]
    """the checkpoint to evaluate, or a run dir (its checkpoint.pt)"""
    episodes: int = 10
    """number of episodes (one per env, all run in parallel)"""
    sample: bool = False
    """sample actions from the policy instead of taking the greedy (argmax / mean) action"""
    per_episode: bool = False
    """also print each episode's return and length, in the envs' order"""
    seed: int = 12345
    """seed of the evaluation envs and of action sampling (distinct from training seeds)"""
    env_id: Optional[str] = None
    """evaluate on this task instead of the checkpoint's"""
    cuda: bool = False
    """run the policy on CUDA when available"""
    video: Optional[str] = None
    """record the first --video-episodes episodes to this MP4 file (more than one: FILE-1.mp4, FILE-2.mp4, ...);
    Atari: the whole games in colour, MuJoCo: gymnasium's view (needs the video extra: pip install 'rlfast[video]')"""
    video_episodes: int = 1
    """how many of the evaluated episodes --video records"""
    policy: int = 0
    """a population's member to play (appo.py --pbt-population: its checkpoint holds agent, agent_1, ...; the run's
    last line names the best); 0: the checkpoint's agent"""
    save_policy: Optional[str] = None
    """also write the evaluated policy to this file: its weights, normalizer and options, without the optimizer
    state, other networks or RNG (a file to commit or share, which this script reads and --resume refuses)"""


def load_script(name: str):
    """Imports scripts/<name> (the trainer that wrote the checkpoint) as a module."""
    path = SCRIPTS / name
    if Path(name).name != name or path.suffix != ".py" or not path.is_file():
        raise SystemExit(f"error: the checkpoint was written by {name}, but {path.name} is not in {SCRIPTS.name}/")
    spec = importlib.util.spec_from_file_location(f"rlfast_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(args: Args) -> int:
    if args.episodes < 1:
        raise SystemExit(f"error: --episodes must be >= 1, got {args.episodes}")
    if not 1 <= args.video_episodes <= args.episodes:
        raise SystemExit(f"error: --video-episodes must be in [1, --episodes={args.episodes}], "
                         f"got {args.video_episodes}")  # fmt: skip
    if args.video is not None and not args.video.endswith(".mp4"):
        raise SystemExit(f"error: --video must name an .mp4 file, got {args.video!r}")
    try:
        ckpt = load_checkpoint(args.checkpoint)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if args.save_policy is not None and Path(args.save_policy).resolve() == checkpoint_path(args.checkpoint).resolve():
        raise SystemExit(f"error: --save-policy {args.save_policy} is the checkpoint being evaluated: writing the "
                         "policy alone over it would lose what --resume needs")  # fmt: skip
    name = trainer_of(ckpt)  # the script that wrote it, or where that variant has moved
    script = load_script(name)
    problems = contract_problems(script)
    if problems:
        raise SystemExit(f"error: {name} cannot be evaluated: {'; '.join(problems)} "
                         "(the contract: rlfast.algos.contract.TrainerScript)")  # fmt: skip
    fields = {f.name for f in dataclasses.fields(script.Args)}
    train_args = script.Args(**{k: v for k, v in ckpt["args"].items() if k in fields})
    env_id = args.env_id or ckpt["env_id"]
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)

    env_kwargs = ckpt.get("eval_env_kwargs", ckpt["env_kwargs"])  # older ones: only the training ones
    try:
        envs = make_eval_envs(env_id, args.episodes, args.seed, env_kwargs, render=args.video is not None)
    except ValueError as e:
        raise SystemExit(f"error: {env_id}: {e}") from None
    videos = None
    if args.video is not None:
        video = Path(args.video)
        paths = [video] if args.video_episodes == 1 else [video.with_name(f"{video.stem}-{i + 1}.mp4")
                                                           for i in range(args.video_episodes)]  # fmt: skip
        try:
            videos = Videos(envs, paths)
        except ImportError as e:
            envs.close()
            raise SystemExit(f"error: --video: {e}") from None
    with envs:
        agent = script.make_agent(train_args, envs.single_observation_space, envs.single_action_space)
        problems = contract_problems(script, agent)
        if problems:
            raise SystemExit(f"error: {name} cannot be evaluated: {'; '.join(problems)} "
                             "(the contract: rlfast.algos.contract.Policy)")  # fmt: skip
        model = "agent" if args.policy == 0 else f"agent_{args.policy}"
        if model not in ckpt["models"]:
            members = sum(1 for name in ckpt["models"] if name == "agent" or name.startswith("agent_"))
            raise SystemExit(f"error: --policy {args.policy}: the checkpoint holds {members} "
                             f"polic{'y' if members == 1 else 'ies'} (0..{members - 1})")  # fmt: skip
        try:
            agent.load_state_dict(ckpt["models"][model])
        except RuntimeError as e:  # e.g. --env-id with another number of actions than the trained task
            raise SystemExit(f"error: the checkpoint's network does not fit {env_id}'s spaces: "
                             f"{str(e).splitlines()[-1].strip()}") from None  # fmt: skip
        agent = agent.to(device).eval()
        obs_normalizer = None
        if "obs" in ckpt["normalizers"]:
            obs_normalizer = ObsNormalizer(envs.single_observation_space.shape, device=device)
            obs_normalizer.load_state_dict(ckpt["normalizers"]["obs"])
            obs_normalizer.update = False
        start = time.perf_counter()
        try:
            returns, lengths = evaluate(agent, envs, device, greedy=not args.sample, obs_normalizer=obs_normalizer,
                                        videos=videos)  # fmt: skip
        except NotImplementedError as e:  # --video of a task that does not render
            raise SystemExit(f"error: --video: {e}") from None
        finally:
            if videos is not None:
                videos.close()
        seconds = time.perf_counter() - start

    policy = "sampled" if args.sample else "greedy"
    member = f" {args.policy}" if args.policy else ""
    print(f"{env_id}: {ckpt['script']} checkpoint at step {ckpt['global_step']:,}, {policy} policy{member}")
    print(f"episodes: {len(returns)}  mean length: {lengths.mean():.1f}  ({seconds:.1f} s)")
    print(f"return: {returns.mean():.2f} ± {returns.std():.2f}  (min {returns.min():.1f}, max {returns.max():.1f})")
    if args.per_episode:
        print("returns:", " ".join(f"{r:g}" for r in returns))
        print("lengths:", " ".join(str(n) for n in lengths))
    if videos is not None:
        for path, frames in zip(videos.paths, videos.frames):
            print(f"video: {path} ({frames} frames)")
    if args.save_policy is not None:
        try:
            path = save_checkpoint(args.save_policy, policy_only(ckpt, model))
        except OSError as e:  # a CheckpointWriteError, or a folder that cannot be made
            raise SystemExit(f"error: --save-policy: {e}") from None
        print(f"policy: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
