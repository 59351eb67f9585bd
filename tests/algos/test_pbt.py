"""Population-based training's rules (rlfast/algos/pbt.py) as pure functions: ranking, who takes whose weights,
how a hyperparameter is perturbed, the population's schedule and its checkpoint state."""

import dataclasses
import io
import random

import pytest
import torch

from rlfast.algos.pbt import (GAMMA_PERTURB, PBTArgs, Population, adopt, choose_source, mutate, parse_set,
                              perturb_value, rank, tuned, with_hparams)  # fmt: skip

DEFAULTS = {"learning_rate": 1e-3, "ent_coef": 0.01, "vf_coef": 0.5, "max_grad_norm": 0.5, "clip_coef": 0.1}


class Scripted(random.Random):
    """A random.Random whose random() returns the given values in turn (uniform and choice stay real)."""

    def __init__(self, *values: float) -> None:
        super().__init__(0)
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_rank_is_best_first_with_ties_to_the_lower_index():
    assert rank([1.0, 5.0, 5.0, -2.0]) == [1, 2, 0, 3]


@pytest.mark.parametrize("fraction, best, worst", [(0.3, 2, 2), (0.25, 1, 1), (0.5, 2, 2), (0.1, 1, 1)])
def test_best_are_left_alone_middle_keep_their_own_worst_take_a_best_ones(fraction, best, worst):
    objectives = [10.0, 40.0, 30.0, 20.0, 0.0][: 4 if fraction in (0.25, 0.5) else 5]
    order = rank(objectives)
    for member in order[:best]:
        assert choose_source(member, objectives, fraction, 0.1, 1e-6, random.Random(0)) is None
    for member in order[best:-worst]:
        assert choose_source(member, objectives, fraction, 0.1, 1e-6, random.Random(0)) == member
    for member in order[-worst:]:
        picks = {choose_source(member, objectives, fraction, 0.1, 1e-6, random.Random(s)) for s in range(50)}
        assert picks == set(order[:best])  # one of the best, at random


def test_a_worst_member_keeps_its_own_when_the_gap_is_small():
    # relative gap: |40 - 37| / 40 = 0.075 < 0.1; absolute gap 3 > 1e-6
    assert choose_source(1, [40.0, 37.0, 39.0], 0.3, 0.1, 1e-6, random.Random(0)) == 1
    # relative gap 0.125 > 0.1 but the absolute one (5) is not above 5
    assert choose_source(1, [40.0, 35.0, 39.0], 0.3, 0.1, 5.0, random.Random(0)) == 1
    assert choose_source(1, [40.0, 35.0, 39.0], 0.3, 0.1, 4.9, random.Random(0)) == 0
    # negative returns: |(-10) - (-20)| / |-10| = 1 > 0.1
    assert choose_source(1, [-10.0, -20.0, -15.0], 0.3, 0.1, 1e-6, random.Random(0)) == 0


def test_perturb_multiplies_or_divides_by_a_factor_in_the_range():
    # Scripted draws: the factor's uniform (1.1 + 0.5 x 0.4 = 1.3), then the coin (< 0.5: divided).
    assert perturb_value("learning_rate", 1e-3, 1e-3, Scripted(0.5, 0.2), 1.1, 1.5) == pytest.approx(1e-3 / 1.3)
    assert perturb_value("learning_rate", 1e-3, 1e-3, Scripted(0.5, 0.7), 1.1, 1.5) == pytest.approx(1e-3 * 1.3)
    rng = random.Random(3)
    factors = [perturb_value("ent_coef", 0.01, 0.01, rng, 1.1, 1.5) / 0.01 for _ in range(2000)]
    assert all(1.1 <= f <= 1.5 or 1 / 1.5 <= f <= 1 / 1.1 for f in factors)
    assert 0.45 < sum(f > 1 for f in factors) / len(factors) < 0.55


