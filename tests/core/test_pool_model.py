"""Model-based check of the pool API: random valid and invalid op sequences against a Python model.

Each trial makes a pool of a random shape (num_envs 1..8, sync or async, num_threads incl. 0 with
work_in_recv) and runs 50-200 random ops: send (valid, or with one defect: an in-flight, duplicate or
out-of-range id, a wrong action shape or dtype, a NaN action, an out-of-range discrete action, an
empty batch), recv, async_reset, reset, step, seed and close. After every op the pool must agree
with the model: invalid ops raise the expected type (ValueError for bad values, PoolStateError for
state misuse) and change nothing; results hold the right envs, shapes, dtypes, episode bookkeeping
and next-step autoresets. Each trial then runs again on a fresh pool from the same seed, and every
env must see identical results for identical inputs (compared per env id and per env step, since
async batches may form in another order).

Nothing can hang CI: recv is only expected to block when the model says its batch can complete, a
watchdog closes the pool (which wakes a blocked recv) if one op takes OP_TIMEOUT_S, and faulthandler
dumps every thread's traceback and exits if a whole test takes TEST_TIMEOUT_S. A failure names the
trial seed, the pool's arguments and the op sequence so far.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pytest
import torch

import rlfast
from rlfast import PoolStateError

TASKS = ("CartPole-v1", "Pendulum-v1", "Dummy-v0")
SEEDS = range(16)
OP_TIMEOUT_S = 8.0  # no op here takes more than milliseconds; one that blocks this long is a hang
TEST_TIMEOUT_S = 20.0  # backstop if even the watchdog's close() hangs
INFO_DTYPES = {"env_id": np.int32, "elapsed_step": np.int32, "episode_return": np.float32, "episode_length": np.int32}
CARTPOLE_X, CARTPOLE_THETA = 2.4, 12 * 2 * np.pi / 360  # termination thresholds


@pytest.fixture(autouse=True)
def hang_backstop(request):
    """If a test outlives TEST_TIMEOUT_S, dump every thread's traceback and exit (a stalled CI job says where)."""
    if request.config.getini("faulthandler_timeout"):  # pytest's own timer is set: leave it alone
        yield
        return
    try:  # the uncaptured stderr pytest's faulthandler plugin keeps (captured output is lost on exit)
        from _pytest.faulthandler import fault_handler_stderr_fd_key

        out = request.config.stash[fault_handler_stderr_fd_key]
    except (ImportError, KeyError):
        out = sys.__stderr__
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True, file=out)
    yield
    faulthandler.cancel_dump_traceback_later()


class ModelMismatch(AssertionError):
    pass


@dataclass
class EnvModel:
    pending: Optional[tuple] = None  # what was sent and not yet received: ("reset",) or ("step", action)
    needs_reset: bool = True  # next_step autoreset: a new pool, a finished episode or a re-seed
    elapsed: int = 0
    episode_return: float = 0.0  # float64 sum of the float32 rewards, as the engine keeps it
    draw: float = 0.0  # Dummy-v0: obs[2], drawn at reset
    history: list = field(default_factory=list)  # (input event, output) per result, for the replay


