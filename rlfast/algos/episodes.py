"""Finished episodes, recorded one way by every trainer for the run log (``RunLog.episodes``).

    episodes = Episodes(num_envs, atari=True, rows=T)   # a rollout's table: row t holds step t's results
    obs, reward, terminated, truncated, info = pool.step(actions)
    episodes.record(t, terminated, truncated, info)     # or envs=a slice of the columns (one of two pools)
    run.end_iteration(steps, scalars, episodes.table)   # (ep_done, ep_return, ep_length) [T, B]

    episodes = Episodes(num_envs, atari=False)           # APPO's sampler: any subset of envs per batch,
    episodes.collect(terminated, truncated, info, env_ids)   # from the sampler's thread
    run.end_iteration(steps, scalars, episodes.take())   # the learner's: what ended since the last take

What an episode is: on Atari a whole game (``GameStats`` below), else what the pool counts as one,
its ``info["episode_return"]`` / ``["episode_length"]`` where a step is ``terminated | truncated``.

Whole Atari games, as CleanRL logs them: under ``episodic_life=True`` (and ``reward_clip=True``) the
pool's episodes are lives and its rewards are clipped, but ``charts/episodic_return`` must be the game's
raw score: the sum of ``info["reward"]`` (always the unclipped reward) over every life until the game is
over, and ``charts/episodic_length`` the agent steps of the whole game.

    stats = GameStats(num_envs)
    obs, reward, terminated, truncated, info = pool.step(actions)
    ended, score, length = stats.update(info["reward"], truncated, info["game_over"], info["new_game"])
    # ended [B] bool: a game ended with this result; score / length [B]: the games so far

Rules, with rlfast's next-step autoreset (``new_game`` marks the first observation of a game):

- a game ends on a result with ``game_over`` (the emulator's game over) or ``truncated``
  (the frame cap ends the game; a life lost under ``episodic_life`` is ``terminated``
  without ``game_over`` and the game goes on). A pool truncation by ``max_episode_steps``
  landing on the same step as a life loss would keep the game going while this counts an
  end; with the defaults (27000 steps, 108000 frames) the game's own cap always comes first.
- every step result belongs to exactly one game, the reset step that starts a game
  included (CleanRL + EnvPool count it too), so the lengths of all games sum to the agent
  steps taken; the observations from ``pool.reset()`` are not steps and are not passed here.
"""

import threading
from typing import Mapping, Optional, Union

import torch


