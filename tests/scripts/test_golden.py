"""Golden traces: a seeded CPU run of each trainer gives the same trace as the run recorded in
``tests/scripts/golden/`` (written before the trainers moved into the shared run layer, commit message
"golden traces", so that refactors of the scripts are proven to change nothing).

A trace is a few iterations on one torch thread: every ``losses/*`` scalar and the learning rate per
iteration, every episode's end step, length and return, and for each tensor of the final checkpoint (models,
optimizer state, normalizer statistics) its sum and sum of absolute values.

What is compared exactly: the command, the step and iteration counts, every episode's end step and length
(the envs are C++ and deterministic; the sampled actions decide them), and the returns of the discrete-action
cases (integer rewards: one other action changes them). That is what a refactor must keep and what no
floating-point kernel changes in runs this short.

What is compared with a tolerance, and why: another x86-64 CPU (or the same one with other
``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` / ``MKL_ENABLE_INSTRUCTIONS``) runs the convolutions,
matmuls and reductions with other vector kernels, which round differently in the last bits, and training
amplifies those bits. Each quantity is measured at its own conditioning (``scaled_errors``):
- a tensor's sum as |difference| / (sum of |x|): the rounding error of a sum is bounded by its sum of absolute
  values, not by the sum, which cancels (conv1's weights sum to -6.49 out of 576.6: the old relative test of
  the sum failed on an Intel Xeon at 2.5e-4, which is 2.8e-6 of the sum of |x|);
- a tensor's sum of |x|, the scalars (losses, learning rate) and continuous returns relatively, the scalars
  against at least ``SCALAR_FLOOR`` (a policy loss is a mean of terms of both signs and passes near zero).
The errors are grouped (``group``: each scalar tag, returns, weights, optimizer state) and each group's
tolerance is ``MARGIN`` (10x) times its spread, at least ``FLOOR``. The spread is the largest error seen over
every combination of ATen / oneDNN / MKL instruction sets of the CPUs measured so far, recorded in each
golden file under ``"spread"``: ``python3 tests/scripts/test_golden.py spread --update`` runs each case under
each combination this CPU offers, prints each group's spread beside its tolerance and widens the record.
Measured so far: the recording CPU (AMD Zen 5, AVX-512) against an AMD EPYC with AVX2 (8 combinations). The
``ppo_atari_lstm`` case (recorded from ``ppo_atari.py --recurrent lstm`` before the recurrent PPO became its own
script) on an AMD EPYC with AVX-512 and AVX512-BF16 (36 combinations), its record widened to ``ppo_atari``'s group
by group: the same CNN, and no AMX kernel has run it yet. The
Atari cases spread most (optimizer state 5.7e-3, weights 3.5e-4: Adam normalizes Breakout's tiny early
gradients, so their last bits move whole updates), the MLP cases least (weights < 1e-6).
``test_a_clip_coefficient_change_fails_the_trace`` proves the tolerances still catch a one-line change of the
loss (the clip coefficient 5% up, as 0.2 -> 0.21): measured, it moves ppo 2000x its tolerance, ppo_atari 171x,
ppo_continuous 46x (its clip never binds in 2 epochs; the value clip does).

To re-record after a change that is meant to change the numbers (say why in the commit):
``RLFAST_RECORD_GOLDEN=1 python3 -m pytest tests/scripts/test_golden.py`` (keeps the recorded spread; measure
it again with ``spread --update`` on a CPU at hand).
"""

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
COMMON = ["--no-cuda", "--torch-threads", "1", "--save-minutes", "0", "--runs-dir", "runs", "--seed", "3"]
CASES = {
    "ppo": ["ppo.py", "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "768"],
    "ppo_atari": ["ppo_atari.py", "--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "64",
                  "--total-timesteps", "512"],
    "ppo_atari_lstm": ["ppo_atari_lstm.py", "--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "64",
                       "--num-minibatches", "2", "--total-timesteps", "512"],
    "ppo_continuous": ["ppo_continuous.py", "--env-id", "Hopper-v5", "--num-envs", "2", "--num-steps", "64",
                       "--num-minibatches", "4", "--update-epochs", "2", "--total-timesteps", "384"],
}  # fmt: skip
FP32 = ["--no-auto-speed"]
"""the recorded path, float32 NCHW, on every CPU, for the CNN trainers (not part of the recorded command: it was
the default then; the others have no CNN speed flags)"""
DISCRETE = {"ppo", "ppo_atari", "ppo_atari_lstm"}  # integer rewards: returns compared exactly
CLIP_COEF = {"ppo": 0.2, "ppo_atari": 0.1, "ppo_continuous": 0.2}  # the scripts' defaults

MARGIN = 10  # tolerance = MARGIN x the measured spread of the quantity's group
FLOOR = 1e-5  # ... and at least this, for groups that agreed to the last float32 bit on every kernel measured
SCALAR_FLOOR = 1e-3  # scalars are compared relative to max(|recorded|, this): policy losses pass near zero


def tensor_sums(tree, prefix=""):
    """``{path: [sum, sum of abs]}`` for every floating/integer tensor in a nested dict/list."""
    out = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(tensor_sums(value, f"{prefix}{key}/"))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            out.update(tensor_sums(value, f"{prefix}{i}/"))
    elif isinstance(tree, torch.Tensor) and tree.dtype != torch.bool:
        t = tree.double()
        out[prefix.rstrip("/")] = [t.sum().item(), t.abs().sum().item()]
    return out


def trace(case: str, workdir: Path, env: Optional[dict] = None, extra: tuple[str, ...] = (), run=None) -> dict:
    """Runs one case in ``workdir`` (its own ``runs/``), with ``env`` added to the environment and ``extra``
    flags appended, and returns its trace (see the module docstring). ``run``: the tests' ``run`` fixture (a fork
    of a process that has the scripts' imports loaded, with the same environment), else a new interpreter."""
    script, *args = CASES[case]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    fp32 = FP32 if script in ("ppo_atari.py", "ppo_atari_lstm.py") else []
    flags = [*args, *COMMON, *fp32, *extra]
    if run is not None:
        proc = run(script, *flags, cwd=workdir, env=env, timeout=300)
    else:
        cmd = [sys.executable, str(ROOT / "scripts" / script), *flags]
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (workdir / "runs").iterdir()
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = sorted(t for t in acc.Tags()["scalars"] if t.startswith("losses/") or t == "charts/learning_rate")
    scalars = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags}
    episodes = [[r.step, r.value, n.value] for r, n in
                zip(acc.Scalars("charts/episodic_return"), acc.Scalars("charts/episodic_length"))]  # fmt: skip
    ckpt = load_checkpoint(run_dir / "checkpoint.pt")
    state = {k: ckpt[k] for k in ("models", "optimizers", "normalizers")}
    return {
        "command": [script, *args, *COMMON],
        "global_step": ckpt["global_step"],
        "iteration": ckpt["iteration"],
        "scalars": scalars,
        "episodes": episodes,
        "checkpoint": tensor_sums(state),
    }


