"""The run layer: what every trainer does the same way, written once.

A trainer script keeps its algorithm (hyperparameters, network, rollout, update) and calls this
for the rest. It never calls back into the trainer::

    @dataclass
    class Args(RunArgs):                  # or a family's base, e.g. rlfast.algos.ppo.PPOArgs
        exp_name: str = "my_trainer"      # a redeclared field keeps the base's --help text

    def main(args: Args, ckpt: Optional[dict] = None) -> int:
        run = Run(args, "my_trainer.py", ckpt, iterations=n, steps_per_iteration=k, families=("atari",))
        envs = run.make_env(args.num_envs, num_threads=args.num_threads)
        agent, optimizer = ...
        run.track(models={"agent": agent}, optimizers={"optimizer": optimizer})  # restored on --resume
        with run:
            for iteration in run.iterations():
                ...                                                  # timed with run.timer("env") etc.
                run.end_iteration(k, scalars, episodes)
        return run.exit_code

    if __name__ == "__main__":
        launch(main, Args, "my_trainer.py")      # rlfast/algos/launch.py

``Run(...)`` checks every flag (one ``error: ...`` line per problem, before anything is created) and starts the
process (``launch.start_process``: seeds, threads, device). ``with run:`` creates the run dir and its ``RunLog``;
leaving it writes ``checkpoint.pt`` and the profile table, or on Ctrl-C / SIGTERM saves ``checkpoint.pt`` and sets
``exit_code`` to 130 / 143. ``end_iteration`` logs (with ``--eval-every``'s evaluations: ``evaluation.Evaluator``),
prints the progress line, writes the checkpoints that are due (and ``best.pt`` after an evaluation better than
every one before it, the run's earlier ones included) and ends the loop at the last iteration or once
``--target-return`` is reached.
"""

import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence, TypeVar

import torch

import rlfast
from rlfast.algos import distributed
from rlfast.algos.checkpoint import (CheckpointSchedule, CheckpointWriteError, load_side_file, make_checkpoint,
                                     restore, save_checkpoint)  # fmt: skip
from rlfast.algos.distributed import World
from rlfast.algos.evaluation import Evaluator
from rlfast.algos.launch import start_process
from rlfast.algos.speed import compiled, describe_speed
from rlfast.algos.profiling import SectionTimer
from rlfast.algos.runargs import RunArgs, run_problems, speed_options, usage_error
from rlfast.algos.runlog import RunLog, run_dir_name
from rlfast.algos.signals import Interrupts, caused_by_interrupt

F = TypeVar("F", bound=Callable[..., Any])


