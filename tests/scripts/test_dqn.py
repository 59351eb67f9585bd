"""scripts/dqn.py end to end with seconds-long budgets: run dir, tensorboard tags, checkpoint contents, the replay
buffer's size line, evaluate.py on the checkpoint, --resume, Ctrl-C, and a slow test that solves CartPole with
the preset. The pieces are checked in tests/algos/test_dqn.py and tests/algos/test_replay.py."""

import re
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--num-envs", "2", "--num-steps", "50", "--learning-starts", "200", "--batch-size", "32",
        "--buffer-size", "500", "--target-network-frequency", "300", "--no-cuda", "--torch-threads", "1",
        "--runs-dir", "runs"]  # fmt: skip


@pytest.fixture(scope="module")
def smoke_run(run_in_new_dir):
    return run_in_new_dir("dqn", "dqn.py", *TINY, "--total-timesteps", "1000", "--save-interval", "5")


def test_smoke_run_outputs_and_checkpoint(smoke_run):
    run_dir, proc = smoke_run
    assert re.fullmatch(r"CartPole-v1__dqn__1__\d+", run_dir.name)
    # obs 8,000 B, actions 4,000, rewards 2,000, flags and counters 2,018
    assert "replay buffer: 500 transitions, 16.02 kB on cpu" in proc.stdout
    assert re.search(r"step\s+1,000/1,000 \|\s+[\d,]+ SPS \| ETA 0:00:00 \| return", proc.stdout)
    assert {"checkpoint.pt", "checkpoint_000005.pt", "checkpoint_000010.pt"} <= {p.name for p in run_dir.iterdir()}
    ckpt = load_checkpoint(run_dir)
    assert ckpt["script"] == "dqn.py" and (ckpt["iteration"], ckpt["global_step"]) == (10, 1000)
    assert set(ckpt["models"]) == {"agent", "target"} and ckpt["optimizers"]["optimizer"]["state"]
    # 800 steps after learning starts at a replay ratio of 12.8 and batches of 32: 320 gradient steps. The target
    # network, copied at steps 300, 600 and 900, lags the online network, and it was updated since step 500.
    def differ(a, b):
        return any((x != y).any() for x, y in zip(a.values(), b.values()))

    assert differ(ckpt["models"]["agent"], ckpt["models"]["target"])
    assert differ(ckpt["models"]["target"], load_checkpoint(run_dir / "checkpoint_000005.pt")["models"]["target"])
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    expected = {"charts/episodic_return", "charts/episodic_length", "charts/SPS", "charts/epsilon", "losses/td_loss",
                "losses/q_values", "perf/env", "perf/inference", "perf/train", "perf/other"}  # fmt: skip
    assert expected <= set(acc.Tags()["scalars"])
    eps = [e.value for e in acc.Scalars("charts/epsilon")]
    # Logged after each iteration: epsilon of its last step, CleanRL's schedule over 0.5 x 1000 steps.
    assert eps[0] == pytest.approx(1 - 0.95 * 98 / 500) and eps[-1] == pytest.approx(0.05)
    assert eps == sorted(eps, reverse=True)
    losses = [e.value for e in acc.Scalars("losses/td_loss")]
    assert losses[0] == 0.0 and losses[-1] > 0.0  # before learning starts, and after


def test_evaluate_greedy_and_epsilon(run, smoke_run):
    run_dir, _ = smoke_run
    proc = run("evaluate.py", str(run_dir), "--episodes", "3", cwd=run_dir)
    assert proc.returncode == 0 and "CartPole-v1: dqn.py checkpoint at step 1,000, greedy policy" in proc.stdout, (
        proc.stdout + proc.stderr
    )
    proc = run("evaluate.py", str(run_dir), "--episodes", "3", "--sample", "--per-episode", cwd=run_dir)
    assert proc.returncode == 0 and "sampled policy" in proc.stdout, proc.stderr
    # --per-episode: each episode's return and length, which the summary lines are made of
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if line.startswith(("returns:", "lengths:")))
    returns, lengths = [float(x) for x in lines["returns"].split()], [int(x) for x in lines["lengths"].split()]
    assert len(returns) == len(lengths) == 3 and returns == [float(n) for n in lengths]  # CartPole: 1 a step
    assert f"return: {sum(returns) / 3:.2f} ± " in proc.stdout
    assert f"mean length: {sum(lengths) / 3:.1f}" in proc.stdout


