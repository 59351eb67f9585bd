"""What a trainer script owes ``scripts/evaluate.py``, which rebuilds its policy from any checkpoint
(``rlfast/algos/checkpoint.py``): ``TrainerScript`` (the script as a module) and ``Policy`` (its agent);
``contract_problems`` says what a script or agent lacks."""

import dataclasses
import inspect
from typing import Any, Mapping, Protocol

import gymnasium as gym
import torch


class Policy(Protocol):
    """The network a trainer's ``make_agent`` builds, as ``scripts/evaluate.py`` uses it (an ``nn.Module``
    whose ``state_dict`` is the checkpoint's ``models["agent"]``)."""

    def act(self, obs: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        """A batch of observations [N, *obs_shape] (normalized when the checkpoint has ``normalizers["obs"]``)
        -> actions [N, ...] the env accepts: the most likely (greedy) or sampled ones. A recurrent policy also has
        ``initial_state(n, device)`` and takes and returns its state: ``act(obs, greedy, state=, starts=)`` ->
        ``(actions, state)``, ``starts`` [N] true where obs begins an episode."""
        ...

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any: ...

    def to(self, device: torch.device) -> "Policy": ...

    def eval(self) -> "Policy": ...


class TrainerScript(Protocol):
    """What a trainer script (``scripts/<name>``, named by its checkpoints' ``script``) provides to
    ``scripts/evaluate.py``, which imports it as a module. The env options to evaluate with travel in
    the checkpoint (``eval_env_kwargs``), not in the script."""

    Args: type
    """A dataclass of the trainer's flags; ``Args(**checkpoint["args"])`` rebuilds a run's."""

    def make_agent(self, args: Any, obs_space: gym.Space, action_space: gym.Space) -> Policy:
        """The network for the evaluation pool's spaces, ready for ``load_state_dict``."""
        ...


def contract_problems(script: Any, agent: Any = None) -> list[str]:
    """What ``script`` (a module) lacks of ``TrainerScript``, and ``agent`` (when given) of ``Policy``."""
    problems = []
    if not dataclasses.is_dataclass(getattr(script, "Args", None)):
        problems.append("no `Args` dataclass")
    if not callable(getattr(script, "make_agent", None)):
        problems.append("no `make_agent(args, obs_space, action_space)` function")
    if agent is not None:
        for name in ("act", "load_state_dict", "to", "eval"):
            if not callable(getattr(agent, name, None)):
                problems.append(f"its agent has no `{name}` method")
        act = getattr(agent, "act", None)
        if callable(act) and "greedy" not in inspect.signature(act).parameters:
            problems.append("its agent's `act` takes no `greedy` argument")
    return problems
