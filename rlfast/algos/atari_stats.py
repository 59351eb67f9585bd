"""Full-game Atari episode statistics, as CleanRL logs them, as vectorized tensor ops.

Under ``episodic_life=True`` (and ``reward_clip=True``) the pool's episodes are lives and
its rewards are clipped, but ``charts/episodic_return`` must be the game's raw score: the
sum of ``info["reward"]`` (always the unclipped reward) over every life until the game is
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

from typing import Optional, Union

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
        env_ids: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Adds one step result of every env: all arguments [B] in env order (or of the envs ``env_ids``
        [B], an async pool's batch: then score and length are [B] copies in that order).

        raw_reward: ``info["reward"]``; truncated: the pool's ``truncated``; game_over,
        new_game: ``info["game_over"]``, ``info["new_game"]``.
        Returns ``(ended [B] bool, score [B] float32, length [B] int32)``: score and length
        are this object's running state (the finished game's totals where ``ended``), so
        copy them before the next ``update``.
        """
        # A new game's reset step starts the count at 1 (its reward is 0); otherwise accumulate.
        ended = game_over | truncated
        if env_ids is not None:
            ids = env_ids.long()
            score = self.score[ids].mul_(~new_game).add_(raw_reward)
            length = self.length[ids].mul_(~new_game).add_(1)
            self.score[ids], self.length[ids] = score, length
            return ended, score, length
        self.score.mul_(~new_game).add_(raw_reward)
        self.length.mul_(~new_game).add_(1)
        return ended, self.score, self.length
