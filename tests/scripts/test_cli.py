"""The trainers' command lines as a new user meets them: every bad flag ends with one ``error: ...`` line
naming it (no traceback) and leaves no run dir behind; ``--help`` lists every flag with its help text and
one default; evaluate.py takes a run dir and names what a script lacks of the evaluation contract.

The bad-flag cases run in-process (``main(*parse_or_resume(...))``, as the scripts' ``__main__`` does):
a SystemExit whose code is the message is exactly what Python prints as one line on stderr. Two cases run
as real processes to prove that end to end.
"""

import dataclasses
import importlib.util
import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import torch

from rlfast.algos.checkpoint import load_checkpoint, make_checkpoint, save_checkpoint
from rlfast.algos.config import parse_or_resume
from rlfast.algos.speed import denormals_flushed

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
TRAINERS = ("ppo.py", "ppo_atari.py", "ppo_atari_lstm.py", "ppo_continuous.py", "dqn.py", "dqn_atari.py", "appo.py")


def load(name):
    spec = importlib.util.spec_from_file_location(f"cli_{name[:-3]}", SCRIPTS / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # tyro reads the Args source (field help texts) through its module
    spec.loader.exec_module(module)
    return module


MODULES = {name: load(name) for name in (*TRAINERS, "evaluate.py")}


def run_main(script, argv, cwd):
    """The script's ``__main__`` in this process; returns the SystemExit code (the printed message)."""
    module = MODULES[script]
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with pytest.raises(SystemExit) as excinfo:
            if script == "evaluate.py":
                import tyro

                module.main(tyro.cli(module.Args, args=argv))
            else:
                module.main(*parse_or_resume(module.Args, script, argv))
    finally:
        os.chdir(old)
    return excinfo.value.code


def tiny_checkpoint(path, script="ppo.py", **overrides):
    """A real checkpoint of a 4-step ppo.py run's shape, written without training."""
    ppo = MODULES["ppo.py"]
    args = ppo.Args(**overrides)
    agent = ppo.Agent(4, 2)
    ckpt = make_checkpoint(script=script, env_id=args.env_id, args=dataclasses.asdict(args), global_step=512,
                           iteration=4, models={"agent": agent})  # fmt: skip
    return save_checkpoint(path, ckpt)


# (script, flags, a piece of the one-line message)
OWN = "and your own envs (gymnasium 'module:Env-v0' ids, rlfast.load_env headers)"
"""what the MLP trainers' family errors add about users' envs"""
BAD_FLAGS = [
    ("ppo_atari.py", ["--env-id", "CartPole-v1"], f"trains atari tasks {OWN}; CartPole-v1 is from the classic_control"),
    ("ppo.py", ["--env-id", "Pong-v5"], f"ppo.py trains classic_control tasks {OWN}; Pong-v5 is from the atari"),
    ("ppo_continuous.py", ["--env-id", "Pong-v5"], f"trains mujoco or classic_control tasks {OWN}; Pong-v5 is from"),
    ("ppo.py", ["--env-id", "Pendulum-v1"], "Pendulum-v1 has a Box action space; ppo.py needs Discrete"),
    ("ppo_continuous.py", ["--env-id", "CartPole-v1"], "has a Discrete action space; ppo_continuous.py needs Box"),
    ("ppo_atari.py", ["--env-id", "Pong-v4"], "--env-id: unknown task id 'Pong-v4'; did you mean 'Pong-v5'"),
    ("ppo.py", ["--num-envs", "0"], "--num-envs must be >= 1, got 0"),
    ("ppo_atari.py", ["--num-envs", "0"], "--num-envs must be >= 1, got 0"),
    ("ppo_continuous.py", ["--num-envs", "0"], "--num-envs must be >= 1, got 0"),
    ("ppo.py", ["--num-steps", "0"], "--num-steps must be >= 1, got 0"),
    ("ppo.py", ["--num-minibatches", "0"], "--num-minibatches must be >= 1, got 0"),
    ("ppo.py", ["--num-minibatches", "3"], "batch of 512 steps (num_envs x num_steps) is not divisible by"),
    ("ppo.py", ["--total-timesteps", "10"], "--total-timesteps 10 is less than one iteration of 512 steps"),
    ("ppo.py", ["--save-minutes", "-1"], "--save-minutes must be >= 0"),
    ("ppo_atari.py", ["--save-interval", "-2"], "--save-interval must be >= 0 (0: none), got -2"),
    ("ppo.py", ["--seed", "-1"], "--seed must be in [0, 2**32), got -1"),
    ("ppo.py", ["--gamma", "1.5"], "--gamma must be in [0, 1], got 1.5"),
    ("ppo.py", ["--learning-rate", "0"], "--learning-rate must be > 0, got 0.0"),
    ("ppo.py", ["--num-threads", "0"], "--num-threads must be >= 1 (or left out), got 0"),
    ("ppo_continuous.py", ["--hidden-size", "0"], "--hidden-size must be > 0, got 0"),
    ("ppo_atari_lstm.py", ["--num-envs", "6"], "--num-envs 6 must split into --num-minibatches 4"),
    ("ppo.py", ["--resume", "nowhere/checkpoint.pt"], "--resume: no checkpoint at nowhere/checkpoint.pt: no such file"),
    ("dqn.py", ["--env-id", "Pendulum-v1"], "Pendulum-v1 has a Box action space; dqn.py needs Discrete"),
    ("dqn.py", ["--env-id", "Breakout-v5"], f"dqn.py trains classic_control tasks {OWN}; Breakout-v5 is from"),
    ("dqn.py", ["--num-envs", "0"], "--num-envs must be >= 1, got 0"),
    ("dqn.py", ["--buffer-size", "100"], "--buffer-size 100 must hold --batch-size 128 transitions"),
    ("dqn.py", ["--replay-ratio", "0"], "--replay-ratio must be > 0, got 0.0"),
    ("dqn_atari.py", ["--env-id", "CartPole-v1"], f"dqn_atari.py trains atari tasks {OWN}; CartPole-v1 is from the"),
    ("dqn_atari.py", ["--learning-starts", "8"], "--learning-starts 8 must be >= --batch-size 32"),
    ("appo.py", ["--env-id", "Pendulum-v1"], "Pendulum-v1 has a Box action space; appo.py needs Discrete"),
    ("appo.py", ["--env-id", "Ant-v5"], f"appo.py trains classic_control or atari tasks {OWN}; Ant-v5 is from the"),
    ("appo.py", ["--env-id", "CartPole-v1", "--batch-size", "100"], "--batch-size 100 is not a whole number of "
     "--trajectory-length 32 trajectories"),
    ("appo.py", ["--num-minibatches", "3"], "the 64 trajectories of a batch do not split into --num-minibatches 3"),
    ("appo.py", ["--deterministic", "--num-envs", "32"], "--deterministic trains on whole rollouts of every env: "
     "--batch-size must be --num-envs x --trajectory-length = 1024, got 2048"),
    ("appo.py", ["--env-batch-size", "65"], "--env-batch-size must be in [1, --num-envs 64], got 65"),
    ("appo.py", ["--rho-bar", "0"], "--rho-bar must be > 0, got 0.0"),
]
if not torch.cuda.is_available():
    BAD_FLAGS.append(("ppo_continuous.py", ["--cudagraphs"], "--cudagraphs needs a CUDA device"))


@pytest.mark.parametrize("script, flags, message", BAD_FLAGS, ids=[f"{s}:{' '.join(f)}" for s, f, _ in BAD_FLAGS])
def test_bad_flag_is_one_line_and_leaves_no_run_dir(script, flags, message, tmp_path):
    code = run_main(script, [*flags, "--no-cuda", "--runs-dir", "runs"], tmp_path)
    assert isinstance(code, str) and code.startswith("error: ") and "\n" not in code, code
    assert message in code
    assert not (tmp_path / "runs").exists()


def test_several_problems_are_each_named(tmp_path):
    code = run_main("ppo.py", ["--num-envs", "0", "--save-minutes", "-1", "--seed", "-3"], tmp_path)
    lines = code.splitlines()
    assert len(lines) == 3 and all(line.startswith("error: --") for line in lines), code


def test_bad_env_option_is_one_line(tmp_path, monkeypatch):
    # An option the pool refuses (here: made up for the Atari family) comes back as the pool's own message.
    ppo_atari = MODULES["ppo_atari.py"]
    monkeypatch.setattr(ppo_atari, "TRAIN_ENV_KWARGS", {**ppo_atari.TRAIN_ENV_KWARGS, "stack_num": 0})
    flushed = denormals_flushed()
    code = run_main("ppo_atari.py", ["--no-cuda", "--runs-dir", "runs"], tmp_path)
    assert code.startswith("error: Pong-v5: ") and "stack_num" in code and "\n" not in code, code
    assert not (tmp_path / "runs").exists()
    assert denormals_flushed() == flushed  # the run set it for Pong (--auto-speed) and put it back (Run.abandon)


def test_resume_rejects_other_scripts_files_and_finished_runs(tmp_path):
    tiny_checkpoint(tmp_path / "run" / "checkpoint.pt", total_timesteps=512, num_envs=4, num_steps=32)
    code = run_main("ppo_atari.py", ["--resume", str(tmp_path / "run")], tmp_path)
    assert code == f"error: --resume: {tmp_path / 'run' / 'checkpoint.pt'} was written by ppo.py, not ppo_atari.py"
    code = run_main("ppo.py", ["--resume", str(tmp_path / "run"), "--no-cuda"], tmp_path)  # a run dir works
    assert "already holds 4 of the 4 iterations asked for; raise --total-timesteps to continue it" in code, code
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    code = run_main("ppo.py", ["--resume", str(tmp_path / "junk.pt")], tmp_path)
    assert code.startswith(f"error: --resume: {tmp_path / 'junk.pt'} is not a readable rlfast checkpoint"), code


def test_partial_rollout_says_how_many_steps_will_run(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPTS / "ppo.py"), "--total-timesteps", "700", "--num-envs", "2",
                           "--num-steps", "128", "--no-cuda", "--torch-threads", "1", "--runs-dir", "runs"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert ("note: --total-timesteps 700 is not a whole number of iterations of 256 steps: 512 steps will run "
            "(2 iterations)") in proc.stdout  # fmt: skip
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_checkpoint(run_dir)["global_step"] == 512


@pytest.mark.parametrize("flags", [["--env-id", "Pong-v4"], ["--save-minutes", "-1"]])
def test_bad_flag_in_a_real_process_prints_no_traceback(flags, tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPTS / "ppo_atari.py"), *flags, "--runs-dir", "runs"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "runs").exists()


