"""Python (gymnasium 1.x) environments in the engine's pool, run by worker processes.

    pool = rlfast.make("my_pkg:MyEnv-v0", num_envs=64, batch_size=32)       # any gymnasium id
    pool = rlfast.make_from(lambda: MyEnv(level=3), num_envs=64)          # any env factory

Data path of one step: ``send`` writes each env's action into the env's slot of a shared-memory segment and
queues the env on its worker's request ring, waking each sleeping worker once per send (the pool has no
threads of its own: ``rlfast/csrc/envs/python/remote_pool.h``); the worker (``_worker_loop`` below, one
process per core by default, several envs each) steps its queued envs one after the other, writes each
observation into the env's slot in place and puts the env on its answer ring; ``recv``'s thread takes the
answers that have arrived, copies each observation into the pool's output ring and commits it, sleeping
only until the answers that can complete its block are there. So send/recv, sync and async batches,
``env_id``, both autoreset modes, episode statistics, errors and ``close()`` are the pool's own: an env
raising surfaces at ``recv`` as ``rlfast.EnvError`` with its traceback.

Workers that die or hang: ``recv`` looks at the workers every 0.1 s while it waits or takes answers. A worker
process that has ended (killed by a signal, a segfault inside the env, ``os._exit``) is an ``EnvError`` at that
``recv``, raised once, naming the worker, its pid, its envs and how it ended; that ``recv`` returns no batch and
loses no result of the other envs (the next ``recv`` returns them). Before raising, the pool starts a new worker
process with the same envs: the envs the dead one had in flight are idle again (``EnvError.env_ids``, send to
them to go on), and each of its envs starts over with a reset at its next send, re-seeded with its seed +
k x num_envs at the worker's k-th restart. If the new worker cannot build its envs, the pool closes and the
``EnvError`` says why. With ``step_timeout`` (seconds; off by default), a step or reset running longer is
treated the same way: its worker is killed (SIGKILL), and the error names the env.

Spaces: observations Box (uint8, bool, int32, int64, float32, float64), Discrete (int64 scalars),
MultiDiscrete (int64) or a Dict of such Boxes; actions Discrete (indices 0..n-1, the env's ``start`` added in
the worker), Box (float32 or float64 rows) or MultiDiscrete (whole numbers, sent as float rows). Tuple spaces,
nested Dicts and Dicts with a key that is not a Box are refused with a message naming the key (flatten them
with ``gymnasium.wrappers.FlattenObservation``). ``info`` dicts stay in the workers (the pool reports
``episode_return``/``episode_length`` itself).

Dict observations (one level, every key a Box): each key is its own tensor of the pool's output ring, so
``recv``'s ``obs`` is a dict ``{key: tensor [batch_size, *key's shape]}`` in the space's key order (gymnasium's
convention for Dict spaces; a fresh dict per ``recv``, over the ring's views), and so is ``info["final_obs"]``
under same-step autoreset; ``single_observation_space`` is the env's Dict. Each tensor is contiguous and pinned
like the other fields, ready for its own ``.to(device, non_blocking=True)``. In the shared segment an env's
observation slot holds the keys' bytes one after the other (the worker writes each key in place); the pool
copies each key into its field (one memcpy per key instead of one per observation; nothing else changes).

Seeding follows gymnasium: env i's first reset (and the first after ``seed``) is ``reset(seed=seed + i)``,
later ones continue its own generator. Workers start with ``fork`` by default (env factories need not
be picklable); ``context="spawn"`` pickles them with cloudpickle (gymnasium's own dependency).
"""

from __future__ import annotations

import importlib
import math
import mmap
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from multiprocessing import shared_memory
from typing import Any, Callable, Optional, Sequence

import cloudpickle
import gymnasium as gym
import numpy as np

import torch

from rlfast._ext import _C
from rlfast.errors import EnvError
from rlfast.pool import EnvPool, pool_config