def exact_mismatches(case: str, got: dict, want: dict) -> list[str]:
    """What differs among the quantities compared exactly (empty: nothing)."""
    out = []
    if (got["global_step"], got["iteration"]) != (want["global_step"], want["iteration"]):
        out.append(f"step/iteration {got['global_step'], got['iteration']} != {want['global_step'], want['iteration']}")
    ends = [(s, n) for s, _, n in got["episodes"]]
    if ends != [(s, n) for s, _, n in want["episodes"]]:
        out.append(f"episodes (end step, length) {ends} != {[(s, n) for s, _, n in want['episodes']]}")
    elif case in DISCRETE and [r for _, r, _ in got["episodes"]] != [r for _, r, _ in want["episodes"]]:
        out.append(f"episode returns {[r for _, r, _ in got['episodes']]} != {[r for _, r, _ in want['episodes']]}")
    if sorted(got["scalars"]) != sorted(want["scalars"]):
        out.append(f"scalar tags {sorted(got['scalars'])} != {sorted(want['scalars'])}")
    else:
        for tag, rows in want["scalars"].items():
            steps, want_steps = [s for s, _ in got["scalars"][tag]], [s for s, _ in rows]
            if steps != want_steps:
                out.append(f"{tag}: logged at steps {steps} != {want_steps}")
    if sorted(got["checkpoint"]) != sorted(want["checkpoint"]):
        out.append(f"checkpoint tensors {sorted(set(got['checkpoint']) ^ set(want['checkpoint']))} differ")
    return out


def group(quantity: str) -> str:
    """The tolerance group of a quantity: a scalar's tag, "returns", or the checkpoint's "weights" (models,
    normalizers) or "optimizer" (Adam's moments: recent gradients, the least well-conditioned)."""
    if quantity.startswith("episode "):
        return "returns"
    if quantity.startswith(("models/", "normalizers/")):
        return "weights"
    if quantity.startswith("optimizers/"):
        return "optimizer"
    return quantity.split("@")[0]


