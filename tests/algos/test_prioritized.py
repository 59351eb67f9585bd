"""PrioritizedReplayBuffer (rlfast/algos/prioritized.py) against brute-force computations: it samples only the
transitions the uniform buffer calls valid, each in proportion to its priority (empirical frequencies against the
exact probabilities), the importance weights are Schaul et al.'s formula, new transitions take the largest priority
so far, the block sums stay equal to a sum from scratch through updates and adds, and its state round-trips (a
uniform buffer's state loads at priority 1). What a transition holds is ReplayBuffer's, checked in test_replay.py."""

import pytest
import torch

from rlfast.algos.prioritized import PrioritizedReplayBuffer
from rlfast.algos.replay import ReplayBuffer

FRAME = (1, 3, 2)


def feed(rb, steps, seed, p_end=0.1):
    """``steps`` adds of all envs with random frames, rewards and episode ends (next-step autoreset's reset steps
    included: the step after an end is no transition)."""
    g = torch.Generator().manual_seed(seed)
    N = rb.num_envs
    for _ in range(steps):
        u = torch.rand(N, 3, generator=g)
        frames = torch.randint(0, 256, (N, *FRAME), generator=g, dtype=torch.uint8)
        rb.add(frames, torch.randint(0, 4, (N,), generator=g), torch.randn(N, generator=g),
               u[:, 0] < p_end, u[:, 1] < p_end / 3, u[:, 2] < 0.05)  # fmt: skip
    return rb


def buffer(num_envs=4, per_env=40, stack=4, n_step=3, **kwargs):
    return PrioritizedReplayBuffer(num_envs * per_env, num_envs, FRAME, torch.uint8, stack=stack, n_step=n_step,
                                   **kwargs)  # fmt: skip


def test_samples_only_valid_slots_in_proportion_to_their_priorities():
    rb = feed(buffer(alpha=0.7), 150, seed=0)  # the rings (40 slots) wrapped several times
    valid = rb.valid().reshape(-1)
    assert 0 < int(valid.sum()) < rb.capacity
    # Priorities from TD errors spread over three orders of magnitude, on every slot (valid or not).
    g = torch.Generator().manual_seed(1)
    everything = torch.arange(rb.capacity)
    errors = 10 ** (torch.rand(rb.capacity, generator=g) * 3 - 2)
    rb.update_priorities(everything, errors)
    expected = torch.where(valid, (errors + rb.eps) ** 0.7, 0.0).double()
    expected /= expected.sum()
    assert torch.allclose(rb.probabilities().reshape(-1), expected, rtol=1e-5, atol=0)
    flat = torch.cat([rb.sample_indices(128, generator=g) for _ in range(3000)])  # 384,000 draws
    assert valid[flat].all()
    hits = torch.bincount(flat, minlength=rb.capacity).double()
    counts = expected * flat.numel()
    often = counts > 400  # slots expected 400+ times: each within 5 standard deviations of its binomial count
    assert often.sum() > 20
    assert ((hits - counts)[often].abs() <= 5 * counts[often].sqrt()).all()
    # Chi-square over all valid slots (~100 degrees of freedom): far below what a wrong distribution gives.
    chi2 = ((hits - counts)[valid] ** 2 / counts[valid]).sum()
    assert chi2 < 2 * int(valid.sum()), float(chi2)


def test_alpha_zero_is_uniform_over_the_valid_slots_as_the_plain_buffer():
    per, plain = feed(buffer(alpha=0.0), 120, seed=2), feed(ReplayBuffer(160, 4, FRAME, torch.uint8, stack=4,
                                                                        n_step=3), 120, seed=2)  # fmt: skip
    assert torch.equal(per.valid(), plain.valid())
    per.update_priorities(torch.arange(10), torch.arange(10.0))  # alpha 0: every priority stays 1
    p = per.probabilities()
    assert torch.allclose(p[plain.valid()], torch.full_like(p[plain.valid()], 1 / int(plain.valid().sum())))
    batch = per.sample(64)
    assert torch.equal(batch["weights"], torch.ones(64))  # equal probabilities: no correction
    for key, value in plain.get(batch["indices"]).items():  # the same transitions as the plain buffer's slots
        assert torch.equal(batch[key], value), key


def test_importance_weights_are_schaul_et_al_s_normalized_by_the_batch_maximum():
    rb = feed(buffer(alpha=0.6, beta=0.5), 100, seed=3)
    rb.update_priorities(torch.arange(rb.capacity), torch.linspace(0.01, 3.0, rb.capacity))
    batch = rb.sample(128, generator=torch.Generator().manual_seed(0))
    prob = rb.probabilities().reshape(-1)[batch["indices"]]
    n = int(rb.valid().sum())
    raw = (n * prob) ** -0.5
    assert torch.allclose(batch["weights"].double(), raw / raw.max(), rtol=1e-5)
    assert batch["weights"].max() == 1.0 and batch["weights"].min() < 0.5
    rb.beta = 1.0
    batch = rb.sample(128, generator=torch.Generator().manual_seed(0))
    raw = 1 / (n * rb.probabilities().reshape(-1)[batch["indices"]])
    assert torch.allclose(batch["weights"].double(), raw / raw.max(), rtol=1e-5)


