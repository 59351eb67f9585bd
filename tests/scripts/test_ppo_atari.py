"""scripts/ppo_atari.py end to end with seconds-long budgets: run dir, tensorboard tags, full-game episode
stats, checkpoints, evaluate.py (whole games, raw scores), --resume (also of checkpoints written before --overlap
and --recurrent left this script), preset + override, Ctrl-C, and clear errors. The episode statistics themselves
are checked against CleanRL's bookkeeping in tests/algos/test_episodes.py."""

import importlib.util
import os
import re
from pathlib import Path

import pytest
import tomllib
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
TINY = ["--num-envs", "2", "--num-steps", "16", "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs"]


# One OpenMP thread in every subprocess (evaluate.py has no flag for it): on a shared 2-core machine a
# busy neighbour makes 2-thread CPU inference of small batches up to 50x slower (spinning threads). The run
# fixture (tests/conftest.py) sets it also where a test gives env (a user's module on the path).
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
pytestmark = pytest.mark.run_defaults(timeout=120, one_thread=True)


@pytest.fixture(scope="module")
def breakout_run(run_in_new_dir):
    """Breakout, long enough (256 steps per env) for random-ish play to end games."""
    return run_in_new_dir("breakout", "ppo_atari.py", *TINY, "--env-id", "Breakout-v5", "--num-steps", "32",
                          "--total-timesteps", "512", "--save-interval", "4")  # fmt: skip


@pytest.fixture(scope="module")
def pong_run(run_in_new_dir):
    """The default task: 2 iterations."""
    return run_in_new_dir("pong", "ppo_atari.py", *TINY, "--total-timesteps", "64")


def test_run_dir_outputs_and_checkpoint(breakout_run, finished_run):
    run_dir, proc = breakout_run
    finished_run(run_dir, proc.stdout, "Breakout-v5__ppo_atari", 512, saves=(4, 8))
    assert proc.stdout.count("EnvPool('Breakout-v5', num_envs=2") == 1

    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["script"] == "ppo_atari.py" and ckpt["env_id"] == "Breakout-v5"
    assert ckpt["iteration"] == 8 and ckpt["global_step"] == 512
    assert ckpt["env_kwargs"] == {"episodic_life": True, "reward_clip": True, "stack_num": 1}
    assert ckpt["eval_env_kwargs"] == {"episodic_life": False, "reward_clip": False, "stack_num": 4}  # evaluate.py's
    weights = ckpt["models"]["agent"]
    assert weights["network.0.weight"].shape == (32, 4, 8, 8) and weights["network.7.weight"].shape == (512, 3136)
    assert weights["actor.weight"].shape == (4, 512) and weights["critic.weight"].shape == (1, 512)
    assert ckpt["optimizers"]["optimizer"]["state"]  # Adam moments were saved


def test_tensorboard_tags_and_full_game_episodes(breakout_run, ppo_log):
    run_dir, _ = breakout_run
    acc = ppo_log(run_dir, 8, 2.5e-4)
    # Whole games of 5 lives: far longer than one life, and each env's games fit in its 256 steps.
    games = list(zip(acc.Scalars("charts/episodic_return"), acc.Scalars("charts/episodic_length")))
    assert games
    for ret, length in games:
        assert ret.value >= 0 and ret.value == int(ret.value)
        assert 50 <= length.value <= ret.step / 2 and ret.step == length.step <= 512


