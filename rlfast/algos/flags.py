"""A trainer's flags as dataclasses, each value's valid range stated where the field is declared.

    @dataclass
    class PPOArgs(Flags):
        num_steps: int = bounded(128, low=1)
        \"\"\"steps per env per rollout\"\"\"
        gamma: float = bounded(0.99, low=0, high=1)

``Flags.validate()`` checks every declared range (also of fields a subclass redeclares with another
default: the range stays with the name) and returns one sentence per problem naming the flag, e.g.
``--num-steps must be >= 1, got 0``; a class adds the checks that tie several flags together by
extending ``validate``. Configs compose by inheritance: a script's ``Args(PPOArgs, RunArgs)``. A renamed
field keeps its old name in ``RENAMED`` (old -> new), which presets, checkpoints' args and command lines
still use (rlfast/algos/config.py maps them); a field added with a default that would change what an older
run does names that run's value in ``ADDED``.
"""

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Optional


@dataclass(frozen=True)
class Range:
    """``low <= value <= high`` (either end open or absent); floats must also be finite."""

    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    high_text: Optional[str] = None
    """how the message writes ``high`` (e.g. "2**32")"""
    note: str = ""
    """added to the message in parentheses, e.g. "0: none", "or left out\""""

    def holds(self, value: Any) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low = None if self.low is None else f"{self.low:g}"
        high = self.high_text or (None if self.high is None else f"{self.high:g}")
        if low is not None and high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        if high is not None:
            return f"{'<' if self.high_open else '<='} {high}"
        return "a finite number"


def bounded(default: Any, **bounds: Any) -> Any:
    """A dataclass field with ``default`` and the ``Range(**bounds)`` its values must keep."""
    return dataclasses.field(default=default, metadata={"range": Range(**bounds)})


def declared_ranges(cls: type) -> dict[str, Range]:
    """Every field's range, from the class that declared it (a redeclared default keeps it)."""
    ranges: dict[str, Range] = {}
    for klass in reversed(cls.__mro__):
        for name, f in getattr(klass, "__dataclass_fields__", {}).items():
            if "range" in f.metadata:
                ranges[name] = f.metadata["range"]
    return ranges


class Flags:
    """Base of the flag dataclasses: ``validate`` checks the declared ranges. Subclasses extend ``validate``
    (calling ``super().validate()`` first), so that composed configs check everything once."""

    RENAMED: ClassVar[dict[str, str]] = {}
    """old field name -> its new name, for presets, checkpoints and command lines written before a rename"""
    ADDED: ClassVar[dict[str, Any]] = {}
    """a field added later -> the value that the args of a checkpoint written before it imply (when it differs
    from the new default: a resumed run keeps doing what it did)"""

    def validate(self) -> list[str]:
        """What is wrong with these values: one sentence per problem, naming the flag."""
        problems = []
        for name, r in declared_ranges(type(self)).items():
            value = getattr(self, name)
            if value is None or isinstance(value, bool) or r.holds(value):
                continue
            note = f" ({r.note})" if r.note else ""
            problems.append(f"--{name.replace('_', '-')} must be {r}{note}, got {value}")
        return problems
