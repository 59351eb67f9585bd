"""Networks the trainers share: CleanRL's orthogonal initialization, its tanh MLP, and its two
discrete-action actor-critics (``MLPAgent`` for vector observations, ``NatureCNNAgent`` for
stacked Atari frames, ``RecurrentNatureCNNAgent`` with an LSTM or GRU core; Sample Factory's Doom network,
``ConvSimpleAgent`` and ``RecurrentConvSimpleAgent``, for a Dict of frames and measurements), each with ``get_value``,
``get_action_and_value`` and ``act`` (the ``Policy`` contract of ``scripts/evaluate.py``). The CNN's layers are a
``FrameNet`` (rlfast/algos/speed.py: its CPU speed options)."""

import math
from typing import Optional, Union

import torch
from torch import nn

from rlfast.algos.distributions import categorical, multi_categorical
from rlfast.algos.speed import FrameNet

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


def nature_widths(width: float = 1.0) -> tuple[int, int, int, int]:
    """The Nature CNN's channels and hidden units (32, 64, 64, 512), each scaled by ``width``."""
    return tuple(max(1, round(n * width)) for n in (32, 64, 64, 512))  # type: ignore[return-value]


def conv_out(size: tuple[int, int], layers: tuple[tuple[int, int, int], ...]) -> tuple[int, int]:
    """(H, W) after unpadded convolutions of (channels, kernel, stride)."""
    h, w = size
    for _, k, s in layers:
        h, w = (h - k) // s + 1, (w - k) // s + 1
    return h, w


NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""The Nature CNN's convolutions: (channels at width 1, kernel, stride)."""


def nature_cnn(in_channels: int, width: float = 1.0, frame_size: int = 84, normalize: bool = False) -> FrameNet:
    """The Nature CNN (Mnih et al. 2015) as CleanRL initializes it: [N, C, 84, 84] uint8 frames -> [N, 512].
    ``width`` scales its channels and hidden units (0.5: 16-32-32-256, about a third of the multiply-adds);
    ``frame_size`` takes square frames of another size (64: the last feature map 4x4 instead of 7x7, half the
    multiply-adds again). Frames below 36x36 leave no room for its three convolutions: a ValueError.
    ``normalize``: each pixel normalized by running statistics instead of / 255 (``FrameNet.normalize``)."""
    c1, c2, c3, hidden = nature_widths(width)
    oh, ow = conv_out((frame_size, frame_size), NATURE_CONVS)
    if oh < 1 or ow < 1:
        raise ValueError(f"frames of {frame_size}x{frame_size} are too small for the Nature CNN (at least 36x36)")
    layers, channels = [], in_channels
    for out, (_, k, stride) in zip((c1, c2, c3), NATURE_CONVS):
        layers += [layer_init(nn.Conv2d(channels, out, k, stride=stride)), nn.ReLU()]
        channels = out
    return FrameNet(*layers, nn.Flatten(), layer_init(nn.Linear(c3 * oh * ow, hidden)), nn.ReLU(),
                    pixel_stats=(frame_size, frame_size) if normalize else None)


