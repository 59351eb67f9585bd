"""bf16 rounded in float32 kernels (``FrameNet.round_bf16``, what ``--bf16`` runs on a CPU without native bf16)
beside the autocast's bf16 kernels (native or emulated) and plain float32: how far each lies from the autocast,
and how long a forward + backward of the Nature CNN takes.

    python3 benchmarks/bench_bf16_rounding.py            # 64 frames, NCHW and channels-last

Per path and layout: the share of the CNN's features that differ from the autocast's, the loss's relative
difference, the largest relative difference (norm) of any parameter's gradient, and the median milliseconds of
a forward + backward of ``--batch`` frames over ``--repeats`` (after one warm-up). The autocast's row against
the other layout's autocast shows what two kernels of the same arithmetic differ by.
"""

import copy
import statistics
import time
from dataclasses import dataclass

import torch
import tyro

from rlfast.algos.nets import NatureCNNAgent

from rlfast.algos.speed import native_bf16, set_speed


@dataclass
class Args:
    batch: int = 64
    """frames per forward + backward"""
    repeats: int = 5
    """timed forward + backward passes per row (after one warm-up)"""
    seed: int = 0


def loss_and_grads(agent: NatureCNNAgent, x: torch.Tensor, actions: torch.Tensor) -> tuple[float, dict]:
    _, logprob, entropy, value = agent.get_action_and_value(x, actions)
    loss = -logprob.mean() - 0.01 * entropy.mean() + 0.5 * value.square().mean()
    agent.zero_grad(set_to_none=True)
    loss.backward()
    return loss.item(), {k: p.grad.clone() for k, p in agent.named_parameters()}


def results(agent: NatureCNNAgent, x: torch.Tensor, actions: torch.Tensor, repeats: int) -> dict:
    """Features (no autograd), loss, gradients and the median ms of a forward + backward."""
    with torch.no_grad():
        features = agent.hidden(x)
    loss, grads = loss_and_grads(agent, x, actions)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        loss_and_grads(agent, x, actions)
        times.append(1e3 * (time.perf_counter() - start))
    return {"features": features, "loss": loss, "grads": grads, "ms": statistics.median(times)}


def distance(got: dict, want: dict) -> tuple[float, float, float]:
    """(share of features that differ, relative loss difference, largest relative gradient difference)."""
    differ = (got["features"] != want["features"]).float().mean().item()
    loss = abs(got["loss"] - want["loss"]) / abs(want["loss"])
    grads = max(((got["grads"][k] - g).norm() / g.norm()).item() for k, g in want["grads"].items())
    return differ, loss, grads


def main(args: Args) -> None:
    torch.manual_seed(args.seed)
    agent = NatureCNNAgent(4, 6)
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, 256, (args.batch, 4, 84, 84), dtype=torch.uint8, generator=g)
    actions = torch.randint(0, 6, (args.batch,), generator=g)
    paths = {"autocast": {"bf16": True}, "rounded": {"bf16": True, "round_bf16": True}, "float32": {}}
    got = {(path, cl): results(set_speed(copy.deepcopy(agent), channels_last=cl, **kw), x, actions, args.repeats)
           for cl in (False, True) for path, kw in paths.items()}  # fmt: skip
    kind = "native" if native_bf16(torch.device("cpu")) else "emulated"
    print(f"Nature CNN, {args.batch} frames, {torch.get_num_threads()} threads; the autocast's bf16 kernels: {kind}")
    print("| path | layout | features differing from the autocast | loss (relative) | worst gradient (relative "
          "norm) | forward + backward, ms |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for (path, cl), r in got.items():
        layout = "channels-last" if cl else "NCHW"
        # the autocast's row: against the autocast in the other layout (two kernels, the same arithmetic)
        want = got["autocast", not cl] if path == "autocast" else got["autocast", cl]
        differ, loss, grads = distance(r, want)
        against = " (vs the other layout)" if path == "autocast" else ""
        print(f"| {path}{against} | {layout} | {100 * differ:.2f}% | {loss:.2g} | {grads:.2g} | {r['ms']:.1f} |")


if __name__ == "__main__":
    main(tyro.cli(Args))