class GameStats:
    """Per-env raw score and length of the game in progress; ``update`` once per step result."""

    def __init__(self, num_envs: int, device: Union[str, torch.device] = "cpu") -> None:
        self.score = torch.zeros(num_envs, device=device)
        self.length = torch.zeros(num_envs, dtype=torch.int32, device=device)

    def update(
        self,
        raw_reward: torch.Tensor,
        truncated: torch.Tensor,
        game_over: torch.Tensor,
        new_game: torch.Tensor,
        env_ids: Optional[Union[torch.Tensor, slice]] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Adds one step result of every env: all arguments [B] in env order, or of the envs ``env_ids``: a
        slice (views of those envs' state) or [B] ids, an async pool's batch (then score and length are [B]
        copies in that order).

        raw_reward: ``info["reward"]``; truncated: the pool's ``truncated``; game_over,
        new_game: ``info["game_over"]``, ``info["new_game"]``.
        Returns ``(ended [B] bool, score [B] float32, length [B] int32)``: score and length
        are this object's running state (the finished game's totals where ``ended``), so
        copy them before the next ``update``.
        """
        # A new game's reset step starts the count at 1 (its reward is 0); otherwise accumulate.
        ended = game_over | truncated
        if isinstance(env_ids, slice):
            score, length = self.score[env_ids], self.length[env_ids]
            score.mul_(~new_game).add_(raw_reward)
            length.mul_(~new_game).add_(1)
            return ended, score, length
        if env_ids is not None:
            ids = env_ids.long()
            score = self.score[ids].mul_(~new_game).add_(raw_reward)
            length = self.length[ids].mul_(~new_game).add_(1)
            self.score[ids], self.length[ids] = score, length
            return ended, score, length
        self.score.mul_(~new_game).add_(raw_reward)
        self.length.mul_(~new_game).add_(1)
        return ended, self.score, self.length


def game_starts(info: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """[B] which step results are the first observation of a game (``rlfast.FrameStack``'s ``new_game``): an Atari
    env's own flag (a game spans lives); for any other env, where a reset put it (``elapsed_step`` 0)."""
    return info["new_game"] if "new_game" in info else info["elapsed_step"] == 0


class Episodes:
    """The episodes that end in a trainer's step results, for ``RunLog.episodes``: a ``rows`` x ``num_envs``
    table filled by ``record`` (the sync trainers: row = step of the rollout), or a list filled by
    ``collect`` from any thread (APPO's sampler: any envs per batch) and emptied by ``take``. ``atari``:
    whole games (``GameStats``), else the pool's episode totals."""

    def __init__(self, num_envs: int, atari: bool, rows: int = 0) -> None:
        self.games = GameStats(num_envs) if atari else None
        self.done = torch.zeros((rows, num_envs), dtype=torch.bool)
        self.ret = torch.zeros((rows, num_envs))
        self.length = torch.zeros((rows, num_envs), dtype=torch.int32)
        self._returns: list[torch.Tensor] = []
        self._lengths: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def ends(self, terminated: torch.Tensor, truncated: torch.Tensor, info: Mapping[str, torch.Tensor],
             envs: Optional[Union[torch.Tensor, slice]] = None) -> tuple[torch.Tensor, ...]:  # fmt: skip
        """``(ended, return, length)`` [B] of one step result of the envs ``envs`` (all; a slice; [B] ids): which
        envs ended an episode with it, and their episodes' totals so far (valid until the next call)."""
        if self.games is not None:
            return self.games.update(info["reward"], truncated, info["game_over"], info["new_game"], envs)
        return terminated | truncated, info["episode_return"], info["episode_length"]

    def record(self, row: int, terminated: torch.Tensor, truncated: torch.Tensor, info: Mapping[str, torch.Tensor],
               envs: slice = slice(None)) -> torch.Tensor:  # fmt: skip
        """Writes one step result of the envs ``envs`` (columns of the table) into ``row``; returns the row's
        episode ends [B] (a view: copy it before the row is written again)."""
        ended, score, length = self.ends(terminated, truncated, info, envs)
        done = self.done[row, envs]
        done.copy_(ended)
        self.ret[row, envs] = score
        self.length[row, envs] = length
        return done

    @property
    def table(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(ep_done, ep_return, ep_length)`` [rows, num_envs]: what ``record`` wrote (``Run.end_iteration``'s)."""
        return self.done, self.ret, self.length

    def collect(self, terminated: torch.Tensor, truncated: torch.Tensor, info: Mapping[str, torch.Tensor],
                env_ids: torch.Tensor) -> None:  # fmt: skip
        """Keeps the episodes that end in one result batch of the envs ``env_ids`` [B] (any thread)."""
        ended, score, length = self.ends(terminated, truncated, info, env_ids)
        if bool(ended.any()):
            with self._lock:
                self._returns.append(score[ended].float())
                self._lengths.append(length[ended].int())

    def take(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The episodes ``collect`` kept since the last call, as ``(ep_done, ep_return, ep_length)`` [1, M]."""
        with self._lock:
            returns, lengths = self._returns, self._lengths
            self._returns, self._lengths = [], []
        ret = torch.cat(returns) if returns else torch.zeros(0)
        length = torch.cat(lengths) if lengths else torch.zeros(0, dtype=torch.int32)
        return torch.ones((1, len(ret)), dtype=torch.bool), ret[None], length[None]