_ENGINE_DTYPES = ("uint8", "bool", "int32", "int64", "float32", "float64")
RENDER_TIMEOUT_S = 120.0
"""seconds ``render()`` waits for a worker's frame when the pool has no ``step_timeout``"""
STARTUP_TIMEOUT = 300.0
"""seconds a worker may take to build its envs and report their spaces"""


def _obs_layout(space: gym.Space) -> tuple[np.dtype, tuple[int, ...]]:
    """(dtype, shape) of one observation in the pool's tensors; ValueError for what cannot go there."""
    if isinstance(space, gym.spaces.Discrete):
        return np.dtype(np.int64), ()
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.dtype(np.int64), tuple(space.shape)
    if isinstance(space, gym.spaces.Box):
        if space.dtype.name not in _ENGINE_DTYPES:
            raise ValueError(f"observation space {space} has dtype {space.dtype}; the pool holds "
                             f"{', '.join(_ENGINE_DTYPES)} (convert with gymnasium.wrappers.DtypeObservation)")
        return space.dtype, tuple(space.shape)
    hint = " (flatten it with gymnasium.wrappers.FlattenObservation)" if isinstance(space, gym.spaces.Tuple) else ""
    raise ValueError(f"observation space {space} is not supported: Box, Discrete, MultiDiscrete or a Dict of "
                     f"Boxes{hint}")  # fmt: skip


def _obs_fields(space: gym.Space) -> list[tuple[Optional[str], np.dtype, tuple[int, ...]]]:
    """The observation's fields as ``(key, dtype, shape)``: one with key None, or one per key of a Dict space, in
    the space's order (the order of their bytes in an env's shared slot and of the pool's output fields).
    ValueError naming the key for a Dict whose keys are not all Box spaces of the engine's dtypes."""
    if not isinstance(space, gym.spaces.Dict):
        return [(None, *_obs_layout(space))]
    if not space.spaces:
        raise ValueError(f"observation space {space} has no keys")
    fields = []
    for key, sub in space.spaces.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"observation space {space}: the keys of a Dict must be non-empty strings, got {key!r}")
        if not isinstance(sub, gym.spaces.Box):
            raise ValueError(f"observation space {space}: key {key!r} is {sub}; the pool takes a Dict whose keys are "
                             "all Box spaces, one level deep (each key its own tensor): make that key a Box, or the "
                             "whole observation one with gymnasium.wrappers.FlattenObservation")  # fmt: skip
        try:
            fields.append((key, *_obs_layout(sub)))
        except ValueError as e:
            raise ValueError(f"observation space key {key!r}: {e}") from None
    return fields


def _obs_views(fields: list, region: Any, offset: int) -> Any:
    """numpy views of an observation's fields in ``region`` from ``offset`` on (keys one after the other): one
    array, or a dict of one per key."""
    views = {}
    for key, dtype, shape in fields:
        views[key] = np.ndarray(shape, dtype, buffer=region, offset=offset)
        offset += dtype.itemsize * math.prod(shape)
    return views[None] if None in views else views


def _put_obs(view: Any, obs: Any) -> None:
    """Writes ``obs`` into ``view`` (``_obs_views``'): an array, or a Dict observation key by key."""
    if isinstance(view, dict):
        for key, v in view.items():
            v[...] = obs[key]
    else:
        view[...] = obs


def _action_spec(space: gym.Space) -> dict:
    """The engine's action spec of ``space``: Discrete -> n int32 actions, Box -> float32 rows, MultiDiscrete
    -> float32 rows of whole numbers in [start, start + nvec - 1]."""
    if isinstance(space, gym.spaces.Discrete):
        return {"num_actions": int(space.n), "integer_actions": False,
                "action": {"dtype": "int32", "shape": (), "low": [], "high": []}}  # fmt: skip
    if isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.floating):
        return {"num_actions": 0, "integer_actions": False,
                "action": {"dtype": "float32", "shape": tuple(space.shape), "low": space.low.ravel().tolist(),
                           "high": space.high.ravel().tolist()}}  # fmt: skip
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = np.broadcast_to(space.start, space.shape).astype(np.float64)
        return {"num_actions": 0, "integer_actions": True,
                "action": {"dtype": "float32", "shape": tuple(space.shape), "low": start.ravel().tolist(),
                           "high": (start + space.nvec - 1).ravel().tolist()}}  # fmt: skip
    raise ValueError(f"action space {space} is not supported: Discrete, a float Box or MultiDiscrete")