def option_blocks(help_text):
    """``{flag: text}`` of tyro's --help: each option's lines joined, box drawing removed."""
    blocks, current = {}, None
    for line in help_text.splitlines():
        body = line.strip("│╭╮╰╯─ ").strip()
        # an option starts at the box's edge; its help's lines (which may begin with another flag) are indented
        match = re.match(r"\s{0,2}(--[a-z0-9-]+)", line.lstrip("│"))
        if match:
            current = match.group(1)
            blocks[current] = body
        elif current and body:
            blocks[current] += " " + body
    return blocks


@pytest.mark.parametrize("script", TRAINERS)
def test_help_lists_every_flag_with_its_text_and_one_default(script, monkeypatch):
    import tyro

    monkeypatch.setenv("COLUMNS", "200")
    module = MODULES[script]
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        tyro.cli(module.Args, args=["--help"])
    blocks = option_blocks(out.getvalue())
    for field in dataclasses.fields(module.Args):
        flag = "--" + field.name.replace("_", "-")
        assert flag in blocks, flag
        text = blocks[flag]
        assert text.count("(default") == 1, text  # tyro's "(default: ...)" and no second one of the help text
        words = re.sub(r"\(default: [^)]*\)|--[a-z0-9-]+|\{None\}\|[A-Z]+|[A-Z]+$|,", "", text).split()
        assert len(words) >= 2, f"{flag} has no help text: {text!r}"
        assert not re.search(r"\d+ SPS|measured", text), f"{flag}'s help states a measurement: {text!r}"


