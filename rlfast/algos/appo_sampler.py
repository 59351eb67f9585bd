"""APPO's sampling side (Sample Factory's sampling/): the sampler thread and the weights it acts with, for
``scripts/appo.py``'s learner; the trajectories it fills are ``rlfast/algos/appo_trajectories.py``'s, its
episodes go to ``Episodes.collect``.

PublishedWeights   the acting copy of the policy and how the learner's weights reach it: after every
                   SGD step under a lock (default), or one snapshot per batch through a queue of one,
                   so that rollout i acts with the weights of batch i - 2 (``--deterministic``, Cleanba's)
Sampler            the sampler thread: recv -> one batched forward -> send, trajectories to the learner
                   through a bounded queue; its exception stops the run from the learner's side

Data path of a sampler step: ``recv`` returns ``env_batch_size`` envs' results (pinned host memory);
their observations go to the device in one non-blocking copy and through one forward pass; the
step is written per env into the builder's [N, T + 1] device buffers, the actions go back with
``send``, and the pool steps those envs while the sampler serves the next batch (in async mode the
other half of the envs was stepping meanwhile: Sample Factory's double-buffered sampling). Each
step keeps the policy version that chose it; the learner logs the lag in SGD steps.
"""

import copy
import queue
import threading
from typing import Any, Callable, Optional

import torch
from torch import nn

import rlfast
from rlfast.algos.appo import APPOArgs
from rlfast.algos.appo_trajectories import Trajectories, TrajectoryBuilder
from rlfast.algos.obs import each, spec
from rlfast.algos.profiling import SectionTimer

POLL_S = 0.05
"""how often a thread blocked on a queue looks whether the run is stopping"""


class PublishedWeights:
    """The sampler's copy of the policy and its version (SGD steps the learner had taken when it was
    published). Immediate mode: ``publish`` after every SGD step copies the learner's parameters (and
    buffers) in under ``lock`` (the sampler's forward holds it too). Alternating mode (``--deterministic``):
    ``publish`` puts a snapshot into a queue of one after each batch, and the sampler takes it at the
    start of every rollout but the second: rollout i acts with the weights after batch i - 2."""

    def __init__(self, agent: nn.Module, alternating: bool, stop: threading.Event) -> None:
        self.acting = copy.deepcopy(agent).requires_grad_(False)
        self.version = 0
        self.lock = threading.Lock()
        self.alternating = alternating
        self._snapshots: "queue.Queue[tuple[int, list[torch.Tensor]]]" = queue.Queue(maxsize=1)
        self._stop = stop
        self._rollouts = 0

    def publish(self, agent: nn.Module, version: int, end_of_batch: bool) -> None:
        """The learner's weights after ``version`` SGD steps (immediate mode: after every step; alternating:
        at each batch's end)."""
        state = _state(agent)
        if not self.alternating:
            with self.lock:
                torch._foreach_copy_(_state(self.acting), state)
                self.version = version
        elif end_of_batch:
            _put(self._snapshots, (version, [t.clone() for t in state]), self._stop)

    def start_rollout(self) -> None:
        """Called by the sampler before each rollout; alternating mode: takes the next snapshot (from the third on)."""
        self._rollouts += 1
        if self.alternating and self._rollouts > 2:
            version, state = _get(self._snapshots, self._stop)
            with self.lock:
                torch._foreach_copy_(_state(self.acting), state)
                self.version = version


def _state(agent: nn.Module) -> list[torch.Tensor]:
    """What a published policy copies: the weights, then the buffers (--normalize-frames' pixel statistics)."""
    return [p.detach() for p in agent.parameters()] + list(agent.buffers())


class Stopped(Exception):
    """The run is stopping: a blocked queue operation gives up."""


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> None:
    while True:
        if stop.is_set():
            raise Stopped
        try:
            return q.put(item, timeout=POLL_S)
        except queue.Full:
            pass


def _get(q: queue.Queue, stop: threading.Event) -> Any:
    while True:
        if stop.is_set():
            raise Stopped
        try:
            return q.get(timeout=POLL_S)
        except queue.Empty:
            pass