def _action_reader(space: gym.Space, view: np.ndarray) -> Callable[[], Any]:
    """A function that reads the float32 action the engine wrote into ``view`` as a Box or MultiDiscrete ``space``
    wants it: a copy in the space's dtype (the env may keep it). A Discrete action comes with the request."""
    return lambda: view.astype(space.dtype)


def _worker_main(index: int, env_fns: bytes, conn: Any) -> None:
    """A worker process: builds its envs, reports their spaces, attaches to the segment, serves steps."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a trainer's KeyboardInterrupt handler, inherited by fork
    envs = []
    try:
        envs = [fn() for fn in cloudpickle.loads(env_fns)]
        spaces = [(e.observation_space, e.action_space) for e in envs]
        if any(s != spaces[0] for s in spaces):
            raise ValueError(f"worker {index}'s envs have different spaces: {spaces}")
        conn.send(("spaces", spaces[0]))
        message = conn.recv()
        if message[0] != "attach":
            return
        threading.Thread(target=_serve_renders, args=(conn, envs, message[-1]), daemon=True).start()
        _worker_loop(index, envs, *message[1:])
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass
    except BaseException:
        try:
            conn.send(("error", traceback.format_exc()))
        except (BrokenPipeError, OSError):
            pass
    finally:
        for e in envs:
            try:
                e.close()
            except Exception:
                pass


def _serve_renders(conn: Any, envs: list, first: int) -> None:
    """A worker's second thread: answers the pool's ``("render", env id)`` on the pipe with the env's
    ``render()`` frame, while the worker's loop steps its other envs (the pool asks only for idle envs)."""
    while True:
        try:
            _, e = conn.recv()
        except (EOFError, OSError):
            return
        env = envs[e - first]
        try:
            frame = env.render()
            if frame is None:
                raise ValueError(f"{type(env.unwrapped).__name__}.render() returned None: make the env with "
                                 "render_mode='rgb_array' (rlfast.make(id, n, render_mode='rgb_array'))")  # fmt: skip
            answer = ("frame", np.ascontiguousarray(frame, dtype=np.uint8))
        except Exception:
            answer = ("error", traceback.format_exc())
        try:
            conn.send(answer)
        except (BrokenPipeError, OSError):
            return


