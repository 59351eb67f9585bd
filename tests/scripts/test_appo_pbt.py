"""scripts/appo.py --pbt-population end to end on CartPole: a population whose member 1 starts with a broken learning
rate (1e-7, it cannot learn) recovers it at its first PBT step, taking member 0's weights and a learning rate near
member 0's, and its return rises; the checkpoint holds every member and the population's state, --resume goes on
with them, and evaluate.py plays any member. The rules themselves: tests/algos/test_pbt.py."""

import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.run_defaults(timeout=240, one_thread=True)
START = 20_480
"""env steps of a member before its first PBT step (40 of its batches of 512)"""


@pytest.fixture(scope="module")
def pbt_run(run_in_new_dir):
    return run_in_new_dir("appo_pbt", "appo.py", "--config", str(ROOT / "configs" / "cartpole_appo.toml"),
                          "--pbt-population", "2", "--pbt-start", str(START), "--pbt-period", str(START),
                          "--pbt-objective-episodes", "20", "--pbt-set", "1:learning_rate=1e-7",
                          "--total-timesteps", str(2 * 30 * 1024), "--num-threads", "1",
                          "--runs-dir", "runs")  # fmt: skip


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_a_member_with_a_broken_learning_rate_takes_a_good_ones_weights_and_rate_and_recovers(pbt_run):
    run_dir, proc = pbt_run
    exchange = re.search(r"pbt: policy 1 \(([\d.]+)\) takes policy 0's weights \(([\d.]+)\); learning_rate 1e-07 -> "
                         r"([\d.e-]+)", proc.stdout)  # fmt: skip
    assert exchange, proc.stdout[-3000:]
    broken, good, rate = map(float, exchange.groups())
    assert broken < 40 and good > 2 * broken  # CartPole at random: ~22
    assert 1e-3 / 1.5 <= rate <= 1e-3 * 1.5  # member 0's 1e-3, perturbed at most once (or not at all)
    assert scalars(run_dir, "pbt/policy_0/learning_rate")[-1][1] == pytest.approx(1e-3)  # the reference: not mutated
    rates = scalars(run_dir, "pbt/policy_1/learning_rate")
    assert rates[0][1] == pytest.approx(1e-7) and rates[-1][1] == pytest.approx(rate, rel=1e-3)
    # Member 1's return (its last 20 episodes): flat while it could not learn, up after the exchange.
    objective = scalars(run_dir, "pbt/policy_1/objective")
    before = max(v for step, v in objective if step < 2 * START - 1024)
    assert before < 40 and objective[-1][1] > 3 * before, objective
    assert "1 replacements; the best: python scripts/evaluate.py" in proc.stdout
    # Each member logs its own losses.
    assert scalars(run_dir, "policy_1/losses/value_loss") and scalars(run_dir, "policy_0/charts/policy_lag_mean")


def test_checkpoint_holds_every_member_resumes_and_plays_any(run, pbt_run):
    run_dir, _ = pbt_run
    ckpt = load_checkpoint(run_dir)
    assert set(ckpt["models"]) == {"agent", "agent_1"} and set(ckpt["optimizers"]) == {"optimizer", "optimizer_1"}
    state = ckpt["states"]["pbt"]
    assert state["steps"] == [30 * 1024] * 2 and state["replacements"] == 1 and len(state["returns"][1]) == 20
    proc = run("appo.py", "--resume", str(run_dir), "--total-timesteps", str(2 * 34 * 1024), cwd=run_dir.parent.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resumed = load_checkpoint(run_dir)["states"]["pbt"]
    assert resumed["steps"] == [34 * 1024] * 2 and resumed["hparams"] == state["hparams"]  # no PBT step due yet
    for policy in ("0", "1"):
        proc = run("evaluate.py", str(run_dir), "--policy", policy, "--episodes", "2", cwd=run_dir.parent.parent)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"greedy policy{' 1' if policy == '1' else ''}\n" in proc.stdout
    proc = run("evaluate.py", str(run_dir), "--policy", "2", cwd=run_dir.parent.parent)
    assert proc.returncode == 1 and "error: --policy 2: the checkpoint holds 2 policies (0..1)" in proc.stderr


@pytest.mark.parametrize("flags, message", [
    (["--num-envs", "15", "--pbt-population", "2"], "--num-envs 15 does not split evenly into --pbt-population 2"),
    (["--pbt-population", "2", "--env-batch-size", "16"], "--env-batch-size 16 is a member's pool's"),
    (["--pbt-population", "2", "--pbt-set", "2:learning_rate=1"], "--pbt-set 2:learning_rate=1: member 2 is not in"),
])  # fmt: skip
def test_bad_population_flags_are_named(run, tmp_path, flags, message):
    proc = run("appo.py", "--env-id", "CartPole-v1", "--num-envs", "16", *flags, cwd=tmp_path)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
