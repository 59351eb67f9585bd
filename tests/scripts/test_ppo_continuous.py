"""scripts/ppo_continuous.py end to end with seconds-long budgets: run dir, tensorboard tags, raw
episode returns, checkpoint contents (normalizer statistics included), evaluate.py on it,
--resume continuing the statistics, the Ant preset + command-line override, Ctrl-C, bad arguments.

The normalization itself is checked against gymnasium's wrappers in tests/algos/test_continuous.py.
"""

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import tomllib
import torch

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
PRESET = ROOT / "configs" / "ant_5min.toml"
TINY = ["--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "1",
        "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs"]  # fmt: skip
TASK = ["--env-id", "InvertedPendulum-v5"]  # cheap, and its raw return is known from its length
pytestmark = pytest.mark.run_defaults(timeout=120)  # for the run fixture (tests/conftest.py)


def obs_count(ckpt):
    """How many observations the checkpoint's observation statistics have seen."""
    return float(ckpt["normalizers"]["obs"]["rms"]["count"]) - 1e-4  # RunningMeanStd starts at count epsilon


@pytest.fixture(scope="module")
def smoke_run(run_in_new_dir):
    """One tiny training run (4 iterations of 2 envs x 16 steps) shared by the tests that inspect it."""
    return run_in_new_dir("smoke", "ppo_continuous.py", *TINY, *TASK, "--total-timesteps", "128",
                          "--save-interval", "2")  # fmt: skip


def test_smoke_run_dir_checkpoint_and_normalizers(smoke_run, finished_run):
    run_dir, proc = smoke_run
    finished_run(run_dir, proc.stdout, "InvertedPendulum-v5__ppo_continuous", 128, saves=(2, 4))

    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["script"] == "ppo_continuous.py" and ckpt["env_id"] == "InvertedPendulum-v5"
    assert ckpt["iteration"] == 4 and ckpt["global_step"] == 128 and ckpt["args"]["num_steps"] == 16
    assert set(ckpt["models"]["agent"]) >= {"actor_logstd", "actor_mean.0.weight", "critic.4.bias"}
    assert not any("action_low" in k for k in ckpt["models"]["agent"])  # bounds come from the action space
    obs_stats, reward = ckpt["normalizers"]["obs"]["rms"], ckpt["normalizers"]["reward"]
    assert obs_count(ckpt) == pytest.approx(2 * (1 + 64))  # the reset batch and 64 steps of 2 envs, once each
    assert obs_stats["mean"].dtype == torch.float64 and obs_stats["mean"].shape == (4,)
    assert (obs_stats["var"] != 1).all() and (obs_stats["mean"] != 0).all()
    assert reward["gamma"] == 0.99 and 0 < float(reward["rms"]["count"]) < 128 + 1  # reset steps are skipped
    assert float(reward["rms"]["var"]) != 1.0
    halfway = load_checkpoint(run_dir / "checkpoint_000002.pt")
    assert obs_count(halfway) == pytest.approx(2 * (1 + 32))


def test_smoke_tensorboard_tags_and_raw_returns(smoke_run, ppo_log):
    run_dir, _ = smoke_run
    acc = ppo_log(run_dir, 4, 3e-4)
    returns, lengths = acc.Scalars("charts/episodic_return"), acc.Scalars("charts/episodic_length")
    assert len(returns) >= 4
    # RecordEpisodeStatistics on the raw reward: InvertedPendulum-v5 pays 1 per step but 0 on the step that
    # terminates (these early episodes all terminate); the scaled rewards would sum to something else.
    assert [r.value for r in returns] == [n.value - 1 for n in lengths]
    assert "hyperparameters/text_summary" in acc.Tags()["tensors"]


def test_evaluate_on_smoke_checkpoint(smoke_run, evaluate_twice):
    run_dir, _ = smoke_run
    evaluate_twice(run_dir / "checkpoint.pt", 4, min_return=1.0)


