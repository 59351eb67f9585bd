"""A tiny section timer: where does a trainer's time go (env / inference / train / other)?

    timer = SectionTimer(("env", "inference", "train"), sync_cuda=args.profile_sync)
    for iteration in ...:
        timer.start_iteration()
        with timer("env"):
            ...
        perf = timer.end_iteration()      # {"perf/env": s, ..., "perf/other": s}
    print(timer.summary())

"other" is the iteration's wall time not covered by a section (logging, bookkeeping). Sections
may nest: time spent in an inner section (say "all_reduce" inside "train") counts for the inner
one only, so the sections still add up to the wall time.
With CUDA, kernels run asynchronously: without ``sync_cuda`` the time of queued GPU work
lands in whichever section next waits for it (usually "env", when the actions are copied
to the host). ``sync_cuda=True`` synchronizes at each section boundary for an exact split,
at the cost of the overlap it removes.
"""

import threading
import time
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch


class SectionTimer:
    """Accumulates wall time per named section, per iteration and over the whole run."""

    def __init__(self, sections: Sequence[str] = ("env", "inference", "train"), sync_cuda: bool = False) -> None:
        if "other" in sections:
            raise ValueError("'other' is computed (iteration time outside every section); do not name a section so")
        self.sections = tuple(sections)
        self.sync_cuda = sync_cuda and torch.cuda.is_available()
        self.totals = dict.fromkeys(self.sections + ("other",), 0.0)
        self.iterations = 0
        self._current = dict.fromkeys(self.sections, 0.0)
        self._iteration_start = None
        self._wall = 0.0
        self._threads = threading.local()  # .inner: this thread's open sections' time spent in sections inside them

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Times the ``with`` block into section ``name`` (which must be one of ``sections``)."""
        if name not in self._current:
            raise KeyError(f"unknown section {name!r}; known: {', '.join(self.sections)}")
        if self.sync_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        inner = self._inner()
        inner.append(0.0)
        try:
            yield
        finally:
            if self.sync_cuda:
                torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            self._current[name] += elapsed - inner.pop()
            if inner:
                inner[-1] += elapsed

    def _inner(self) -> list:
        """The calling thread's stack of open sections (sections may be timed from several threads)."""
        if not hasattr(self._threads, "inner"):
            self._threads.inner = []
        return self._threads.inner

    def start_iteration(self) -> None:
        self._current = dict.fromkeys(self.sections, 0.0)
        self._iteration_start = time.perf_counter()

    def end_iteration(self) -> dict[str, float]:
        """Closes the iteration; returns seconds per section as ``{"perf/<name>": s}`` incl. "other"."""
        if self._iteration_start is None:
            raise RuntimeError("end_iteration() without start_iteration()")
        wall = time.perf_counter() - self._iteration_start
        self._iteration_start = None
        times = dict(self._current)
        times["other"] = max(wall - sum(self._current.values()), 0.0)
        for name, seconds in times.items():
            self.totals[name] += seconds
        self._wall += wall
        self.iterations += 1
        return {f"perf/{name}": seconds for name, seconds in times.items()}

    def summary(self, steps: int = 0) -> str:
        """A table of total seconds, share of the timed wall time and ms per iteration per section.

        With ``steps`` (env steps taken over those iterations) adds the steps/s the run would
        reach if that section were the only cost.
        """
        n = max(self.iterations, 1)
        wall = max(self._wall, 1e-12)
        header = f"{'section':<10} {'total s':>9} {'share':>7} {'ms/iter':>9}" + (
            f" {'steps/s alone':>14}" if steps else ""
        )
        lines = [f"profile over {self.iterations} iterations, {self._wall:.2f} s", header, "-" * len(header)]
        for name, seconds in list(self.totals.items()) + [("total", self._wall)]:
            row = f"{name:<10} {seconds:>9.2f} {100 * seconds / wall:>6.1f}% {1000 * seconds / n:>9.2f}"
            if steps:
                row += f" {steps / seconds:>14.0f}" if seconds > 0 else f" {'-':>14}"
            lines.append(row)
        return "\n".join(lines)
