"""rlfast/_omp.py: importing rlfast before torch shortens how long torch's idle OpenMP threads spin, unless the
user chose (GOMP_SPINCOUNT, OMP_WAIT_POLICY, RLFAST_OMP_DEFAULTS=0) or torch was loaded first."""

import os
import subprocess
import sys

import pytest

PROBE = "import os, {first}; import rlfast._omp as o; print(os.environ.get('GOMP_SPINCOUNT')); print(o.SPIN)"


def probe(first: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
                                                              "RLFAST_OMP_DEFAULTS")}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", PROBE.format(first=first)], env={**clean, **env},
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_rlfast_first_sets_a_short_spin():
    assert probe("rlfast") == ["3000", "GOMP_SPINCOUNT=3000 (rlfast)"]


@pytest.mark.parametrize("name, value", [("GOMP_SPINCOUNT", "123"), ("OMP_WAIT_POLICY", "PASSIVE")])
def test_the_users_setting_is_kept(name, value):
    spin, says = probe("rlfast", **{name: value})
    assert says == f"{name}={value} (yours)"
    assert spin == (value if name == "GOMP_SPINCOUNT" else "None")


def test_opt_out_and_torch_first_change_nothing():
    assert probe("rlfast", RLFAST_OMP_DEFAULTS="0") == ["None", "libgomp's (RLFAST_OMP_DEFAULTS=0)"]
    assert probe("torch") == ["None", "libgomp's (torch was imported before rlfast)"]
