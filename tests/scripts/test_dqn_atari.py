"""scripts/dqn_atari.py end to end with a seconds-long budget: the replay buffer's size line, whole-game episode
stats, a checkpoint with its evaluation options, gradient steps at the replay ratio, and evaluate.py playing
whole games with raw scores. The buffer's stacks are checked against the pool's own stacking in
tests/algos/test_replay.py (a Breakout pool with episodic life)."""

import dataclasses
import re
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
# For the run fixture (tests/conftest.py): one OpenMP thread, also where a test gives env (a user's module on the path).
pytestmark = pytest.mark.run_defaults(timeout=240, one_thread=True)


@pytest.fixture(scope="module")
def breakout_run(run_in_new_dir):
    return run_in_new_dir("dqn_atari", "dqn_atari.py", "--num-envs", "2", "--num-steps", "64", "--total-timesteps",
                          "768", "--learning-starts", "256", "--batch-size", "16", "--buffer-size", "1024",
                          "--target-network-frequency", "256", "--no-cuda", "--torch-threads", "1",
                          "--runs-dir", "runs")  # fmt: skip


def test_run_outputs_and_checkpoint(breakout_run):
    run_dir, proc = breakout_run
    assert re.fullmatch(r"Breakout-v5__dqn_atari__1__\d+", run_dir.name)
    # 1,024 frames of 84x84 (7.23 MB) and 16 bytes of action, reward and flags per slot.
    assert "replay buffer: 1,024 transitions, 7.24 MB on cpu" in proc.stdout
    ckpt = load_checkpoint(run_dir)
    assert ckpt["script"] == "dqn_atari.py" and (ckpt["iteration"], ckpt["global_step"]) == (6, 768)
    assert ckpt["env_kwargs"] == {"episodic_life": True, "reward_clip": True, "stack_num": 1}
    assert ckpt["eval_env_kwargs"] == {"episodic_life": False, "reward_clip": False, "stack_num": 4}
    assert ckpt["models"]["agent"]["network.0.weight"].shape == (32, 4, 8, 8)
    # Learning from step 256 at a replay ratio of 8 with batches of 16: one gradient step per vector step.
    assert ckpt["optimizers"]["optimizer"]["state"][0]["step"].item() == (768 - 256) // 2
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    games = list(zip(acc.Scalars("charts/episodic_return"), acc.Scalars("charts/episodic_length")))
    assert games and all(length.value >= 50 and ret.value == int(ret.value) for ret, length in games)  # whole games


@pytest.mark.parametrize("flag, policy", [([], "greedy"), (["--sample"], "sampled")])
def test_evaluate_plays_whole_games(run, breakout_run, flag, policy):
    run_dir, _ = breakout_run
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", *flag, cwd=run_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Breakout-v5: dqn_atari.py checkpoint at step 768, {policy} policy" in proc.stdout
    assert float(re.search(r"mean length: ([\d.]+)", proc.stdout).group(1)) > 50