class Run:
    """One training run's scaffolding (see the module docstring): checks, seeds, device, pools,
    run dir, log, timer, checkpoints, Ctrl-C. Used from the trainer's main thread only."""

    def __init__(
        self,
        args: RunArgs,
        script: str,
        ckpt: Optional[Mapping[str, Any]] = None,
        *,
        iterations: int,
        steps_per_iteration: int,
        families: Sequence[str] = (),
        sections: Sequence[str] = ("env", "inference", "train"),
        data_parallel: bool = False,
    ) -> None:
        """``iterations`` of ``steps_per_iteration`` env steps each make the run; ``families``: the task
        families the trainer can train (``rlfast.task_family``; empty: any); ``data_parallel``: the trainer
        runs under torchrun on several ranks (see rlfast/algos/distributed.py and ``action_noise``)."""
        start_iteration = int(ckpt["iteration"]) if ckpt else 0
        try:
            self.world = World.from_env()
        except ValueError as e:
            raise usage_error(str(e)) from None
        ckpt_world = int(ckpt.get("world_size", 1)) if ckpt else None
        problems = run_problems(args, script, families, iterations, steps_per_iteration, start_iteration,
                                self.world, data_parallel, ckpt_world)  # fmt: skip
        if problems:
            raise usage_error(*problems)
        if iterations * steps_per_iteration != args.total_timesteps and self.world.is_main:
            print(f"note: --total-timesteps {args.total_timesteps:,} is not a whole number of iterations of "
                  f"{steps_per_iteration:,} steps: {iterations * steps_per_iteration:,} steps will run ({iterations} "
                  "iterations)", flush=True)  # fmt: skip

        self.args, self.script, self.ckpt = args, script, ckpt
        self.num_iterations, self.steps_per_iteration = iterations, steps_per_iteration
        self.device, self.flush_denormals, self._restore_denormals = start_process(args, self.world)
        """the device; whether torch's CPU threads treat denormals as 0 (``speed.flush_denormals``); whether this
        thread's mode is put back at the end"""
        self.speed = speed_options(args, self.device)
        """the CNN's speed options (``speed.set_speed(model, **run.speed)``): the flags, and --auto-speed's picks"""
        distributed.init_process_group(self.world, self.device)
        self.env_shard = self.world.shard(args.num_envs)
        """this rank's envs among all ranks' (all of them in one process)"""

        self.start_iteration = start_iteration
        self.global_step = int(ckpt["global_step"]) if ckpt else 0
        self.completed = (self.start_iteration, self.global_step)
        """(iteration, global_step) of the last completed iteration: the progress a checkpoint records"""
        if ckpt is not None:
            self.run_dir = Path(args.resume).parent
        else:
            self.run_dir = Path(args.runs_dir) / run_dir_name(args.env_id, args.exp_name, args.seed)
        self.evaluator = Evaluator(args.env_id, args.seed, args.eval_every, args.eval_episodes, args.capture_video,
                                   iterations, self.device)  # fmt: skip
        sections = (*sections, *["eval"][: self.evaluator.enabled], *["all_reduce"][: self.world.distributed])
        self.timer = SectionTimer(sections, sync_cuda=args.profile_sync)
        self.world = dataclasses.replace(self.world, comm=lambda: self.timer("all_reduce"))
        """this rank's place and the data-parallel collectives, timed as "all_reduce" (no-ops in one process)"""
        self.pools: list[rlfast.EnvPool] = []
        self.log: Optional[RunLog] = None
        self.exit_code = 0
        self.iteration = self.start_iteration
        self._finished = False
        self._state: dict[str, Any] = {"models": {}}
        self._states: dict[str, Any] = {}
        self._side: dict[str, Any] = {}  # run-dir file name -> object with state_dict / load_state_dict
        self._interrupts = Interrupts()
        self._saved_step: Optional[int] = self.global_step if ckpt is not None else None
        """the step of the last checkpoint.pt in the run dir (None: none yet)"""
        self.best_eval: Optional[float] = ckpt.get("best_eval") if ckpt is not None else None
        """the highest eval/episodic_return so far (None: no evaluation yet), whose state is run_dir/best.pt"""

    @property
    def resumed(self) -> bool:
        return self.ckpt is not None

    @property
    def env_seed(self) -> int:
        """Seed of this rank's first env (env i of all ranks' gets seed + i). A resumed run cannot restore its
        envs' state (the pool does not export it): it starts fresh episodes from seeds it has not used yet."""
        return self.args.seed + self.start_iteration * self.args.num_envs + self.env_shard.start

    @property
    def local_num_envs(self) -> int:
        """This rank's envs: --num-envs in one process, --num-envs / world size under torchrun."""
        return self.env_shard.stop - self.env_shard.start

    def action_noise(self, *shape: int, normal: bool = False) -> torch.Tensor:
        """[local_num_envs, *shape] uniform [0, 1) (or standard normal) numbers to sample this step's actions
        with (``categorical``, ``diag_normal``): drawn from torch's RNG on the device for all --num-envs envs
        of every rank, this rank's rows kept. So the actions of env i do not depend on the number of ranks."""
        draw = torch.randn if normal else torch.rand
        return draw((self.args.num_envs, *shape), device=self.device)[self.env_shard]

    def make_env(self, num_envs: int, *, seed: Optional[int] = None, **kwargs: Any) -> rlfast.EnvPool:
        """``rlfast.make(--env-id, num_envs, seed=env_seed, **kwargs)``, closed when the run ends. A bad
        option (ValueError) ends the process with one line naming it. Under torchrun ``num_envs`` is this
        rank's (``local_num_envs``) and ``num_threads`` defaults to the rank's share of the cores."""
        if self.world.distributed and kwargs.get("num_threads") is None:
            kwargs["num_threads"] = min(self.world.cpu_share(), num_envs)
        try:
            pool = rlfast.make(self.args.env_id, num_envs, seed=self.env_seed if seed is None else seed, **kwargs)
        except ValueError as e:
            self.abandon()
            raise usage_error(f"{self.args.env_id}: {e}") from None
        self.pools.append(pool)
        return pool

    def track(self, *, models: Mapping[str, torch.nn.Module], optimizers: Optional[Mapping[str, Any]] = None,
              normalizers: Optional[Mapping[str, Any]] = None, env_kwargs: Optional[Mapping[str, Any]] = None,
              eval_env_kwargs: Optional[Mapping[str, Any]] = None, states: Optional[Mapping[str, Any]] = None,
              ) -> None:  # fmt: skip
        """Names what every checkpoint holds (see rlfast.algos.checkpoint) and, on --resume, loads the
        checkpoint's states into these objects and the global RNGs. Call once, before ``compile``. ``states``: more
        objects with ``state_dict`` / ``load_state_dict`` of plain values (a PBT population's bookkeeping), kept
        as the checkpoint's ``states``."""
        self._state = {"models": models, "optimizers": optimizers, "normalizers": normalizers,
                       "env_kwargs": env_kwargs, "eval_env_kwargs": eval_env_kwargs}  # fmt: skip
        self._states = dict(states or {})
        if self.ckpt is not None:
            try:
                restore(self.ckpt, models, optimizers, normalizers)
                for name, obj in self._states.items():
                    obj.load_state_dict(self.ckpt.get("states", {})[name])
            except (KeyError, ValueError, RuntimeError) as e:  # RuntimeError: load_state_dict's shape mismatches
                self.abandon()
                detail = str(e).strip().splitlines()
                raise usage_error(f"--resume: {self.args.resume} does not fit this run's networks: "
                                  f"{detail[-1].strip() if detail else type(e).__name__}") from None  # fmt: skip

    def save_with_checkpoint(self, name: str, obj: Any) -> Optional[Path]:
        """Saves ``obj.state_dict()`` as ``run_dir/name`` (atomically) right before every ``checkpoint.pt``
        (the kept ``checkpoint_N.pt`` do not get one), tagged with the checkpoint's step. On --resume,
        loads that file into ``obj`` when it was saved with the checkpoint resumed from, or after it (a process
        killed between the two writes; a note says so); an older one is left (a note, and ``obj`` stays as it
        is); returns its path when it loaded, else None. A file that does not fit ``obj`` ends
        the process with one line naming it."""
        self._side[name] = obj
        if self.ckpt is None:
            return None
        try:
            return load_side_file(self.run_dir / name, obj, self.global_step)
        except ValueError as e:
            self.abandon()
            raise usage_error(str(e)) from None

    def compile(self, fn: F) -> F:
        """``fn`` as --compile / --cudagraphs ask (``speed.compiled``)."""
        return compiled(fn, self.args.compile, self.args.cudagraphs)

    def save(self, name: str) -> Path:
        """Writes ``run_dir/name`` atomically: the tracked state now, the progress of the last completed iteration
        (``checkpoint.pt``: after the files of ``save_with_checkpoint``). Under torchrun only rank 0 writes
        (every rank holds the same state) and records the world size, which --resume must match."""
        iteration, step = self.completed
        if not self.world.is_main:
            return self.run_dir / name
        if name == "checkpoint.pt":
            for side_name, obj in self._side.items():
                side = {"global_step": step, "iteration": iteration, "state": obj.state_dict()}
                save_checkpoint(self.run_dir / side_name, side)
        state = make_checkpoint(script=self.script, env_id=self.args.env_id, args=dataclasses.asdict(self.args),
                                global_step=step, iteration=iteration, **self._state)  # fmt: skip
        state["world_size"] = self.world.world_size
        state["best_eval"] = self.best_eval
        if self._states:
            state["states"] = {name: obj.state_dict() for name, obj in self._states.items()}
        return save_checkpoint(self.run_dir / name, state)

    def abandon(self) -> None:
        """Undoes what the run set up: the pools made so far are closed and this thread's denormal mode is put back,
        so a caller in the same process goes on as before. ``__exit__`` ends with it; a trainer that stops before
        ``with run:`` (a usage error found once the envs exist) calls it itself."""
        if self._restore_denormals:
            torch.set_flush_denormal(False)
            self._restore_denormals = False
        for pool in self.pools:
            pool.close()
        self.evaluator.close()

    def __enter__(self) -> "Run":
        self._interrupts.catch()
        total_steps = self.num_iterations * self.steps_per_iteration
        self._schedule = CheckpointSchedule(self.args.save_interval, self.args.save_minutes)
        self._start_step = self.global_step
        if self.world.is_main:
            self.log = RunLog(self.run_dir, dataclasses.asdict(self.args), total_steps, start_step=self.global_step,
                              track=(self.args.wandb_project_name, self.args.wandb_entity) if self.args.track else None)
            pools = " + ".join(repr(p) for p in self.pools)
            ranks = f"  ranks: {self.world.world_size} (this one's pools:)" if self.world.distributed else ""
            auto = getattr(self.args, "auto_speed", False) and self.device.type == "cpu"
            speed = describe_speed(self._state["models"].values(), self.flush_denormals, auto)
            print(f"run dir: {self.run_dir}  device: {self.device}{ranks}  {pools}{speed}", flush=True)
        return self

    def iterations(self) -> Iterator[int]:
        """The iteration numbers still to run (1-based, after the checkpoint's); starts each one's timer.
        Ends after the last, or after an ``end_iteration`` that found --target-return reached."""
        for iteration in range(self.start_iteration + 1, self.num_iterations + 1):
            self.iteration = iteration
            self.timer.start_iteration()
            yield iteration
            if self._finished:
                return

    def end_iteration(
        self, steps: int, scalars: Mapping[str, Any], episodes: Optional[Sequence[torch.Tensor]] = None
    ) -> None:
        """Closes the current iteration of ``steps`` env steps: logs ``episodes`` (``(ep_done, ep_return,
        ep_length)``, [T, B] host tensors, see RunLog.episodes) and ``scalars`` with the timer's ``perf/*``,
        updates the progress line and writes the checkpoints that are due."""
        first_step = self.global_step
        self.global_step += steps
        world = self.world
        if episodes is not None:  # every rank's episodes, in global env order
            episodes = world.gather_columns(episodes)
        for name, model in self._state["models"].items():  # the ranks' copies still identical
            world.check_in_sync(model.parameters(), f"{name}'s parameters")
        reached = best = False
        if world.is_main:
            if self.evaluator.due(self.iteration):
                with self.timer("eval"):
                    evaluation, video = self.evaluator.run(self._state, self.run_dir, self.global_step)
                score = evaluation["eval/episodic_return"]
                best = self.best_eval is None or score > self.best_eval
                self.best_eval = score if best else self.best_eval
                scalars = {**scalars, **evaluation, "eval/best_return": self.best_eval}
                self.log.video(video, self.global_step)
            if episodes is not None:
                self.log.episodes(*episodes, first_step)
            self.log.scalars({**scalars, **self.timer.end_iteration()}, self.global_step)
            target = self.args.target_return
            reached = target is not None and self.log.window_full and self.log.mean_return >= target
        else:
            self.timer.end_iteration()
        reached = world.broadcast(reached, self.device)
        self._finished = self.iteration == self.num_iterations or reached
        if world.is_main:
            self.log.progress(self.global_step, final=self._finished)
        self.completed = (self.iteration, self.global_step)
        if best:  # the best policy so far (main process only: it alone evaluates)
            self.save_or_stop("best.pt")
        for name in self._schedule.due(self.iteration):
            self.save_or_stop(name)

    def save_or_stop(self, name: str) -> Path:
        """``save(name)``; a write that fails (a full disk, a size limit) ends the process with one line naming the
        file and what is kept: the file as it was, the last ``checkpoint.pt`` and its step."""
        try:
            path = self.save(name)
        except CheckpointWriteError as e:
            last = "No checkpoint had been written yet."
            if self._saved_step is not None:
                last = (f"The last checkpoint, {self.run_dir / 'checkpoint.pt'} (step {self._saved_step:,}), is "
                        f"intact: make room and go on with --resume {self.run_dir}")  # fmt: skip
            raise usage_error(f"{e}; training stopped at step {self.completed[1]:,}. {last}") from None
        if name == "checkpoint.pt":
            self._saved_step = self.completed[1]
        return path

    def __exit__(self, exc_type: Optional[type], exc: Optional[BaseException], tb: Any) -> bool:
        interrupted = exc is not None and caused_by_interrupt(exc)
        try:
            if interrupted and self.world.is_main:
                # The latest weights (maybe mid-update) with the progress of the last completed iteration.
                path = self.save_or_stop("checkpoint.pt")
                iteration, step = self.completed
                print(f"\ninterrupted at step {step:,} (iteration {iteration}): saved {path}", flush=True)
            elif exc_type is None and self.world.is_main:
                self.log.close()
                path = self.save_or_stop("checkpoint.pt")
                steps = self.global_step - self._start_step
                print(self.timer.summary(steps=steps))
                print(f"{steps:,} steps in {self.log.elapsed():.1f} s; saved {path}", flush=True)
            if interrupted:
                self.exit_code = 128 + self._interrupts.signum
        finally:
            self._interrupts.restore()
            self.abandon()  # this thread's denormal mode back, the pools closed
            if self.log is not None:
                self.log.close()
            if exc_type is None:
                distributed.destroy_process_group()
        return interrupted
