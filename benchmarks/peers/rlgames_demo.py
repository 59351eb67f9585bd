"""rl_games' own EnvPool recipe for a demo task on this machine's CPU: the peer of benchmarks/bench_demo.py.

Runs rl_games (``pip install rl-games``: a peer for the benchmark, not a dependency of rlfast) with the
config it ships, ``configs/atari/ppo_pong_envpool.yaml`` or ``configs/mujoco/ant_envpool.yaml``, changed only
where a CPU-only machine or the comparison needs it (each printed at the start):

- ``device``: cpu (its default is cuda:0);
- ``mixed_precision``: off (it is CUDA's autocast in rl_games; the Ant recipe turns it on for a GPU);
- ``games_to_track``: 20, so its mean return is over the same 20-episode window as rlfast's;
- ``score_to_win``: the demo's threshold, so it stops there as rlfast's ``--target-return`` does
  (rl_games stops when the mean is above it; rlfast at or above);
- ``env_name`` Ant-v5 for Ant (the recipe names Ant-v4; the comparison is on the same task), ``seed``;
- ``max_frames``: a cap on env steps;
- with ``--no-contact-forces`` (Ant only), EnvPool's ``use_contact_force`` off: the 27-value observation of the
  recipe's Ant-v4 and of rlfast's ``configs/ant_cpu.toml``, instead of Ant-v5's 105 with the 78 contact forces.
  EnvPool then also leaves the contact cost out of the reward (gymnasium's Ant-v5, rlfast's, keeps it whatever the
  observation): in rl_games' favour by at most 0.042 a step, 42 over a 1,000-step episode (a weight of
  5e-4 on at most 84 squared contact forces clipped to [-1, 1]).

    python benchmarks/peers/rlgames_demo.py --task pong --seed 1 --out results/demo_rlgames/pong_seed1

The events (``rewards/step``, ``rewards/time``) go to OUT/summaries, written every 2 s instead of every 120 s
so that a run stopped from outside keeps its curve. The last line printed is ``RESULT steps=<n>``.
"""

import time

START = time.time()  # wall time counts from the command's start, imports included

import argparse  # noqa: E402
import importlib.resources  # noqa: E402
import os  # noqa: E402

import yaml  # noqa: E402

RECIPES = {"pong": ("atari/ppo_pong_envpool.yaml", "Pong-v5", 18.0),
           "ant": ("mujoco/ant_envpool.yaml", "Ant-v5", 5000.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(RECIPES), required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="folder for rl_games' train dir and events")
    parser.add_argument("--max-steps", type=int, default=20_000_000, help="env steps cap")
    parser.add_argument("--no-contact-forces", action="store_true",
                        help="Ant: EnvPool's use_contact_force off (27 observation values, no contact cost)")
    args = parser.parse_args()
    if args.no_contact_forces and args.task != "ant":
        parser.error(f"--no-contact-forces is for --task ant, got --task {args.task}")

    import tensorboardX

    class FlushingWriter(tensorboardX.SummaryWriter):  # rl_games' writer flushes every 120 s by default
        def __init__(self, *a, **k):
            k["flush_secs"] = 2
            super().__init__(*a, **k)

    tensorboardX.SummaryWriter = FlushingWriter
    import rl_games
    from rl_games.common import a2c_common

    a2c_common.SummaryWriter = FlushingWriter
    from rl_games.torch_runner import Runner

    name, env_id, threshold = RECIPES[args.task]
    path = importlib.resources.files(rl_games) / "configs" / name
    params = yaml.safe_load(path.read_text())
    config = params["params"]["config"]
    changes = {"device": "cpu", "mixed_precision": False, "games_to_track": 20, "score_to_win": threshold,
               "max_frames": args.max_steps, "max_epochs": -1, "train_dir": args.out}
    params["params"]["seed"] = args.seed
    config["env_config"]["env_name"] = env_id
    config["env_config"].pop("seed", None)
    if args.no_contact_forces:
        print(f"rl_games {name}: env_config use_contact_force (unset: EnvPool's default, on for Ant-v5) -> False")
        config["env_config"]["use_contact_force"] = False
    for key, value in changes.items():
        print(f"rl_games {name}: {key} {config.get(key, '(unset)')} -> {value}")
        config[key] = value
    print(f"rl_games {rl_games.__version__ if hasattr(rl_games, '__version__') else ''} {name} on {env_id}, "
          f"seed {args.seed}, {os.cpu_count()} cores, torch threads from torch's default", flush=True)
    os.makedirs(args.out, exist_ok=True)
    runner = Runner()
    runner.load(params)
    runner.run({"train": True, "play": False, "checkpoint": None, "sigma": None})
    print(f"RESULT wall_s={time.time() - START:.1f}", flush=True)


if __name__ == "__main__":
    main()
