"""Golden traces: a seeded CPU run of each trainer gives the same losses, episode returns and checkpoint
as the run recorded in ``tests/scripts/golden/`` (written before the trainers moved into the shared run
layer, commit message "golden traces", so that refactors of the scripts are proven to change nothing).

A trace is a few iterations on one torch thread: every ``losses/*`` scalar and the learning rate per
iteration, every episode's return and length, and for each tensor of the final checkpoint (models,
optimizer state, normalizer statistics) its sum and sum of absolute values.

Tolerances: float32 scalars and tensor sums agree to ``RTOL`` (same machine: bit-equal; another x86 CPU
may pick other vectorized kernels and differ in the last bits, too little to flip a sampled action in
runs this short); episode boundaries and lengths exactly.

To re-record after a change that is meant to change the numbers (say why in the commit):
``RLFAST_RECORD_GOLDEN=1 python3 -m pytest tests/scripts/test_golden.py``.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
RTOL = 1e-4
COMMON = ["--no-cuda", "--torch-threads", "1", "--save-minutes", "0", "--runs-dir", "runs", "--seed", "3"]
CASES = {
    "ppo": ["ppo.py", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "768"],
    "ppo_atari": ["ppo_atari.py", "--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "64",
                  "--total-timesteps", "512"],
    "ppo_atari_overlap": ["ppo_atari.py", "--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "64",
                          "--total-timesteps", "512", "--overlap"],
    "ppo_continuous": ["ppo_continuous.py", "--env-id", "Hopper-v5", "--num-envs", "2", "--num-steps", "64",
                       "--num-minibatches", "4", "--update-epochs", "2", "--total-timesteps", "384"],
}  # fmt: skip


def tensor_sums(tree, prefix=""):
    """``{path: [sum, sum of abs]}`` for every floating/integer tensor in a nested dict/list."""
    out = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(tensor_sums(value, f"{prefix}{key}/"))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            out.update(tensor_sums(value, f"{prefix}{i}/"))
    elif isinstance(tree, torch.Tensor) and tree.dtype != torch.bool:
        t = tree.double()
        out[prefix.rstrip("/")] = [t.sum().item(), t.abs().sum().item()]
    return out


def trace(case, tmp_path):
    """Runs one case and returns its trace (see the module docstring)."""
    script, *args = CASES[case]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args, *COMMON], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(t for t in acc.Tags()["scalars"] if t.startswith("losses/") or t == "charts/learning_rate")
    scalars = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags}
    episodes = [[r.step, r.value, n.value] for r, n in
                zip(acc.Scalars("charts/episodic_return"), acc.Scalars("charts/episodic_length"))]  # fmt: skip
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    state = {k: ckpt[k] for k in ("models", "optimizers", "normalizers")}
    return {
        "command": [script, *args, *COMMON],
        "global_step": ckpt["global_step"],
        "iteration": ckpt["iteration"],
        "scalars": scalars,
        "episodes": episodes,
        "checkpoint": tensor_sums(state),
    }


def close(a, b):
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainer_matches_its_golden_trace(case, tmp_path):
    got = trace(case, tmp_path)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("RLFAST_RECORD_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
        pytest.skip(f"recorded {path.name}")
    want = json.loads(path.read_text())
    assert got["command"] == want["command"], "the case changed: re-record it (see the module docstring)"
    assert (got["global_step"], got["iteration"]) == (want["global_step"], want["iteration"])
    assert got["episodes"], "a trace without episodes checks no returns: lengthen the case"
    assert [e[0] for e in got["episodes"]] == [e[0] for e in want["episodes"]], "episodes ended at other steps"
    for (_, r, n), (_, wr, wn) in zip(got["episodes"], want["episodes"]):
        assert n == wn and close(r, wr), (r, n, wr, wn)
    assert sorted(got["scalars"]) == sorted(want["scalars"])
    for tag, rows in want["scalars"].items():
        assert [s for s, _ in got["scalars"][tag]] == [s for s, _ in rows], tag
        for (_, v), (_, w) in zip(got["scalars"][tag], rows):
            assert close(v, w), (tag, v, w)
    assert sorted(got["checkpoint"]) == sorted(want["checkpoint"])
    for name, sums in want["checkpoint"].items():
        assert all(close(a, b) for a, b in zip(got["checkpoint"][name], sums)), (name, got["checkpoint"][name], sums)
