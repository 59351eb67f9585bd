"""``EnvPool``, the torch-facing pool over an engine pool: torch tensors out, gymnasium spaces, clear errors.

``EnvPool(task_id, ...)`` builds an engine task's pool; ``EnvPool.from_binding`` wraps a pool built
elsewhere (a ``load_env`` module's, ``rlfast/loader.py``; the Python-env pool of ``rlfast/procpool.py``);
``pool_config`` checks the options every pool shares.

Data path: ``send(actions, env_ids)`` copies the actions into the C++ action store and
returns; worker threads step the envs and write results in place into a fixed ring of
output blocks (torch tensors allocated here once, pinned when CUDA is available);
``recv()`` returns views of the next complete block. No allocation or copy per step.

A block returned by ``recv`` stays valid until the second ``recv`` after it; copy (e.g.
``obs.to("cuda", non_blocking=True)``) before then.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Optional, Sequence, Union

import gymnasium as gym
import numpy as np
import torch

from rlfast import _mujoco
from rlfast._ext import _C
from rlfast.errors import EnvError, PoolStateError
from rlfast.registry import check_task_id

_TORCH_DTYPES = {
    "uint8": torch.uint8,
    "bool": torch.bool,
    "int32": torch.int32,
    "int64": torch.int64,
    "float32": torch.float32,
    "float64": torch.float64,
}
_STEP_FIELDS = ("obs", "reward", "terminated", "truncated")
"""The output fields recv() returns positionally; the others are info items, named _INFO + key."""
_INFO = "info:"
_OBS_KEY, _FINAL_OBS_KEY = "obs:", "final_obs:"
"""A Dict observation's fields: "obs:<key>" and the info items "final_obs:<key>", one per key (the engine's
EnvSpec::obs_keys; Python envs in worker processes, ``rlfast/procpool.py``)."""
_AUTORESET_MODES = ("next_step", "same_step")
_LIVE_POOLS: "weakref.WeakSet[EnvPool]" = weakref.WeakSet()

ArrayLike = Union[torch.Tensor, np.ndarray, Sequence[Any]]
Obs = Union[torch.Tensor, dict[str, torch.Tensor]]
"""A batch of observations: one tensor, or one per key of a Dict observation space."""

INT32_MAX = 2**31 - 1
SEED_MAX = 2**64 - 1
"""Seeds are uint64 in the engine (ALE itself takes the low 31 bits)."""


def _int_arg(name: str, value: Any, lo: int, hi: int, hint: str = "") -> int:
    """``value`` as an int in [lo, hi]; ValueError naming ``name`` and the value otherwise.
    Python ints, numpy integers and 0-d integer arrays pass; bools, floats and strings do not."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}{hint}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}{hint}, got {value}")
    if value > hi:
        raise ValueError(f"{name} must be <= {hi}{hint}, got {value}")
    return int(value)


def _seed_list(name: str, seeds: Any, n: int) -> list[int]:
    """One seed per env from a sequence of ``n`` ints in [0, 2**64); ValueError otherwise."""
    if isinstance(seeds, (str, bytes)) or np.ndim(seeds) != 1:
        raise ValueError(f"{name} must be a sequence of {n} ints (one per env), got {seeds!r}")
    values = list(seeds)
    if len(values) != n:
        raise ValueError(f"{name} must have one entry per env ({n}), got {len(values)}")
    return [_int_arg(f"{name}[{i}]", v, 0, SEED_MAX) for i, v in enumerate(values)]


def _space(spec: dict, discrete_n: int = 0) -> gym.Space:
    if discrete_n > 0:
        return gym.spaces.Discrete(discrete_n)
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])

    def bound(values: list, default: float) -> np.ndarray:
        if not values:
            values = [default]
        arr = np.asarray(values, dtype=np.float64)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            arr = np.clip(arr, info.min, info.max)
        return np.broadcast_to(arr.reshape(shape) if arr.size > 1 else arr.reshape(()), shape).astype(dtype)

    return gym.spaces.Box(bound(spec["low"], -np.inf), bound(spec["high"], np.inf), shape, dtype)


_TORCH_SENDABLE = (torch.uint8, torch.int32, torch.int64, torch.float32, torch.float64)