def test_normalized_frames_are_counted_copied_to_the_target_saved_and_resumed(run, tmp_path):
    """--normalize-frames: every frame the envs give is counted as it comes (the reset's 2, then 2 per step), the
    target network takes the statistics at its updates with the weights, evaluate.py plays with them and --resume
    counts on."""
    args = ["--env-id", "Pong-v5", "--num-envs", "2", "--num-steps", "32", "--learning-starts", "128", "--batch-size",
            "16", "--buffer-size", "512", "--target-network-frequency", "128", "--no-cuda", "--torch-threads", "1",
            "--runs-dir", "runs", "--normalize-frames"]  # fmt: skip
    proc = run("dqn_atari.py", *args, "--total-timesteps", "256", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    models = load_checkpoint(run_dir)["models"]
    online, target = models["agent"], models["target"]
    assert online["network.pixel_count"].item() == 2 + 256
    # The target's last update came at step 256, before that step's frames were counted.
    assert target["network.pixel_count"].item() == 2 + 254
    mean, var = online["network.pixel_mean"], online["network.pixel_var"]
    assert mean.shape == var.shape == (84, 84) and 0 < mean.mean() < 255
    assert (var == 0).any() and (var > 0).any()  # the still border, and what moves
    proc = run("evaluate.py", str(run_dir), "--episodes", "1", "--no-cuda", cwd=tmp_path)
    assert proc.returncode == 0 and "greedy policy" in proc.stdout, proc.stdout + proc.stderr
    proc = run("dqn_atari.py", "--resume", str(run_dir), "--total-timesteps", "320", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert load_checkpoint(run_dir)["models"]["agent"]["network.pixel_count"].item() == 2 + 320


def test_trains_and_evaluates_a_users_pixel_env(run, tmp_path, pixel_env):
    """A user's env giving uint8 (1, 84, 84) frames: stacked and stored as the Atari games' frames, its own
    episodes (no lives, no clipping), and evaluate.py stacks them the same way."""
    proc = run("dqn_atari.py", "--env-id", "dotframes:DotFrame-v0", "--num-envs", "2", "--num-steps", "64",
               "--total-timesteps", "256", "--learning-starts", "64", "--batch-size", "16", "--buffer-size", "512",
               "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs", cwd=tmp_path, env=pixel_env)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir)
    assert ckpt["env_kwargs"] == {} and ckpt["eval_env_kwargs"] == {"frame_stack": 4}
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    assert {e.value for e in acc.Scalars("charts/episodic_length")} == {40.0}  # the env's 40-step episodes
    assert acc.Scalars("losses/td_loss")  # gradient steps ran on the stored frames
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", cwd=tmp_path, env=pixel_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dotframes:DotFrame-v0: dqn_atari.py checkpoint at step 256, greedy policy" in proc.stdout


def test_pong_preset_keeps_cleanrls_schedule_up_to_its_3m_steps(load_script):
    """configs/pong_dqn.toml is cut at 3M steps to lie beside CleanRL's 10M-step curve: the same epsilon at every
    step (1 -> 0.01 over the first 1M) and CleanRL's other settings."""
    from rlfast.algos.config import parse_or_resume

    dqn = load_script("dqn_atari.py")
    args, _ = parse_or_resume(dqn.Args, "dqn_atari.py", ["--config", str(ROOT / "configs" / "pong_dqn.toml")])
    cleanrl = dqn.Args()  # the script's defaults are CleanRL's dqn_atari.py
    assert args.validate() == [] and args.total_timesteps == 3_000_000 and cleanrl.total_timesteps == 10_000_000
    for step in (0, 250_000, 999_999, 1_000_000, 2_999_999):
        assert args.epsilon(step) == pytest.approx(cleanrl.epsilon(step), abs=1e-6), step
    for key in ("num_envs", "learning_rate", "buffer_size", "batch_size", "learning_starts", "target_network_frequency",
                "replay_ratio", "gamma", "tau"):
        assert getattr(args, key) == getattr(cleanrl, key), key


def test_dueling_head_is_value_plus_centred_advantage_and_width_scales_the_net(load_script):
    """--dueling: Q = V + A - mean(A) over actions (Wang et al. 2016, eq. 9), each stream on its own half of the
    hidden layer; --cnn-width 0.5 halves every layer, as PPO's."""
    import torch

    dqn = load_script("dqn_atari.py")
    torch.manual_seed(0)
    net = dqn.QNetwork(6, width=0.5, dueling=True)
    assert net.network[0].weight.shape == (16, 4, 8, 8) and net.network[7].weight.shape == (2 * 256, 32 * 7 * 7)
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    hidden = net.network(frames)
    value, advantage = net.value(hidden[:, :256]), net.advantage(hidden[:, 256:])
    torch.testing.assert_close(net(frames), value + advantage - advantage.mean(1, keepdim=True))
    assert net(frames).shape == (5, 6) and net.act(frames, greedy=True).shape == (5,)
    plain = dqn.QNetwork(6)
    assert plain.network[-1].weight.shape == (6, 512) and not hasattr(plain, "value")


def test_evaluate_rebuilds_a_dueling_half_width_net_trained_with_prioritized_replay(run, tmp_path):
    proc = run("dqn_atari.py", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--learning-starts",
               "64", "--batch-size", "16", "--buffer-size", "512", "--dueling", "--cnn-width", "0.5", "--prioritized",
               "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "replay buffer: prioritized (alpha 0.5), 512 transitions" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_checkpoint(run_dir)["models"]["agent"]["advantage.weight"].shape == (4, 256)  # Breakout: 4 actions
    # Sampled (epsilon) actions: an untrained greedy net may never press FIRE, and Breakout then runs to its
    # 27,000-step cut (minutes here).
    proc = run("evaluate.py", str(run_dir), "--episodes", "1", "--sample", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checkpoint at step 256, sampled policy" in proc.stdout


def test_save_policy_writes_a_weights_only_file_that_plays_the_same_and_does_not_resume(run, breakout_run, tmp_path):
    run_dir, _ = breakout_run
    policy = tmp_path / "shared" / "policy.pt"
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", "--save-policy", str(policy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"^policy: {re.escape(str(policy))} \(\d+\.\d MB\)$", proc.stdout, re.MULTILINE)
    full, saved = load_checkpoint(run_dir), load_checkpoint(policy)  # load_checkpoint checks its crc32 too
    assert saved["policy_only"] and set(saved["models"]) == {"agent"} and saved["optimizers"] == {}
    assert "rng" not in saved and "target" in full["models"] and full["optimizers"]
    for name, weight in full["models"]["agent"].items():
        assert torch.equal(saved["models"]["agent"][name], weight), name
    assert policy.stat().st_size < 0.6 * (run_dir / "checkpoint.pt").stat().st_size  # no target, no Adam moments
    again = run("evaluate.py", str(policy), "--episodes", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    score = re.compile(r"^return: .*$", re.MULTILINE)
    assert score.search(again.stdout).group() == score.search(proc.stdout).group()  # the same policy, same games
    proc = run("dqn_atari.py", "--resume", str(policy), cwd=tmp_path)
    assert proc.returncode == 1 and f"error: --resume: {policy} holds a policy only" in proc.stderr
    before = (run_dir / "checkpoint.pt").read_bytes()  # the run's own checkpoint is never written over
    proc = run("evaluate.py", str(run_dir), "--save-policy", str(run_dir / "checkpoint.pt"), cwd=tmp_path)
    assert proc.returncode == 1 and "is the checkpoint being evaluated" in proc.stderr
    assert (run_dir / "checkpoint.pt").read_bytes() == before


def test_rainbow_preset_is_variant_h_with_its_evaluations(load_script):
    """configs/pong_dqn_rainbow.toml is the command line of the results page's variant h: variant c
    (pong_dqn_fast.toml plus its flags) with prioritized replay, and the greedy evaluations that keep best.pt on."""
    from rlfast.algos.config import parse_or_resume

    dqn = load_script("dqn_atari.py")
    configs = ROOT / "configs"
    preset, _ = parse_or_resume(dqn.Args, "dqn_atari.py", ["--config", str(configs / "pong_dqn_rainbow.toml")])
    c, _ = parse_or_resume(dqn.Args, "dqn_atari.py", [
        "--config", str(configs / "pong_dqn_fast.toml"), "--cnn-width", "0.5", "--dueling", "--batch-size", "64",
        "--learning-rate", "6.25e-5", "--target-network-frequency", "8000", "--eval-every", "50",
        "--prioritized"])  # fmt: skip
    assert preset.validate() == []
    differ = {f.name for f in dataclasses.fields(dqn.Args) if getattr(preset, f.name) != getattr(c, f.name)}
    assert differ == {"config", "exp_name"}
    assert (preset.num_envs, preset.batch_size, preset.replay_ratio, preset.eval_every) == (64, 64, 8.0, 50)
    assert preset.prioritized