class Sampler:
    """The sampler thread (see the module docstring); a context manager that starts it and, on leaving,
    stops and joins it (before the run closes the pool). ``next_batch`` gives the learner the next full
    ``Trajectories`` (re-raising the sampler's exception, if any), ``release`` hands it back for reuse."""

    def __init__(
        self,
        envs: rlfast.EnvPool,
        args: APPOArgs,
        agent: nn.Module,
        on_results: Callable[..., None],
        device: torch.device,
    ) -> None:
        self.envs, self.args, self.device = envs, args, device
        self.on_results = on_results
        self.stop = threading.Event()
        self.weights = PublishedWeights(agent, alternating=args.deterministic, stop=self.stop)
        obs_space, action_space = envs.single_observation_space, envs.single_action_space
        obs_spec = spec(obs_space)  # (shape, dtype), or a dict of them for a Dict env
        action_dtype = torch.long if action_space.shape == () else torch.float32
        T = args.trajectory_length
        # A recurrent policy's state per env, on the device (zeroed where an episode starts, by the policy).
        self.state = agent.initial_state(envs.num_envs, device) if hasattr(agent, "initial_state") else None
        state_shape = None if self.state is None else self.state.shape[1:]

        def make(k: int) -> Trajectories:
            return Trajectories(k, T, obs_spec, action_space.shape, action_dtype, device, state_shape)

        K = args.trajectories_per_batch
        self._ready: "queue.Queue[Trajectories]" = queue.Queue(maxsize=1 if args.deterministic else args.queue_size)
        self._free: "queue.Queue[Trajectories]" = queue.Queue()
        for _ in range(self._ready.maxsize + 2):  # one filling, those queued, one training
            self._free.put(make(K))
        # on_results(terminated, truncated, info, env_ids) sees every result batch (Episodes.collect)
        self.builder = TrajectoryBuilder(envs.num_envs, T, K, make, lambda: _get(self._free, self.stop),
                                         lambda batch: _put(self._ready, batch, self.stop))  # fmt: skip
        self.timer = SectionTimer(("env", "inference", "storage"))
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="appo-sampler", daemon=True)

    def __enter__(self) -> "Sampler":
        self.timer.start_iteration()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self._thread.join()

    def _run(self) -> None:
        envs, timer, builder, weights = self.envs, self.timer, self.builder, self.weights
        recvs = 0
        try:
            envs.async_reset()
            while not self.stop.is_set():
                with timer("env"):
                    obs, rewards, terminated, truncated, info = envs.recv()
                ids = info["env_id"]
                with timer("storage"):
                    builder.observe(ids, obs, rewards, terminated, truncated)
                    self.on_results(terminated, truncated, info, ids)
                if self.args.deterministic and recvs % self.args.trajectory_length == 0:  # a sync rollout's first step
                    weights.start_rollout()
                state = None
                with timer("inference"), torch.no_grad(), weights.lock:
                    obs_d = each(lambda o: o.to(self.device, non_blocking=True), obs)
                    if self.state is None:
                        actions, logprobs, _, _ = weights.acting.get_action_and_value(obs_d)
                    else:  # each env's state goes on from its last step (any order of envs), zeroed at starts
                        ids_d = ids.to(self.device, non_blocking=True).long()
                        state = self.state.index_select(0, ids_d)
                        starts = builder.starts(ids).to(self.device, non_blocking=True)
                        actions, logprobs, _, _, new_state = weights.acting.get_action_and_value(obs_d, state, starts)
                        self.state.index_copy_(0, ids_d, new_state)
                    version = weights.version
                with timer("storage"):
                    builder.act(ids, obs_d, actions, logprobs, version, state)
                with timer("env"):
                    envs.send(actions, ids)
                recvs += 1
        except Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the learner, which raises it
            self.error = e

    def next_batch(self) -> Trajectories:
        """The next full batch; raises the sampler's exception if it failed."""
        while True:
            if self.error is not None:
                raise self.error
            try:
                return self._ready.get(timeout=POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self.error is None:
                    raise RuntimeError("the sampler thread ended without a batch or an exception") from None

    def release(self, batch: Trajectories) -> None:
        self._free.put(batch)

    def perf(self) -> dict[str, float]:
        """The sampler's seconds per section since the last call, as ``perf/sampler_*`` scalars (read from
        the learner's thread while the sampler adds to them: a section in progress counts in the next call)."""
        times = self.timer.end_iteration()
        self.timer.start_iteration()
        return {name.replace("perf/", "perf/sampler_"): s for name, s in times.items()}