def test_gamma_is_perturbed_through_one_minus_gamma_and_stays_below_one():
    rng = random.Random(0)
    for _ in range(2000):
        gamma = perturb_value("gamma", 0.99, 0.99, rng, 1.1, 1.5)
        ratio = (1 - gamma) / 0.01
        assert gamma < 1 and (GAMMA_PERTURB[0] - 1e-9 <= ratio <= GAMMA_PERTURB[1] + 1e-9
                              or 1 / GAMMA_PERTURB[1] - 1e-9 <= ratio <= 1 / GAMMA_PERTURB[0] + 1e-9)  # fmt: skip


def test_a_changed_value_goes_back_to_its_default_one_time_in_a_hundred():
    assert perturb_value("vf_coef", 0.7, 0.5, Scripted(0.005), 1.1, 1.5) == 0.5
    assert perturb_value("vf_coef", 0.7, 0.5, Scripted(0.02, 0.5, 0.9), 1.1, 1.5) == pytest.approx(0.7 * 1.3)
    assert perturb_value("vf_coef", 0.5, 0.5, Scripted(0.5, 0.3), 1.1, 1.5) == pytest.approx(0.5 / 1.3)  # no reset draw


def test_mutate_perturbs_each_value_with_the_mutation_rate():
    rng = random.Random(0)
    assert mutate(DEFAULTS, DEFAULTS, rng, 0.0, 1.1, 1.5) == DEFAULTS
    changed = mutate(DEFAULTS, DEFAULTS, rng, 1.0, 1.1, 1.5)
    assert changed.keys() == DEFAULTS.keys() and all(changed[k] != DEFAULTS[k] for k in DEFAULTS)
    counts = sum(sum(v != DEFAULTS[k] for k, v in mutate(DEFAULTS, DEFAULTS, rng, 0.15, 1.1, 1.5).items())
                 for _ in range(2000))  # fmt: skip
    assert 0.13 < counts / (2000 * len(DEFAULTS)) < 0.17


def cfg(**kw) -> PBTArgs:
    base = dict(pbt_population=4, pbt_start=100, pbt_period=50, pbt_objective_episodes=3)
    return PBTArgs(**{**base, **kw})


def test_population_starts_with_the_defaults_for_member_0_and_mutated_copies_for_the_others():
    pop = Population(cfg(pbt_mutation_rate=1.0, pbt_set=("2:learning_rate=1e-7",)), DEFAULTS, seed=1)
    assert pop.hparams[0] == DEFAULTS
    assert all(pop.hparams[k][name] != DEFAULTS[name] for k in (1, 3) for name in DEFAULTS)
    assert pop.hparams[2]["learning_rate"] == 1e-7


def test_pbt_steps_come_after_the_start_every_period_once_every_member_has_episodes():
    pop = Population(cfg(), DEFAULTS, seed=1)
    assert pop.learned(0, 60) is None and pop.learned(0, 39) is None  # 99 < --pbt-start
    assert pop.learned(0, 1) is None  # due at 100, but members 1-3 have no episode: skipped, period restarts
    for k, returns in enumerate([[10.0], [20.0, 30.0], [1.0], [5.0, 6.0, 7.0, 8.0]]):
        pop.record(k, returns)
    assert pop.objective(1) == 25.0 and pop.objective(3) == 7.0  # the last 3 episodes
    assert pop.learned(0, 49) is None
    step = pop.learned(0, 1)  # 150: member 0 (10) is among the best 2 of [10, 25, 1, 7]: left alone
    assert step is not None and step.source is None and step.after == step.before == DEFAULTS
    assert step.describe() == "pbt: policy 0 (10) is among the best: unchanged"
    pop.steps[2] = 150
    step = pop.learned(2, 0)  # member 2 (1.0) is among the worst 2: takes a best one's weights (member 1 or 0)
    assert step.replaced and step.source in (1, 0) and pop.replacements == 1
    assert step.describe().startswith(f"pbt: policy 2 (1) takes policy {step.source}'s weights")
    assert pop.learned(2, 49) is None and pop.learned(2, 1) is not None  # the next one a period later


