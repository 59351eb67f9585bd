"""Network building blocks the trainers share: CleanRL's orthogonal initialization and its tanh MLP."""

import math

import torch
from torch import nn

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
