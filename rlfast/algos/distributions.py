"""Action distributions written as plain tensor ops (no ``torch.distributions`` objects).

Building a ``Categorical`` per step costs argument validation and Python objects on the hot
path and breaks ``torch.compile`` graphs; these functions do the same math.
"""

from typing import Optional

import torch


def categorical(
    logits: torch.Tensor, action: Optional[torch.Tensor] = None, noise: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Samples (or scores) a categorical policy, like ``torch.distributions.Categorical(logits=logits)``.

    Args:
        logits: [N, A] unnormalized log-probabilities.
        action: [N] integer actions to score; sampled from the policy when None.
        noise: [N, A] uniform [0, 1) numbers to sample with (Gumbel-max: ``argmax(logits - log(-log(noise)))``,
            the same distribution); ``torch.multinomial`` draws its own when None. The trainers pass
            ``Run.action_noise``, drawn for every env of every rank, so a run's actions do not depend on
            how its envs are split between ranks (rlfast/algos/distributed.py).

    Returns:
        ``(action [N] int64, logprob [N], entropy [N])``.
    """
    logp = logits.log_softmax(-1)
    probs = logp.exp()
    if action is None and noise is not None:
        action = (logits - (-noise.log()).log()).argmax(-1)
    elif action is None:
        action = torch.multinomial(probs, 1).squeeze(-1)
    logprob = logp.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    entropy = -(probs * logp).sum(-1)
    return action, logprob, entropy


def multi_categorical(
    logits: torch.Tensor, heads: tuple[int, ...], action: Optional[torch.Tensor] = None,
    noise: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """A MultiDiscrete policy: independent categoricals over the ``heads`` slices of ``logits`` [N, sum(heads)], as
    ``categorical`` each; the log-probabilities and entropies add up.

    Args:
        action: [N, H] actions to score (whole numbers, any dtype); sampled when None.
        noise: [N, sum(heads)] uniform [0, 1) numbers to sample with (see ``categorical``).

    Returns:
        ``(action [N, H] float32 (the pool takes MultiDiscrete actions as float rows of whole numbers), logprob [N],
        entropy [N])``."""
    parts = logits.split(heads, -1)
    noises = noise.split(heads, -1) if noise is not None else (None,) * len(heads)
    outs = [categorical(part, None if action is None else action[:, i], part_noise)
            for i, (part, part_noise) in enumerate(zip(parts, noises))]  # fmt: skip
    actions = torch.stack([a for a, _, _ in outs], 1).float()
    return actions, sum(lp for _, lp, _ in outs), sum(e for _, _, e in outs)
