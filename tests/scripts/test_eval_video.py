"""Evaluation and video during training (``--eval-every``, ``--capture-video``), Weights & Biases (``--track``, run
offline) and ``evaluate.py --video``, each through a real trainer run."""

import os
import re

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import save_checkpoint

imageio = pytest.importorskip("imageio.v2")
pytest.importorskip("imageio_ffmpeg")


pytestmark = pytest.mark.run_defaults(timeout=300, one_thread=True)


def test_eval_every_logs_greedy_returns_at_its_iterations(run, tmp_path, run_dir_of):
    proc = run("ppo.py", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "1280", "--eval-every", "4",
               "--eval-episodes", "3", cwd=tmp_path)  # fmt: skip
    run_dir = run_dir_of(proc, tmp_path)
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    returns = acc.Scalars("eval/episodic_return")
    assert [e.step for e in returns] == [512, 1024, 1280]  # iterations 4, 8 and the last (10) of 128 steps
    lengths = [e.value for e in acc.Scalars("eval/episodic_length")]
    assert [e.value for e in returns] == lengths  # CartPole: a reward of 1 per step
    assert all(8 <= v <= 500 for v in lengths)
    assert re.search(r"^eval\s+\d+\.\d+\s+\d+\.\d%", proc.stdout, re.MULTILINE)  # its own profile section
    assert not (run_dir / "videos").exists()


def running_max(values):
    return [max(values[: i + 1]) for i in range(len(values))]


def test_eval_every_keeps_the_best_evaluated_policy_as_best_pt_across_a_resume(run, tmp_path, run_dir_of):
    proc = run("ppo.py", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "1280", "--eval-every", "2",
               "--eval-episodes", "3", "--seed", "3", cwd=tmp_path)  # fmt: skip
    run_dir = run_dir_of(proc, tmp_path)
    proc = run("ppo.py", "--resume", str(run_dir), "--total-timesteps", "2560", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    returns = [(e.step, e.value) for e in acc.Scalars("eval/episodic_return")]
    assert [s for s, _ in returns] == list(range(256, 2561, 256))  # both runs' evaluations
    values = [v for _, v in returns]
    assert len(set(values)) > 1, values  # else which one is best is not tested
    assert [e.value for e in acc.Scalars("eval/best_return")] == running_max(values)
    best_step = returns[values.index(max(values))][0]  # the first evaluation with the highest mean
    best = torch.load(run_dir / "best.pt", weights_only=True)
    assert best["best_eval"] == max(values) and best["global_step"] == best_step
    final = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert final["best_eval"] == max(values) and final["global_step"] == 2560
    if best_step != 2560:  # the policy played by evaluate.py is the best one's, not the last one's
        assert any(not torch.equal(best["models"]["agent"][k], final["models"]["agent"][k])
                   for k in final["models"]["agent"])  # fmt: skip

    # A resumed run compares with the best of the run before it, kept in checkpoint.pt: one no evaluation can beat
    # leaves best.pt alone.
    final["best_eval"] = 1e9
    save_checkpoint(run_dir / "checkpoint.pt", {k: v for k, v in final.items() if k != "crc32"})
    proc = run("ppo.py", "--resume", str(run_dir), "--total-timesteps", "3072", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("eval/best_return")][-2:] == [(2816, 1e9), (3072, 1e9)]
    assert torch.load(run_dir / "best.pt", weights_only=True)["global_step"] == best_step


@pytest.fixture(scope="module")
def video_run(run, tmp_path_factory):
    """Pong: 4 iterations with --capture-video (at iterations 2 and 4) and --track to an offline W&B run."""
    pytest.importorskip("wandb")
    tmp = tmp_path_factory.mktemp("video")
    proc = run("ppo_atari.py", "--num-envs", "2", "--num-steps", "16", "--total-timesteps", "128", "--eval-every", "2",
               "--eval-episodes", "1", "--capture-video", "--track", cwd=tmp,
               env={**os.environ, "WANDB_MODE": "offline"})  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp / "runs").iterdir()
    return run_dir, proc


def test_capture_video_writes_each_evaluated_game(video_run):
    run_dir, _ = video_run
    videos = sorted((run_dir / "videos").iterdir())
    assert [v.name for v in videos] == ["step_000000064.mp4", "step_000000128.mp4"]
    acc = EventAccumulator(str(run_dir), size_guidance={"images": 0})
    acc.Reload()
    lengths = [e.value for e in acc.Scalars("eval/episodic_length")]
    for video, length in zip(videos, lengths):
        reader = imageio.get_reader(video)
        assert reader.get_meta_data()["fps"] == 15  # 4 emulator frames of 60 Hz a step
        frames = reader.count_frames()
        assert frames == length + 1  # the reset's frame, then one per step: the whole game
        frame = reader.get_data(frames // 2)
        assert frame.shape == (210, 160, 3) and frame.std() > 10  # the colour screen, not a blank
        reader.close()
    gifs = acc.Images("videos/episode")  # TensorBoard shows each as an animated GIF
    assert [g.step for g in gifs] == [64, 128] and all(g.encoded_image_string[:6] == b"GIF89a" for g in gifs)


def test_track_logs_scalars_config_and_videos_to_an_offline_wandb_run(video_run):
    run_dir, proc = video_run
    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    (log,) = offline.glob("*.wandb")
    data = log.read_bytes()  # the run's records (protobuf): the synced TensorBoard scalars and the config
    for name in (b"charts/SPS", b"losses/value_loss", b"eval/episodic_return", b"videos/episode", b"learning_rate",
                 b"ppo_atari"):  # fmt: skip
        assert name in data, name
    assert len(list(offline.glob("files/media/videos/**/*.mp4"))) == 2
    assert "wandb sync" in proc.stdout + proc.stderr  # W&B says how to upload it later


def test_evaluate_writes_a_video_of_the_game(run, video_run, tmp_path):
    run_dir, _ = video_run
    out = tmp_path / "pong.mp4"
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", "--video", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    frames = int(re.search(r"video: .*pong\.mp4 \((\d+) frames\)", proc.stdout).group(1))
    assert imageio.get_reader(out).count_frames() == frames > 700  # a whole game of Pong: 21 points
    two = run("evaluate.py", str(run_dir), "--episodes", "2", "--video", str(tmp_path / "g.mp4"),
              "--video-episodes", "2", cwd=tmp_path)  # fmt: skip
    assert two.returncode == 0 and (tmp_path / "g-1.mp4").exists() and (tmp_path / "g-2.mp4").exists()


@pytest.mark.parametrize("flags, message", [
    (["--video", "x.avi"], "--video must name an .mp4 file, got 'x.avi'"),
    (["--video", "x.mp4", "--video-episodes", "3"], "--video-episodes must be in [1, --episodes=2], got 3"),
])  # fmt: skip
def test_evaluate_refuses_bad_video_flags(run, video_run, tmp_path, flags, message):
    run_dir, _ = video_run
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", *flags, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {message}"
