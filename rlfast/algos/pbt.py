"""Population-based training (PBT) for APPO: Sample Factory's rules (Petrenko et al. 2020, "Sample Factory: Egocentric
3D Control from Pixels at 100000 FPS", section 3.4, and its ``sample_factory/pbt/population_based_training.py``),
which follow Jaderberg et al. 2017 ("Population Based Training of Neural Networks") and 2019 (Capture the Flag).

``--pbt-population N`` trains N members in one run, each on its own share of the envs with its own learner
(weights, optimizer state, hyperparameters). A member takes a PBT step every ``--pbt-period`` env steps it has
learned from, once it has learned from ``--pbt-start``:

1. Rank: every member's objective is the mean raw return of its last ``--pbt-objective-episodes`` episodes (Sample
   Factory's ``true_objective``, averaged over its ``--stats_avg`` 100). While a member has none, the step is
   skipped (the period starts again), as Sample Factory's.
2. Exchange: a member among the best ``ceil(--pbt-replace-fraction x N)`` is left alone (no exchange, no mutation).
   One among the worst as many picks one of the best at random and takes its weights, optimizer state and
   hyperparameters when their objectives differ by more than ``--pbt-replace-gap-absolute`` and by more than
   ``--pbt-replace-gap`` of the better one's (relative); else it keeps its own. Those in between keep their own.
3. Mutate: each of the hyperparameters it now has is perturbed with probability ``--pbt-mutation-rate``: one that
   differs from its default goes back to the default with probability 0.01; otherwise a float is multiplied or
   divided (a coin toss) by a factor drawn uniformly from ``[--pbt-perturb-min, --pbt-perturb-max]``, and gamma's
   ``1 - gamma`` by one from [1.01, 1.2] (so gamma stays below 1). Member 0 is never mutated: it is the reference
   (it may still be replaced, and then takes the better member's hyperparameters as they are).

At the start member 0 has the defaults (the flags) and members 1..N-1 mutated copies of them (each value with
probability ``--pbt-mutation-rate``), then ``--pbt-set K:name=value`` sets any member's start values.

The hyperparameters (``HYPERPARAMS``) are Sample Factory's, as rlfast names them: the learning rate, the entropy and
value loss coefficients, the gradient-norm clip and the PPO clip ratio, and gamma with ``--pbt-optimize-gamma``.
Sample Factory also tunes ``ppo_clip_value``; rlfast's APPO clips no value loss, so that one is not here.

This module holds the rules as pure functions (``rank``, ``choose_source``, ``perturb_value``, ``mutate``) and the
population's bookkeeping (``Population``, checkpointed with the run); ``scripts/appo.py`` holds the members.
"""

import copy
import dataclasses
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import torch

from rlfast.algos.flags import Flags, bounded

HYPERPARAMS = ("learning_rate", "ent_coef", "vf_coef", "max_grad_norm", "clip_coef")
"""what PBT tunes (Sample Factory's learning_rate, exploration_loss_coeff, value_loss_coeff, max_grad_norm and
ppo_clip_ratio); gamma too with --pbt-optimize-gamma"""
RESET_TO_DEFAULT = 0.01
"""probability that a mutation sets a hyperparameter that differs from its default back to it (Sample Factory's)"""
GAMMA_PERTURB = (1.01, 1.2)
"""the range of the factor that perturbs 1 - gamma (Sample Factory's ``perturb_exponential_decay``)"""
EPS = 1e-8
"""Sample Factory's EPS in the relative reward gap"""


