"""Networks the trainers share: CleanRL's orthogonal initialization, its tanh MLP, and its two
discrete-action actor-critics (``MLPAgent`` for vector observations, ``NatureCNNAgent`` for
stacked Atari frames), each with ``get_value``, ``get_action_and_value`` and ``act`` (the
``Policy`` contract of ``scripts/evaluate.py``)."""

import math
from typing import Optional

import torch
from torch import nn

from rlfast.algos.distributions import categorical

M = nn.Module


def layer_init(layer: M, std: float = math.sqrt(2), bias_const: float = 0.0) -> M:
    """Orthogonal weights with gain ``std`` and constant biases (CleanRL's ``layer_init``); returns ``layer``."""
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def tanh_mlp(in_dim: int, hidden: int, out_dim: int, out_std: float) -> nn.Sequential:
    """``in_dim -> hidden -> hidden -> out_dim`` with tanh between, orthogonally initialized (the output
    layer with gain ``out_std``): CleanRL's actor and critic for vector observations."""
    return nn.Sequential(
        layer_init(nn.Linear(in_dim, hidden)), nn.Tanh(),
        layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
        layer_init(nn.Linear(hidden, out_dim), std=out_std),
    )  # fmt: skip


class MLPAgent(nn.Module):
    """CleanRL's ppo.py network: separate 64-64 tanh actor and critic."""

    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__()
        self.critic = tanh_mlp(obs_dim, 64, 1, out_std=1.0)
        self.actor = tanh_mlp(obs_dim, 64, num_actions, out_std=0.01)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, obs_dim] -> V(x): [N]."""
        return self.critic(x).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None, noise: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, obs_dim] -> (action [N], logprob [N], entropy [N], value [N]); samples when action is None
        (with ``noise`` [N, A] uniform, see ``categorical``)."""
        action, logprob, entropy = categorical(self.actor(x), action, noise)
        return action, logprob, entropy, self.get_value(x)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, obs_dim] -> actions [N]: argmax when greedy, else sampled."""
        logits = self.actor(x)
        return logits.argmax(-1) if greedy else categorical(logits)[0]


class NatureCNNAgent(nn.Module):
    """CleanRL's ppo_atari network: the Nature CNN (Mnih et al. 2015) trunk shared by a linear actor and critic."""

    def __init__(self, in_channels: int, num_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )  # fmt: skip
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, C, 84, 84] uint8 frames -> [N, 512] features (scaled to [0, 1] here)."""
        return self.network(x / 255.0)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, C, 84, 84] uint8 -> V(x): [N]."""
        return self.critic(self.hidden(x)).squeeze(-1)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None, noise: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: [N, C, 84, 84] uint8 -> (action [N], logprob [N], entropy [N], value [N]); samples when action is
        None (with ``noise`` [N, A] uniform, see ``categorical``)."""
        hidden = self.hidden(x)
        action, logprob, entropy = categorical(self.actor(hidden), action, noise)
        return action, logprob, entropy, self.critic(hidden).squeeze(-1)

    def act(self, x: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """x: [N, C, 84, 84] uint8 -> actions [N]: argmax when greedy, else sampled."""
        logits = self.actor(self.hidden(x))
        return logits.argmax(-1) if greedy else categorical(logits)[0]