def _as_numpy(x: ArrayLike, name: str, expected: str = "integers or floats") -> np.ndarray:
    """``x`` as a C-contiguous numpy array; ValueError naming ``name`` for what cannot be sent."""
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise ValueError(f"{name} is a meta tensor (no data); pass a tensor on the CPU or a GPU")
        if x.dtype not in _TORCH_SENDABLE and x.dtype != torch.bool:
            raise ValueError(f"{name} has dtype {x.dtype}; expected {expected} "
                             "(convert with .float() or .long())")
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        x = x.numpy()
    elif not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except ValueError as e:  # ragged nested sequences
            raise ValueError(f"{name} is not a rectangular array ({e})") from e
    if x.dtype == np.bool_ or x.dtype == object or x.dtype.kind in "USV":
        raise ValueError(f"{name} has dtype {x.dtype}; expected {expected}")
    return np.ascontiguousarray(x)


def _as_env_ids(x: ArrayLike, call: str) -> np.ndarray:
    ids = _as_numpy(x, "env_ids", expected="integers")
    if ids.size == 0:
        raise ValueError(f"{call} needs at least one env id, got an empty env_ids")
    return ids


def pool_config(
    num_envs: int,
    batch_size: Optional[int] = None,
    num_threads: Optional[int] = None,
    seed: int = 0,
    seeds: Optional[Sequence[int]] = None,
    max_episode_steps: Optional[int] = None,
    autoreset_mode: str = "next_step",
    thread_affinity_offset: int = -1,
    work_in_recv: bool = False,
    pin_memory: Optional[bool] = None,
) -> tuple[Any, bool]:
    """The engine's PoolConfig from ``EnvPool``'s options, each checked (ValueError naming the bad value),
    and whether the output ring is pinned."""
    if autoreset_mode not in _AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {_AUTORESET_MODES}, got {autoreset_mode!r}")
    num_envs = _int_arg("num_envs", num_envs, 1, INT32_MAX)
    if batch_size is not None:
        batch_size = _int_arg("batch_size", batch_size, 1, INT32_MAX)
        if batch_size > num_envs:
            raise ValueError(f"batch_size must be in [1, num_envs={num_envs}], got {batch_size}")
    if num_threads is not None:
        least, hint = (0, "") if work_in_recv else (1, " (or 0 with work_in_recv=True)")
        num_threads = _int_arg("num_threads", num_threads, least, INT32_MAX, hint)
    seed = _int_arg("seed", seed, 0, SEED_MAX)
    if seeds is not None:
        seeds = _seed_list("seeds", seeds, num_envs)
    elif seed + num_envs - 1 > SEED_MAX:
        raise ValueError(f"seed + env_id must stay below 2**64 (seed={seed}, num_envs={num_envs})")
    if max_episode_steps is not None:
        max_episode_steps = _int_arg("max_episode_steps", max_episode_steps, 1, INT32_MAX,
                                     " (None: the env's default)")
    thread_affinity_offset = _int_arg("thread_affinity_offset", thread_affinity_offset, -1, INT32_MAX,
                                      " (-1: no pinning)")
    if not isinstance(work_in_recv, (bool, np.bool_)):
        raise ValueError(f"work_in_recv must be a bool, got {work_in_recv!r}")
    if pin_memory is None:
        pin_memory = torch.cuda.is_available()
    elif not isinstance(pin_memory, (bool, np.bool_)):
        raise ValueError(f"pin_memory must be a bool or None, got {pin_memory!r}")
    elif pin_memory and not torch.cuda.is_available():
        raise ValueError("pin_memory=True needs CUDA, and torch.cuda.is_available() is False")
    config = _C.PoolConfig()
    config.num_envs = num_envs
    config.batch_size = batch_size or 0
    config.num_threads = -1 if num_threads is None else num_threads
    config.work_in_recv = bool(work_in_recv)
    config.seed = seed
    config.seeds = seeds or []
    config.max_episode_steps = max_episode_steps or 0
    config.same_step_autoreset = autoreset_mode == "same_step"
    config.thread_affinity_offset = thread_affinity_offset
    return config, bool(pin_memory)