@dataclass
class PBTArgs(Flags):
    """Population-based training's flags (the defaults are Sample Factory's ``--pbt_*`` defaults)."""

    pbt_population: int = bounded(1, low=1, note="1: no PBT")
    """members of the population (Sample Factory's --num_policies with --with_pbt): each trains its own network on
    --num-envs / N of the envs with its own learner; 1: plain APPO"""
    pbt_period: int = bounded(5_000_000, low=1)
    """env steps a member learns from between its PBT steps (Sample Factory's --pbt_period_env_steps)"""
    pbt_start: int = bounded(20_000_000, low=0)
    """env steps a member learns from before its first PBT step (Sample Factory's --pbt_start_mutation)"""
    pbt_replace_fraction: float = bounded(0.3, low=0, high=0.5, low_open=True)
    """the best and the worst ceil(fraction x N) members: the worst may take the weights of one of the best"""
    pbt_mutation_rate: float = bounded(0.15, low=0, high=1)
    """probability that a PBT step perturbs each hyperparameter"""
    pbt_replace_gap: float = bounded(0.1, low=0)
    """a worse member takes a better one's weights only if their objectives differ by more than this fraction of
    the better one's"""
    pbt_replace_gap_absolute: float = bounded(1e-6, low=0)
    """... and by more than this"""
    pbt_perturb_min: float = bounded(1.1, low=1)
    """a perturbed hyperparameter is multiplied or divided by a factor drawn from [min, max]"""
    pbt_perturb_max: float = bounded(1.5, low=1)
    """(see --pbt-perturb-min)"""
    pbt_optimize_gamma: bool = False
    """also tune gamma (perturbing 1 - gamma by a factor in [1.01, 1.2])"""
    pbt_objective_episodes: int = bounded(100, low=1)
    """a member's objective: the mean raw return of its last this many episodes (Sample Factory's --stats_avg)"""
    pbt_set: tuple[str, ...] = ()
    """start values for chosen members, as K:name=value (e.g. 2:learning_rate=1e-7), after the initial mutation"""

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.pbt_perturb_min > self.pbt_perturb_max:
            problems.append(f"--pbt-perturb-min {self.pbt_perturb_min} is above --pbt-perturb-max "
                            f"{self.pbt_perturb_max}")  # fmt: skip
        for item in self.pbt_set:
            try:
                parse_set(item, self.pbt_population, tuned(self))
            except ValueError as e:
                problems.append(f"--pbt-set {item}: {e}")
        return problems


def tuned(args: PBTArgs) -> tuple[str, ...]:
    """The hyperparameters this population tunes."""
    return HYPERPARAMS + ("gamma",) * args.pbt_optimize_gamma


def parse_set(item: str, population: int, names: Sequence[str]) -> tuple[int, str, float]:
    """``"K:name=value"`` -> (K, name, value); ValueError naming what is wrong."""
    member, sep, rest = item.partition(":")
    name, eq, value = rest.partition("=")
    if not (sep and eq and member.strip().isdigit()):
        raise ValueError("must be K:name=value (e.g. 2:learning_rate=1e-7)")
    k, name = int(member), name.strip()
    if k >= population:
        raise ValueError(f"member {k} is not in a population of {population} (members 0..{population - 1})")
    if name not in names:
        raise ValueError(f"{name!r} is not a tuned hyperparameter ({', '.join(names)})")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value.strip()!r} is not a number") from None
    if not math.isfinite(number) or number <= 0 or (name == "gamma" and number > 1):
        raise ValueError(f"{name} must be {'in (0, 1]' if name == 'gamma' else '> 0'}, got {value.strip()}")
    return k, name, number


# The rules, as pure functions of the objectives, the hyperparameters and a random.Random.


def rank(objectives: Sequence[float]) -> list[int]:
    """Members from the best objective to the worst (ties: the lower index first)."""
    return sorted(range(len(objectives)), key=lambda k: (-objectives[k], k))


def choose_source(member: int, objectives: Sequence[float], fraction: float, gap: float, gap_absolute: float,
                  rng: random.Random) -> Optional[int]:  # fmt: skip
    """The member whose weights and hyperparameters ``member`` takes at its PBT step (itself: it keeps its own and
    only mutates them), or None when it is among the best ``ceil(fraction x N)`` (left alone)."""
    order = rank(objectives)
    count = math.ceil(fraction * len(objectives))
    best, worst = order[:count], order[-count:]
    if member in best:
        return None
    if member not in worst:
        return member
    candidate = rng.choice(best)
    delta = objectives[candidate] - objectives[member]
    relative = abs(delta / (objectives[candidate] + EPS))
    return candidate if abs(delta) > gap_absolute and relative > gap else member


