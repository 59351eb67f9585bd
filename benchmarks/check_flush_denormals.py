"""Does flushing denormals (``--flush-denormals``) change what a trained Q-network learns, and what does it save?

From any trainer's checkpoint: the share of its Adam moments in the denormals, and one fused Adam step alone on
its optimizer state (random gradients, half of them 0), kept and flushed, in ms. From a ``dqn_atari.py``
checkpoint also (its Q-network, target network and Adam state, whose moments of dead units'
weights sit in the denormals after a long run), the same gradient steps of the TD loss (``td_loss``, batches of
random frames from one seed) run twice: denormals kept and flushed. One torch thread, so that every op runs
on this thread, whose mode the script sets. Printed per CNN path (float32, bf16): the weights that differ at
the end and by how much, the denormal moments each run ended with, and the seconds each took.

    python3 benchmarks/check_flush_denormals.py runs/<a dqn_atari.py run>/checkpoint.pt
    python3 benchmarks/check_flush_denormals.py runs/<a ppo_atari.py run>/checkpoint.pt

(The figures of docs/performance/cpu.md came from the run dirs of the Pong DQN and PPO runs: checkpoints with
optimizer state, which stay out of the repository; their training commands make them.)
"""

import copy
import time
from dataclasses import dataclass

import torch
import tyro
from trainers import load_trainer  # benchmarks/trainers.py (this script's folder is on the path when it runs)

from rlfast.algos.dqn import td_loss

QNetwork = load_trainer("dqn_atari.py").QNetwork


@dataclass
class Args:
    checkpoint: tyro.conf.Positional[str]
    """a trainer's checkpoint.pt with optimizer state (a dqn_atari.py one also gets the TD-loss comparison)"""
    steps: int = 300
    """gradient steps per run"""
    batch_size: int = 32


def denormal(t: torch.Tensor) -> int:
    return int(((t != 0) & (t.abs() < torch.finfo(torch.float32).tiny)).sum())


def denormal_moments(optimizer_state: dict) -> int:
    """Adam's first and second moments in the denormals, over all parameters of an optimizer's state_dict."""
    return sum(denormal(s[k]) for s in optimizer_state["state"].values() for k in ("exp_avg", "exp_avg_sq"))


def train(ckpt: dict, args: Args, flush: bool, bf16: bool) -> tuple[list[torch.Tensor], int, float]:
    """``args.steps`` gradient steps from the checkpoint: (the weights, denormal Adam moments at the end, seconds)."""
    nets = []
    for key in ("agent", "target"):
        net = QNetwork(ckpt["models"][key]["network.9.weight"].shape[0])
        net.load_state_dict(ckpt["models"][key])
        net.network.set_speed(channels_last=True, bf16=bf16)
        nets.append(net)
    q, target = nets
    optimizer = torch.optim.Adam(q.parameters(), lr=ckpt["args"]["learning_rate"], fused=True)
    optimizer.load_state_dict(copy.deepcopy(ckpt["optimizers"]["optimizer"]))  # each run from the same moments
    g = torch.Generator().manual_seed(0)
    torch.set_flush_denormal(flush)
    try:
        start = time.perf_counter()
        for _ in range(args.steps):
            B = args.batch_size
            frames = torch.randint(0, 256, (2, B, 4, 84, 84), dtype=torch.uint8, generator=g)
            batch = {"obs": frames[0], "next_obs": frames[1],
                     "actions": torch.randint(0, q.num_actions, (B,), generator=g),
                     "rewards": torch.randint(-1, 2, (B,), generator=g).float(), "dones": torch.zeros(B),
                     "discounts": torch.full((B,), 0.99)}  # fmt: skip
            loss, *_ = td_loss(q, target, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        seconds = time.perf_counter() - start
    finally:
        torch.set_flush_denormal(False)
    return [p.detach().clone() for p in q.parameters()], denormal_moments(optimizer.state_dict()), seconds


def adam_step_ms(state: dict, flush: bool, repeats: int = 30) -> float:
    """One fused Adam step on a copy of an optimizer's state_dict (random gradients, half of them 0), in ms."""
    states = [copy.deepcopy(state["state"][i]) for i in sorted(state["state"])]  # parameters with a state only
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s["exp_avg"].shape, generator=g) * 0.01) for s in states]
    optimizer = torch.optim.Adam(params, fused=True)
    group = {**state["param_groups"][0], "params": list(range(len(params))), "fused": True}
    optimizer.load_state_dict({"state": dict(enumerate(states)), "param_groups": [group]})
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * 1e-4 * (torch.rand(p.shape, generator=g) > 0.5)
    torch.set_flush_denormal(flush)
    try:
        optimizer.step()  # the first one allocates
        start = time.perf_counter()
        for _ in range(repeats):
            optimizer.step()
        return (time.perf_counter() - start) / repeats * 1e3
    finally:
        torch.set_flush_denormal(False)


def main(args: Args) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        report(args)
    finally:
        torch.set_num_threads(threads)


def report(args: Args) -> None:
    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    for name, state in ckpt["optimizers"].items():
        moments = sum(s["exp_avg"].numel() * 2 for s in state["state"].values())
        print(f"optimizer {name!r}, step {ckpt['global_step']:,}: {denormal_moments(state):,} of {moments:,} Adam "
              f"moments denormal; one fused Adam step {adam_step_ms(state, False):.2f} ms kept, "
              f"{adam_step_ms(state, True):.2f} ms flushed (one thread)")  # fmt: skip
    if "target" not in ckpt["models"]:
        return  # the TD-loss comparison needs a dqn_atari.py checkpoint
    at_start = denormal_moments(ckpt["optimizers"]["optimizer"])
    total = sum(p.numel() for p in ckpt["models"]["agent"].values())
    print(f"{args.checkpoint}: step {ckpt['global_step']:,}, {at_start:,} of {2 * total:,} Adam moments denormal; "
          f"{args.steps} gradient steps of batch {args.batch_size}, one thread")  # fmt: skip
    print("cnn      weights differing  max relative difference  denormal moments kept / flushed  "
          "seconds kept / flushed")
    for bf16 in (False, True):
        (kept, n_kept, s_kept), (flushed, n_flushed, s_flushed) = (train(ckpt, args, f, bf16) for f in (False, True))
        differ = sum(int((a != b).sum()) for a, b in zip(kept, flushed))
        rel = max(float(((a - b).abs() / b.abs().clamp(min=1e-30)).max()) for a, b in zip(kept, flushed))
        print(f"{'bf16' if bf16 else 'float32':8} {differ:>8,} of {total:,}  {rel:>23.2g}  {n_kept:>15,} / "
              f"{n_flushed:<15,}  {s_kept:>8.1f} / {s_flushed:.1f}")  # fmt: skip


if __name__ == "__main__":
    main(tyro.cli(Args))