def test_resume_continues_the_run_and_its_statistics(run, smoke_run, tmp_path):
    run_dir, _ = smoke_run
    copy = tmp_path / run_dir.name
    copy.mkdir()
    start = load_checkpoint(run_dir / "checkpoint.pt")
    (copy / "checkpoint.pt").write_bytes((run_dir / "checkpoint.pt").read_bytes())
    proc = run("ppo_continuous.py", "--resume", str(copy / "checkpoint.pt"), "--total-timesteps", "192", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"run dir: {copy}" in proc.stdout and not (tmp_path / "runs").exists()
    ckpt = load_checkpoint(copy / "checkpoint.pt")
    assert ckpt["iteration"] == 6 and ckpt["global_step"] == 192 and ckpt["args"]["env_id"] == "InvertedPendulum-v5"
    # The statistics continue from the checkpoint's: + a fresh reset batch + 2 iterations of 2 x 16 steps.
    assert obs_count(ckpt) == pytest.approx(obs_count(start) + 2 * (1 + 32))
    assert float(ckpt["normalizers"]["reward"]["rms"]["count"]) > float(start["normalizers"]["reward"]["rms"]["count"])


def test_ant_preset_is_loaded_and_command_line_wins(run, tmp_path):
    with open(PRESET, "rb") as f:
        preset = tomllib.load(f)
    proc = run("ppo_continuous.py", "--config", str(PRESET), *TINY, "--total-timesteps", "64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("Ant-v5__")
    args = load_checkpoint(run_dir / "checkpoint.pt")["args"]
    assert args["num_envs"] == 2 and args["num_steps"] == 16 and args["total_timesteps"] == 64  # command line
    overridden = {"num_envs", "num_steps", "num_minibatches", "update_epochs", "total_timesteps", "torch_threads"}
    for key, value in preset.items():
        if key not in overridden:
            assert args[key] == value, key  # preset
    assert args["config"].endswith("ant_5min.toml") and args["hidden_size"] == preset["hidden_size"]


def test_options_beyond_cleanrl_run_and_resume(run, tmp_path):
    # --init-logstd, --bootstrap-truncated and --kl-adaptive-lr (the Ant preset's) end to end: the policy starts
    # at that std, the learning rate moves by factors of 1.5 once per epoch, and both carry over a resume.
    flags = ["--init-logstd", "-1", "--bootstrap-truncated", "--kl-adaptive-lr", "0.008", "--no-anneal-lr"]
    proc = run("ppo_continuous.py", *TINY, *TASK, *flags, "--total-timesteps", "64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["args"]["bootstrap_truncated"] and ckpt["args"]["kl_adaptive_lr"] == 0.008
    logstd = ckpt["models"]["agent"]["actor_logstd"]
    assert torch.allclose(logstd, torch.full_like(logstd, -1.0), atol=0.01)  # 2 Adam steps of 3e-4 from -1
    lr = ckpt["optimizers"]["optimizer"]["param_groups"][0]["lr"]
    moves = [k for k in range(-2, 3) if lr == pytest.approx(3e-4 * 1.5**k)]
    assert moves and moves != [0], lr  # 2 iterations x 1 epoch: 2 moves, not both cancelling out here
    proc = run("ppo_continuous.py", "--resume", str(run_dir), "--total-timesteps", "128", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resumed = load_checkpoint(run_dir / "checkpoint.pt")
    assert resumed["iteration"] == 4 and resumed["args"]["init_logstd"] == -1.0
    proc = run("ppo_continuous.py", *TINY, *TASK, "--kl-adaptive-lr", "0.008", cwd=tmp_path)
    assert proc.returncode == 1 and "--kl-adaptive-lr sets the learning rate itself" in proc.stderr


def test_env_groups_run_two_pools_and_resume(run, tmp_path):
    """--env-groups 2: 4 envs in two pools of 2 that take turns (the statistics and trajectories against one pool's:
    tests/algos/test_continuous.py); the run trains, checkpoints every env's observations counted and resumes; a
    group count that does not divide the envs is refused."""
    flags = [*TINY, *TASK, "--num-envs", "4", "--env-groups", "2"]
    proc = run("ppo_continuous.py", *flags, "--total-timesteps", "128", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("EnvPool('InvertedPendulum-v5', num_envs=2") == 2, proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["args"]["env_groups"] == 2 and obs_count(ckpt) == pytest.approx(4 * (1 + 32))  # reset + 2 x 16 steps
    proc = run("ppo_continuous.py", "--resume", str(run_dir), "--total-timesteps", "256", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert obs_count(load_checkpoint(run_dir / "checkpoint.pt")) == pytest.approx(4 * (1 + 32) * 2)  # + a reset
    proc = run("ppo_continuous.py", *TINY, *TASK, "--num-envs", "4", "--env-groups", "3", cwd=tmp_path)
    assert proc.returncode == 1 and "--env-groups 3 does not divide the 4 envs" in proc.stderr, proc.stderr


def test_final_logstd_schedules_the_std_instead_of_learning_it(run, tmp_path, load_script):
    # 4 iterations from -1 to -3: the checkpoint (after the last) holds the last iteration's value, -3 exactly,
    # untouched by the 4 updates; the schedule itself is linear in the iteration.
    flags = ["--init-logstd", "-1", "--final-logstd", "-3", "--total-timesteps", "128"]
    proc = run("ppo_continuous.py", *TINY, *TASK, *flags, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    logstd = load_checkpoint(run_dir / "checkpoint.pt")["models"]["agent"]["actor_logstd"]
    assert torch.equal(logstd, torch.full_like(logstd, -3.0))
    args = load_script("ppo_continuous.py").Args(num_envs=2, num_steps=16, total_timesteps=128, init_logstd=-1.0,
                                                 final_logstd=-3.0)  # fmt: skip
    assert [args.scheduled_logstd(i) for i in range(1, 5)] == pytest.approx([-1.0, -1 - 2 / 3, -1 - 4 / 3, -3.0])
    # --logstd-steps 96: the same schedule over the first 3 iterations of 32 steps, then held.
    short = dataclasses.replace(args, logstd_steps=96)
    assert [short.scheduled_logstd(i) for i in range(1, 6)] == pytest.approx([-1.0, -2.0, -3.0, -3.0, -3.0])
    proc = run("ppo_continuous.py", *TINY, *TASK, "--final-logstd", "-3", "--logstd-steps", "0", cwd=tmp_path)
    assert proc.returncode == 1 and "--logstd-steps" in proc.stderr and "0" in proc.stderr, proc.stderr
    proc = run("ppo_continuous.py", *TINY, *TASK, "--logstd-steps", "96", cwd=tmp_path)
    assert proc.returncode == 1 and "--logstd-steps 96 times --final-logstd's schedule" in proc.stderr, proc.stderr


def test_env_kwargs_reach_the_pool_the_checkpoint_and_evaluate(run, tmp_path):
    # Ant-v5 without the contact forces in its observation: 27 values instead of 105, in training and evaluation
    flags = ["--env-id", "Ant-v5", "--env-kwargs", "include_cfrc_ext_in_observation=false", "healthy_reward=2"]
    proc = run("ppo_continuous.py", *TINY, *flags, "--total-timesteps", "64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    assert ckpt["env_kwargs"] == ckpt["eval_env_kwargs"] == {"include_cfrc_ext_in_observation": False,
                                                              "healthy_reward": 2}  # fmt: skip
    assert ckpt["models"]["agent"]["critic.0.weight"].shape[1] == 27
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # healthy_reward=2 reached the evaluation envs too: an episode that lasts L steps earns at least ~2 per step
    length = float(proc.stdout.split("mean length:")[1].split()[0])
    assert float(proc.stdout.split("return:")[1].split()[0]) > 1.5 * length
    for bad, message in (("include_cfrc_ext_in_observation", "is not name=value"),
                         ("no_such_option=1", "unknown option 'no_such_option' for Ant-v5")):  # fmt: skip
        proc = run("ppo_continuous.py", *TINY, "--env-id", "Ant-v5", "--env-kwargs", bad, cwd=tmp_path)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
    assert len(list((tmp_path / "runs").iterdir())) == 1  # the refused commands left no run dir


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path, interrupt_training):
    _, ckpt = interrupt_training("ppo_continuous.py", *TINY, *TASK, "--total-timesteps", "10000000", cwd=tmp_path)
    assert ckpt["global_step"] == ckpt["iteration"] * 32
    assert obs_count(ckpt) >= 2 * (1 + 16 * ckpt["iteration"])  # the statistics as of the interrupt


def test_script_imports_without_running():
    # evaluate.py imports the trainer named in a checkpoint: importing must not start training.
    spec = importlib.util.spec_from_file_location("check_ppo_continuous", SCRIPTS / "ppo_continuous.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hasattr(module, "main") and hasattr(module, "make_agent")
