"""Networks the trainers share: CleanRL's orthogonal initialization, its tanh MLP, and its two
discrete-action actor-critics (``MLPAgent`` for vector observations, ``NatureCNNAgent`` for
stacked Atari frames), each with ``get_value``, ``get_action_and_value`` and ``act`` (the
``Policy`` contract of ``scripts/evaluate.py``), and ``FrameNet``, the layers over uint8 frames with the CPU's
speed options (``set_speed``: channels-last activations, a bfloat16 autocast)."""

import math
from typing import Optional

import torch
from torch import nn

from rlfast.algos.distributions import categorical

M = nn.Module


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 matmuls and convolutions natively: a CUDA GPU that supports it, or
    a CPU with AVX512-BF16 or AMX (oneDNN's bf16 kernels; elsewhere bf16 is emulated and slower than fp32)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


class FrameNet(nn.Sequential):
    """``nn.Sequential`` over uint8 frames [N, C, H, W]: scales them to [0, 1] (CleanRL's ``x / 255.0``), runs
    its layers and returns float32. Its state_dict is the plain ``nn.Sequential``'s (``0.weight``, ...).

    Speed options (``set_speed``), off by default: ``channels_last`` keeps weights and activations NHWC,
    which oneDNN's CPU convolutions run faster (its backward most); ``bf16`` runs the layers under
    ``torch.autocast(bfloat16)`` (fast only where ``native_bf16``), the result cast back to float32 so
    that heads, distributions and losses outside stay float32."""

    channels_last: bool = False
    bf16: bool = False

    def set_speed(self, channels_last: bool = False, bf16: bool = False) -> "FrameNet":
        self.channels_last, self.bf16 = channels_last, bf16
        self.to(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)  # on the uint8 frames: 4x fewer bytes to move
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            return super().forward(x / 255.0).float()


def set_speed(model: nn.Module, channels_last: bool = False, bf16: bool = False) -> nn.Module:
    """``FrameNet.set_speed`` on every FrameNet in ``model`` (a no-op for models without one); returns it."""
    for m in model.modules():
        if isinstance(m, FrameNet):
            m.set_speed(channels_last, bf16)
    return model


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
        self.network = FrameNet(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )  # fmt: skip
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, C, 84, 84] uint8 frames -> [N, 512] features (scaled to [0, 1] by ``FrameNet``)."""
        return self.network(x)

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
