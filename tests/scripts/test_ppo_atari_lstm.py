"""scripts/ppo_atari_lstm.py end to end with seconds-long budgets: its run, checkpoint and evaluate.py; and the
checkpoints that ppo_atari.py --recurrent wrote before the recurrent PPO became this script, which this script
resumes and evaluate.py evaluates while ppo_atari.py refuses them with a line naming this one. The invariant that
makes the recurrent update right is tests/scripts/test_recurrent.py's; its numbers, tests/scripts/test_golden.py's
(recorded from ppo_atari.py --recurrent lstm before the split)."""

import pytest
import torch

from rlfast.algos.checkpoint import load_checkpoint, save_checkpoint

TINY = ["--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2", "--no-cuda",
        "--torch-threads", "1", "--runs-dir", "runs"]  # fmt: skip
pytestmark = pytest.mark.run_defaults(one_thread=True)  # for the run fixture (tests/conftest.py): one OpenMP thread


@pytest.fixture(scope="module")
def gru_run(run_in_new_dir):
    run_dir, _ = run_in_new_dir("lstm", "ppo_atari_lstm.py", *TINY, "--recurrent", "gru", "--total-timesteps", "64")
    return run_dir


def test_its_run_and_checkpoint(gru_run):
    ckpt = load_checkpoint(gru_run / "checkpoint.pt")
    assert gru_run.name.startswith("Breakout-v5__ppo_atari_lstm__1__")
    assert ckpt["script"] == "ppo_atari_lstm.py" and ckpt["global_step"] == 64 and ckpt["args"]["recurrent"] == "gru"
    weights = ckpt["models"]["agent"]
    assert weights["network.0.weight"].shape == (32, 1, 8, 8)  # one frame per observation, as CleanRL's
    assert weights["core.weight_ih_l0"].shape == (3 * 128, 512)  # a GRU's three gates
    assert ckpt["eval_env_kwargs"] == {"episodic_life": False, "reward_clip": False, "stack_num": 1}


def test_a_checkpoint_of_ppo_atari_recurrent_goes_on_here(run, gru_run, tmp_path):
    # What ppo_atari.py --recurrent gru wrote: its script's name and its flags of then (overlap included).
    ckpt = load_checkpoint(gru_run / "checkpoint.pt")
    ckpt["script"] = "ppo_atari.py"
    ckpt["args"] = {**ckpt["args"], "exp_name": "ppo_atari", "overlap": False, "frame_stack": None}
    old = save_checkpoint(tmp_path / "old" / "checkpoint.pt", ckpt)
    proc = run("ppo_atari.py", "--resume", str(old), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        f"error: --resume: {old} was written by ppo_atari.py (that run now goes on in ppo_atari_lstm.py), "
        "not ppo_atari.py")  # fmt: skip
    proc = run("ppo_atari_lstm.py", "--resume", str(old), "--total-timesteps", "96", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sets overlap, which this trainer no longer has: ignored" in proc.stderr
    resumed = load_checkpoint(old)
    assert resumed["script"] == "ppo_atari_lstm.py" and resumed["global_step"] == 96
    save_checkpoint(old, ckpt)  # as it was before the resume
    proc = run("evaluate.py", str(old), "--episodes", "1", "--sample", cwd=tmp_path)  # sampled: games end soon
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Breakout-v5: ppo_atari.py checkpoint at step 64, sampled policy" in proc.stdout


def test_normalized_frames_keep_their_statistics_in_the_checkpoint(normalized_frames_run, tmp_path):
    """--normalize-frames as in ppo_atari.py: its statistics counted, saved, evaluated (one frame per observation
    here) and resumed (``normalized_frames_run``)."""
    normalized_frames_run("ppo_atari_lstm.py", *[a if a != "Breakout-v5" else "Pong-v5" for a in TINY], cwd=tmp_path)


def test_normalized_frames_change_what_the_network_sees(run, tmp_path):
    """The same seed twice without --normalize-frames and once with it: one iteration's update gives the first
    layer the same weights twice (the run repeats itself) and other ones with the flag, so the flag changes what
    the run trains on and not only what the checkpoint holds."""
    firsts = []
    for name, extra in (("a", []), ("b", []), ("n", ["--normalize-frames"])):
        proc = run("ppo_atari_lstm.py", *TINY, "--total-timesteps", "32", "--exp-name", name, *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = (tmp_path / "runs").glob(f"*__{name}__*")
        firsts.append(load_checkpoint(run_dir / "checkpoint.pt")["models"]["agent"]["network.0.weight"])
    assert torch.equal(firsts[0], firsts[1]) and not torch.equal(firsts[0], firsts[2])