def test_resume_continues_the_count(run, smoke_run, tmp_path):
    run_dir, _ = smoke_run
    copy = tmp_path / run_dir.name
    copy.mkdir()
    (copy / "checkpoint.pt").write_bytes((run_dir / "checkpoint.pt").read_bytes())
    proc = run("dqn.py", "--resume", str(copy), "--total-timesteps", "1400", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ckpt = load_checkpoint(copy)
    assert (ckpt["iteration"], ckpt["global_step"]) == (14, 1400) and "profile over 4 iterations" in proc.stdout
    assert "note: the replay buffer starts empty (it is saved only with --save-replay)" in proc.stdout
    assert not (copy / "replay_buffer.pt").exists()


def test_adam_eps_and_huber_reach_the_update(run, tmp_path):
    proc = run("dqn.py", *TINY, "--total-timesteps", "400", "--adam-eps", "1.5e-4", "--huber", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["optimizers"]["optimizer"]["param_groups"][0]["eps"] == 1.5e-4 and ckpt["args"]["huber"]
    assert ckpt["optimizers"]["optimizer"]["state"]  # it took gradient steps (from step 200)
    proc = run("dqn.py", *TINY, "--adam-eps", "0", cwd=tmp_path)
    assert proc.returncode == 1 and "--adam-eps" in proc.stderr, proc.stderr


def test_anneal_lr_reaches_the_optimizer_and_the_log(run, tmp_path):
    proc = run("dqn.py", *TINY, "--total-timesteps", "400", "--learning-rate", "1e-3", "--anneal-lr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    # The last gradient steps came at step 400 of 400 (2 envs): the rate set then is 1e-3 x (1 - 400/400) = 0.
    group = load_checkpoint(run_dir / "checkpoint.pt")["optimizers"]["optimizer"]["param_groups"][0]
    assert group["lr"] == 0.0
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    # Logged after each iteration of 100 steps: the rate at its last step.
    assert [e.value for e in acc.Scalars("charts/learning_rate")] == pytest.approx([7.5e-4, 5e-4, 2.5e-4, 0.0])


def test_save_replay_resumes_with_the_buffer(run, tmp_path):
    proc = run("dqn.py", *TINY, "--total-timesteps", "600", "--save-replay", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "replay buffer: 500 transitions, 16.02 kB on cpu; saved with every checkpoint.pt (--save-replay)" in (
        proc.stdout
    )
    (run_dir,) = (tmp_path / "runs").iterdir()
    saved = torch.load(run_dir / "replay_buffer.pt", weights_only=True)
    assert saved["global_step"] == 600 and saved["state"]["count"].tolist() == [300, 300]
    proc = run("dqn.py", "--resume", str(run_dir), "--total-timesteps", "1000", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"replay buffer: restored from {run_dir / 'replay_buffer.pt'}" in proc.stdout
    # The rings went on from 300 steps per env (an empty buffer would count 200).
    assert torch.load(run_dir / "replay_buffer.pt", weights_only=True)["state"]["count"].tolist() == [500, 500]
    # A buffer file from before the checkpoint's step is left alone; one of another layout is one line.
    stale = torch.load(run_dir / "replay_buffer.pt", weights_only=True)
    stale["global_step"] = 800
    save_checkpoint(run_dir / "replay_buffer.pt", stale)  # its checksum made anew
    proc = run("dqn.py", "--resume", str(run_dir), "--total-timesteps", "1100", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is from step 800, older than the checkpoint (step 1000): replay_buffer.pt starts empty" in proc.stdout
    # One from after the checkpoint (the process ended between the two writes) holds real transitions: used.
    newer = torch.load(run_dir / "replay_buffer.pt", weights_only=True)
    newer["global_step"] = 1150
    save_checkpoint(run_dir / "replay_buffer.pt", newer)
    proc = run("dqn.py", "--resume", str(run_dir), "--total-timesteps", "1200", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is from step 1,150, the checkpoint from step 1,100 (the run stopped between the two writes)" in proc.stdout
    assert f"replay buffer: restored from {run_dir / 'replay_buffer.pt'}" in proc.stdout
    proc = run("dqn.py", "--resume", str(run_dir), "--total-timesteps", "1300", "--buffer-size", "400", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: {run_dir / 'replay_buffer.pt'}: a replay buffer of")
    assert "(move the file away to resume without it)" in proc.stderr and "Traceback" not in proc.stderr


def test_prioritized_replay_learns_its_priorities_and_resumes_with_them(run, tmp_path):
    proc = run("dqn.py", *TINY, "--total-timesteps", "600", "--prioritized", "--save-replay", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"replay buffer: prioritized \(alpha 0.5\), 500 transitions, [\d.]+ kB on cpu", proc.stdout)
    (run_dir,) = (tmp_path / "runs").iterdir()
    state = torch.load(run_dir / "replay_buffer.pt", weights_only=True)["state"]
    # Gradient steps from step 200 on set the priorities of the transitions they drew from their TD errors.
    learnt = state["priority"][state["priority"] != 1.0]
    assert len(learnt.unique()) > 50 and state["max_priority"] > 1.0, state["max_priority"]
    proc = run("dqn.py", "--resume", str(run_dir), "--total-timesteps", "700", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"replay buffer: restored from {run_dir / 'replay_buffer.pt'}" in proc.stdout
    after = torch.load(run_dir / "replay_buffer.pt", weights_only=True)["state"]
    assert after["max_priority"] >= state["max_priority"]  # went on from the saved priorities, not from 1
    proc = run("dqn.py", *TINY, "--prioritized", "--priority-beta", "1.5", cwd=tmp_path)
    assert proc.returncode == 1 and "--priority-beta" in proc.stderr, proc.stderr


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path, interrupt_training):
    out, ckpt = interrupt_training("dqn.py", *TINY, "--total-timesteps", "10000000", cwd=tmp_path)
    assert out.startswith("replay buffer:")
    assert ckpt["global_step"] == ckpt["iteration"] * 100


@pytest.mark.slow
def test_cartpole_preset_reaches_400(tmp_path, learning_run):
    last, mean_return, seconds = learning_run("dqn.py", "--config", str(ROOT / "configs" / "cartpole_dqn.toml"),
                                              "--no-cuda", cwd=tmp_path, timeout=600)  # fmt: skip
    print(f"{last} in {seconds:.0f} s")
    assert mean_return >= 400, last