class Trial:
    """One random pool and op sequence, checked op by op against the model."""

    def __init__(self, task: str, seed: int) -> None:
        self.task, self.seed = task, seed
        self.rng = np.random.default_rng([14, TASKS.index(task), seed])
        rng = self.rng
        n = int(rng.integers(1, 9))
        sync = n == 1 or rng.random() < 0.4
        work_in_recv = bool(rng.random() < 0.5)
        self.kwargs: dict[str, Any] = dict(
            num_envs=n,
            batch_size=n if sync else int(rng.integers(1, n)),
            num_threads=int(rng.integers(0 if work_in_recv else 1, 4)),
            work_in_recv=work_in_recv,
            seed=int(rng.integers(0, 1000)),
        )
        if task == "CartPole-v1":
            self.kwargs["max_episode_steps"] = int(rng.choice([500, rng.integers(5, 40)]))
        elif task == "Pendulum-v1":
            self.kwargs["max_episode_steps"] = int(rng.integers(3, 25))
        else:
            self.kwargs.update(episode_length=int(rng.integers(1, 7)), jitter_us=int(rng.choice([0, 50])))
            if rng.random() < 0.5:
                self.kwargs["max_episode_steps"] = int(rng.integers(2, 8))
        self.num_ops = int(rng.integers(50, 201))
        # Actions of valid sends come from per-env streams, so an env's k-th step gets the same
        # action in the replay even where async batches formed in another order.
        self.action_rngs = [np.random.default_rng([14, TASKS.index(task), seed, i]) for i in range(n)]
        self.log: list[str] = []
        self.pool: Optional[rlfast.EnvPool] = None
        self.envs = [EnvModel() for _ in range(n)]
        self.closed = False
        self.last_ids_view: Optional[torch.Tensor] = None  # recv's env_id tensor, until the next recv
        self.ops_valid = self.ops_invalid = 0

    # ------------------------------------------------------------------ model queries
    @property
    def n(self) -> int:
        return self.kwargs["num_envs"]

    @property
    def batch(self) -> int:
        return self.kwargs["batch_size"]

    def in_flight(self) -> list[int]:
        return [i for i, e in enumerate(self.envs) if e.pending is not None]

    def idle(self) -> list[int]:
        return [i for i, e in enumerate(self.envs) if e.pending is None]

    # ------------------------------------------------------------------ reporting
    def fail(self, msg: str) -> ModelMismatch:
        head = (
            f"{msg}\n  task={self.task} trial seed={self.seed} "
            f"(reproduce: python3 -m pytest tests/core/test_pool_model.py -k '{self.task}-seed{self.seed}')\n"
            f"  rlfast.make({self.task!r}, **{self.kwargs})\n  ops so far ({len(self.log)}):\n"
        )
        return ModelMismatch(head + "\n".join(f"    {line}" for line in self.log))

    def check(self, cond: Any, msg: str) -> None:
        if not cond:
            raise self.fail(msg)

    def guarded(self, fn, *args, **kwargs):
        """Runs an op; one that may block gets a watchdog that closes the pool if it has not returned in
        OP_TIMEOUT_S (close wakes a blocked recv, which then raises)."""
        if getattr(fn, "__name__", "") not in ("recv", "reset", "step"):
            return fn(*args, **kwargs)
        fired = []

        def fire() -> None:
            fired.append(True)
            self.pool.close()

        timer = threading.Timer(OP_TIMEOUT_S, fire)
        timer.daemon = True
        timer.start()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if fired:
                raise self.fail(f"op hung for {OP_TIMEOUT_S} s; the watchdog closed the pool") from e
            raise
        finally:
            timer.cancel()

    def expect_error(self, expected, fn, *args, **kwargs) -> None:
        """An invalid op: must raise `expected` (a type or tuple) and change nothing."""
        try:
            self.guarded(fn, *args, **kwargs)
        except ModelMismatch:
            raise
        except expected as e:
            self.log[-1] += f" -> {type(e).__name__}"
            self.ops_invalid += 1
        except Exception as e:
            raise self.fail(f"expected {expected}, got {type(e).__name__}: {e}") from e
        else:
            raise self.fail(f"expected {expected}, but the op succeeded")
        self.probe()

    def probe(self) -> None:
        """A recv that cannot complete must raise at once, naming how many envs are in flight: after an
        invalid op this checks the engine's count still matches the model's (nothing was sent)."""
        k = len(self.in_flight())
        if self.closed or k >= self.batch:
            return
        try:
            self.guarded(self.pool.recv)
        except PoolStateError as e:
            self.check(
                f" {k} env(s) in flight" in str(e),
                f"recv's error disagrees with the model ({k} in flight): {e}",
            )
        except Exception as e:
            raise self.fail(f"probe recv with {k} < batch_size in flight: {type(e).__name__}: {e}") from e
        else:
            raise self.fail(f"probe recv returned with {k} < batch_size={self.batch} envs in flight")

    def run_valid(self, fn, *args, **kwargs):
        try:
            out = self.guarded(fn, *args, **kwargs)
        except ModelMismatch:
            raise
        except Exception as e:
            raise self.fail(f"valid op raised {type(e).__name__}: {e}") from e
        self.ops_valid += 1
        return out

    # ------------------------------------------------------------------ arguments
    def pick(self, ids: list[int], lo: int = 1) -> list[int]:
        """A random subset (size >= lo) of ids, in random order."""
        k = int(self.rng.integers(lo, len(ids) + 1))
        return [int(i) for i in self.rng.permutation(ids)[:k]]

    def valid_actions(self, ids: list[int]) -> np.ndarray:
        space = self.pool.single_action_space
        if self.discrete:
            return np.array([self.action_rngs[i].integers(0, space.n) for i in ids], dtype=np.int64)
        rows = [self.action_rngs[i].uniform(space.low, space.high) for i in ids]
        return np.array(rows, dtype=np.float32).reshape(len(ids), *space.shape)

    def junk_actions(self, k: int) -> np.ndarray:
        """Well-formed actions for a send that is invalid for another reason (not from the env streams)."""
        space = self.pool.single_action_space
        if self.discrete:
            return self.rng.integers(0, space.n, size=k).astype(np.int64)
        return self.rng.uniform(-1, 1, size=(k, *space.shape)).astype(np.float32)

    def as_format(self, x: np.ndarray, kind: str):
        """The same values as numpy of another dtype, a torch tensor or a list."""
        r = self.rng.integers(0, 4)
        if r == 0:
            return x
        if r == 1:
            return torch.from_numpy(x.copy())
        if r == 2:
            return x.tolist()
        if kind == "ids" or self.discrete:
            return x.astype(np.int32)
        return x.astype(np.float64)

    # ------------------------------------------------------------------ results
    def check_results(self, what: str, obs, info, reward=None, term=None, trunc=None) -> None:
        space = self.pool.single_observation_space
        b = self.batch
        self.check(tuple(obs.shape) == (b, *space.shape), f"{what}: obs shape {tuple(obs.shape)}")
        self.check(obs.dtype == torch.float32 or obs.dtype == torch.uint8, f"{what}: obs dtype {obs.dtype}")
        for name, dtype in INFO_DTYPES.items():
            self.check(name in info, f"{what}: info lacks {name!r}")
            self.check(info[name].numpy().dtype == dtype and tuple(info[name].shape) == (b,), f"{what}: info[{name}]")
        if reward is not None:
            for t, dtype in ((reward, torch.float32), (term, torch.bool), (trunc, torch.bool)):
                self.check(t.dtype == dtype and tuple(t.shape) == (b,), f"{what}: {t.dtype} {tuple(t.shape)}")
        ids = info["env_id"].numpy().tolist()
        flying = set(self.in_flight())
        self.log[-1] += f" -> env_ids {ids}"
        self.check(len(set(ids)) == b, f"{what}: env_ids {ids} has duplicates")
        self.check(set(ids) <= flying, f"{what}: env_ids {ids} not all in flight ({sorted(flying)})")
        if b == self.n:
            self.check(ids == list(range(self.n)), f"{what}: sync results not ordered by env id: {ids}")
        obs_np = obs.numpy().copy()
        info_np = {k: v.numpy().copy() for k, v in info.items()}
        for row, i in enumerate(ids):
            out = {k: v[row] for k, v in info_np.items()}
            if reward is not None:
                out.update(reward=reward.numpy()[row], term=bool(term[row]), trunc=bool(trunc[row]))
            self.check_env(what, i, obs_np[row], out)

    def check_env(self, what: str, i: int, obs: np.ndarray, out: dict) -> None:
        m = self.envs[i]
        event, m.pending = m.pending, None
        where = f"{what}: env {i} ({event[0]}{'' if event[0] == 'reset' or not m.needs_reset else ', autoreset'})"
        elapsed, ret, length = int(out["elapsed_step"]), out["episode_return"], int(out["episode_length"])
        reward, term, trunc = out.get("reward"), out.get("term", False), out.get("trunc", False)
        if event[0] == "reset" or m.needs_reset:
            self.check(elapsed == 0 and length == 0 and ret == 0, f"{where}: elapsed {elapsed}, return {ret}")
            self.check(reward is None or reward == 0, f"{where}: reward {reward} on a reset")
            self.check(not term and not trunc, f"{where}: terminated/truncated on a reset")
            m.elapsed, m.episode_return, m.needs_reset = 0, 0.0, False
            if self.task == "Dummy-v0":
                self.check(obs[0] == -1 and obs[1] == 0 and out["last_action"] == -1, f"{where}: obs {obs}")
                self.check(0 <= obs[2] < 1, f"{where}: reset draw {obs[2]}")
                m.draw = obs[2]
        else:
            m.elapsed += 1
            m.episode_return += float(reward)
            self.check(elapsed == m.elapsed == length, f"{where}: elapsed_step {elapsed}, model {m.elapsed}")
            self.check(ret == np.float32(m.episode_return), f"{where}: episode_return {ret}, model {m.episode_return}")
            self.check(trunc == (m.elapsed >= self.pool.max_episode_steps), f"{where}: truncated={trunc} at {elapsed}")
            action = event[1]
            if self.task == "Dummy-v0":
                a = float(action[0])
                self.check(obs[0] == a and reward == a and out["last_action"] == a, f"{where}: action {a}, obs {obs}")
                self.check(obs[1] == m.elapsed and obs[2] == m.draw, f"{where}: obs {obs}")
                self.check(term == (m.elapsed >= self.kwargs["episode_length"]), f"{where}: terminated={term}")
            elif self.task == "CartPole-v1":
                self.check(reward == 1.0, f"{where}: reward {reward}")
                outside = abs(obs[0]) > CARTPOLE_X - 1e-5 or abs(obs[2]) > CARTPOLE_THETA - 1e-5
                self.check(not term or outside, f"{where}: terminated inside the bounds: {obs}")
            else:
                self.check(not term and reward <= 0, f"{where}: terminated={term}, reward {reward}")
            if term or trunc:
                m.needs_reset = True
        if self.task != "Dummy-v0" and (not term or self.task == "Pendulum-v1"):
            space = self.pool.single_observation_space
            self.check(np.all(obs >= space.low) and np.all(obs <= space.high), f"{where}: obs {obs} outside {space}")
        result = (tuple(obs.tolist()), 0.0 if reward is None else float(reward), term, trunc, elapsed, float(ret))
        m.history.append((event, result))

    def mark_sent(self, ids: list[int], actions: Optional[np.ndarray]) -> None:
        for row, i in enumerate(ids):
            self.envs[i].pending = ("reset",) if actions is None else ("step", tuple(np.ravel(actions[row]).tolist()))

    def after_seed(self, seeds: list[int]) -> None:
        for i, m in enumerate(self.envs):
            m.needs_reset = True
            m.history.append((("seed", seeds[i]), None))

    # ------------------------------------------------------------------ ops
    def op_send_valid(self) -> None:
        idle = self.idle()
        if not idle:  # every env in flight: collect some instead
            return self.op_recv()
        view = self.last_ids_view
        if view is not None and self.rng.random() < 0.3 and all(self.envs[i].pending is None for i in view.tolist()):
            ids, env_ids = view.tolist(), view  # recv's own env_id tensor: send's fast path
        elif len(idle) == self.n and self.rng.random() < 0.2:
            ids, env_ids = list(range(self.n)), None
        else:
            ids = self.pick(idle)
            env_ids = self.as_format(np.array(ids, dtype=np.int64), "ids")
        actions = self.valid_actions(ids)
        self.log.append(f"send(actions={actions.tolist()}, env_ids={'None' if env_ids is None else ids})")
        if self.closed:
            return self.expect_error(PoolStateError, self.pool.send, self.as_format(actions, "actions"), env_ids)
        self.run_valid(self.pool.send, self.as_format(actions, "actions"), env_ids)
        self.mark_sent(ids, actions)

    def op_send_invalid(self) -> None:
        idle, flying = self.idle(), self.in_flight()
        kinds = ["out_of_range", "empty", "wrong_count"]
        if flying:
            kinds.append("in_flight")
        if idle:
            kinds += ["duplicate", "action_shape", "action_dtype", "nan" if not self.discrete else "action_range"]
        kind = str(self.rng.choice(kinds))
        ids = self.pick(idle, lo=0) if idle else []
        expected: Any = ValueError
        if kind == "in_flight":
            ids.insert(int(self.rng.integers(0, len(ids) + 1)), int(self.rng.choice(flying)))
            expected = PoolStateError
        elif kind == "duplicate":
            ids = ids or [int(self.rng.choice(idle))]
            ids.insert(int(self.rng.integers(0, len(ids) + 1)), int(self.rng.choice(ids)))
        elif kind == "out_of_range":
            ids.insert(int(self.rng.integers(0, len(ids) + 1)), int(self.rng.choice([-1, self.n, self.n + 7])))
        elif kind == "empty":
            ids = []
        elif not ids:
            ids = [int(self.rng.choice(idle))] if idle else [self.n]  # no idle env: the id is the defect too
        actions = self.junk_actions(len(ids))
        if kind == "wrong_count":
            actions = self.junk_actions(len(ids) + int(self.rng.choice([-1, 1])) if ids else 1)
        elif kind == "action_shape":
            actions = actions[:, None] if self.discrete else actions.reshape(len(ids), -1)[:, 0]
            if self.rng.random() < 0.5:
                actions = np.repeat(actions[..., None], 2, axis=-1)  # (k, 1, 2) / (k, 2)
                if not self.discrete:
                    actions = np.ascontiguousarray(actions)
        elif kind == "action_dtype":
            actions = actions.astype(np.float32 if self.discrete else np.int32)
        elif kind == "nan":
            actions.reshape(-1)[int(self.rng.integers(0, actions.size))] = self.rng.choice([np.nan, np.inf, -np.inf])
        elif kind == "action_range":
            actions[int(self.rng.integers(0, len(ids)))] = self.rng.choice([-1, self.pool.single_action_space.n])
        if self.closed:
            # A closed pool says so first; only shapes the binding rejects before asking the pool may be
            # reported as the ValueError they also are.
            expected = (ValueError, PoolStateError) if kind == "action_shape" else PoolStateError
        self.log.append(f"send[{kind}](actions={actions.tolist()}, env_ids={ids})")
        self.expect_error(expected, self.pool.send, actions, np.array(ids, dtype=np.int64))

    def op_recv(self) -> None:
        self.log.append("recv()")
        if self.closed or len(self.in_flight()) < self.batch:
            return self.expect_error(PoolStateError, self.pool.recv)
        obs, reward, term, trunc, info = self.run_valid(self.pool.recv)
        self.check_results("recv", obs, info, reward, term, trunc)
        self.last_ids_view = info["env_id"]

    def op_async_reset(self) -> None:
        idle, flying = self.idle(), self.in_flight()
        r = self.rng.random()
        if idle and r < 0.7:
            all_idle = len(idle) == self.n and self.rng.random() < 0.3
            ids = list(range(self.n)) if all_idle else self.pick(idle)
            self.log.append(f"async_reset({'None' if all_idle else ids})")
            arg = None if all_idle else self.as_format(np.array(ids, dtype=np.int64), "ids")
            if self.closed:
                return self.expect_error(PoolStateError, self.pool.async_reset, arg)
            self.run_valid(self.pool.async_reset, arg)
            return self.mark_sent(ids, None)
        kinds = ["out_of_range", "empty"] + (["in_flight"] if flying else []) + (["duplicate"] if idle else [])
        kind = str(self.rng.choice(kinds))
        ids, expected = (self.pick(idle, lo=0) if idle else []), ValueError
        if kind == "in_flight":
            ids.insert(int(self.rng.integers(0, len(ids) + 1)), int(self.rng.choice(flying)))
            expected = PoolStateError
        elif kind == "duplicate":
            ids = ids or [int(self.rng.choice(idle))]
            ids.append(int(self.rng.choice(ids)))
        elif kind == "out_of_range":
            ids.append(int(self.rng.choice([-1, self.n])))
        else:
            ids = []
        self.log.append(f"async_reset[{kind}]({ids})")
        self.expect_error(PoolStateError if self.closed else expected, self.pool.async_reset, np.array(ids, np.int64))

    def op_reset(self) -> None:
        seed = int(self.rng.integers(0, 1000)) if self.rng.random() < 0.3 else None
        self.log.append(f"reset(seed={seed})")
        if self.closed or self.in_flight():
            return self.expect_error(PoolStateError, self.pool.reset, seed=seed)
        obs, info = self.run_valid(self.pool.reset, seed=seed)
        if seed is not None:
            self.after_seed([seed + i for i in range(self.n)])
        self.mark_sent(list(range(self.n)), None)
        self.check_results("reset", obs, info)
        self.last_ids_view = info["env_id"]

    def op_step(self) -> None:
        idle = self.idle()
        if self.batch == self.n and (not idle or len(idle) == self.n) and self.rng.random() < 0.7:
            ids, env_ids = list(range(self.n)), None  # the sync API: step(actions) for all envs
        else:  # explicit ids: in sync mode those still idle complete the batch others were sent in
            if idle:
                ids = [int(i) for i in self.rng.permutation(idle)] if self.batch == self.n else self.pick(idle)
            else:
                ids = [int(self.rng.integers(0, self.n))]
            env_ids = np.array(ids, dtype=np.int64)
        send_ok = not self.closed and all(self.envs[i].pending is None for i in ids)
        actions = self.valid_actions(ids) if send_ok else self.junk_actions(len(ids))
        self.log.append(f"step(actions={actions.tolist()}, env_ids={'None' if env_ids is None else ids})")
        if not send_ok:
            return self.expect_error(PoolStateError, self.pool.step, actions, env_ids)
        if len(self.in_flight()) + len(ids) < self.batch:
            # send goes through, then recv cannot complete: the envs stay in flight
            self.mark_sent(ids, actions)
            self.log[-1] += " (send ok, recv short)"
            return self.expect_error(PoolStateError, self.pool.step, actions, env_ids)
        self.mark_sent(ids, actions)
        obs, reward, term, trunc, info = self.run_valid(self.pool.step, self.as_format(actions, "actions"), env_ids)
        self.check_results("step", obs, info, reward, term, trunc)
        self.last_ids_view = info["env_id"]

    def op_seed(self) -> None:
        seed = int(self.rng.integers(0, 1000))
        as_list = self.rng.random() < 0.3
        seeds = [seed * 3 + i * 7 for i in range(self.n)] if as_list else [seed + i for i in range(self.n)]
        self.log.append(f"seed({seeds if as_list else seed})")
        arg = seeds if as_list else seed
        if self.closed or self.in_flight():
            return self.expect_error(PoolStateError, self.pool.seed, arg)
        self.run_valid(self.pool.seed, arg)
        self.after_seed(seeds)

    def op_close(self) -> None:
        self.log.append("close()")
        self.run_valid(self.pool.close)
        self.closed = True
        self.check(self.pool.closed, "closed is False after close()")

    OPS = (
        ("op_send_valid", 30), ("op_send_invalid", 12), ("op_recv", 25), ("op_async_reset", 7), ("op_reset", 4),
        ("op_step", 10), ("op_seed", 4), ("op_close", 0.4),
    )  # fmt: skip

    def run(self) -> None:
        names = [name for name, _ in self.OPS]
        weights = np.array([w for _, w in self.OPS], dtype=float)
        self.pool = rlfast.make(self.task, **self.kwargs)
        self.discrete = hasattr(self.pool.single_action_space, "n")
        try:
            after_close = 0
            for t in range(self.num_ops):
                if self.closed:
                    after_close += 1
                    if after_close > 15:  # every op of a closed pool raises; a few of each are enough
                        break
                # close() only in the second half, so every trial also runs a long open stretch
                w = weights if t >= self.num_ops // 2 else weights * (np.array(names) != "op_close")
                name = names[int(self.rng.choice(len(names), p=w / w.sum()))]
                getattr(self, name)()
                self.check(self.pool.closed == self.closed, f"pool.closed={self.pool.closed}, model {self.closed}")
                self.log[-1] = f"#{len(self.log) - 1} {self.log[-1]}"
            if not self.closed:  # close is idempotent; everything after it raises
                self.op_close()
                self.op_close()
                self.op_recv()
                self.op_send_valid()
        finally:
            self.pool.close()


