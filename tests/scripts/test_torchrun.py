"""PPO under torchrun (gloo, CPU): 2 ranks x 2 envs make the same run as 1 process x 4 envs.

Every iteration of a multi-rank run compares the ranks' parameter checksums and fails on any
difference (``distributed.check_in_sync``; tests/algos/test_distributed.py shows it failing), so a run
that exits 0 kept its ranks' parameters identical. Here its final parameters, episodes and normalizer
statistics are compared with a single-process run of the same global hyperparameters.
"""

import glob
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlfast.algos.checkpoint import load_checkpoint

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
COMMON = ["--no-cuda", "--torch-threads", "1", "--save-minutes", "0", "--seed", "5"]
# Sums of the same numbers in another order: float32 rounding, amplified a little by a few Adam steps.
ATOL = 1e-5


def launch(cwd: Path, prefix: list, script: str, *flags: str, runs: str) -> subprocess.CompletedProcess:
    cmd = [*prefix, str(SCRIPTS / script), *COMMON, "--runs-dir", runs, *flags]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def checkpoint(cwd: Path, runs: str) -> dict:
    (path,) = glob.glob(str(cwd / runs / "*" / "checkpoint.pt"))
    return load_checkpoint(path)


def assert_same_run(one: dict, two: dict) -> None:
    assert (one["global_step"], one["iteration"]) == (two["global_step"], two["iteration"])
    assert (one.get("world_size", 1), two["world_size"]) == (1, 2)
    for name, p in one["models"]["agent"].items():
        torch.testing.assert_close(two["models"]["agent"][name], p, atol=ATOL, rtol=0, msg=name)


@pytest.mark.parametrize("script, flags", [
    ("ppo.py", ["--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "768"]),
    ("ppo_continuous.py", ["--env-id", "Hopper-v5", "--num-envs", "4", "--num-steps", "32", "--num-minibatches", "4",
                           "--update-epochs", "2", "--total-timesteps", "384"]),
])  # fmt: skip
def test_two_ranks_equal_one_process(tmp_path, script, flags):
    single = launch(tmp_path, [sys.executable], script, *flags, runs="one")
    assert single.returncode == 0, single.stderr
    ranks = launch(tmp_path, TORCHRUN, script, *flags, runs="two")
    assert ranks.returncode == 0, ranks.stderr + ranks.stdout
    assert ranks.stdout.count("run dir:") == 1, "only rank 0 prints"
    assert "all_reduce" in ranks.stdout, "the profile has the collectives' own section"
    one, two = checkpoint(tmp_path, "one"), checkpoint(tmp_path, "two")
    assert_same_run(one, two)
    if script == "ppo_continuous.py":
        for key in ("mean", "var", "count"):
            torch.testing.assert_close(two["normalizers"]["obs"]["rms"][key], one["normalizers"]["obs"]["rms"][key])
            torch.testing.assert_close(two["normalizers"]["reward"]["rms"][key],
                                       one["normalizers"]["reward"]["rms"][key])  # fmt: skip
    # rank 0 logged every rank's episodes: the same returns, in the same order, as the single process
    lines = [[line.split("return")[-1] for line in out.splitlines() if line.startswith("step")]
             for out in (single.stdout, ranks.stdout)]  # fmt: skip
    assert lines[0] == lines[1]
    if script == "ppo.py":  # the 2-rank run resumes on 2 ranks only
        (run_dir,) = glob.glob(str(tmp_path / "two" / "*"))
        more = ["--resume", run_dir, "--total-timesteps", "1024"]
        refused = launch(tmp_path, [sys.executable], script, *more, runs="two")
        assert refused.returncode == 1
        assert "was trained on 2 rank(s), this run has 1" in refused.stderr
        resumed = launch(tmp_path, TORCHRUN, script, *more, runs="two")
        assert resumed.returncode == 0, resumed.stderr
        assert checkpoint(tmp_path, "two")["global_step"] == 1024


def test_single_rank_trainers_refuse_torchrun(tmp_path):
    proc = launch(tmp_path, TORCHRUN, "appo.py", "--total-timesteps", "256", runs="runs")
    assert proc.returncode != 0
    assert "appo.py runs on one rank" in proc.stderr
