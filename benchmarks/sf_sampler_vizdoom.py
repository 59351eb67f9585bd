"""Sample Factory's own sampler on its own VizDoom envs: env steps/s over a fixed wall-clock budget.

Run by ``benchmarks/bench_vizdoom.py`` with Sample Factory's Python (a venv of its own: sample-factory pins
numpy < 2 and gymnasium < 1.0, rlfast needs gymnasium >= 1.0), so it imports nothing of rlfast. Prints one JSON
line: ``{"steps": ..., "seconds": ..., "num_envs": ...}``.

What runs: ``SyncSamplingAPI`` (``sample_factory/algo/sampling/simplified_sampling_api.py``, the sampler without
a learner, as ``sf_examples/sampler/use_simplified_sampling_api.py`` runs it): ``num_workers`` rollout worker
processes, each stepping ``envs_per_worker`` envs in ``worker_num_splits`` = 2 halves (its double-buffered
sampling), one inference worker, shared-memory trajectory buffers, on the CPU. The env is Sample Factory's own
(``sf_examples/vizdoom/doom/doom_utils.py``, its .cfg files and wrappers, 160x120 -> 128x72, frame skip 4).
``--policy trivial`` (the default) replaces the Doom model with an encoder that reads 4 pixels and no recurrent
core, so the rate is the sampler's and the env's, as rlfast's pool and gymnasium's vector env are measured with
random actions; ``--policy doom`` keeps Sample Factory's Doom model (conv encoder, GRU 512) for reference.
``--single``: instead, one of Sample Factory's envs stepped with random actions in a plain loop (its own step rate).

    venv-sf/bin/python benchmarks/sf_sampler_vizdoom.py --env doom_basic --num-workers 2 --envs-per-worker 4
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time


def tiny_encoder(cfg, obs_space):  # noqa: ANN001, ANN201 - Sample Factory's factory signature
    """An encoder costing next to nothing: 4 pixels of the screen, one linear layer."""
    from sample_factory.model.encoder import Encoder
    from torch import nn

    class Tiny(Encoder):
        def __init__(self) -> None:
            super().__init__(cfg)
            self.linear = nn.Linear(4, 8)

        def forward(self, obs_dict):  # noqa: ANN001, ANN201
            return self.linear(obs_dict["obs"][:, 0, ::36, ::64].float().flatten(1))

        def get_out_size(self) -> int:
            return 8

    return Tiny()


def single(a: argparse.Namespace) -> None:
    """One of Sample Factory's envs (its ``make_doom_env_from_spec``, every wrapper) in a plain loop."""
    from sf_examples.vizdoom.doom.doom_utils import doom_env_by_name, make_doom_env_from_spec
    from sf_examples.vizdoom.train_vizdoom import parse_vizdoom_cfg

    cfg = parse_vizdoom_cfg(argv=[f"--env={a.env}", "--experiment=sampler_bench", f"--train_dir={tempfile.mkdtemp()}"])
    env = make_doom_env_from_spec(doom_env_by_name(a.env), a.env, cfg, None)
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(64)]
    env.reset(seed=0)
    steps, start, measured = 0, time.perf_counter(), None
    while True:
        _, _, terminated, truncated, _ = env.step(actions[steps % len(actions)])
        if terminated or truncated:
            env.reset()
        steps += 1
        now = time.perf_counter()
        if measured is None and now - start >= a.warmup:
            measured, start, steps = now, now, 0
        elif measured is not None and now - start >= a.seconds:
            break
    env.close()
    print(json.dumps({"steps": steps, "seconds": now - start, "num_envs": 1}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="doom_basic", help="a Sample Factory Doom env (doom_utils.py DOOM_ENVS)")
    p.add_argument("--num-workers", type=int, default=2, help="rollout worker processes")
    p.add_argument("--envs-per-worker", type=int, default=4, help="envs per worker (an even number: 2 splits)")
    p.add_argument("--seconds", type=float, default=8.0, help="measured wall-clock seconds")
    p.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds after the first trajectory")
    p.add_argument("--policy", choices=("trivial", "doom"), default="trivial")
    p.add_argument("--niceness", type=int, default=0, help="--default_niceness: rollout workers at this + 10")
    p.add_argument("--single", action="store_true", help="one env in a plain loop, no sampler")
    a = p.parse_args()
    if a.single:
        return single(a)

    from sample_factory.algo.sampling.simplified_sampling_api import SyncSamplingAPI
    from sample_factory.algo.utils.context import global_model_factory
    from sample_factory.algo.utils.env_info import obtain_env_info_in_a_separate_process
    from sample_factory.algo.utils.rl_utils import samples_per_trajectory
    from sf_examples.vizdoom.train_vizdoom import parse_vizdoom_cfg, register_vizdoom_components

    register_vizdoom_components()
    argv = [f"--env={a.env}", "--experiment=sampler_bench", f"--train_dir={tempfile.mkdtemp()}", "--device=cpu",
            f"--num_workers={a.num_workers}", f"--num_envs_per_worker={a.envs_per_worker}", "--worker_num_splits=2",
            "--rollout=32", "--serial_mode=False", "--async_rl=True", "--decorrelate_envs_on_one_worker=False",
            "--with_wandb=False", f"--default_niceness={a.niceness}"]  # fmt: skip
    if a.policy == "trivial":
        global_model_factory().register_encoder_factory(tiny_encoder)
        argv += ["--use_rnn=False", "--normalize_input=False", "--decoder_mlp_layers",
                 "--actor_critic_share_weights=True"]
    cfg = parse_vizdoom_cfg(argv=argv)
    env_info = obtain_env_info_in_a_separate_process(cfg)
    sampler = SyncSamplingAPI(cfg, env_info)
    sampler.start()
    try:
        traj = sampler.get_trajectories_sync()  # the workers are up and stepping
        end = time.perf_counter() + a.warmup
        while time.perf_counter() < end:
            traj = sampler.get_trajectories_sync()
        steps, start = 0, time.perf_counter()
        end = start + a.seconds
        while time.perf_counter() < end:
            traj = sampler.get_trajectories_sync()
            if traj is None:
                raise RuntimeError("Sample Factory's sampler stopped")
            steps += samples_per_trajectory(traj)
        seconds = time.perf_counter() - start
    finally:
        sampler.stop()
    print(json.dumps({"steps": steps, "seconds": seconds, "num_envs": a.num_workers * a.envs_per_worker}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
