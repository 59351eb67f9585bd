"""How long torch's idle OpenMP threads spin: set before torch loads its OpenMP library, so imported first.

torch's CPU ops run on GNU OpenMP (libgomp), whose worker threads busy-wait after each parallel op for the
next (300,000 polls by default) before they sleep. In a trainer the op after the policy's forward is the
pool's ``send``: the pool's threads then step the envs on cores where torch's workers still spin, and on a
2-core machine the envs stepped at half speed (Pong: 306 against 616 ms a rollout). A short spin
(``GOMP_SPINCOUNT=3000``) keeps the forward as fast and gives the cores back to the pool
(``benchmarks/bench_omp_spin.py`` measures it; docs/performance/cpu.md has the table).

libgomp reads its variables once, when it is loaded (by ``import torch``), so this only works when rlfast is
imported before torch; the trainers in ``scripts/`` do. Nothing is changed when the user set
``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``, or set ``RLFAST_OMP_DEFAULTS=0``.
"""

import os
import sys

SPIN_COUNT = "3000"
"""libgomp polls before an idle worker sleeps (its default: 300,000)"""


def set_spin_default() -> str:
    """set ``GOMP_SPINCOUNT`` where it can still take effect; returns what applies, for the run's header"""
    if os.environ.get("RLFAST_OMP_DEFAULTS", "1") == "0":
        return "libgomp's (RLFAST_OMP_DEFAULTS=0)"
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        if name in os.environ:
            return f"{name}={os.environ[name]} (yours)"
    if "torch" in sys.modules:
        return "libgomp's (torch was imported before rlfast)"
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    return f"GOMP_SPINCOUNT={SPIN_COUNT} (rlfast)"


SPIN = set_spin_default()
"""what decides how long torch's idle OpenMP threads spin in this process"""