def _worker_loop(index: int, envs: list, shm_name: str, size: int, layout: tuple, first: int) -> None:
    """Serves worker ``index``'s envs (global ids ``first`` ...) until the pool closes."""
    fd = os.open(f"/dev/shm/{shm_name.lstrip('/')}", os.O_RDWR)
    try:
        region = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    memory = np.frombuffer(region, np.uint8)
    channel = _C.SharedChannel(memory.ctypes.data, *layout)
    obs_space, action_space = envs[0].observation_space, envs[0].action_space
    fields = _obs_fields(obs_space)
    dict_obs = isinstance(obs_space, gym.spaces.Dict)
    discrete = isinstance(action_space, gym.spaces.Discrete)
    start = int(action_space.start) if discrete else 0  # the pool's Discrete actions are indices 0..n-1
    act_shape = _action_spec(action_space)["action"]["shape"]
    obs_views, final_views, readers = {}, {}, {}
    for i, env in enumerate(envs):
        e = first + i
        obs_views[e] = _obs_views(fields, region, channel.obs_offset(e))
        final_views[e] = _obs_views(fields, region, channel.final_obs_offset(e))
        readers[e] = (env, None if discrete else _action_reader(action_space, np.ndarray(
            act_shape, np.float32, buffer=region, offset=channel.action_offset(e))))  # fmt: skip
    reset, reset_when_done, last_step = channel.RESET, channel.RESET_WHEN_DONE, channel.LAST_STEP
    # One call per step answers the last request and takes the next (with a Discrete action, read in C++).
    e, kind, seed, flags, action = channel.next(index)
    while e >= 0:
        env, read = readers[e]
        try:
            if kind == reset:
                obs, _ = env.reset(seed=None if seed < 0 else seed)
                reward, terminated, truncated = 0.0, False, False
            else:
                obs, reward, terminated, truncated, _ = env.step(action + start if read is None else read())
                if flags & reset_when_done and (terminated or truncated or flags & last_step):
                    _put_obs(final_views[e], obs)  # same-step autoreset: the pool's final_obs
                    obs, _ = env.reset()
                reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
            if dict_obs:
                _put_obs(obs_views[e], obs)
            else:  # a Box, Discrete or MultiDiscrete observation: the hot path as it was
                obs_views[e][...] = obs
        except Exception:
            channel.fail(e, f"{type(env.unwrapped).__name__} in worker process {index} (pid {os.getpid()}):\n"
                            f"{traceback.format_exc()}")  # fmt: skip
            e, kind, seed, flags, action = channel.next(index)
            continue
        e, kind, seed, flags, action = channel.reply_next(index, e, reward, terminated, truncated)
    del memory, obs_views, readers, channel