class EnvPool:
    """A batch of ``num_envs`` C++ environments stepped by ``num_threads`` worker threads.

    Sync mode (``batch_size == num_envs``): ``step(a)`` returns every env's result, ordered
    by env id. Async mode (``batch_size < num_envs``): ``recv()`` returns the first
    ``batch_size`` envs to finish; ``info["env_id"]`` says which.

    ``work_in_recv=True``: while ``recv()`` waits for its batch, the calling thread steps
    queued envs itself instead of sleeping, so it counts as one more worker (``num_threads``
    then defaults to one fewer, and may be 0: every step runs inside ``recv``). It pays off
    where the loop spends its time waiting on envs and cores are few; a ``recv`` that took a
    step finishes that step before returning, so it can return up to one env step late.
    """

    def __init__(
        self,
        task_id: str,
        num_envs: int,
        batch_size: Optional[int] = None,
        num_threads: Optional[int] = None,
        seed: int = 0,
        seeds: Optional[Sequence[int]] = None,
        max_episode_steps: Optional[int] = None,
        autoreset_mode: str = "next_step",
        thread_affinity_offset: int = -1,
        work_in_recv: bool = False,
        pin_memory: Optional[bool] = None,
        **env_kwargs: Any,
    ) -> None:
        check_task_id(task_id)
        config, pin_memory = pool_config(num_envs, batch_size, num_threads, seed, seeds, max_episode_steps,
                                         autoreset_mode, thread_affinity_offset, work_in_recv, pin_memory)
        if _C.task_family(task_id) == "mujoco":
            env_kwargs = _mujoco.resolve_xml_file(_C.task_defaults(task_id), env_kwargs)
        binding = _C.Pool(task_id, config, dict(env_kwargs))
        self._init_from_binding(binding, task_id, env_kwargs, autoreset_mode, pin_memory)

    @classmethod
    def from_binding(
        cls,
        binding: Any,
        task_id: str,
        env_kwargs: Optional[dict] = None,
        autoreset_mode: str = "next_step",
        pin_memory: bool = False,
    ) -> "EnvPool":
        """A pool over ``binding``: an engine pool built from a ``pool_config`` PoolConfig and not yet attached to
        an output ring (a ``_C.Pool``; what the ``make`` of a module ``rlfast.load_env`` compiled returns).
        ``autoreset_mode``: as given to ``pool_config``; ``pin_memory``: as it returned; ``env_kwargs``: the env's
        options the binding was built with (kept as ``pool.env_kwargs``)."""
        pool = cls.__new__(cls)
        pool._init_from_binding(binding, task_id, env_kwargs or {}, autoreset_mode, pin_memory)
        return pool

    def _init_from_binding(
        self, binding: Any, task_id: str, env_kwargs: dict, autoreset_mode: str, pin_memory: bool
    ) -> None:
        """Takes over a built engine pool: its spaces, and the output ring allocated here and attached. The one
        initialization every pool shares: ``__init__``, ``from_binding`` and subclasses' ``__init__`` call it."""
        self._pool = binding
        self.task_id = task_id
        self.env_kwargs = dict(env_kwargs)
        self.autoreset_mode = autoreset_mode
        resolved = self._pool.config
        self.num_envs = resolved.num_envs
        self.batch_size = resolved.batch_size
        self.num_threads = resolved.num_threads
        self.max_episode_steps = resolved.max_episode_steps
        self.is_sync = self.batch_size == self.num_envs
        spec = self._pool.spec
        self.spec = spec
        if spec.get("obs_keys"):  # the env's own Dict replaces it where a subclass has one (ProcessEnvPool)
            self.single_observation_space = gym.spaces.Dict({k["name"]: _space(k) for k in spec["obs_keys"]})
        else:
            self.single_observation_space = _space(spec["obs"])
        self.single_action_space = _space(spec["action"], spec["num_actions"])

        self.pin_memory = bool(pin_memory)
        fields = self._pool.fields()
        k = self._pool.num_blocks
        names = [f["name"] for f in fields]
        self._buffers = [
            torch.zeros((k, self.batch_size, *f["shape"]), dtype=_TORCH_DTYPES[f["dtype"]], pin_memory=self.pin_memory)
            for f in fields
        ]
        self._pool.attach(self._buffers)
        # recv()'s results pre-built per block, fields found by name: (obs, reward, terminated,
        # truncated) and the info items, which the engine names "info:<key>" (env_id, elapsed_step,
        # ..., the env's own arrays; Atari's raw "reward" among them). A Dict observation's keys,
        # "obs:<key>" and "info:final_obs:<key>", become dicts of their views, in the fields' order.
        keys = [n[len(_OBS_KEY) :] for n in names if n.startswith(_OBS_KEY)]
        self._dict_obs = bool(keys)
        results, infos = [], []
        for b in range(k):
            views = {name: buf[b] for name, buf in zip(names, self._buffers)}
            if keys:
                views["obs"] = {key: views[_OBS_KEY + key] for key in keys}
                finals = {key: views.pop(_INFO + _FINAL_OBS_KEY + key) for key in keys if
                          _INFO + _FINAL_OBS_KEY + key in views}  # fmt: skip
                if finals:
                    views[_INFO + "final_obs"] = finals
            results.append(tuple(views[name] for name in _STEP_FIELDS))
            infos.append(tuple((n[len(_INFO) :], v) for n, v in views.items() if n.startswith(_INFO)))
        self._results, self._infos = results, infos
        # send() fast path: id of each block's env_id view -> a numpy view of the same memory.
        # The views live as long as the pool, so their ids cannot be reused by other objects.
        self._env_id_arrays = {id(v): v.numpy() for info in infos for n, v in info if n == "env_id"}
        self._staging: dict[tuple, torch.Tensor] = {}  # pinned host buffers for actions sent from a GPU
        _LIVE_POOLS.add(self)

    # ------------------------------------------------------------------ async API
    def send(self, actions: ArrayLike, env_ids: Optional[ArrayLike] = None) -> None:
        """Queues one step for each env in ``env_ids`` (default: all, in order) and returns.

        ``actions[i]`` goes to env ``env_ids[i]``. Discrete: integer array of shape (n,);
        continuous: float array of shape (n, *action_shape). Actions on a CUDA device come back
        through a pinned host buffer of the pool's (one non-blocking copy, one stream sync).
        """
        if env_ids is None:
            ids = None
        else:  # recv's own env_id tensor (the usual case) maps straight to its numpy view
            ids = self._env_id_arrays.get(id(env_ids))
            if ids is None:
                self._check_open()
                ids = _as_env_ids(env_ids, "send()")
        if isinstance(actions, torch.Tensor) and actions.is_cuda and 0 < actions.shape[0] <= self.num_envs:
            actions = self._staged(actions)
        self._pool.send(_as_numpy(actions, "actions"), ids)

    def _staged(self, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` copied into the pool's pinned buffer for their dtype and row shape (made once);
        the C++ send copies them out before returning, so the buffer is free again after it."""
        key = (actions.dtype, tuple(actions.shape[1:]))
        buf = self._staging.get(key)
        if buf is None:
            buf = self._staging[key] = torch.zeros((self.num_envs, *key[1]), dtype=key[0], pin_memory=True)
        host = buf[: actions.shape[0]]
        host.copy_(actions.detach(), non_blocking=True)
        torch.cuda.current_stream(actions.device).synchronize()
        return host

    def recv(self) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Waits for the next ``batch_size`` results: ``(obs, reward, terminated, truncated, info)``.

        ``obs``: a tensor ``[batch_size, *obs_shape]``; for a Dict observation space (Python envs,
        ``rlfast/procpool.py``) a dict ``{key: tensor [batch_size, *shape]}``, as is ``info["final_obs"]``.
        Raises EnvError if an env raised during its step (naming it), PoolStateError if not
        enough envs are in flight to ever fill a batch. Ctrl-C interrupts the wait.
        """
        block, error = self._pool.recv()
        info = dict(self._infos[block])
        if error:
            raise EnvError(error, info["env_id"].clone())
        obs, reward, terminated, truncated = self._results[block]
        if self._dict_obs:  # fresh dicts over the same views: what a caller does to them stays its own
            obs = dict(obs)
            if "final_obs" in info:
                info["final_obs"] = dict(info["final_obs"])
        return obs, reward, terminated, truncated, info

    def async_reset(self, env_ids: Optional[ArrayLike] = None) -> None:
        """Queues a reset of every env (or ``env_ids``); collect the results with ``recv``."""
        if env_ids is not None:
            self._check_open()
        self._pool.send_reset(None if env_ids is None else _as_env_ids(env_ids, "async_reset()"))

    # ------------------------------------------------------------------ sync API
    def reset(self, seed: Optional[int] = None) -> tuple[Obs, dict[str, Any]]:
        """Resets all envs and returns ``(obs, info)`` of the first batch (all envs in sync mode).

        With ``seed``, env i is re-seeded with ``seed + i`` first (gymnasium semantics).
        """
        if seed is not None:
            self.seed(seed)
        self.async_reset()
        obs, _, _, _, info = self.recv()
        return obs, info

    def step(
        self, actions: ArrayLike, env_ids: Optional[ArrayLike] = None
    ) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``send`` then ``recv``."""
        self.send(actions, env_ids)
        return self.recv()

    def seed(self, seed: Union[int, Sequence[int]], env_ids: Optional[ArrayLike] = None) -> None:
        """Re-seeds env i with ``seed + i`` (or ``seed[k]`` for the k-th env); only while those
        envs are idle. ``env_ids``: re-seed only these envs (default: all).

        Seeds are ints in [0, 2**64). Atari envs reload their ROM to reseed (as ale-py does);
        the pool's builder threads do that in parallel.
        """
        self._check_open()
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in _as_env_ids(env_ids, "seed()")]
        if isinstance(seed, (str, bytes)) or np.ndim(seed) == 0:
            base = _int_arg("seed", seed, 0, SEED_MAX - (max(ids) if ids else 0))
            seeds = [base + i for i in ids]
        else:
            seeds = _seed_list("seed", seed, len(ids))
        self._pool.reseed(seeds, [] if env_ids is None else ids)

    def render(self, env_ids: Optional[ArrayLike] = None, *, follow: bool = False) -> torch.Tensor:
        """The current frames of envs ``env_ids`` (default: every env) in colour: uint8 ``[n, H, W, 3]`` on the CPU.

        Atari: the emulator's 210 x 160 screen (ale-py's ``getScreenRGB``), not the processed observation.
        MuJoCo: the view of gymnasium's ``render_mode="rgb_array"`` for the same state, 480 x 480
        (``rlfast/render.py``; headless through EGL). The envs must be idle: not sent and not yet received
        (in async mode, render the envs a ``recv`` has just returned). Nothing is rendered unless this is called.
        ``follow``: MuJoCo's camera keeps the env's root body in view (what videos use); Atari: no effect.
        """
        ids = self._render_ids(env_ids)
        shape = self._pool.render_shape()
        if shape:
            out = torch.empty((ids.size, *shape), dtype=torch.uint8)
            self._pool.render([int(i) for i in ids], out.numpy())
            return out
        if _C.task_family(self.task_id) == "mujoco":
            from rlfast import render

            if getattr(self, "_renderer", None) is None:
                frame_skip = self.env_kwargs.get("frame_skip", _C.task_defaults(self.task_id)["frame_skip"])
                self._renderer = render.MujocoFrames(self.task_id, self.env_kwargs["xml_file"], frame_skip)
            return render.mujoco_frames(self._pool, ids, self._renderer, follow)
        raise NotImplementedError(f"{self.task_id} does not render (Atari, MuJoCo and Python envs that render do)")

    def _render_ids(self, env_ids: Optional[ArrayLike]) -> np.ndarray:
        """``render()``'s env ids, checked (the pool open, each in range, none twice)."""
        self._check_open()
        ids = np.arange(self.num_envs) if env_ids is None else _as_env_ids(env_ids, "render()")
        if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() >= self.num_envs)):
            raise ValueError(f"render() env_ids must be in [0, {self.num_envs}), got {ids.tolist()}")
        if len(set(ids.tolist())) != ids.size:
            raise ValueError(f"render() env_ids must not repeat, got {ids.tolist()}")
        return ids

    def _check_open(self) -> None:
        """A closed pool answers PoolStateError before any argument is looked at (as the engine does)."""
        if self._pool.closed:
            raise PoolStateError("the pool is closed")

    def _peek(self, env_ids: ArrayLike) -> None:
        """Queues a result for each env that reports its current state again, stepping nothing
        (reward 0, not done): fills a sync batch around a partial reset (the gymnasium adapter's
        ``reset_mask``)."""
        self._pool.send_peek(_as_env_ids(env_ids, "_peek()"))

    def close(self) -> None:
        """Stops the workers. Idempotent; never hangs on a blocked ``recv`` in another thread."""
        self._pool.close()

    @property
    def closed(self) -> bool:
        return self._pool.closed

    @property
    def memory_estimate(self) -> int:
        """Bytes make() estimated this pool needs (envs, output ring, bookkeeping); make()
        refuses a pool whose estimate exceeds the machine's available memory."""
        return self._pool.memory_estimate

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        mode = "sync" if self.is_sync else "async"
        return (
            f"EnvPool({self.task_id!r}, num_envs={self.num_envs}, batch_size={self.batch_size}, "
            f"num_threads={self.num_threads}, {mode})"
        )

    # ------------------------------------------------------------------ test hooks
    def _get_state(self, env_id: int) -> list[float]:
        """Test-only: the env's internal state (builds with RLFAST_TEST_HOOKS)."""
        return self._pool.get_state(env_id)

    def _set_state(self, env_id: int, state: Sequence[float]) -> None:
        """Test-only: overwrite the env's internal state (builds with RLFAST_TEST_HOOKS)."""
        self._pool.set_state(env_id, [float(s) for s in state])


@atexit.register
def _close_all() -> None:
    # Join worker threads before interpreter teardown frees the tensors they write into.
    for pool in list(_LIVE_POOLS):
        pool.close()
