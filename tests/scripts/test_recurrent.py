"""Recurrent policies (--recurrent lstm/gru) in the trainers: the invariant that makes recurrent PPO correct.

Before an update's first gradient step the weights are the ones that acted, so recomputing each sample's
log-probability from the stored rollout (state at the rollout's start, episode starts, minibatch assembly)
must give the acting one back: ratio 1 for every sample. Each check runs the real trainer in-process on
Breakout (episodic life: a random agent loses lives inside every rollout) and records, through the loss, what
the update recomputes. The actor is re-initialized with gain 1 (CleanRL's 0.01 makes near-uniform logits that
hide a wrong state) and the recomputation is repeated with the state handling broken, which must then differ:
the test can fail.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from rlfast.algos.appo import policy_on

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5
"""|log ratio| allowed, in float32 (the runs here leave --auto-speed's bfloat16 CNN off): acting runs the CNN and the
input projection on one step of the envs, the update on whole rollouts, and matrix products of other shapes may
round the last bits differently. (Under bfloat16 a last-bit difference in a convolution's float32 sum can flip a
feature's bfloat16 rounding: up to ~6e-5 here, for feed-forward PPO as much.)"""


def load(script: str):
    spec = importlib.util.spec_from_file_location(f"recurrent_{script[:-3]}", ROOT / "scripts" / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def sharpen(make_agent):
    """``make_agent`` whose actor has gain 1, so that log-probabilities depend on the recurrent state."""

    def make(*args, **kwargs):
        agent = make_agent(*args, **kwargs)
        nn.init.orthogonal_(agent.actor.weight, 1.0)
        return agent

    return make


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_ppo_atari_lstm_recomputes_the_acting_log_probs_before_the_first_gradient_step(cell, run, tmp_path):
    ppo = load("ppo_atari_lstm.py")
    ppo.make_agent = sharpen(ppo.make_agent)
    calls = []
    loss = ppo.minibatch_loss

    def spy(agent, args, mb, ent_coef):
        with torch.no_grad():
            new = agent.get_action_and_value(mb["obs"], mb["state"], mb["starts"], mb["actions"])
            unreset = agent.get_action_and_value(mb["obs"], mb["state"], torch.zeros_like(mb["starts"]), mb["actions"])
            zeroed = agent.get_action_and_value(mb["obs"], torch.zeros_like(mb["state"]), mb["starts"], mb["actions"])
        calls.append({"logprobs": mb["logprobs"], "values": mb["values"], "starts": mb["starts"], "state": mb["state"],
                      "new": new[1], "new_values": new[3], "unreset": unreset[1], "zeroed": zeroed[1]})  # fmt: skip
        return loss(agent, args, mb, ent_coef)

    ppo.minibatch_loss = spy
    # One minibatch per update (every env, in shuffled order) and one epoch: each recorded call comes before its
    # update's gradient step. Three iterations: the later rollouts start from a carried-over state.
    args = ppo.Args(env_id="Breakout-v5", recurrent=cell, num_envs=4, num_steps=64, num_minibatches=1,
                    update_epochs=1, total_timesteps=3 * 4 * 64, cuda=False, torch_threads=1, auto_speed=False,
                    runs_dir=str(tmp_path / "runs"), save_interval=0)  # fmt: skip
    assert ppo.main(args) == 0
    assert len(calls) == 3
    for k, c in enumerate(calls):
        assert c["logprobs"].shape == (4 * 64,)
        logratio = c["new"] - c["logprobs"]
        assert logratio.abs().max().item() <= TOL, (k, logratio.abs().max().item())
        assert (c["new_values"] - c["values"]).abs().max().item() <= 10 * TOL
    starts = torch.stack([c["starts"].view(64, 4)[1:] for c in calls])
    assert starts.any(), "no episode (life) started inside a rollout: the test would not see a reset"
    # Without the resets at episode starts, or from a zero state instead of the stored one, it differs.
    assert max((c["unreset"] - c["logprobs"]).abs().max().item() for c in calls) > 100 * TOL
    assert calls[1]["state"].abs().sum() > 0
    assert max((c["zeroed"] - c["logprobs"]).abs().max().item() for c in calls[1:]) > 100 * TOL
    if cell == "lstm":  # evaluate.py carries the state through whole games
        (run_dir,) = (tmp_path / "runs").iterdir()
        proc = run("evaluate.py", str(run_dir), "--episodes", "1", "--sample", cwd=tmp_path, timeout=300,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "Breakout-v5: ppo_atari_lstm.py checkpoint at step 768, sampled policy" in proc.stdout


@pytest.mark.parametrize("env_id, cell", [("Breakout-v5", "lstm"), ("Breakout-v5", "gru"),
                                          ("dotframes:DotScene-v0", "gru")])  # fmt: skip
def test_appo_recomputes_the_acting_log_probs_from_async_batches(env_id, cell, tmp_path, request, monkeypatch):
    """APPO's sampler acts on whichever envs the async pool returns (3 of 8 per recv here), each from its own
    state; a trajectory keeps the state its first step acted from. With a learning rate of 1e-12 the learner's
    weights stay the acting ones (to the last bit or so), so every recomputed log-prob must be the acting one.
    DotScene (a Dict of frames and a vector, 40-step episodes, in worker processes) runs Sample Factory's Doom
    network with its GRU core (``RecurrentConvSimpleAgent``)."""
    if env_id.startswith("dotframes:"):
        monkeypatch.setenv("PYTHONPATH", request.getfixturevalue("pixel_env")["PYTHONPATH"])
    appo = load("appo.py")
    appo.make_agent = sharpen(appo.make_agent)
    calls = []
    loss = appo.appo_loss

    def spy(agent, args, batch):
        T = batch["actions"].shape[1]
        with torch.no_grad():
            new = policy_on(agent, batch)[0][:, :T]
            unreset = policy_on(agent, {**batch, "starts": torch.zeros_like(batch["starts"]),
                                             "reset": torch.zeros_like(batch["reset"])})[0][:, :T]  # fmt: skip
            zeroed = policy_on(agent, {**batch, "state": torch.zeros_like(batch["state"])})[0][:, :T]
        calls.append({"logprobs": batch["logprobs"], "starts": batch["starts"], "state": batch["state"], "new": new,
                      "unreset": unreset, "zeroed": zeroed, "dict": isinstance(batch["obs"], dict)})  # fmt: skip
        return loss(agent, args, batch)

    appo.appo_loss = spy
    args = appo.Args(env_id=env_id, recurrent=cell, num_envs=8, env_batch_size=3, trajectory_length=32,
                     batch_size=256, num_minibatches=1, update_epochs=1, learning_rate=1e-12, total_timesteps=3 * 256,
                     cuda=False, torch_threads=1, auto_speed=False, runs_dir=str(tmp_path / "runs"))  # fmt: skip
    assert appo.main(args) == 0
    assert len(calls) == 3
    assert all(c["dict"] == env_id.startswith("dotframes:") for c in calls)
    for k, c in enumerate(calls):
        assert c["logprobs"].shape == (8, 32)
        assert (c["new"] - c["logprobs"]).abs().max().item() <= TOL, (k, (c["new"] - c["logprobs"]).abs().max())
    assert torch.stack([c["starts"][:, 1:] for c in calls]).any(), "no episode started inside a trajectory"
    assert max((c["unreset"] - c["logprobs"]).abs().max().item() for c in calls) > 100 * TOL
    assert any(bool(c["state"].abs().sum() > 0) for c in calls)
    assert max((c["zeroed"] - c["logprobs"]).abs().max().item() for c in calls) > 100 * TOL
