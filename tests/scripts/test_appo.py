"""scripts/appo.py end to end with seconds-long budgets: run dir, tensorboard tags (policy lag, the sampler's
profile), checkpoint, evaluate.py, --resume, Ctrl-C, an Atari run, users' envs in worker processes (an MLP one and
a pixel one through the CNN), --deterministic giving the same losses twice, and a slow test that trains CartPole
with the preset. The pieces: tests/algos/test_appo_pieces.py, test_vtrace.py."""

import re
import signal
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint
from rlfast.algos.config import parse_or_resume

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--env-id", "CartPole-v1", "--num-envs", "8", "--trajectory-length", "8", "--batch-size", "64", "--no-cuda",
        "--torch-threads", "1", "--runs-dir", "runs"]  # fmt: skip


def scalars(run_dir, tag):
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)], set(acc.Tags()["scalars"])


@pytest.fixture(scope="module")
def smoke_run(run_in_new_dir):
    return run_in_new_dir("appo", "appo.py", *TINY, "--total-timesteps", "3200")


def test_smoke_run_outputs_and_checkpoint(smoke_run):
    run_dir, proc = smoke_run
    assert re.fullmatch(r"CartPole-v1__appo__1__\d+", run_dir.name)
    assert "EnvPool('CartPole-v1', num_envs=8, batch_size=4" in proc.stdout and "async" in proc.stdout
    assert re.search(r"step\s+3,200/3,200 \|", proc.stdout) and "profile over 50 iterations" in proc.stdout
    ckpt = load_checkpoint(run_dir)
    assert ckpt["script"] == "appo.py" and (ckpt["iteration"], ckpt["global_step"]) == (50, 3200)
    lag, tags = scalars(run_dir, "charts/policy_lag_mean")
    expected = {"charts/episodic_return", "charts/SPS", "losses/policy_loss", "losses/value_loss", "losses/entropy",
                "losses/approx_kl", "losses/clipfrac", "charts/policy_lag_max", "perf/wait", "perf/train",
                "perf/other", "perf/sampler_env", "perf/sampler_inference", "perf/sampler_storage"}  # fmt: skip
    assert expected <= tags, expected - tags
    # Async: samples were chosen by weights some SGD steps old, never by newer ones than the learner's.
    assert all(v >= 0 for _, v in lag) and max(v for _, v in lag) > 0


