"""Per-pixel frame normalization (``--normalize-frames``): ``rlfast._C.normalize_frames`` against torch's element-wise
ops, ms per call, in one run.

Each row normalizes a batch of uint8 Atari stacks [N, 4, 84, 84] to ``clamp((x - mean) * scale, -5, 5)`` in the
output dtype, the way the trainers call it (``rlfast.algos.frame_norm.normalize_rows``):

- torch: ``torch.sub(x, mean).mul_(scale).clamp_(-5, 5).to(dtype)``, a float32 temporary and one pass per op (what
  runs on a GPU and under ``torch.compile``; torch's ops use ``--threads`` threads);
- kernel, fresh output: ``normalize_rows(...)`` into a new tensor each call (acting's small batches);
- kernel, kept output: ``normalize_rows(..., out=buffer)``, one buffer (``FrameNet.normalized``, the update's batch).

Both give the same values bit for bit (checked here on every row, and in tests/algos/test_frame_norm.py). The median
of ``--repeats`` timed calls after two warm-up calls; rows interleaved round by round, so drift hits all alike.

    python3 benchmarks/bench_frame_norm.py                     # batches 8, 16, 256, 2048; float32 and bfloat16
    python3 benchmarks/bench_frame_norm.py --threads 2 --batches 2048
"""

import statistics
import time
from dataclasses import dataclass

import torch
import tyro

from bench_learning import cpu_model  # benchmarks/bench_learning.py (this script's folder is on the path when it runs)
from rlfast.algos.frame_norm import normalize_rows
from rlfast.algos.speed import native_bf16

LIMIT = 5.0
SHAPE = (4, 84, 84)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
WAYS = ("torch", "kernel, fresh output", "kernel, kept output")


@dataclass
class Args:
    batches: tuple[int, ...] = (8, 16, 256, 2048)
    """stacks per call: 8 and 16 as acting sees them (an env group, a pool), 256 a minibatch, 2048 an update's batch"""
    dtypes: tuple[str, ...] = ("float32", "bfloat16")
    """output dtypes (bfloat16 is what the CNN takes under --bf16)"""
    threads: int = 1
    """threads for torch's ops and the kernel alike"""
    repeats: int = 20
    """timed calls per row and round"""
    rounds: int = 3
    """rounds, each timing every row once in turn"""
    seed: int = 0


def call(way: str, rows: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype,
         threads: int, out: torch.Tensor) -> torch.Tensor:  # fmt: skip
    if way == "torch":
        return torch.sub(rows, mean).mul_(scale).clamp_(-LIMIT, LIMIT).to(dtype)
    if way == "kernel, fresh output":
        return normalize_rows(rows, mean, scale, LIMIT, dtype, threads)
    return normalize_rows(rows, mean, scale, LIMIT, dtype, threads, out=out)


def time_calls(way, rows, mean, scale, dtype, threads, out, repeats) -> list[float]:
    for _ in range(2):
        call(way, rows, mean, scale, dtype, threads, out)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call(way, rows, mean, scale, dtype, threads, out)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def main(args: Args) -> None:
    for name in args.dtypes:
        if name not in DTYPES:
            raise SystemExit(f"--dtypes: {name!r} is not one of {sorted(DTYPES)}")
    if min(args.batches, default=0) < 1 or args.threads < 1 or args.repeats < 1 or args.rounds < 1:
        raise SystemExit(f"--batches, --threads, --repeats and --rounds must be >= 1, got batches={args.batches} "
                         f"threads={args.threads} repeats={args.repeats} rounds={args.rounds}")  # fmt: skip
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    mean = torch.rand(SHAPE, generator=gen) * 255
    scale = 1.0 / (torch.rand(SHAPE, generator=gen) * 80 + 0.5)
    cells = []
    for batch in args.batches:
        rows = torch.randint(0, 256, (batch, *SHAPE), dtype=torch.uint8, generator=gen)
        for name in args.dtypes:
            dtype = DTYPES[name]
            want = call("torch", rows, mean, scale, dtype, args.threads, None)
            out = torch.empty_like(want)
            for way in WAYS[1:]:
                got = call(way, rows, mean, scale, dtype, args.threads, out)
                if not torch.equal(got.view(torch.uint8), want.view(torch.uint8)):  # bit for bit, not just ==
                    raise SystemExit(f"{way} differs from torch's ops at batch {batch}, {name}")
            cells.append((batch, name, rows, dtype, out, {way: [] for way in WAYS}))
    for _ in range(args.rounds):
        for batch, name, rows, dtype, out, times in cells:
            for way in WAYS:
                times[way] += time_calls(way, rows, mean, scale, dtype, args.threads, out, args.repeats)
    print(f"frames [N, 4, 84, 84] uint8 -> clamp((x - mean) * scale, -5, 5); {args.threads} thread(s); "
          f"median ms per call over {args.rounds} x {args.repeats} calls; {cpu_model()}"
          f"{' (native bf16)' if native_bf16(torch.device('cpu')) else ''}; torch {torch.__version__}")  # fmt: skip
    print()
    print("| stacks | dtype | torch ms | kernel, fresh output ms | kernel, kept output ms | torch / kept |")
    print("| --- | --- | --- | --- | --- | --- |")
    for batch, name, _, _, _, times in cells:
        ms = {way: statistics.median(values) for way, values in times.items()}
        print(f"| {batch} | {name} | {ms['torch']:.3f} | {ms['kernel, fresh output']:.3f} | "
              f"{ms['kernel, kept output']:.3f} | {ms['torch'] / ms['kernel, kept output']:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    main(tyro.cli(Args))