def test_evaluate_takes_a_run_dir_and_names_what_is_missing(tmp_path):
    run_dir = tmp_path / "CartPole-v1__ppo__1__1"
    tiny_checkpoint(run_dir / "checkpoint.pt")
    out = io.StringIO()
    with redirect_stdout(out):
        assert MODULES["evaluate.py"].main(MODULES["evaluate.py"].Args(str(run_dir), episodes=2)) == 0
    assert "CartPole-v1: ppo.py checkpoint at step 512, greedy policy" in out.getvalue()

    code = run_main("evaluate.py", [str(tmp_path / "missing")], tmp_path)
    assert code == f"error: no checkpoint at {tmp_path / 'missing'}: no such file"
    code = run_main("evaluate.py", [str(tmp_path)], tmp_path)
    assert code == f"error: {tmp_path} is a folder without a checkpoint.pt (is it a run dir?)"
    code = run_main("evaluate.py", [str(run_dir), "--env-id", "CartPol-v1"], tmp_path)
    assert code.startswith("error: CartPol-v1: unknown task id 'CartPol-v1'"), code
    code = run_main("evaluate.py", [str(run_dir), "--env-id", "Acrobot-v1"], tmp_path)  # 6 observations, 3 actions
    assert code.startswith("error: the checkpoint's network does not fit Acrobot-v1's spaces: "), code
    assert "size mismatch" in code and "\n" not in code, code
    # plot_profile.py is a script (with an Args dataclass), but not a trainer: evaluate.py says what it lacks.
    tiny_checkpoint(tmp_path / "other" / "checkpoint.pt", script="plot_profile.py")
    code = run_main("evaluate.py", [str(tmp_path / "other")], tmp_path)
    assert code == ("error: plot_profile.py cannot be evaluated: no `make_agent(args, obs_space, action_space)` "
                    "function (the contract: rlfast.algos.contract.TrainerScript)")  # fmt: skip
    tiny_checkpoint(tmp_path / "far" / "checkpoint.pt", script="../tests/evil.py")
    code = run_main("evaluate.py", [str(tmp_path / "far")], tmp_path)
    assert "evil.py is not in scripts/" in code, code