def perturb_value(name: str, value: float, default: float, rng: random.Random, low: float, high: float) -> float:
    """One hyperparameter perturbed (the caller has tossed the --pbt-mutation-rate coin): back to ``default`` with
    probability 0.01 when it differs; gamma's 1 - gamma, any other value, multiplied or divided (a coin toss) by a
    factor from [1.01, 1.2] (gamma) or [low, high]."""
    if value != default and rng.random() < RESET_TO_DEFAULT:
        return default
    if name == "gamma":
        factor = rng.uniform(*GAMMA_PERTURB)
        rest = 1.0 - value
        return 1.0 - max(rest / factor if rng.random() < 0.5 else rest * factor, EPS)
    factor = rng.uniform(low, high)
    return value / factor if rng.random() < 0.5 else value * factor


def mutate(hparams: Mapping[str, float], defaults: Mapping[str, float], rng: random.Random, rate: float, low: float,
           high: float) -> dict[str, float]:  # fmt: skip
    """A copy of ``hparams`` with each value perturbed (``perturb_value``) with probability ``rate``."""
    out = dict(hparams)
    for name in hparams:  # in a fixed order: the draws, and so a seed's run, repeat
        if rng.random() < rate:
            out[name] = perturb_value(name, out[name], defaults[name], rng, low, high)
    return out


@dataclass
class Step:
    """What one member's PBT step did."""

    member: int
    source: Optional[int]
    """whose weights and hyperparameters it took (itself: its own; None: left alone, among the best)"""
    objectives: list[float]
    before: dict[str, float]
    after: dict[str, float]

    @property
    def replaced(self) -> bool:
        return self.source is not None and self.source != self.member

    def describe(self) -> str:
        o = self.objectives
        if self.source is None:
            return f"pbt: policy {self.member} ({o[self.member]:.4g}) is among the best: unchanged"
        head = (f"pbt: policy {self.member} ({o[self.member]:.4g}) takes policy {self.source}'s weights "
                f"({o[self.source]:.4g})" if self.replaced else f"pbt: policy {self.member} ({o[self.member]:.4g}) "
                "keeps its weights")  # fmt: skip
        changes = [f"{k} {self.before[k]:.4g} -> {v:.4g}" for k, v in self.after.items() if v != self.before[k]]
        return f"{head}; {', '.join(changes) if changes else 'no hyperparameter changed'}"