def test_new_transitions_take_the_largest_priority_so_far_and_sums_stay_exact():
    rb = feed(buffer(num_envs=3, per_env=30, alpha=1.0), 40, seed=4)
    rb.sample(16)  # fold the valid mask in
    rb.update_priorities(torch.tensor([5, 7, 40]), torch.tensor([2.0, 9.0, 0.5]))
    assert float(rb.max_priority) == pytest.approx(9.0 + rb.eps)
    feed(rb, 1, seed=5)  # one more step of the 3 envs: their newest slots get 9
    newest = torch.arange(3) * rb.per_env + (rb.count - 1) % rb.per_env
    assert torch.allclose(rb.priority[newest], torch.full((3,), 9.0 + rb.eps))
    # Updates between adds keep each block's sum equal to a sum from scratch of the valid slots' priorities.
    g = torch.Generator().manual_seed(6)
    for _ in range(20):
        batch = rb.sample(32, generator=g)
        rb.update_priorities(batch["indices"], torch.randn(32, generator=g))
        scratch = (rb.priority[: rb.capacity] * rb.valid().reshape(-1)).double()
        padded = torch.zeros(rb.num_blocks * rb.block, dtype=torch.float64)
        padded[: rb.capacity] = scratch
        assert torch.allclose(rb._block_sums, padded.view(rb.num_blocks, rb.block).sum(1), rtol=1e-6)
        if _ % 5 == 4:
            feed(rb, 2, seed=_)


def test_state_round_trip_and_a_uniform_buffer_s_state(tmp_path):
    rb = feed(buffer(), 90, seed=7)
    rb.update_priorities(torch.arange(rb.capacity), torch.rand(rb.capacity) * 4)
    torch.save(rb.state_dict(), tmp_path / "rb.pt")
    other = buffer()
    other.load_state_dict(torch.load(tmp_path / "rb.pt", weights_only=True))
    assert torch.equal(other.priority, rb.priority) and torch.equal(other.max_priority, rb.max_priority)
    # ReplayBuffer.load_state_dict's rule (the newest slot of each env is no transition) applies to both.
    assert torch.equal(other.valid(), ReplayBuffer.valid(other))
    assert (other.probabilities()[other.valid()] > 0).all()
    plain = feed(ReplayBuffer(160, 4, FRAME, torch.uint8, stack=4, n_step=3), 90, seed=7)
    other.load_state_dict(plain.state_dict())
    p = other.probabilities()[other.valid()]
    assert torch.allclose(p, torch.full_like(p, 1 / len(p)))  # every transition at priority 1
    plain.load_state_dict(rb.state_dict())  # and the other way: the priorities are left out
    assert torch.equal(plain.obs, rb.obs)


def test_bad_arguments_and_an_empty_buffer_are_clear_errors():
    for kwargs, word in (({"alpha": -1.0}, "alpha"), ({"beta": 1.5}, "beta"), ({"eps": 0.0}, "eps")):
        with pytest.raises(ValueError, match=word):
            buffer(**kwargs)
    rb = buffer()
    with pytest.raises(ValueError, match="cannot sample 8 transitions"):
        rb.sample(8)
    feed(rb, 3, seed=8)  # 12 slots written, none whole yet: each env's transitions look 3 steps ahead
    with pytest.raises(ValueError, match="cannot sample 1 transitions"):
        rb.sample(1)
    feed(rb, 1, seed=9)
    assert rb.sample(1)["indices"].tolist()[0] % rb.per_env == 0  # each env's step 0: the only one held whole


def test_never_draws_from_empty_blocks_after_the_last_held_transition():
    # Only env 0 has stepped (async adds): every block past its ring has priority 0, the draws' upper end sits on
    # the total, and the largest draws must still land on env 0's valid slots.
    rb = buffer(num_envs=8, per_env=50)
    g = torch.Generator().manual_seed(10)
    for _ in range(60):
        rb.add(torch.zeros((1, *FRAME), dtype=torch.uint8), torch.zeros(1, dtype=torch.long), torch.zeros(1),
               torch.rand(1, generator=g) < 0.1, torch.zeros(1, dtype=torch.bool), env_ids=torch.tensor([0]))
    rb.update_priorities(torch.arange(rb.capacity), 10 ** (torch.rand(rb.capacity, generator=g) * 6 - 3))
    flat = torch.cat([rb.sample_indices(30, generator=g) for _ in range(2000)])
    assert int(rb._block_sums.gt(0).sum()) < rb.num_blocks // 2
    assert rb.valid().reshape(-1)[flat].all() and int(flat.max()) < rb.per_env
