"""The run layer (rlfast/algos/run.py) driven by a minimal trainer: checks before anything exists, the
iteration loop and its checkpoints, --target-return, Ctrl-C (checkpoint of the last completed iteration,
pools closed, exit code 130), resume through ``track``, and ``compile`` leaving functions alone by default.
The PPO scripts on top of it are checked end to end in tests/scripts."""

import dataclasses
import os
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from rlfast.algos.checkpoint import load_checkpoint
from rlfast.algos.run import Run, RunArgs
from rlfast.algos.runargs import CNNArgs


@dataclass
class Args(CNNArgs, RunArgs):
    exp_name: str = "unit"
    num_envs: int = 2
    total_timesteps: int = 40
    save_minutes: float = 0.0


def make_run(tmp_path, ckpt=None, **overrides):
    args = Args(runs_dir=str(tmp_path / "runs"), cuda=False, **overrides)
    return Run(args, "unit.py", ckpt, iterations=args.total_timesteps // 10, steps_per_iteration=10)


def train(run, stop_at=None, episodes_per_iteration=0, value=1.0):
    """A stand-in trainer: one pool, one linear model whose weight counts the iterations it saw."""
    pool = run.make_env(run.args.num_envs, num_threads=1)
    model = torch.nn.Linear(1, 1, bias=False)
    run.track(models={"model": model})
    with run:
        for iteration in run.iterations():
            with torch.no_grad():
                model.weight += 1
            if iteration == stop_at:
                raise KeyboardInterrupt  # mid-iteration: after the update, before end_iteration
            done = torch.zeros(1, 2, dtype=torch.bool)
            done[0, :episodes_per_iteration] = True
            episodes = (done, torch.full((1, 2), value), torch.ones(1, 2, dtype=torch.int32))
            run.end_iteration(10, {"losses/x": 0.0}, episodes)
    return pool, model


def test_validate_names_each_bad_flag():
    problems = Args(num_envs=0, seed=-1, save_interval=-1, save_minutes=float("nan"), torch_threads=0,
                    exp_name="a/b", target_return=float("inf")).validate()  # fmt: skip
    for flag in ("--num-envs", "--seed", "--save-interval", "--save-minutes", "--torch-threads", "--exp-name",
                 "--target-return"):  # fmt: skip
        assert sum(p.startswith(flag) for p in problems) == 1, (flag, problems)
    assert Args().validate() == []


def test_bad_flags_exit_before_anything_is_created(tmp_path):
    with pytest.raises(SystemExit) as e:
        make_run(tmp_path, num_envs=0, total_timesteps=5)
    assert e.value.code == "error: --num-envs must be >= 1, got 0"  # checked before the iteration count
    assert not (tmp_path / "runs").exists()
    with pytest.raises(SystemExit, match="--total-timesteps 5 is less than one iteration of 10 steps"):
        make_run(tmp_path, total_timesteps=5)
    with pytest.raises(SystemExit, match="unknown task id 'CartPol-v1'"):
        Run(Args(env_id="CartPol-v1"), "unit.py", iterations=4, steps_per_iteration=10, families=("classic_control",))
    with pytest.raises(SystemExit, match="unit.py trains mujoco tasks; CartPole-v1 is from the classic_control family"):
        Run(Args(), "unit.py", iterations=4, steps_per_iteration=10, families=("mujoco",))
    with pytest.raises(SystemExit, match="CartPole-v1: .*bogus_option"):
        make_run(tmp_path).make_env(2, bogus_option=1)
    assert not (tmp_path / "runs").exists()


def test_iterations_checkpoints_and_final_summary(tmp_path, capsys):
    run = make_run(tmp_path, save_interval=2, total_timesteps=45)
    pool, model = train(run)
    out = capsys.readouterr().out
    assert "note: --total-timesteps 45 is not a whole number of iterations of 10 steps: 40 steps will run" in out
    assert out.count("run dir: ") == 1 and "EnvPool('CartPole-v1', num_envs=2" in out
    assert "profile over 4 iterations" in out and "40 steps in" in out
    assert run.exit_code == 0 and pool.closed
    names = sorted(p.name for p in run.run_dir.iterdir() if p.suffix == ".pt")
    assert names == ["checkpoint.pt", "checkpoint_000002.pt", "checkpoint_000004.pt"]
    ckpt = load_checkpoint(run.run_dir)
    assert (ckpt["iteration"], ckpt["global_step"], ckpt["script"]) == (4, 40, "unit.py")
    assert ckpt["models"]["model"]["weight"].item() == pytest.approx(model.weight.item())
    assert ckpt["args"] == dataclasses.asdict(run.args) and ckpt["eval_env_kwargs"] == {}
    assert load_checkpoint(run.run_dir / "checkpoint_000002.pt")["global_step"] == 20


def test_checkpoint_has_the_permissions_of_the_other_run_files(tmp_path):
    run = make_run(tmp_path)
    train(run)
    (events,) = [p for p in run.run_dir.iterdir() if p.name.startswith("events")]
    assert stat.S_IMODE(os.stat(run.run_dir / "checkpoint.pt").st_mode) == stat.S_IMODE(os.stat(events).st_mode)


def test_target_return_ends_the_loop_early(tmp_path):
    run = make_run(tmp_path, total_timesteps=1000, target_return=5.0)
    train(run, episodes_per_iteration=2, value=7.0)  # 2 episodes per iteration: the 20-episode window fills at 10
    assert run.completed == (10, 100) and load_checkpoint(run.run_dir)["iteration"] == 10


def test_ctrl_c_saves_the_last_completed_iteration_and_closes_pools(tmp_path, capsys):
    run = make_run(tmp_path)
    pool, model = train(run, stop_at=3)
    assert run.exit_code == 130 and pool.closed
    ckpt = load_checkpoint(run.run_dir)
    assert (ckpt["iteration"], ckpt["global_step"]) == (2, 20)  # the progress of the last completed iteration
    assert ckpt["models"]["model"]["weight"].item() == pytest.approx(model.weight.item())  # the latest weights
    assert f"interrupted at step 20 (iteration 2): saved {run.run_dir / 'checkpoint.pt'}" in capsys.readouterr().out


def test_an_error_in_the_loop_propagates_and_closes_the_pools(tmp_path):
    run = make_run(tmp_path)
    pool = run.make_env(2)
    run.track(models={})
    with pytest.raises(RuntimeError, match="boom"):
        with run:
            for _ in run.iterations():
                raise RuntimeError("boom")
    assert pool.closed and not (run.run_dir / "checkpoint.pt").exists()


def test_resume_restores_tracked_state_and_continues_the_count(tmp_path):
    first = make_run(tmp_path, total_timesteps=20)
    train(first)
    ckpt = load_checkpoint(first.run_dir)
    args = dataclasses.replace(first.args, total_timesteps=40, resume=str(first.run_dir / "checkpoint.pt"))
    run = Run(args, "unit.py", ckpt, iterations=4, steps_per_iteration=10)
    assert run.resumed and run.run_dir == first.run_dir and run.env_seed == args.seed + 2 * args.num_envs
    pool, model = train(run)
    assert model.weight.item() == pytest.approx(ckpt["models"]["model"]["weight"].item() + 2)  # 2 more iterations
    assert load_checkpoint(first.run_dir)["global_step"] == 40


def test_compile_is_the_identity_unless_asked(tmp_path):
    run = make_run(tmp_path)

    def f(x):
        return x + 1

    assert run.compile(f) is f


def test_bf16_without_native_support_says_it_rounds_in_float32(tmp_path, capsys):
    from rlfast.algos.speed import native_bf16

    run = make_run(tmp_path, bf16=True)
    note = "note: --bf16 on cpu, which has no native bfloat16 (AVX512-BF16 / AMX): bfloat16's numerics in float32"
    emulated = not native_bf16(torch.device("cpu"))
    assert (note in capsys.readouterr().out) == emulated
    assert run.speed["round_bf16"] == emulated
    make_run(tmp_path)
    assert "--bf16" not in capsys.readouterr().out


def test_auto_speed_picks_channels_last_and_auto_bf16_on_a_cpu_only(tmp_path, capsys, monkeypatch):
    from rlfast.algos import runargs
    from rlfast.algos.nets import NatureCNNAgent
    from rlfast.algos.speed import auto_bf16, native_bf16, set_speed
    from rlfast.algos.runargs import speed_options

    cpu, native, picked = torch.device("cpu"), native_bf16(torch.device("cpu")), auto_bf16(torch.device("cpu"))
    assert speed_options(Args(), cpu) == {"channels_last": True, "bf16": picked, "round_bf16": False}
    for pays in (True, False):  # bf16 where auto_bf16 says it pays (AMX; AMD with AVX512-BF16), else float32
        monkeypatch.setattr(runargs, "auto_bf16", lambda device, pays=pays: pays)
        assert speed_options(Args(), cpu)["bf16"] is pays
    monkeypatch.undo()
    off = {"channels_last": False, "bf16": False, "round_bf16": False}
    assert speed_options(Args(auto_speed=False), cpu) == off  # CleanRL's
    forced = {"channels_last": False, "bf16": True, "round_bf16": not native}  # bf16's numerics wherever asked
    assert speed_options(Args(auto_speed=False, bf16=True), cpu) == forced
    assert speed_options(Args(), torch.device("cuda")) == off  # unmeasured there

    def run_dir_line(run):  # what a trainer prints on entering its run, the CNN on run.speed
        pool = run.make_env(run.args.num_envs, num_threads=1)
        run.track(models={"agent": set_speed(NatureCNNAgent(4, 2), **run.speed)})
        with run:
            pass
        pool.close()
        return next(x for x in capsys.readouterr().out.splitlines() if x.startswith("run dir:"))

    run = make_run(tmp_path)
    assert run.speed == {"channels_last": True, "bf16": picked, "round_bf16": False}
    auto = "cnn: channels-last + bf16 (--auto-speed)" if picked else "cnn: channels-last (--auto-speed)"
    assert run_dir_line(run).endswith(auto)
    forced = run_dir_line(make_run(tmp_path, bf16=True, auto_speed=False, exp_name="forced"))
    assert forced.endswith("cnn: bf16" if native else "cnn: bf16 (rounded in float32)")


@pytest.mark.parametrize("env_id, auto_speed, flush, flushed", [
    ("Pong-v5", True, False, True),  # --auto-speed on a CPU: an Atari task flushes
    ("Pong-v5", False, False, False),  # CleanRL's numerics
    ("CartPole-v1", True, False, False),  # classic control and MuJoCo keep gymnasium's numerics
    ("CartPole-v1", False, True, True),  # --flush-denormals asks for it anywhere
])  # fmt: skip
def test_denormals_are_flushed_during_the_run_and_restored_after(tmp_path, env_id, auto_speed, flush, flushed):
    from rlfast.algos.speed import denormals_flushed

    assert not denormals_flushed()
    run = make_run(tmp_path, env_id=env_id, auto_speed=auto_speed, flush_denormals=flush)
    run.track(models={"model": torch.nn.Linear(1, 1)})
    with run:
        assert denormals_flushed() == flushed
    assert not denormals_flushed()  # the caller's thread as it was


def test_finish_exits_with_the_code_after_the_atexit_handlers(tmp_path):
    """The trainers end with ``finish(main(...))``: their exit status is main's, atexit handlers still run
    (the interpreter's last garbage collection is what it skips)."""
    script = ("import atexit, sys\nfrom rlfast.algos.launch import finish\n"
              "atexit.register(lambda: print('atexit ran', flush=True))\nfinish(3)\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout == "atexit ran\n", (proc.returncode, proc.stdout, proc.stderr)


def test_an_error_raised_from_an_interrupt_saves_and_exits_as_ctrl_c_does(tmp_path, capsys):
    # e.g. a Ctrl-C inside the import torch.compile's first call makes, which a class body turns into RuntimeError
    run = make_run(tmp_path)
    pool = run.make_env(2, num_threads=1)
    run.track(models={"model": torch.nn.Linear(1, 1)})
    with run:
        for iteration in run.iterations():
            if iteration == 2:
                try:
                    raise KeyboardInterrupt
                except KeyboardInterrupt as e:
                    raise RuntimeError("Error calling __set_name__ on 'Field' instance") from e
            run.end_iteration(10, {"losses/x": 0.0}, None)
    assert run.exit_code == 130 and pool.closed and load_checkpoint(run.run_dir)["iteration"] == 1
    assert "interrupted at step 10 (iteration 1)" in capsys.readouterr().out


@pytest.mark.parametrize("sig", [None, signal.SIGTERM])
def test_launch_ends_an_interrupt_before_the_run_with_one_line(tmp_path, sig):
    """Before ``with run:`` (parsing, building the envs, torch.compile's imports), Ctrl-C, SIGTERM or an error a
    library raised from the KeyboardInterrupt end the trainer with one line and status 128 + the signal."""
    body = ("    time.sleep(0.2); os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n" if sig else
            "    try:\n        raise KeyboardInterrupt\n    except KeyboardInterrupt as e:\n"
            "        raise RuntimeError('an import cut short') from e\n")  # fmt: skip
    script = ("import os, signal, time\nimport rlfast.algos.launch as L\nL.parse_or_resume = lambda a, s: ()\n"
              f"def main():\n{body}    return 0\nL.launch(main, None, 'unit.py')\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 128 + (sig or signal.SIGINT), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "interrupted: no checkpoint written now" in proc.stderr, proc.stderr


def test_launch_lets_other_errors_through(tmp_path):
    script = ("import rlfast.algos.launch as L\nL.parse_or_resume = lambda a, s: ()\n"
              "def main():\n    raise ValueError('a real bug')\nL.launch(main, None, 'unit.py')\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "ValueError: a real bug" in proc.stderr, (proc.returncode, proc.stderr)
