"""Observations that are one tensor or a dict of tensors (a ``gym.spaces.Dict`` env's: the pool gives each key its own
tensor, ``obs["screen"]`` [B, ...]), handled alike by the code that stores, moves and slices them."""

from typing import Any, Callable, Mapping

import gymnasium as gym
import torch

from rlfast.pool import Obs


def each(fn: Callable[..., Any], *xs: Any) -> Any:
    """``fn(*xs)`` for tensors; for dicts, ``{key: fn(x[key] for x in xs)}`` over the first one's keys."""
    if isinstance(xs[0], Mapping):
        return {key: fn(*(x[key] for x in xs)) for key in xs[0]}
    return fn(*xs)


def spec(space: gym.Space) -> Any:
    """The (shape, torch dtype) of a Box's values, or a dict of them for a Dict of Boxes."""
    if isinstance(space, gym.spaces.Dict):
        return {key: spec(sub) for key, sub in space.spaces.items()}
    return tuple(space.shape), torch.uint8 if space.dtype == "uint8" else torch.float32


def zeros(lead: tuple, obs_spec: Any, device: torch.device) -> Obs:
    """Zeros [*lead, *shape] of each (shape, dtype) in ``obs_spec`` (``spec``'s result)."""
    if isinstance(obs_spec, Mapping):
        return {key: zeros(lead, sub, device) for key, sub in obs_spec.items()}
    shape, dtype = obs_spec
    return torch.zeros((*lead, *shape), dtype=dtype, device=device)


def assign(dst: Obs, index: Any, src: Obs) -> None:
    """``dst[index] = src`` for each tensor."""
    each(lambda d, s: d.__setitem__(index, s), dst, src)