def test_evaluate_plays_whole_games_with_raw_scores(run, pong_run):
    run_dir, _ = pong_run
    proc = run("evaluate.py", str(run_dir / "checkpoint.pt"), "--episodes", "2", cwd=run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Pong-v5: ppo_atari.py checkpoint at step 64, greedy policy" in proc.stdout
    # A whole game of Pong ends at 21 points: an untrained agent loses it about 21-0, raw score about -21
    # (with the training options, an episode would be one point and the return clipped).
    match = re.search(r"mean length: ([\d.]+).*\nreturn: (-?[\d.]+)", proc.stdout)
    assert match and float(match.group(1)) > 500 and float(match.group(2)) <= -15, proc.stdout


def test_half_width_cnn_on_64px_frames_is_saved_and_rebuilt_by_evaluate(run, tmp_path):
    proc = run("ppo_atari.py", *TINY, "--total-timesteps", "64", "--cnn-width", "0.5", "--frame-size", "64",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    shapes = {k: tuple(v.shape) for k, v in ckpt["models"]["agent"].items() if k.endswith("weight")}
    # 16-32-32-256 instead of the Nature CNN's 32-64-64-512 (Pong: 6 actions), a 4x4 last feature map
    assert [s[0] for s in shapes.values()] == [16, 32, 32, 256, 6, 1], shapes
    assert shapes["network.7.weight"] == (256, 32 * 4 * 4), shapes
    size = {"img_height": 64, "img_width": 64}
    assert ckpt["env_kwargs"].items() >= size.items() and ckpt["eval_env_kwargs"].items() >= size.items(), ckpt
    proc = run("evaluate.py", str(run_dir / "checkpoint.pt"), "--episodes", "1", cwd=run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "greedy policy" in proc.stdout
    proc = run("ppo_atari.py", *TINY, "--total-timesteps", "64", "--cnn-width", "0", "--frame-size", "35",
               cwd=tmp_path)  # fmt: skip
    assert proc.returncode != 0 and "--cnn-width" in proc.stderr and "--frame-size" in proc.stderr, proc.stderr


def test_env_groups_train_on_the_same_trajectories_as_one_pool(run, tmp_path):
    """--env-groups 2: two pools of 2 envs, one acting while the other steps, seeded as one pool's 4 envs. The
    trajectories are the same, so the weights after 2 updates are too, up to the rounding of acting on batches of 2
    instead of 4 (float32 here, ~1e-6). Adam moves each weight by about the learning rate (2.5e-4) per minibatch
    whatever its gradient's size, so other trajectories (other gradients) would move nearly every weight far beyond
    2e-5; the same step also lifts that rounding for the few weights whose gradient is near zero (on an AVX2-only
    CPU 141 of the third convolution's 36,864 weights, up to 7.4e-5 apart): at most 1% of a tensor may pass 2e-5,
    none 1e-3."""
    weights = {}
    for groups in (1, 2):
        proc = run("ppo_atari.py", *TINY, "--num-envs", "4", "--total-timesteps", "128", "--env-id", "Breakout-v5",
                   "--no-auto-speed", "--env-groups", str(groups), "--runs-dir", f"runs{groups}",
                   cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = (tmp_path / f"runs{groups}").iterdir()
        weights[groups] = load_checkpoint(run_dir / "checkpoint.pt")["models"]["agent"]
    assert proc.stdout.count("EnvPool('Breakout-v5', num_envs=2") == 2, proc.stdout
    for key, w in weights[2].items():
        apart = (w - weights[1][key]).abs()
        assert (apart > 2e-5).float().mean() <= 0.01 and apart.max() < 1e-3, (key, apart.max())
    proc = run("ppo_atari.py", *TINY, "--num-envs", "4", "--env-groups", "3", cwd=tmp_path)
    assert proc.returncode == 1 and "--env-groups 3 does not divide the 4 envs" in proc.stderr, proc.stderr


def test_normalized_frames_keep_their_statistics_in_the_checkpoint(normalized_frames_run, tmp_path):
    """--normalize-frames: its statistics counted, saved, evaluated and resumed (``normalized_frames_run``)."""
    normalized_frames_run("ppo_atari.py", *TINY, cwd=tmp_path)


def test_trains_and_evaluates_a_users_pixel_env(run, tmp_path, pixel_env):
    """A user's env giving uint8 (1, 84, 84) frames: stacked as the Atari games' frames, its own episodes (no lives,
    no clipping), and evaluate.py stacks them the same way."""
    proc = run("ppo_atari.py", *TINY, "--env-id", "dotframes:DotFrame-v0", "--total-timesteps", "128", cwd=tmp_path,
               env=pixel_env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ProcessEnvPool('dotframes:DotFrame-v0', num_envs=2" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["env_kwargs"] == {} and ckpt["eval_env_kwargs"] == {"frame_stack": 4}
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    assert [e.value for e in acc.Scalars("charts/episodic_length")] == [40.0, 40.0]  # the env's 40-step episodes
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", cwd=tmp_path, env=pixel_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dotframes:DotFrame-v0: ppo_atari.py checkpoint at step 128, greedy policy" in proc.stdout
    assert "mean length: 40.0" in proc.stdout


def test_refuses_a_users_env_without_its_frames(run, tmp_path, pixel_env):
    proc = run("ppo_atari.py", *TINY, "--env-id", "dotframes:DotFrames-v0", "--total-timesteps", "128", cwd=tmp_path,
               env=pixel_env)  # fmt: skip
    assert proc.returncode == 1
    assert ("dotframes:DotFrames-v0 observations are (4, 84, 84) uint8; ppo_atari.py stacks uint8 frames of shape "
            "(1, 84, 84)") in proc.stderr, proc.stdout + proc.stderr


def test_resume_continues_the_same_run(run, pong_run):
    run_dir, _ = pong_run
    proc = run("ppo_atari.py", "--resume", str(run_dir / "checkpoint.pt"), "--total-timesteps", "128",
               cwd=run_dir.parent.parent)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"run dir: {run_dir}  " in proc.stdout
    assert "profile over 2 iterations" in proc.stdout  # iterations 3 and 4 only
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["iteration"] == 4 and ckpt["global_step"] == 128
    assert len(list(run_dir.parent.iterdir())) == 1


def test_preset_is_loaded_and_command_line_wins(run, tmp_path):
    with open(ROOT / "configs" / "pong_5min.toml", "rb") as f:
        preset = tomllib.load(f)
    overridden = {"num_envs", "num_steps", "total_timesteps"}
    proc = run("ppo_atari.py", "--config", str(ROOT / "configs" / "pong_5min.toml"), *TINY,
               "--total-timesteps", "32", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    args = load_checkpoint(run_dir / "checkpoint.pt")["args"]
    assert args["num_envs"] == 2 and args["num_steps"] == 16 and args["total_timesteps"] == 32
    assert set(preset) - overridden, "the preset should set something the command line leaves alone"
    for key, value in preset.items():
        if key not in overridden:
            assert args[key] == value, key
    assert args["config"].endswith("pong_5min.toml")


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path, interrupt_training):
    _, ckpt = interrupt_training("ppo_atari.py", *TINY, "--total-timesteps", "10000000", cwd=tmp_path, env=ENV)
    assert ckpt["global_step"] == ckpt["iteration"] * 32


def test_script_imports_without_running():
    # evaluate.py imports the trainer named in a checkpoint: importing must not start training.
    spec = importlib.util.spec_from_file_location("check_ppo_atari", SCRIPTS / "ppo_atari.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hasattr(module, "main") and module.EVAL_ENV_KWARGS["episodic_life"] is False