def compare_replay(first: Trial, second: Trial) -> int:
    """Per env: results must be identical as long as the env's inputs (resets, actions, seeds) were.

    Sync trials (and async ones whose batches formed the same way) must replay op for op."""
    if first.kwargs["batch_size"] == first.n:
        if first.log != second.log:
            raise first.fail(f"the replay of a sync trial took other ops:\n{second.fail('replay').args[0]}")
    compared = 0
    for i, (a, b) in enumerate(zip(first.envs, second.envs)):
        for k, ((in_a, out_a), (in_b, out_b)) in enumerate(zip(a.history, b.history)):
            if in_a != in_b:
                break
            if out_a != out_b:
                raise first.fail(f"replay differs for env {i} at its result {k} ({in_a}): {out_a} vs {out_b}")
            compared += 1
        else:
            if first.log == second.log:
                if len(a.history) != len(b.history):
                    raise first.fail(f"replay: env {i} got {len(b.history)} results, first run {len(a.history)}")
    return compared


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("task", TASKS)
def test_random_op_sequences_match_the_model(task, seed):
    first = Trial(task, seed)
    first.run()
    if first.ops_valid < 10 or first.ops_invalid < 5:
        raise first.fail(f"too few ops ran: {first.ops_valid} valid, {first.ops_invalid} invalid")
    second = Trial(task, seed)
    second.run()
    compared = compare_replay(first, second)
    if compared == 0:
        raise first.fail("the replay compared nothing")


def test_seed_after_close_raises():
    # The model test found this one: Reseed did not check closed_ (fixed with issue 14).
    pool = rlfast.make("CartPole-v1", num_envs=2)
    pool.close()
    with pytest.raises(PoolStateError):
        pool.seed(1)