def _exit_text(exitcode: Optional[int]) -> str:
    """How a process ended, from multiprocessing's exit code (negative: the signal that killed it)."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by signal {-exitcode} ({signal.Signals(-exitcode).name})"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class ProcessEnvPool(EnvPool):
    """An ``EnvPool`` of Python envs: ``env_fns[i]()`` makes env i in one of ``num_workers`` worker
    processes (default: one per core, at most one per env), envs spread over them in contiguous runs.
    Everything else (``send``/``recv``, ``step``, ``reset``, ``seed``, ``close``) is ``EnvPool``'s.

    ``observation_space``/``action_space`` are the env's own (``single_*``); the tensors hold Discrete
    observations as int64 and Discrete actions are indices 0..n-1. ``step_timeout``: seconds an env's step or
    reset may run before its worker is killed and reported at ``recv`` (None: no limit)."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        task_id: str = "python",
        batch_size: Optional[int] = None,
        num_workers: Optional[int] = None,
        seed: int = 0,
        seeds: Optional[Sequence[int]] = None,
        max_episode_steps: Optional[int] = None,
        autoreset_mode: str = "next_step",
        pin_memory: Optional[bool] = None,
        context: str = "fork",
        step_timeout: Optional[float] = None,
    ) -> None:
        self._procs: list = []
        self._shm: Optional[shared_memory.SharedMemory] = None
        self._memory: Optional[np.ndarray] = None
        self._channel: Any = None
        num_envs = len(env_fns)
        if num_envs < 1:
            raise ValueError("a pool needs at least one env")
        cores = len(os.sched_getaffinity(0))
        if num_workers is None:
            num_workers = min(cores, num_envs)
        elif isinstance(num_workers, bool) or not isinstance(num_workers, int) or not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be an int in [1, num_envs={num_envs}], got {num_workers!r}")
        if context not in mp.get_all_start_methods():
            raise ValueError(f"context must be one of {mp.get_all_start_methods()}, got {context!r}")
        if step_timeout is not None and (isinstance(step_timeout, bool) or not isinstance(step_timeout, (int, float))
                                         or not 0 < step_timeout < math.inf):  # fmt: skip
            raise ValueError(f"step_timeout must be a number of seconds > 0 (or None: no limit), got {step_timeout!r}")
        self._env_fns, self._context = list(env_fns), mp.get_context(context)
        # No pool threads: send() queues each env with its worker, recv()'s thread writes the answers.
        config, pin_memory = pool_config(num_envs, batch_size, 0, seed, seeds, max_episode_steps,
                                         autoreset_mode, -1, True, pin_memory)  # fmt: skip
        self.num_workers = num_workers
        self._render_timeout = float(step_timeout) if step_timeout is not None else RENDER_TIMEOUT_S
        try:
            obs_space, action_space = self._start_workers(num_workers)
            fields = _obs_fields(obs_space)
            spec = _action_spec(action_space)
            # Bounds only shape the engine's own spaces; the env's space replaces them below.
            arrays = [{"name": key, "dtype": dtype.name, "shape": shape, "low": [0], "high": [0]}
                      for key, dtype, shape in fields]  # fmt: skip
            obs_bytes = sum(dtype.itemsize * math.prod(shape) for _, dtype, shape in fields)
            if isinstance(obs_space, gym.spaces.Dict):  # one output field per key; "obs": the shared slot's bytes
                spec["obs"] = {"dtype": "uint8", "shape": (obs_bytes,), "low": [0], "high": [0]}
                spec["obs_keys"] = arrays
            else:
                spec["obs"] = arrays[0]
            act_bytes = 4 * max(1, math.prod(spec["action"]["shape"]))
            layout = self._layout = (num_envs, num_workers, obs_bytes, act_bytes)
            size = self._layout_bytes = _C.SharedChannel.total_bytes(*layout)
            self._shm = shared_memory.SharedMemory(create=True, size=size)
            self._memory = np.frombuffer(self._shm.buf, np.uint8)
            self._channel = _C.SharedChannel(self._memory.ctypes.data, *layout)
            self._channel.init()
            for w, (proc, conn) in enumerate(self._procs):
                self._channel.set_worker_pid(w, proc.pid)
                conn.send(("attach", self._shm.name, size, layout, self._channel.envs_of(w)[0]))
            pool = _C.make_remote_pool(task_id, config, self._channel, spec)
            if step_timeout is not None:
                _C.set_step_timeout(pool, float(step_timeout))
            self._init_from_binding(pool, task_id, {}, autoreset_mode, pin_memory)
        except BaseException:
            self._stop_workers()
            raise
        self.single_observation_space = obs_space
        self.single_action_space = (gym.spaces.Discrete(action_space.n) if isinstance(action_space, gym.spaces.Discrete)
                                    else action_space)  # fmt: skip
        self._spaces = (obs_space, action_space)

    def recv(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``EnvPool.recv``; a worker that died (or ran past ``step_timeout``) is an ``EnvError`` here, raised
        once, after a new worker took over its envs (the module's docstring says what becomes of them)."""
        try:
            return super().recv()
        except _C.EnvsLost as lost:
            what, env_ids, workers = lost.args
            raise self._replace_workers(what, env_ids, workers) from None

    def render(self, env_ids: Optional[Any] = None, *, follow: bool = False) -> torch.Tensor:
        """The envs' own ``render()`` frames (envs made with ``render_mode="rgb_array"``), drawn in their worker
        processes while the envs are idle: uint8 ``[n, H, W, 3]``. ``follow``: no effect here. A worker that
        does not answer within ``step_timeout`` (``RENDER_TIMEOUT_S`` without one) is an ``EnvError``."""
        ids = [int(i) for i in self._render_ids(env_ids)]
        for i in ids:
            self._pool.render_state(i)  # PoolStateError where the env is in flight
        firsts = [self._channel.envs_of(w)[0] for w in range(self.num_workers)]
        frames = []
        for i in ids:
            w = max(k for k, first in enumerate(firsts) if first <= i)
            proc, conn = self._procs[w]
            conn.send(("render", i))
            deadline = time.monotonic() + self._render_timeout
            while not conn.poll(0.1):
                if time.monotonic() > deadline:  # its render thread died, or the env's render() hangs
                    raise EnvError(f"{self.task_id}: worker {w} (pid {proc.pid}) did not answer the render of env {i} "
                                   f"within {self._render_timeout:g} s (step_timeout, else {RENDER_TIMEOUT_S:g} s)",
                                   torch.tensor([i], dtype=torch.int32))  # fmt: skip
                if not proc.is_alive():
                    raise EnvError(f"{self.task_id}: worker {w} (pid {proc.pid}) ended while rendering env {i}: "
                                   f"{_exit_text(proc.exitcode)}", torch.tensor([i], dtype=torch.int32))  # fmt: skip
            kind, value = conn.recv()
            if kind != "frame":
                raise EnvError(f"{self.task_id}: env {i}'s render() in worker {w} (pid {proc.pid}):\n{value}",
                               torch.tensor([i], dtype=torch.int32))  # fmt: skip
            frames.append(value)
        if len({f.shape for f in frames}) > 1:
            raise ValueError(f"{self.task_id}: the envs' frames differ in shape: {[f.shape for f in frames]}")
        return torch.from_numpy(np.stack(frames))

    def _replace_workers(self, what: str, env_ids: list[int], workers: list[int]) -> EnvError:
        """Starts a new process for each dead worker in ``workers``; the EnvError that reports the loss."""
        ids = ", ".join(map(str, env_ids)) or "none"
        lost = f"{what}. Envs in flight there, now idle (EnvError.env_ids): {ids}."
        try:
            for w in workers:
                old, conn = self._procs[w]
                conn.close()
                old.join(1.0)  # reaps it: gone already, or killed for the step timeout
                proc, conn = self._spawn(w)
                self._procs[w] = (proc, conn)
                spaces = self._await_spaces(w)
                if spaces != self._spaces:
                    raise ValueError(f"its new envs have other spaces: {spaces}, not {self._spaces}")
                _C.restart_worker(self._pool, w, proc.pid)
                conn.send(("attach", self._shm.name, self._layout_bytes, self._layout, self._channel.envs_of(w)[0]))
                lost += (f" Worker {w} restarted (pid {proc.pid}): each of its envs starts over with a reset at its "
                         f"next send.")  # fmt: skip
        except Exception as e:
            self.close()
            lost += f" Restarting worker {w} failed, so the pool is closed: {e}"
        return EnvError(f"{self.task_id}: {lost}", torch.tensor(env_ids, dtype=torch.int32))

    def _spawn(self, w: int) -> tuple[Any, Any]:
        """Starts worker ``w``'s process for its envs (``env_fns[first:first + count]``); (process, its pipe)."""
        base, extra = divmod(len(self._env_fns), self.num_workers)
        first, count = w * base + min(w, extra), base + (1 if w < extra else 0)
        parent, child = self._context.Pipe()
        fns = cloudpickle.dumps(self._env_fns[first : first + count])
        proc = self._context.Process(target=_worker_main, args=(w, fns, child), daemon=True,
                                     name=f"rlfast-env-worker-{w}")  # fmt: skip
        proc.start()
        child.close()
        return proc, parent

    def _await_spaces(self, w: int, deadline: Optional[float] = None) -> tuple[gym.Space, gym.Space]:
        """Worker ``w``'s report once it has built its envs: their (observation, action) spaces."""
        proc, conn = self._procs[w]
        deadline = deadline or time.monotonic() + STARTUP_TIMEOUT
        while not conn.poll(0.05):
            if not proc.is_alive():
                raise RuntimeError(f"env worker process {w} (pid {proc.pid}) died while building its envs "
                                   f"({_exit_text(proc.exitcode)})")  # fmt: skip
            if time.monotonic() > deadline:
                raise RuntimeError(f"env worker process {w} did not build its envs in {STARTUP_TIMEOUT:.0f} s")
        kind, value = conn.recv()
        if kind == "error":
            raise RuntimeError(f"env worker process {w} failed to build its envs:\n{value}")
        return value

    def _start_workers(self, num_workers: int) -> tuple[gym.Space, gym.Space]:
        """Starts the workers and returns the envs' (observation, action) spaces, the same in every worker."""
        for w in range(num_workers):
            self._procs.append(self._spawn(w))
        deadline = time.monotonic() + STARTUP_TIMEOUT
        spaces = [self._await_spaces(w, deadline) for w in range(num_workers)]
        for w, s in enumerate(spaces):
            if s != spaces[0]:
                raise ValueError(f"envs have different spaces: worker 0 {spaces[0]}, worker {w} {s}")
        return spaces[0]

    def close(self) -> None:
        """Stops the pool threads, then the worker processes, then frees the shared segment. Idempotent;
        never hangs (a worker that does not stop within a second is killed)."""
        if self._channel is not None:
            self._channel.close()  # wakes every waiting proxy and worker
        if getattr(self, "_pool", None) is not None:
            self._pool.close()
        self._stop_workers()

    def _stop_workers(self) -> None:
        if self._channel is not None:
            self._channel.close()
        for _, conn in self._procs:
            try:
                conn.close()
            except OSError:
                pass
        deadline = time.monotonic() + 1.0
        for proc, _ in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        self._procs = []
        if self._channel is not None:
            self._channel.destroy()
            self._channel = None
        if self._shm is not None:
            self._memory = None
            self._shm.close()
            self._shm.unlink()
            self._shm = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        mode = "sync" if self.is_sync else "async"
        return (f"ProcessEnvPool({self.task_id!r}, num_envs={self.num_envs}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers}, {mode})")  # fmt: skip


def make_from(
    env_fn: Callable[..., gym.Env],
    num_envs: int,
    env_kwargs_per_env: Optional[Sequence[dict]] = None,
    task_id: Optional[str] = None,
    **pool_kwargs: Any,
) -> ProcessEnvPool:
    """A pool of ``num_envs`` envs ``env_fn(**env_kwargs_per_env[i])`` (or ``env_fn()``) in worker processes.
    ``pool_kwargs``: ``batch_size``, ``num_workers``, ``seed``, ``seeds``, ``max_episode_steps``,
    ``autoreset_mode``, ``pin_memory``, ``context``, ``step_timeout``."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if env_kwargs_per_env is not None and len(env_kwargs_per_env) != num_envs:
        raise ValueError(f"env_kwargs_per_env must have one dict per env ({num_envs}), got {len(env_kwargs_per_env)}")
    kwargs = env_kwargs_per_env or [{}] * num_envs
    fns = [_Bound(env_fn, k) for k in kwargs]
    name = task_id or getattr(env_fn, "__name__", "python")
    return ProcessEnvPool(fns, task_id=name, **pool_kwargs)


def make_gymnasium(task_id: str, num_envs: int, **kwargs: Any) -> ProcessEnvPool:
    """``rlfast.make`` for a gymnasium id (``"module:Env-v0"`` imports the module first): ``gymnasium.make(task_id,
    **env_kwargs)`` in worker processes; pool options as ``make_from``'s."""
    pool_keys = ("batch_size", "num_workers", "seed", "seeds", "max_episode_steps", "autoreset_mode", "pin_memory",
                 "context", "step_timeout")  # fmt: skip
    pool_kwargs = {k: kwargs.pop(k) for k in pool_keys if k in kwargs}
    try:
        if ":" in task_id:  # gymnasium's "module:Env-v0": the module registers the env when imported
            module, name = task_id.split(":", 1)
            importlib.import_module(module)
            gym.spec(name)
        else:
            gym.spec(task_id)
    except (gym.error.Error, ImportError) as e:
        raise ValueError(f"unknown task id {task_id!r}: not an rlfast task and not a gymnasium one ({e})") from e
    return make_from(_Bound(gym.make, {"id": task_id, **kwargs}), num_envs, task_id=task_id, **pool_kwargs)


class _Bound:
    """``fn(**kwargs)`` as a picklable callable (cloudpickle takes ``fn`` by value where it must)."""

    def __init__(self, fn: Callable[..., gym.Env], kwargs: dict) -> None:
        self.fn, self.kwargs = fn, dict(kwargs)

    def __call__(self) -> gym.Env:
        return self.fn(**self.kwargs)
