"""Faults of C++ envs, which run on the pool's threads: built-in ones (Dummy-v0) and ``rlfast.load_env`` ones
(faulty_env.h). An exception in a constructor, a reset or a step is a Python error naming the env; a segfault in
env code ends the process (it is the trainer's own process: the checkpoint and --resume are the way back)."""

import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlfast

HEADER = Path(__file__).resolve().parent / "faulty_env.h"


@pytest.fixture(scope="module")
def loaded() -> str:
    return rlfast.load_env(str(HEADER), "Faulty-v0")


def kinds(loaded: str) -> dict:
    """Per pool kind: (task id, the action that throws in step, the options that fail reset k, construction)."""
    return {
        "builtin": ("Dummy-v0", 7, lambda k: {"throw_on_reset": k, "throw_on_action": 7}, {"throw_on_build": 1}),
        "load_env": (loaded, 1, lambda k: {"fail_reset": k}, {"fail_build": 1}),
    }


@pytest.mark.parametrize("kind", ["builtin", "load_env"])
def test_a_constructor_that_throws_is_an_error_naming_the_task_and_env(loaded, kind):
    task, _, _, build = kinds(loaded)[kind]
    with pytest.raises(RuntimeError, match=rf"{task} env \d+ could not be built: .*told to fail in its constructor"):
        rlfast.make(task, 4, **build)


@pytest.mark.parametrize("kind", ["builtin", "load_env"])
@pytest.mark.parametrize("batch_size", [2, 4])
def test_a_step_or_reset_that_throws_is_one_env_error_naming_it_and_the_pool_goes_on(loaded, kind, batch_size):
    """Random envs throw in random steps (and each env's second reset throws); every throw is one EnvError
    naming that env, the batch's envs are idle again, and every env goes on stepping."""
    task, bad, fail_reset, _ = kinds(loaded)[kind]
    rng = np.random.default_rng(0)
    with rlfast.make(task, 4, batch_size=batch_size, **fail_reset(1)) as pool:
        pool.async_reset()
        seen, thrown, errors = np.zeros(4, int), 0, 0
        ids = None
        for _ in range(300):
            try:
                _, _, _, _, info = pool.recv()
                ids = info["env_id"].numpy().copy()
                seen[ids] += 1
            except rlfast.EnvError as err:
                errors += 1
                assert "told to fail " in str(err) and f"{task} env " in str(err)
                ids = err.env_ids.numpy().copy()
            actions = np.zeros(len(ids), np.int64)
            if rng.random() < 0.05:
                actions[rng.integers(len(ids))] = bad
                thrown += 1
            pool.send(actions, ids)
        assert thrown > 5 and errors >= thrown  # the throws in step, plus the resets that threw
        assert (seen > 20).all(), seen


def test_a_segfault_in_cpp_env_code_ends_the_process(loaded, tmp_path):
    """What the reliability page says: no handler can make a process whose own thread segfaulted go on; the
    process ends with SIGSEGV (a trainer then resumes from its last checkpoint: test_trainer_faults.py)."""
    code = (f"import numpy as np, rlfast; rlfast.load_env({str(HEADER)!r}, 'Faulty-v0'); "
            "pool = rlfast.make('Faulty-v0', 2); pool.reset(); print('stepping', flush=True); "
            "pool.step(np.array([0, 2]))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.stdout == "stepping\n" and proc.returncode == -11, (proc.returncode, proc.stderr[-2000:])


def test_random_env_exceptions_in_a_long_async_run_never_lose_an_env():
    """Dummy-v0 envs whose action 7 throws, 32 envs in async batches of 8, 2,000 rounds with 1% bad actions."""
    rng = random.Random(1)
    with rlfast.make("Dummy-v0", 32, batch_size=8, num_threads=2, throw_on_action=7) as pool:
        pool.async_reset()
        last_seen, errors = np.zeros(32, int), 0
        for r in range(2000):
            try:
                _, _, _, _, info = pool.recv()
                ids = info["env_id"].numpy().copy()
                last_seen[ids] = r
            except rlfast.EnvError as err:
                ids = err.env_ids.numpy().copy()
                errors += 1
            pool.send(np.array([7 if rng.random() < 0.01 else 0 for _ in ids]), ids)
        assert errors > 50 and (last_seen > 1900).all(), (errors, last_seen)  # every env still steps at the end