class NatureCNNAgent(nn.Module):
    """CleanRL's ppo_atari network: the Nature CNN (Mnih et al. 2015) trunk shared by a linear actor and critic."""

    def __init__(self, in_channels: int, num_actions: int, width: float = 1.0, frame_size: int = 84,
                 normalize: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.network = nature_cnn(in_channels, width, frame_size, normalize)
        hidden = nature_widths(width)[-1]
        self.actor = layer_init(nn.Linear(hidden, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden, 1), std=1.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """x: [N, C, 84, 84] uint8 frames -> [N, 512 x width] features (scaled to [0, 1] by ``FrameNet``)."""
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


RECURRENT_CELLS = ("lstm", "gru")


def recurrent_core(cell: str, input_size: int, hidden_size: int) -> nn.Module:
    """One layer of ``nn.LSTM`` (cell "lstm") or ``nn.GRU`` ("gru"), initialized as CleanRL's ppo_atari_lstm
    initializes its LSTM: orthogonal weights (gain 1), zero biases."""
    if cell not in RECURRENT_CELLS:
        raise ValueError(f"cell must be one of {RECURRENT_CELLS}, got {cell!r}")
    core = (nn.LSTM if cell == "lstm" else nn.GRU)(input_size, hidden_size)
    for name, param in core.named_parameters():
        if "bias" in name:
            nn.init.constant_(param, 0)
        else:
            nn.init.orthogonal_(param, 1.0)
    return core


def unroll(core: nn.Module, features: torch.Tensor, state: torch.Tensor,
           starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``core`` (``recurrent_core``'s) over features [T * N, F], time-major (row ``t * N + i``: env i at step t), from
    state [N, S, H] (S = 2 for an LSTM's h and c, 1 for a GRU) before step 0, zeroed before each row where ``starts``
    [T * N] is true -> (the outputs [T * N, H], the state after step T - 1).

    The cell is ``nn.LSTM``'s (``nn.GRU``'s) own equations on its own parameters, written out: the input projection
    of all T steps is one matrix product, then one small product per step. (Through ``nn.LSTM``, one call per step
    since the state is reset within sequences, oneDNN's RNN kernels took 30 ms forward and 80 ms backward per step of
    2 envs on the 2-core CPU.)"""
    n = state.shape[0]
    gates_x = torch.addmm(core.bias_ih_l0, features, core.weight_ih_l0.t()).view(-1, n, core.weight_ih_l0.shape[0])
    keep = (~starts.bool()).to(features.dtype).view(-1, n, 1)
    lstm = isinstance(core, nn.LSTM)
    h, c = state[:, 0], state[:, 1] if lstm else None
    outputs = []
    for gx, k in zip(gates_x.unbind(0), keep.unbind(0)):  # unbind: one backward op for all steps
        h = h * k
        gates_h = torch.addmm(core.bias_hh_l0, h, core.weight_hh_l0.t())
        if c is not None:
            i, f, g, o = (gx + gates_h).chunk(4, 1)
            c = torch.sigmoid(f) * (c * k) + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        else:
            (rx, zx, nx), (rh, zh, nh) = gx.chunk(3, 1), gates_h.chunk(3, 1)
            r, z = torch.sigmoid(rx + rh), torch.sigmoid(zx + zh)
            h = (1 - z) * torch.tanh(nx + r * nh) + z * h
        outputs.append(h)
    final = torch.stack((h, c), 1) if lstm else h.unsqueeze(1)
    return torch.stack(outputs).flatten(0, 1), final


class RecurrentPolicy:
    """The recurrent half of an actor-critic whose subclass has ``hidden(x)`` (the encoder's features of [T * N]
    observations, time-major), a ``core`` (``recurrent_core``'s) and linear ``actor`` and ``critic`` on its output,
    and ``_policy(logits, action, noise)`` (the action distribution). The recurrent state of N envs is one tensor
    [N, S, H], so that a trainer keeps it per env id and indexes it like any other per-env tensor; it is zeroed
    before an observation that starts an episode (``starts``), as CleanRL multiplies it by ``1 - done``. Acting is
    T = 1; training unrolls whole rollouts from the state stored at their start."""

    def initial_state(self, n: int, device: Optional[torch.device] = None) -> torch.Tensor:
        """Zeros [n, S, H]: the state of n envs before their first observation."""
        return torch.zeros((n, 2 if isinstance(self.core, nn.LSTM) else 1, self.core.hidden_size), device=device)

    def unroll(self, x, state: torch.Tensor, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Observations x [T * N, ...] (time-major), state [N, S, H] before step 0, starts [T * N] -> (the core's
        outputs [T * N, H], the state after step T - 1): ``unroll`` on the encoder's features."""
        return unroll(self.core, self.hidden(x), state, starts)

    def get_value(self, x, state: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """V of each observation: [T * N]."""
        return self.critic(self.unroll(x, state, starts)[0]).squeeze(-1)

    def get_action_and_value(
        self, x, state: torch.Tensor, starts: torch.Tensor, action: Optional[torch.Tensor] = None,
        noise: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """-> (action, logprob, entropy, value, each [T * N]; the state after the last step [N, S, H]); samples
        when action is None (with ``noise`` [T * N, A] uniform, see ``categorical``)."""
        out, state = self.unroll(x, state, starts)
        action, logprob, entropy = self._policy(self.actor(out), action, noise)
        return action, logprob, entropy, self.critic(out).squeeze(-1), state

    def act(
        self, x, greedy: bool = False, state: Optional[torch.Tensor] = None, starts: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """One step of N envs -> (actions: greedy or sampled; the new state). ``state`` None: every env starts here
        (zeros)."""
        first = next(iter(x.values())) if isinstance(x, dict) else x
        n, device = first.shape[0], first.device
        if state is None:
            state = self.initial_state(n, device)
        if starts is None:
            starts = torch.zeros(n, dtype=torch.bool, device=device)
        out, state = self.unroll(x, state, starts)
        return self._choose(self.actor(out), greedy), state


class RecurrentNatureCNNAgent(RecurrentPolicy, nn.Module):
    """CleanRL's ppo_atari_lstm network: the Nature CNN trunk, a recurrent core (an LSTM of 128 units, or a GRU)
    over its 512 features, and a linear actor and critic on the core's output (``RecurrentPolicy``'s methods).
    Observations come time-major, [T * N, C, 84, 84] uint8; ``normalize``: each pixel normalized by running
    statistics instead of / 255 (``FrameNet.normalize``)."""

    def __init__(self, in_channels: int, num_actions: int, cell: str = "lstm", hidden_size: int = 128,
                 normalize: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.network = nature_cnn(in_channels, normalize=normalize)
        self.core = recurrent_core(cell, 512, hidden_size)
        self.actor = layer_init(nn.Linear(hidden_size, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden_size, 1), std=1.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)

    def _policy(self, logits: torch.Tensor, action: Optional[torch.Tensor] = None,
                noise: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        return categorical(logits, action, noise)

    def _choose(self, logits: torch.Tensor, greedy: bool) -> torch.Tensor:
        return logits.argmax(-1) if greedy else self._policy(logits)[0]


class ConvSimpleAgent(nn.Module):
    """Sample Factory's default Doom network without its recurrent core: the ``convnet_simple`` encoder of uint8
    frames of any size (conv 32 8x8 /4, 64 4x4 /2, 128 3x3 /2, ELU; then a 512-unit layer, ``encoder_conv_mlp_layers``
    [512]), beside the ``VizdoomEncoder``'s 128-128 ELU head for a vector of measurements when the env gives one,
    and linear actor and critic on the two joined (Sample Factory 2: ``sample_factory/model/encoder.py``,
    ``sf_examples/vizdoom/doom/doom_model.py``). Initialization: CleanRL's orthogonal one (as the other nets here).

    Observations are a dict, a ``gym.spaces.Dict`` env's as the pool gives them: ``frames_key`` [N, C, H, W] uint8
    and, if ``measurements`` > 0, ``measurements_key`` [N, M] float32. ``num_actions``: a Discrete space's n, or a
    MultiDiscrete space's nvec as a tuple (one categorical head per entry, Sample Factory's tuple of discrete
    actions; actions then [N, H] float32 whole numbers, as the pool takes them)."""

    CONVS = ((32, 8, 4), (64, 4, 2), (128, 3, 2))

    def __init__(self, frame_shape: tuple[int, int, int], num_actions: Union[int, tuple[int, ...]],
                 measurements: int = 0, frames_key: str = "obs",
                 measurements_key: str = "measurements") -> None:  # fmt: skip
        super().__init__()
        self.heads = tuple(int(n) for n in num_actions) if isinstance(num_actions, tuple) else None
        c, h, w = frame_shape
        self.frames_key, self.measurements_key = frames_key, measurements_key
        layers, channels = [], c
        for out, k, s in self.CONVS:
            layers += [layer_init(nn.Conv2d(channels, out, k, stride=s)), nn.ELU()]
            channels = out
        oh, ow = conv_out((h, w), self.CONVS)
        if oh < 1 or ow < 1:
            raise ValueError(f"frames of {h}x{w} are too small for convnet_simple (at least 36x36)")
        self.network = FrameNet(*layers, nn.Flatten(), layer_init(nn.Linear(channels * oh * ow, 512)), nn.ELU())
        self.measurements = None
        if measurements:
            self.measurements = nn.Sequential(layer_init(nn.Linear(measurements, 128)), nn.ELU(),
                                              layer_init(nn.Linear(128, 128)), nn.ELU())  # fmt: skip
        hidden = 512 + 128 * bool(measurements)
        self.actor = layer_init(nn.Linear(hidden, sum(self.heads) if self.heads else num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden, 1), std=1.0)

    def hidden(self, x: dict) -> torch.Tensor:
        features = self.network(x[self.frames_key])
        if self.measurements is None:
            return features
        return torch.cat((features, self.measurements(x[self.measurements_key].float())), 1)

    def get_value(self, x: dict) -> torch.Tensor:
        return self.critic(self.hidden(x)).squeeze(-1)

    def get_action_and_value(
        self, x: dict, action: Optional[torch.Tensor] = None, noise: Optional[torch.Tensor] = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (action [N], logprob [N], entropy [N], value [N]), as ``NatureCNNAgent``'s."""
        hidden = self.hidden(x)
        action, logprob, entropy = self._policy(self.actor(hidden), action, noise)
        return action, logprob, entropy, self.critic(hidden).squeeze(-1)

    def _policy(self, logits: torch.Tensor, action: Optional[torch.Tensor] = None,
                noise: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        if self.heads is None:
            return categorical(logits, action, noise)
        return multi_categorical(logits, self.heads, action, noise)

    def act(self, x: dict, greedy: bool = False) -> torch.Tensor:
        return self._choose(self.actor(self.hidden(x)), greedy)

    def _choose(self, logits: torch.Tensor, greedy: bool) -> torch.Tensor:
        """Actions from logits: sampled, or each head's argmax (``greedy``)."""
        if not greedy:
            return self._policy(logits)[0]
        if self.heads is None:
            return logits.argmax(-1)
        return torch.stack([part.argmax(-1) for part in logits.split(self.heads, -1)], 1).float()


class RecurrentConvSimpleAgent(RecurrentPolicy, ConvSimpleAgent):
    """Sample Factory's default Doom network whole: ``ConvSimpleAgent``'s encoder (frames, and measurements when the
    env gives them) into a recurrent core, a GRU of 512 units by default (Sample Factory 2's ``--use_rnn True
    --rnn_type gru --rnn_size 512 --rnn_num_layers 1``, ``sample_factory/model/core.py``), and the linear actor and
    critic on the core's output (``RecurrentPolicy``'s methods). Observations are dicts as ``ConvSimpleAgent``'s,
    each key's tensor time-major [T * N, ...]."""

    def __init__(self, frame_shape: tuple[int, int, int], num_actions: Union[int, tuple[int, ...]],
                 measurements: int = 0, frames_key: str = "obs", measurements_key: str = "measurements",
                 cell: str = "gru", hidden_size: int = 512) -> None:  # fmt: skip
        super().__init__(frame_shape, num_actions, measurements, frames_key, measurements_key)
        self.core = recurrent_core(cell, self.actor.in_features, hidden_size)
        self.actor = layer_init(nn.Linear(hidden_size, self.actor.out_features), std=0.01)
        self.critic = layer_init(nn.Linear(hidden_size, 1), std=1.0)