def test_member_0_takes_the_hyperparameters_as_they_are_when_replaced():
    pop = Population(cfg(pbt_population=2, pbt_mutation_rate=1.0), DEFAULTS, seed=1)
    pop.record(0, [1.0])
    pop.record(1, [100.0])
    pop.steps[0] = 100
    step = pop.learned(0, 0)
    assert step.source == 1 and pop.hparams[0] == pop.hparams[1] != DEFAULTS


def test_population_state_survives_a_checkpoint_and_its_draws_go_on():
    pop = Population(cfg(pbt_mutation_rate=0.5), DEFAULTS, seed=7)
    for k in range(4):
        pop.record(k, [float(k), float(10 * k)])
    pop.learned(1, 120)
    buffer = io.BytesIO()
    torch.save(pop.state_dict(), buffer)
    buffer.seek(0)
    other = Population(cfg(pbt_mutation_rate=0.5), DEFAULTS, seed=99)
    other.load_state_dict(torch.load(buffer, weights_only=True))
    assert other.hparams == pop.hparams and other.steps == pop.steps and other.last_step == pop.last_step
    assert [list(r) for r in other.returns] == [list(r) for r in pop.returns]
    assert other.rng.random() == pop.rng.random()
    with pytest.raises(ValueError, match="a population of 4, this run's is 2"):
        Population(cfg(pbt_population=2), DEFAULTS, seed=1).load_state_dict(pop.state_dict())


@pytest.mark.parametrize("item, message", [
    ("learning_rate=1e-3", "must be K:name=value"),
    ("4:learning_rate=1e-3", "member 4 is not in a population of 4"),
    ("1:gamma=0.9", "'gamma' is not a tuned hyperparameter"),
    ("1:ent_coef=abc", "'abc' is not a number"),
    ("1:ent_coef=-1", "ent_coef must be > 0, got -1"),
])  # fmt: skip
def test_bad_pbt_set_items_are_named(item, message):
    problems = cfg(pbt_set=(item,)).validate()
    assert len(problems) == 1 and problems[0].startswith(f"--pbt-set {item}: ") and message in problems[0]


def test_flag_checks():
    assert cfg().validate() == []
    assert "--pbt-perturb-min 2.0 is above --pbt-perturb-max 1.5" in cfg(pbt_perturb_min=2.0).validate()
    assert any(p.startswith("--pbt-replace-fraction must be in (0, 0.5]") for p in cfg(pbt_replace_fraction=0.7)
               .validate())  # fmt: skip
    assert tuned(cfg(pbt_optimize_gamma=True))[-1] == "gamma" and parse_set("3:gamma=0.995", 4, tuned(
        cfg(pbt_optimize_gamma=True))) == (3, "gamma", 0.995)  # fmt: skip


def test_adopt_copies_weights_and_optimizer_state_without_sharing_them():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    opt_a, opt_b = torch.optim.Adam(a.parameters(), lr=1e-3), torch.optim.Adam(b.parameters(), lr=5e-4)
    for model, opt in ((a, opt_a), (b, opt_b)):
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    adopt(b, opt_b, a, opt_a)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    exp_a, exp_b = opt_a.state[opt_a.param_groups[0]["params"][0]]["exp_avg"], opt_b.state[b.weight]["exp_avg"]
    assert torch.equal(exp_a, exp_b) and exp_a.data_ptr() != exp_b.data_ptr()
    assert opt_b.param_groups[0]["params"] == list(b.parameters())  # still b's own parameters

    @dataclasses.dataclass
    class Hyper:
        learning_rate: float = 1e-3
        ent_coef: float = 0.01

    args = with_hparams(Hyper(), opt_b, {"learning_rate": 2e-4, "ent_coef": 0.02})
    assert args == Hyper(2e-4, 0.02) and opt_b.param_groups[0]["lr"] == 2e-4