def scaled_errors(case: str, got: dict, want: dict) -> dict[str, float]:
    """``{quantity: error}`` for every quantity compared with a tolerance: its difference from the recorded
    value at the quantity's conditioning (module docstring), to be compared with ``tolerance(want, group)``.
    Call only when ``exact_mismatches`` is empty (the same tags, tensors and episodes)."""
    out = {}
    for tag, rows in want["scalars"].items():
        for (step, w), (_, v) in zip(rows, got["scalars"][tag]):
            if not (math.isnan(v) and math.isnan(w)):
                out[f"{tag}@{step}"] = abs(v - w) / max(abs(w), SCALAR_FLOOR)
    if case not in DISCRETE:
        for i, ((_, r, _), (_, wr, _)) in enumerate(zip(got["episodes"], want["episodes"])):
            out[f"episode {i} return"] = abs(r - wr) / max(abs(wr), 1.0)
    for name, (wsum, wabs) in want["checkpoint"].items():
        gsum, gabs = got["checkpoint"][name]
        out[f"{name} sum"] = abs(gsum - wsum) / wabs if wabs else abs(gsum)
        out[f"{name} abs_sum"] = abs(gabs - wabs) / wabs if wabs else gabs
    return out


def tolerance(want: dict, group_name: str) -> float:
    """``MARGIN`` times the spread recorded for this group of the trace, at least ``FLOOR``."""
    return max(MARGIN * want["spread"].get(group_name, 0.0), FLOOR)


def failures(case: str, got: dict, want: dict) -> list[str]:
    """Every way ``got`` is not the recorded trace ``want`` (empty: it is)."""
    if exact := exact_mismatches(case, got, want):
        return exact
    return [f"{q}: error {e:.3g} > tolerance {tolerance(want, group(q)):.3g}"
            for q, e in scaled_errors(case, got, want).items() if not e <= tolerance(want, group(q))]  # fmt: skip