class Population:
    """The population's bookkeeping: each member's hyperparameters, env steps learned from, recent episode returns
    and last PBT step, and the random draws of the rules; ``state_dict`` / ``load_state_dict`` for the checkpoint."""

    def __init__(self, args: PBTArgs, defaults: Mapping[str, float], seed: int) -> None:
        self.args, self.defaults = args, dict(defaults)
        n = args.pbt_population
        self.rng = random.Random(seed)
        self.hparams = [dict(self.defaults)] + [self._mutate(self.defaults) for _ in range(1, n)]
        for item in args.pbt_set:
            k, name, value = parse_set(item, n, tuned(args))
            self.hparams[k][name] = value
        self.steps = [0] * n
        """env steps each member has learned from"""
        self.last_step = [0] * n
        """each member's ``steps`` at its last PBT step"""
        self.returns: list[deque] = [deque(maxlen=args.pbt_objective_episodes) for _ in range(n)]
        self.replacements = 0

    def _mutate(self, hparams: Mapping[str, float]) -> dict[str, float]:
        return mutate(hparams, self.defaults, self.rng, self.args.pbt_mutation_rate, self.args.pbt_perturb_min,
                      self.args.pbt_perturb_max)  # fmt: skip

    def record(self, member: int, returns: Sequence[float]) -> None:
        """The raw returns of episodes ``member`` finished."""
        self.returns[member].extend(float(r) for r in returns)

    def objective(self, member: int) -> Optional[float]:
        """The mean of its recent returns (None: no episode yet)."""
        r = self.returns[member]
        return sum(r) / len(r) if r else None

    def learned(self, member: int, steps: int) -> Optional[Step]:
        """``member`` has learned from ``steps`` more env steps: its PBT step if one is due (None otherwise, or while
        a member has no episode yet)."""
        args = self.args
        self.steps[member] += steps
        if self.steps[member] < args.pbt_start or self.steps[member] - self.last_step[member] < args.pbt_period:
            return None
        self.last_step[member] = self.steps[member]
        objectives = [self.objective(k) for k in range(len(self.steps))]
        if any(o is None for o in objectives):
            return None
        source = choose_source(member, objectives, args.pbt_replace_fraction, args.pbt_replace_gap,
                               args.pbt_replace_gap_absolute, self.rng)  # fmt: skip
        before = dict(self.hparams[member])
        if source is not None:
            taken = self.hparams[source]
            self.hparams[member] = dict(taken) if member == 0 else self._mutate(taken)
            self.replacements += source != member
        return Step(member, source, objectives, before, dict(self.hparams[member]))

    def scalars(self) -> dict[str, float]:
        """``pbt/policy_K/<hyperparameter>`` and ``pbt/policy_K/objective`` for the log."""
        out: dict[str, float] = {"pbt/replacements": float(self.replacements)}
        for k, hp in enumerate(self.hparams):
            out.update({f"pbt/policy_{k}/{name}": v for name, v in hp.items()})
            if (o := self.objective(k)) is not None:
                out[f"pbt/policy_{k}/objective"] = o
        return out

    def summary(self, evaluate: str) -> str:
        """The members ranked by their objective now, and the command (``evaluate`` + the best one's index) that
        plays the best."""
        objectives = [-math.inf if (o := self.objective(k)) is None else o for k in range(len(self.steps))]
        order = rank(objectives)
        ranked = ", ".join(f"{k} ({objectives[k]:.4g})" for k in order)
        best = f"{evaluate} {order[0]}"
        return f"pbt: policies by objective: {ranked}; {self.replacements} replacements; the best: {best}"

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"hparams": [dict(h) for h in self.hparams], "steps": list(self.steps),
                "last_step": list(self.last_step), "returns": [list(r) for r in self.returns],
                "replacements": self.replacements,
                "rng": [version, list(internal), gauss]}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if len(state["hparams"]) != len(self.steps):
            raise ValueError(f"a population of {len(state['hparams'])}, this run's is {len(self.steps)}")
        self.hparams = [dict(h) for h in state["hparams"]]
        self.steps, self.last_step = list(state["steps"]), list(state["last_step"])
        for window, saved in zip(self.returns, state["returns"]):
            window.clear()
            window.extend(saved)
        self.replacements = int(state["replacements"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))


def with_hparams(args: Any, optimizer: Optional[torch.optim.Optimizer], hparams: Mapping[str, float]) -> Any:
    """A member's args with ``hparams`` in them (a new object: the loss reads them), and ``optimizer``'s learning
    rate (if given) set to theirs."""
    for group in optimizer.param_groups if optimizer is not None else ():
        group["lr"] = hparams["learning_rate"]
    return dataclasses.replace(args, **hparams)


def adopt(agent: torch.nn.Module, optimizer: torch.optim.Optimizer, source_agent: torch.nn.Module,
          source_optimizer: torch.optim.Optimizer) -> None:  # fmt: skip
    """``agent`` and ``optimizer`` take copies of the source's weights and optimizer state (Adam's moments: a
    copy, since ``load_state_dict`` would share the source's tensors)."""
    agent.load_state_dict(source_agent.state_dict())
    optimizer.load_state_dict(copy.deepcopy(source_optimizer.state_dict()))