def test_evaluate_and_resume(run, smoke_run, tmp_path):
    run_dir, _ = smoke_run
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", cwd=tmp_path)
    assert proc.returncode == 0 and "appo.py checkpoint at step 3,200, greedy policy" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    copy = tmp_path / run_dir.name
    copy.mkdir()
    (copy / "checkpoint.pt").write_bytes((run_dir / "checkpoint.pt").read_bytes())
    proc = run("appo.py", "--resume", str(copy), "--total-timesteps", "3840", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (load_checkpoint(copy)["global_step"], "profile over 10 iterations" in proc.stdout) == (3840, True)


def test_deterministic_runs_give_identical_losses(run, tmp_path):
    flags = [*TINY, "--deterministic", "--env-batch-size", "8", "--total-timesteps", "1280"]
    losses = []
    for i in range(2):
        proc = run("appo.py", *flags, "--runs-dir", f"runs{i}", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "batch_size=8" in proc.stdout and "sync" in proc.stdout
        (run_dir,) = (tmp_path / f"runs{i}").iterdir()
        losses.append([scalars(run_dir, f"losses/{t}")[0] for t in ("policy_loss", "value_loss", "entropy")])
        lag = scalars(run_dir, "charts/policy_lag_mean")[0]
        # Batch 1 learns from the initial weights (lag 0 at its first step), every later batch from those of the
        # batch before the previous one: one batch (1 SGD step per minibatch here: 2) behind at its first step.
        assert lag[0][1] == pytest.approx(0.5) and all(v == pytest.approx(2.5) for _, v in lag[2:]), lag
    assert losses[0] == losses[1]
    assert len(losses[0][0]) == 20 and len({v for _, v in losses[0][0]}) > 1


def test_kl_adaptive_lr_steers_the_rate_by_the_epochs_kl(run, tmp_path):
    # a KL target far above what an epoch moves the policy: the rate grows x1.5 per epoch up to --lr-max
    flags = [*TINY, "--total-timesteps", "640", "--update-epochs", "2", "--learning-rate", "1e-4"]
    proc = run("appo.py", *flags, "--kl-adaptive-lr", "10", "--lr-max", "5e-4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    rates = [v for _, v in scalars(run_dir, "charts/learning_rate")[0]]
    assert rates[0] == pytest.approx(1e-4 * 1.5**2) and rates[-1] == pytest.approx(5e-4) and len(rates) == 10
    # the KL from the learner's weights at the batch's start (PPO's): the same growth, and it is logged
    proc = run("appo.py", *flags, "--kl-adaptive-lr", "10", "--lr-max", "5e-4", "--kl-reference", "batch",
               "--runs-dir", "batch", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "batch").iterdir()
    assert [v for _, v in scalars(run_dir, "charts/learning_rate")[0]] == pytest.approx(rates)
    kls = [v for _, v in scalars(run_dir, "losses/update_kl")[0]]
    assert len(kls) == 10 and all(0.0 < v < 1.0 for v in kls), kls
    proc = run("appo.py", *flags, "--runs-dir", "plain", cwd=tmp_path)  # without it: constant
    (run_dir,) = (tmp_path / "plain").iterdir()
    assert all(v == pytest.approx(1e-4) for _, v in scalars(run_dir, "charts/learning_rate")[0])
    proc = run("appo.py", *flags, "--kl-adaptive-lr", "0.01", "--lr-max", "5e-5", cwd=tmp_path)
    assert proc.returncode != 0 and "error: --lr-max 5e-05 is below --learning-rate 0.0001" in proc.stderr


def test_atari_run_logs_whole_games(run, tmp_path):
    proc = run("appo.py", "--env-id", "Breakout-v5", "--num-envs", "4", "--rollout", "8", "--batch-size", "32",
               "--total-timesteps", "640", "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir)
    assert ckpt["env_kwargs"] == {"episodic_life": True, "reward_clip": True}
    assert ckpt["eval_env_kwargs"] == {"episodic_life": False, "reward_clip": False}
    assert "network.0.weight" in ckpt["models"]["agent"]  # the Nature CNN


def test_normalized_frames_are_counted_published_saved_and_resumed(run, tmp_path):
    """--normalize-frames: the learner counts every batch's frames (the newest of each step's stack) before its
    update, so the checkpoint's statistics hold every step trained on; evaluate.py plays with them, --resume counts
    on from them, and the flag is refused where there is no Nature CNN."""
    common = ["--env-id", "Pong-v5", "--num-envs", "4", "--trajectory-length", "8", "--batch-size", "32", "--no-cuda",
              "--torch-threads", "1", "--runs-dir", "runs", "--normalize-frames"]  # fmt: skip
    proc = run("appo.py", *common, "--total-timesteps", "96", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    weights = load_checkpoint(run_dir)["models"]["agent"]
    assert weights["network.pixel_count"].item() == 96  # 3 batches of 4 trajectories x 8 steps
    mean, var = weights["network.pixel_mean"], weights["network.pixel_var"]
    assert mean.shape == var.shape == (84, 84) and 0 < mean.mean() < 255
    assert (var == 0).any() and (var > 0).any()  # the still border, and what moves
    proc = run("evaluate.py", str(run_dir), "--episodes", "1", "--no-cuda", cwd=tmp_path)
    assert proc.returncode == 0 and "greedy policy" in proc.stdout, proc.stdout + proc.stderr
    proc = run("appo.py", "--resume", str(run_dir / "checkpoint.pt"), "--total-timesteps", "160", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert load_checkpoint(run_dir)["models"]["agent"]["network.pixel_count"].item() == 160
    proc = run("appo.py", *TINY, "--normalize-frames", "--total-timesteps", "640", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--normalize-frames normalizes the Nature CNN's stacked frames; CartPole-v1 observations are (4,)" in \
        proc.stderr, proc.stderr


def test_trains_a_gymnasium_env_in_worker_processes_and_evaluates_it(run, tmp_path):
    """A gymnasium "module:Env-v0" id runs as Python envs (rlfast/procpool.py) through the MLP; evaluate.py replays
    it."""
    proc = run("appo.py", *TINY, "--env-id", "gymnasium:CartPole-v1", "--total-timesteps", "640", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ProcessEnvPool('gymnasium:CartPole-v1', num_envs=8, batch_size=4" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("gymnasium_CartPole-v1__appo__1__")
    assert "network.0.weight" not in load_checkpoint(run_dir)["models"]["agent"]  # the MLP
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", "--no-cuda", cwd=tmp_path)
    assert proc.returncode == 0 and "appo.py checkpoint at step 640, greedy policy" in proc.stdout, (
        proc.stdout + proc.stderr
    )


def test_trains_a_users_pixel_env_through_the_cnn(run, tmp_path, pixel_env):
    """uint8 (C, 84, 84) frames of a user's env go to the Nature CNN, with no Atari wrapper added."""
    proc = run("appo.py", *TINY, "--env-id", "dotframes:DotFrames-v0", "--total-timesteps", "640", cwd=tmp_path,
               env=pixel_env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir)
    assert "network.0.weight" in ckpt["models"]["agent"]  # the Nature CNN
    assert not ckpt["env_kwargs"] and not ckpt["eval_env_kwargs"]  # the env's own preprocessing only
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", "--no-cuda", cwd=tmp_path, env=pixel_env)
    assert proc.returncode == 0 and "appo.py checkpoint at step 640, greedy policy" in proc.stdout, (
        proc.stdout + proc.stderr
    )


@pytest.mark.parametrize("recurrent", ["none", "gru"])
def test_trains_a_dict_envs_frames_and_vector_and_evaluates_it(run, tmp_path, pixel_env, recurrent):
    """A Dict env of uint8 frames (1, 48, 84) and a float32 vector goes to convnet_simple with the vector's head (and
    with ``--recurrent gru`` into Sample Factory's GRU of 512); the trajectories keep each key
    (tests/algos/test_appo_pieces.py), evaluate.py plays it."""
    proc = run("appo.py", *TINY, "--env-id", "dotframes:DotScene-v0", "--total-timesteps", "640", "--recurrent",
               recurrent, cwd=tmp_path, env=pixel_env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    agent = load_checkpoint(run_dir)["models"]["agent"]
    assert agent["network.0.weight"].shape == (32, 1, 8, 8) and agent["measurements.0.weight"].shape == (128, 1)
    if recurrent == "none":
        assert agent["actor.weight"].shape == (3, 512 + 128) and "core.weight_ih_l0" not in agent
    else:  # the GRU's three gates over the 640 joined features, the heads on its 512 outputs
        assert agent["core.weight_ih_l0"].shape == (3 * 512, 512 + 128) and agent["actor.weight"].shape == (3, 512)
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", "--no-cuda", cwd=tmp_path, env=pixel_env)
    assert proc.returncode == 0 and "appo.py checkpoint at step 640, greedy policy" in proc.stdout, (
        proc.stdout + proc.stderr
    )


@pytest.mark.parametrize("env_id, message", [
    ("dotframes:DotFramesFloat-v0", "dotframes:DotFramesFloat-v0 observations are (4, 84, 84) float32; the Nature CNN "
                                    "needs uint8 frames of shape (C, 84, 84)"),
    ("gymnasium:FrozenLake-v1", "gymnasium:FrozenLake-v1 has Discrete observations; appo.py needs a Box"),
    ("gymnasium:Pendulum-v1", "gymnasium:Pendulum-v1 has a Box action space; appo.py needs Discrete"),
])  # fmt: skip
def test_refuses_a_users_env_it_cannot_train(run, tmp_path, pixel_env, env_id, message):
    proc = run("appo.py", *TINY, "--env-id", env_id, "--total-timesteps", "640", cwd=tmp_path, env=pixel_env)
    assert proc.returncode == 1 and message in proc.stderr, proc.stdout + proc.stderr


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path, interrupt_training):
    _, ckpt = interrupt_training("appo.py", *TINY, "--total-timesteps", "100000000", cwd=tmp_path)
    assert ckpt["global_step"] == ckpt["iteration"] * 64


def processes_in(folder):
    """The pids of the live processes whose working directory is ``folder``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cwd").resolve() == folder.resolve():
                pids.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return pids


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_a_run_on_worker_processes_cleanly(tmp_path, interrupt_training, sig):
    """The sampler thread in a recv on Python envs' worker processes: Ctrl-C or SIGTERM still saves, stops the
    workers and exits cleanly (no worker left behind)."""
    out, ckpt = interrupt_training("appo.py", *TINY, "--env-id", "gymnasium:CartPole-v1", "--total-timesteps",
                                   "100000000", cwd=tmp_path, sig=sig)  # fmt: skip
    assert "ProcessEnvPool('gymnasium:CartPole-v1'" in out and ckpt["global_step"] == ckpt["iteration"] * 64
    assert not processes_in(tmp_path)  # the workers ran there too (forked from the trainer), and are gone


def test_bad_flag_is_one_error_line(run, tmp_path):
    proc = run("appo.py", *TINY, "--total-timesteps", "640", "--num-threads", "0", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("error: --num-threads must be >= 1"), proc.stderr


@pytest.mark.slow
def test_cartpole_preset_reaches_400(tmp_path, learning_run):
    last, mean_return, seconds = learning_run("appo.py", "--config", str(ROOT / "configs" / "cartpole_appo.toml"),
                                              "--target-return", "400", "--no-cuda", cwd=tmp_path,
                                              timeout=600)  # fmt: skip
    print(f"{last} in {seconds:.0f} s")
    assert mean_return >= 400, last


@pytest.mark.parametrize(
    "preset", ["cartpole_appo.toml", "pong_appo_5min.toml", "breakout_cleanba.toml", "pong_sample_factory.toml",
               "doom_basic_appo.toml", "doom_defend_center_appo.toml", "doom_health_gathering_supreme_appo.toml"]
)
def test_presets_are_valid_args(preset, load_script):
    appo = load_script("appo.py")
    args, _ = parse_or_resume(appo.Args, "appo.py", ["--config", str(ROOT / "configs" / preset)])
    assert args.validate() == [] and args.config.endswith(preset)
    if preset == "breakout_cleanba.toml":
        assert args.deterministic and args.batch_size == args.num_envs * args.trajectory_length
    if preset == "doom_health_gathering_supreme_appo.toml":
        assert args.recurrent == "gru"