def recorded(case: str) -> dict:
    return json.loads((GOLDEN / f"{case}.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_trainer_matches_its_golden_trace(case, tmp_path, run):
    got = trace(case, tmp_path, run=run)
    if os.environ.get("RLFAST_RECORD_GOLDEN") == "1":
        spread = recorded(case).get("spread", {}) if (GOLDEN / f"{case}.json").exists() else {}
        write_golden(case, {**got, "spread": spread})
        pytest.skip(f"recorded {case}.json (its spread kept: measure it again, see the module docstring)")
    want = recorded(case)
    assert got["command"] == want["command"], "the case changed: re-record it (see the module docstring)"
    assert got["episodes"], "a trace without episodes checks no returns: lengthen the case"
    assert failures(case, got, want) == []


@pytest.mark.parametrize("case", ["ppo", "ppo_atari", "ppo_continuous"])
def test_a_clip_coefficient_change_fails_the_trace(case, tmp_path, run):
    # A flag standing for a one-line change of the loss: the clip range 5% off the default (0.2 -> 0.21).
    got, want = trace(case, tmp_path, extra=("--clip-coef", f"{CLIP_COEF[case] * 1.05:g}"), run=run), recorded(case)
    assert not exact_mismatches(case, got, want), "too coarse: the change should pass the exact checks"
    worst = max(e / tolerance(want, group(q)) for q, e in scaled_errors(case, got, want).items())
    assert worst > MARGIN, f"a 5% change of the clip coefficient moves the trace only {worst:.1f}x its tolerance"


BF16_FIRST_UPDATE = 0.05
"""The bfloat16 path against the float32 trace, first iteration only (later ones drift apart: training amplifies
rounding, the point of the float32 traces): measured 0.0103 at most (the policy loss, a mean of terms of both
signs, relative to max(|loss|, SCALAR_FLOOR)) under AMX and under AVX512-BF16 kernels (ONEDNN_MAX_CPU_ISA caps),
value loss 0.0017, entropy 1e-6; a bf16 rounding is 2^-9 = 0.2% of a value, a few of them deep. On a CPU without
native bf16 the path rounds in float32 kernels (``FrameNet.round_bf16``): measured 0.0071 (the policy loss), value
loss 0.0012, explained variance 0.011 on the AVX2 AMD EPYC."""


def test_bf16_path_makes_the_float32_traces_first_update(tmp_path, run):
    # the same run with the CNN in bfloat16 and channels-last: the same rollout, losses within bf16 rounding
    got, want = trace("ppo_atari", tmp_path, extra=("--bf16", "--channels-last"), run=run), recorded("ppo_atari")
    structure = [m for m in exact_mismatches("ppo_atari", got, want) if not m.startswith("episode")]
    assert structure == []  # steps, tags, tensors (the episodes too, unless a rounding flipped a sampled action)
    first = min(step for rows in want["scalars"].values() for step, _ in rows)
    errors = {q: e for q, e in scaled_errors("ppo_atari", got, want).items() if q.endswith(f"@{first}")}
    assert errors and max(errors.values()) <= BF16_FIRST_UPDATE, errors
    assert max(errors.values()) > 0, "bf16 left no trace: was the bfloat16 path taken at all?"


# ---- the spread across vector kernels: python3 tests/scripts/test_golden.py spread [--update] ----


def write_golden(case: str, trace_: dict) -> None:
    GOLDEN.mkdir(exist_ok=True)
    (GOLDEN / f"{case}.json").write_text(json.dumps(trace_, indent=1) + "\n")


def cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        return set(next(line for line in f if line.startswith("flags")).split(":", 1)[1].split())


def kernel_settings() -> list[dict[str, str]]:
    """Every combination of ATen / oneDNN / MKL instruction-set caps this CPU can run (a cap above the CPU
    means nothing to oneDNN and MKL, and ATen does not check it: it would run instructions the CPU lacks)."""
    flags = cpu_flags()
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    aten = ["default", "avx2"] + (["avx512"] if avx512 else [])
    onednn = ["SSE41", "AVX2"] + (["AVX512_CORE"] if avx512 else [])
    onednn += ["AVX512_CORE_BF16"] if avx512 and "avx512_bf16" in flags else []
    onednn += ["AVX512_CORE_AMX"] if avx512 and "amx_tile" in flags else []
    mkl = ["SSE4_2", "AVX2"] + (["AVX512"] if avx512 else [])
    combos = itertools.product(aten, onednn, mkl)
    return [{"ATEN_CPU_CAPABILITY": a, "ONEDNN_MAX_CPU_ISA": o, "MKL_ENABLE_INSTRUCTIONS": m} for a, o, m in combos]


def spread(jobs: int, update: bool, cases: list[str]) -> None:
    """Runs every case under every kernel setting of this CPU, prints each group's largest error against the
    recorded trace (the spread) beside its tolerance, and with ``update`` raises each golden file's recorded
    spread to it (so the record is the widest spread of every CPU it was measured on)."""
    settings = kernel_settings()
    print(f"{len(settings)} kernel settings x {len(cases)} cases on this CPU (ATen: "
          f"{torch.backends.cpu.get_cpu_capability()}), {jobs} at a time", flush=True)  # fmt: skip

    def one(run: tuple[str, dict]) -> tuple[str, dict, dict]:
        case, setting = run
        with tempfile.TemporaryDirectory() as tmp:
            return case, setting, trace(case, Path(tmp), env=setting)

    measured = {case: {} for case in cases}  # case -> group -> (error, quantity, setting)
    failed = False
    with ThreadPoolExecutor(jobs) as pool:
        for case, setting, got in pool.map(one, itertools.product(sorted(cases), settings)):
            want, where = recorded(case), " ".join(f"{k}={v}" for k, v in setting.items())
            if exact := exact_mismatches(case, got, want):
                print(f"{case} [{where}]: an exact quantity differs: {exact}")
                failed = True
                continue
            for quantity, e in scaled_errors(case, got, want).items():
                if e >= measured[case].get(group(quantity), (-1.0,))[0]:
                    measured[case][group(quantity)] = (e, quantity, where)
    for case, groups in measured.items():
        want = recorded(case)
        print(f"{case}:")
        for name, (e, quantity, where) in sorted(groups.items()):
            print(f"  {name:28s} spread {e:9.3g}  tolerance {tolerance(want, name):9.3g}  ({quantity} at {where})")
        if update and not failed:
            wider = {name: max(e, want.get("spread", {}).get(name, 0.0)) for name, (e, _, _) in groups.items()}
            write_golden(case, {**want, "spread": dict(sorted(wider.items()))})
    if failed:
        sys.exit("some exact quantities differ: the traces depend on the CPU beyond rounding")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="measure the golden traces' spread across vector kernels")
    parser.add_argument("command", choices=["spread"])
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), help="cases run at once (one core each)")
    parser.add_argument("--update", action="store_true", help="widen the spread recorded in the golden files")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES), help="these cases only")
    cli = parser.parse_args()
    spread(cli.jobs, cli.update, cli.cases)
