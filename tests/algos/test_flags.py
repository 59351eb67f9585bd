"""rlfast/algos/flags.py: ranges declared with the fields, checked once, kept by redeclared defaults."""

import math
from dataclasses import dataclass
from typing import Optional

from rlfast.algos.flags import Flags, Range, bounded


@dataclass
class Base(Flags):
    steps: int = bounded(8, low=1)
    rate: float = bounded(0.1, low=0, low_open=True)
    gamma: float = bounded(0.99, low=0, high=1)
    seed: int = bounded(1, low=0, high=2**32, high_open=True, high_text="2**32")
    threads: Optional[int] = bounded(None, low=1, note="or left out")
    target: Optional[float] = bounded(None)
    plain: int = -5  # no range: never checked


@dataclass
class Script(Base):
    steps: int = 0  # a redeclared default keeps its range

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.steps > 100:
            problems.append("--steps is too many for --rate")
        return problems


def test_each_declared_range_is_checked_with_one_sentence():
    assert Base().validate() == []
    assert Script().validate() == ["--steps must be >= 1, got 0"]
    bad = Base(steps=0, rate=0.0, gamma=1.5, seed=-1, threads=0, target=math.inf).validate()
    assert bad == ["--steps must be >= 1, got 0", "--rate must be > 0, got 0.0", "--gamma must be in [0, 1], got 1.5",
                   "--seed must be in [0, 2**32), got -1", "--threads must be >= 1 (or left out), got 0",
                   "--target must be a finite number, got inf"]  # fmt: skip
    assert Script(steps=200).validate() == ["--steps is too many for --rate"]


def test_non_finite_floats_never_hold():
    assert not Range(low=0).holds(math.nan) and not Range(low=0).holds(math.inf) and Range(low=0).holds(3.0)
    assert str(Range(high=1, high_open=True)) == "< 1" and str(Range(low=-10, high=2)) == "in [-10, 2]"
