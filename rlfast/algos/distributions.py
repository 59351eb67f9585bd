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
