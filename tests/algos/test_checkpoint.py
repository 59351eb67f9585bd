"""Checkpoints: exact round trip of model / optimizer / normalizer / RNG state, atomic writes, and
resume: a restored trainer's next update is bit-identical to the uninterrupted one (CPU).

The env pool cannot export its envs' state, so a resumed ppo.py run starts fresh episodes:
the end-to-end check is that resuming one checkpoint twice gives bit-identical weights, and
the update-level check below shows nothing else in the trainer's state is lost.
"""

import importlib.util
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlfast.algos.checkpoint import CheckpointSchedule, load_checkpoint, make_checkpoint, restore, save_checkpoint
from rlfast.algos.normalize import ObsNormalizer

ROOT = Path(__file__).resolve().parents[2]


def load_ppo_module():
    spec = importlib.util.spec_from_file_location("ppo_script", ROOT / "scripts" / "ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_round_trip_restores_everything(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    norm = ObsNormalizer((3,))
    norm(torch.randn(5, 3))
    ckpt = make_checkpoint(script="x.py", env_id="CartPole-v1", args={"seed": 1, "lr": 1e-3, "note": None},
                           global_step=640, iteration=5, models={"m": model}, optimizers={"o": opt},
                           normalizers={"obs": norm}, env_kwargs={"max_episode_steps": 100})  # fmt: skip
    path = save_checkpoint(tmp_path / "sub" / "ckpt.pt", ckpt)
    after = (torch.rand(3), np.random.rand(3), random.random())

    model2 = torch.nn.Linear(3, 2)
    opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)
    norm2 = ObsNormalizer((3,))
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    loaded = load_checkpoint(path)
    restore(loaded, {"m": model2}, {"o": opt2}, {"obs": norm2})
    assert loaded["script"] == "x.py" and loaded["env_id"] == "CartPole-v1" and loaded["global_step"] == 640
    assert (
        loaded["iteration"] == 5 and loaded["args"]["note"] is None and loaded["env_kwargs"]["max_episode_steps"] == 100
    )
    for a, b in zip(model.state_dict().values(), model2.state_dict().values()):
        assert torch.equal(a, b)
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], opt2.state_dict()["state"][0]["exp_avg"])
    assert torch.equal(norm.rms.var, norm2.rms.var) and torch.equal(norm.rms.count, norm2.rms.count)
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(after[0], again[0]) and np.array_equal(after[1], again[1]) and after[2] == again[2]


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    model = torch.nn.Linear(2, 2)
    good = make_checkpoint(script="x.py", env_id="e", args={}, global_step=1, iteration=1, models={"m": model})
    save_checkpoint(path, good)

    def broken_save(obj, f):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {**good, "global_step": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)["global_step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temp file left behind


def test_ctrl_c_as_the_temporary_file_is_created_leaves_none(tmp_path, monkeypatch):
    # Ctrl-C in the instant after the temporary file exists, before the writer holds it (bench_faults.py's
    # ctrl_c_save once hit this with tempfile.mkstemp, whose file was left behind): it goes, the checkpoint stays.
    path = tmp_path / "ckpt.pt"
    good = make_checkpoint(script="x.py", env_id="e", args={}, global_step=1, iteration=1,
                           models={"m": torch.nn.Linear(2, 2)})  # fmt: skip
    save_checkpoint(path, good)
    real_open = os.open

    def open_then_interrupt(file, flags, *args, **kwargs):
        os.close(real_open(file, flags, *args, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "open", open_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {**good, "global_step": 2})
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"] and load_checkpoint(path)["global_step"] == 1
    # the file has the run's files' permissions (0666 less the umask), not a temporary file's private 0600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_write_that_fails_names_the_file_and_keeps_the_previous_one(tmp_path):
    """A full disk or a file size limit: torch's zip writer turns the failed write into its own RuntimeError; the
    OSError comes out, naming the file (RLIMIT_FSIZE in a child process: Python ignores SIGXFSZ, so the write fails
    with EFBIG)."""
    code = (
        "import resource, sys, torch\n"
        "from rlfast.algos.checkpoint import CheckpointWriteError, make_checkpoint, save_checkpoint\n"
        "path = sys.argv[1]\n"
        "model = torch.nn.Linear(256, 256)\n"
        "ckpt = make_checkpoint(script='x.py', env_id='e', args={}, global_step=1, iteration=1, models={'m': model})\n"
        "save_checkpoint(path, ckpt)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))\n"
        "try:\n"
        "    save_checkpoint(path, {**ckpt, 'global_step': 2})\n"
        "except CheckpointWriteError as e:\n"
        "    print(e, e.errno)\n"
    )  # fmt: skip
    path = tmp_path / "ckpt.pt"
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == f"could not write {path}: File too large 27", out.stderr
    assert load_checkpoint(path)["global_step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_a_byte_changed_inside_a_tensor_is_found_by_the_checksum(tmp_path):
    path = tmp_path / "ckpt.pt"
    model = torch.nn.Linear(100, 10)
    with torch.no_grad():
        model.weight.fill_(7.0)
    save_checkpoint(path, make_checkpoint(script="x.py", env_id="e", args={}, global_step=1, iteration=1,
                                          models={"m": model}))  # fmt: skip
    assert load_checkpoint(path)["models"]["m"]["weight"].eq(7.0).all()
    data = bytearray(path.read_bytes())
    at = data.index(struct.pack("<f", 7.0) * 8)  # inside the weight's stored values
    data[at + 1] ^= 0x40
    path.write_bytes(data)
    assert torch.load(path, weights_only=True)["models"]["m"]["weight"].ne(7.0).any()  # torch reads it silently
    with pytest.raises(ValueError, match="ckpt.pt is corrupt: its contents do not match the checksum"):
        load_checkpoint(path)


def test_load_rejects_other_files(tmp_path):
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an rlfast checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


def test_resumed_update_is_bit_identical_to_uninterrupted(tmp_path):
    ppo = load_ppo_module()
    args = ppo.Args(num_envs=4, num_steps=16, update_epochs=2, num_minibatches=2)
    g = torch.Generator().manual_seed(0)
    rollout = ppo.Rollout(args.num_steps, args.num_envs, (4,))
    rollout.obs.copy_(torch.randn(rollout.obs.shape, generator=g))
    rollout.actions.copy_(torch.randint(0, 2, rollout.actions.shape, generator=g))
    rollout.logprobs.fill_(-0.69)
    rollout.rewards.copy_(torch.randn(rollout.rewards.shape, generator=g))
    rollout.values.copy_(torch.randn(rollout.values.shape, generator=g))
    next_obs, next_done = torch.randn(args.num_envs, 4, generator=g), torch.zeros(args.num_envs)

    def update(agent, opt):
        return ppo.update(agent, opt, ppo.minibatch_loss, rollout, next_obs, next_done, torch.zeros_like(next_done),
                          args)  # fmt: skip

    def fresh():
        torch.manual_seed(args.seed)
        agent = ppo.Agent(4, 2)
        return agent, torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    agent, opt = fresh()
    for _ in range(2):
        update(agent, opt)
    ckpt = make_checkpoint(script="ppo.py", env_id=args.env_id, args={}, global_step=0, iteration=2,
                           models={"agent": agent}, optimizers={"optimizer": opt})  # fmt: skip
    save_checkpoint(tmp_path / "c.pt", ckpt)
    update(agent, opt)  # uses the RNG (minibatch order) and Adam's moments

    agent2, opt2 = fresh()
    torch.manual_seed(999)  # restore() must bring the RNG back
    restore(load_checkpoint(tmp_path / "c.pt"), {"agent": agent2}, {"optimizer": opt2})
    update(agent2, opt2)
    for (name, a), b in zip(agent.state_dict().items(), agent2.state_dict().values()):
        assert torch.equal(a, b), name


def test_resume_continues_the_run_deterministically(run, tmp_path):
    def run_ppo(*extra, cwd):
        proc = run("ppo.py", "--num-envs", "4", "--num-steps", "16", "--no-cuda", "--torch-threads", "1", *extra,
                   cwd=cwd)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    run_ppo("--total-timesteps", "192", "--save-interval", "2", "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    (run_dir,) = (tmp_path / "runs").iterdir()
    mid = load_checkpoint(run_dir / "checkpoint_000002.pt")
    assert mid["iteration"] == 2 and mid["global_step"] == 128
    finals = []
    for name in ("a", "b"):
        copy = tmp_path / name
        copy.mkdir()
        shutil.copy(run_dir / "checkpoint_000002.pt", copy / "checkpoint_000002.pt")
        run_ppo("--resume", str(copy / "checkpoint_000002.pt"), "--total-timesteps", "256", cwd=tmp_path)
        final = load_checkpoint(copy / "checkpoint.pt")
        assert final["iteration"] == 4 and final["global_step"] == 256 and final["args"]["total_timesteps"] == 256
        assert any(p.name.startswith("events.out.tfevents") for p in copy.iterdir())
        finals.append(final["models"]["agent"])
    for key in finals[0]:
        assert torch.equal(finals[0][key], finals[1][key]), key
        assert not torch.equal(finals[0][key], mid["models"]["agent"][key]), key  # it did train


def test_schedule_numbered_every_interval_and_latest_every_few_minutes():
    now = [0.0]
    schedule = CheckpointSchedule(interval=3, minutes=2.0, clock=lambda: now[0])
    due = {}
    for iteration in range(1, 10):
        now[0] += 50.0  # 50 s per iteration: 120 s have passed after iterations 3, 6 and 9
        due[iteration] = schedule.due(iteration)
    assert due[3] == ["checkpoint_000003.pt", "checkpoint.pt"]
    assert due[6] == ["checkpoint_000006.pt", "checkpoint.pt"]
    assert due[9] == ["checkpoint_000009.pt", "checkpoint.pt"]
    assert all(due[i] == [] for i in (1, 2, 4, 5, 7, 8))
    never = CheckpointSchedule(interval=0, minutes=0.0, clock=lambda: now[0])
    now[0] += 1e6
    assert never.due(1) == []
    with pytest.raises(ValueError, match="save_minutes"):
        CheckpointSchedule(interval=1, minutes=-1.0)
