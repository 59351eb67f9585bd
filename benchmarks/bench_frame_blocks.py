"""The Nature CNN's first convolution over 4x4 blocks of the frames (``FrameNet.blocks``) against the plain
8x8 stride-4 convolution, on this machine's CPU: the time of a PPO minibatch's forward and backward and of
an acting batch's forward, in the CNN's channels-last modes (float32, and bf16 where the CPU has it natively),
each pair timed in alternation, one table.

    python benchmarks/bench_frame_blocks.py                      # widths 0.5 and 1, minibatch 256, acting 8 and 16
    python benchmarks/bench_frame_blocks.py --threads 1 --repeats 40

Both compute the same sums (the block weight is the 8x8 weight reordered: ``rlfast/algos/speed.py``'s
``to_blocks`` and ``block_weight``); tests/algos/test_nets.py checks that they agree.
"""

import argparse
import os
import platform
import statistics
import time

import torch

from rlfast.algos.nets import NatureCNNAgent
from rlfast.algos.speed import FrameNet, native_bf16, set_speed


def cpu_model() -> str:
    for line in open("/proc/cpuinfo") if os.path.exists("/proc/cpuinfo") else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def timed(fn, repeats: int, blocks: bool) -> float:
    """Median seconds of ``fn()`` with ``FrameNet.blocks`` set to ``blocks`` (after two warm-up calls)."""
    FrameNet.blocks = blocks
    for _ in range(2):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--minibatch", type=int, default=256)
    parser.add_argument("--acting", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of plain and blocks; the median is kept")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    modes = ["float32"] + (["bf16"] if native_bf16(torch.device("cpu")) else [])
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}, {args.threads} thread(s); "
          f"channels-last; median of {args.rounds} rounds x {args.repeats} calls")  # fmt: skip
    print("| net width | mode | call | plain 8x8/4 (ms) | over 4x4 blocks (ms) | speed-up |")
    print("| --- | --- | --- | --- | --- | --- |")
    torch.manual_seed(0)
    for width in args.widths:
        for mode in modes:
            agent = set_speed(NatureCNNAgent(4, 6, width=width), channels_last=True, bf16=mode == "bf16")
            optimizer = torch.optim.Adam(agent.parameters(), lr=1e-9)
            frames = {n: torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8).contiguous(
                memory_format=torch.channels_last) for n in [args.minibatch, *args.acting]}  # fmt: skip
            actions = torch.randint(0, 6, (args.minibatch,))

            def update() -> None:
                _, logprob, entropy, value = agent.get_action_and_value(frames[args.minibatch], actions)
                loss = -logprob.mean() - 0.01 * entropy.mean() + value.square().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            calls = [(f"update, minibatch {args.minibatch}", update)]
            for n in args.acting:
                def act(n: int = n) -> None:
                    with torch.no_grad():
                        agent.get_action_and_value(frames[n])
                calls.append((f"act, {n} frames", act))
            for name, fn in calls:
                plain, blocks = [], []
                for _ in range(args.rounds):
                    plain.append(timed(fn, args.repeats, False))
                    blocks.append(timed(fn, args.repeats, True))
                p, b = statistics.median(plain), statistics.median(blocks)
                print(f"| {width:g} | {mode} | {name} | {p * 1e3:.2f} | {b * 1e3:.2f} | {p / b:.2f}x |", flush=True)
    FrameNet.blocks = True


if __name__ == "__main__":
    main()
