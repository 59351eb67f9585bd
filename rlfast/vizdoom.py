"""VizDoom scenarios as gymnasium envs with Sample Factory's Doom preprocessing, for rlfast's pool of Python envs.

    pool = rlfast.make("rlfast.vizdoom:DoomBasic-v0", num_envs=16, batch_size=8)   # worker processes
    obs, reward, terminated, truncated, info = pool.step(actions)
    obs["obs"]            # uint8 [8, 3, 72, 128]: the screen, channels first
    obs["measurements"]   # float32 [8, 23]: health, ammo, weapons... (Sample Factory's DoomAdditionalInput)

An optional extra: ``pip install "rlfast[vizdoom]"`` (the ``vizdoom`` package, 1.3 or later; it runs headless).
Importing this module registers the gymnasium ids below and needs nothing else; making an env imports vizdoom.

The scenarios are the vizdoom package's own (``vizdoom.scenarios_path``: its .wad maps and .cfg files). On top of
each, what Sample Factory 2.1.1 does to it (``sf_examples/vizdoom/doom/``; file and function named per setting):

- screen 160x120 (``doom_utils.py``, ``make_doom_env_impl``: "160x120" unless ``--wide_aspect_ratio``), RGB, resized
  to 128x72 with nearest-neighbour sampling (``sample_factory/envs/env_wrappers.py``, ``ResizeWrapper``:
  ``cv2.INTER_NEAREST``; ``doom_params.py``: ``--res_w 128 --res_h 72``), channels first (``--pixel_format CHW``);
  the screen after an episode's last step is black (``doom_gym.py``, ``VizdoomEnv._process_game_step``);
- frame skip 4: each action held for 4 tics, the last one rendered (``doom_params.py``, ``doom_override_defaults``:
  ``env_frameskip=4``; ``VizdoomEnv.step``: ``make_action(actions, skip_frames)``);
- the action set of each scenario (``doom_utils.py``, ``DOOM_ENVS``; ``action_space.py``), with the buttons of Sample
  Factory's .cfg of the scenario, in its order (``doom/scenarios/*.cfg``): a flat ``Discrete(1 + k)`` is no-op or one
  of k buttons; a Tuple of sub-spaces becomes a ``MultiDiscrete``, each head no-op or one of its buttons, a
  ``Discretized(n, lo, hi)`` head a delta button's value ``lo + i (hi - lo) / (n - 1)``
  (``VizdoomEnv._convert_actions``);
- what the agent sees as Sample Factory's .cfg renders it: HUD, crosshair and weapon per scenario, no decals, no
  particles (``doom/scenarios/*.cfg``);
- measurements, an extra input for every scenario: the 23 values of ``wrappers/additional_input.py``,
  ``DoomAdditionalInput._parse_info`` (selected weapon, its ammo / 15 (at most 5), health / 30, armor / 30, kills
  (USER2 / 10: battle maps only, else 0), attack ready, player count / 5 (1 here), then WEAPON0..7 and AMMO0..7 / 15
  (at most 5)), from game variables this module adds to every scenario. Sample Factory feeds them only to its
  battle and deathmatch envs (``ADDITIONAL_INPUT`` in ``DOOM_ENVS``); a model may ignore them;
- rewards (``rewards="sample_factory"``, the default: what Sample Factory trains on): its .cfg's living reward and
  death penalty where they differ from the vizdoom package's (health gathering: 0.01 and 0, not 1 and 100), its
  reward shaping (``wrappers/scenario_wrappers/gathering_reward_shaping.py``, ``DoomGatheringRewardShaping``: +1
  each step health rises; ``wrappers/reward_shaping.py``, ``DoomRewardShapingWrapper`` with
  ``REWARD_SHAPING_BATTLE`` for Deathmatch) and scaling (``RewardScalingWrapper``: 0.01 for Basic and DeadlyCorridor).
  ``rewards="vizdoom"``: the vizdoom package's .cfg rewards alone, the scenario's own score.

Deathmatch (the vizdoom package's single-player arena) has no Sample Factory spec: it takes that of
``doom_battle``, the one single-player fight against monsters there (its buttons, action set, HUD, measurements and
reward shaping, ``battle_continuous_turning.cfg``). With the weapon and ammo variables this module adds, the
shaping's weapon, ammo and armor terms count, as in Sample Factory's deathmatch envs (its battle .cfg lacks them).
Sample Factory's selected-weapon reward reads ``SELECTED{weapon}`` with ``weapon`` the module's leftover loop
variable (7), so it pays 0.002 whatever the weapon; this module pays the same.

Where this differs from Sample Factory: the vizdoom package's .cfg is loaded first, so its settings that Sample
Factory's .cfg does not mention stay (screen flashes off; DeadlyCorridor starts at tic 1), and
HealthGatheringSupreme's map is the vizdoom package's (Sample Factory ships another revision of the .wad). The
scenario's time limit (``episode_timeout`` in tics) ends an episode as ``truncated``, as vizdoom's own gymnasium
envs do; Sample Factory reports it as ``terminated``. Its agent-step limits (``default_timeout``: Basic 300,
battle 2100) never bind before the scenarios' own (75 and 1,050 agent steps), so there is none here.

Each env runs the VizDoom engine in a process of its own (vizdoom's executable, which the env drives through shared
memory); its settings file goes to ``~/.cache/rlfast/vizdoom/_vizdoom.ini`` (``$RLFAST_CACHE``), not the working
directory.

Seeding: ``reset(seed=s)`` seeds the env's generator; every reset seeds the game with a draw from it (as vizdoom's
own gymnasium envs do), so the same seed gives the same frames.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import gymnasium as gym
import numpy as np

NUM_WEAPONS = 8
MEASUREMENT_VARIABLES = ("SELECTED_WEAPON", "SELECTED_WEAPON_AMMO", "HEALTH", "ARMOR", "USER2", "ATTACK_READY",
                         *(f"WEAPON{w}" for w in range(NUM_WEAPONS)),
                         *(f"AMMO{w}" for w in range(NUM_WEAPONS)))  # fmt: skip
"""the game variables the measurements are made of (DoomAdditionalInput's, less PLAYER_COUNT: one player)"""
_LOW = np.array([0, 0, -1, -1, -50, 0, 0] + [0] * NUM_WEAPONS * 2, np.float32)
_HIGH = np.array([20, 50, 50, 50, 50, 1, 10] + [5] * NUM_WEAPONS + [50] * NUM_WEAPONS, np.float32)
"""DoomAdditionalInput's bounds of the 23 measurements"""
SCREEN = (160, 120)
RESIZE = (128, 72)
FRAME_SKIP = 4


@dataclass(frozen=True)
class Scenario:
    """One scenario: the vizdoom package's ``cfg``, and Sample Factory's settings for it (``DOOM_ENVS`` entry
    ``sf_name``, its .cfg ``sf_cfg``)."""

    cfg: str
    sf_name: str
    sf_cfg: str
    buttons: tuple[str, ...]
    """available buttons, in the order of Sample Factory's .cfg"""
    heads: tuple[int, ...] = ()
    """a Tuple action space: the sizes of its one-hot heads (no-op + buttons), then ``delta`` if any; () for flat"""
    delta: Optional[tuple[int, float, float]] = None
    """a last ``Discretized(n, lo, hi)`` head driving the last button (a delta button)"""
    hud: tuple[bool, bool, bool] = (False, False, False)
    """render_hud, render_crosshair, render_weapon of Sample Factory's .cfg"""
    variables: tuple[str, ...] = ()
    """the game variables of Sample Factory's .cfg"""
    sf_rewards: Optional[tuple[float, float]] = None
    """(living_reward, death_penalty) of Sample Factory's .cfg where they differ from the vizdoom package's"""
    shaping: Optional[str] = None
    """Sample Factory's reward shaping: "gathering" or "battle" """
    reward_scale: float = 1.0


_TURN_MOVE = ("TURN_LEFT", "TURN_RIGHT", "MOVE_FORWARD", "MOVE_BACKWARD")
SCENARIOS = {
    "DoomBasic-v0": Scenario("basic.cfg", "doom_basic", "basic.cfg", ("MOVE_LEFT", "MOVE_RIGHT", "ATTACK"),
                             hud=(True, False, True), variables=("AMMO2", "POSITION_X", "POSITION_Y", "ANGLE"),
                             reward_scale=0.01),
    "DoomDefendCenter-v0": Scenario("defend_the_center.cfg", "doom_defend_the_center", "defend_the_center.cfg",
                                    ("TURN_LEFT", "TURN_RIGHT", "ATTACK"), heads=(3, 2), hud=(True, False, True),
                                    variables=("AMMO2", "HEALTH")),
    "DoomHealthGathering-v0": Scenario("health_gathering.cfg", "doom_health_gathering", "health_gathering.cfg",
                                       _TURN_MOVE, variables=("HEALTH",), sf_rewards=(0.01, 0.0), shaping="gathering"),
    "DoomHealthGatheringSupreme-v0": Scenario("health_gathering_supreme.cfg", "doom_health_gathering_supreme",
                                              "health_gathering_supreme.cfg", _TURN_MOVE, variables=("HEALTH",),
                                              sf_rewards=(0.01, 0.0), shaping="gathering"),
    "DoomMyWayHome-v0": Scenario("my_way_home.cfg", "doom_my_way_home", "my_way_home.cfg", _TURN_MOVE, heads=(3, 3),
                                 hud=(False, False, True), variables=("AMMO0",)),
    "DoomDeadlyCorridor-v0": Scenario("deadly_corridor.cfg", "doom_deadly_corridor", "deadly_corridor.cfg",
                                      (*_TURN_MOVE, "MOVE_LEFT", "MOVE_RIGHT", "ATTACK"), heads=(3, 3, 3, 2),
                                      hud=(True, False, True), variables=("HEALTH",), reward_scale=0.01),
    "DoomDeathmatch-v0": Scenario("deathmatch.cfg", "doom_battle", "battle_continuous_turning.cfg",
                                  ("MOVE_FORWARD", "MOVE_BACKWARD", "MOVE_RIGHT", "MOVE_LEFT", "ATTACK", "SPEED",
                                   "TURN_LEFT_RIGHT_DELTA"), heads=(3, 3, 2, 2), delta=(11, -10.0, 10.0),
                                  hud=(True, True, True), variables=("POSITION_X", "POSITION_Y", "ANGLE",
                                  "SELECTED_WEAPON", "SELECTED_WEAPON_AMMO", "HEALTH", "USER2"), shaping="battle"),
}  # fmt: skip
"""gymnasium id -> its scenario; ``rlfast.make("rlfast.vizdoom:<id>", ...)``"""

_BATTLE_DELTAS = {"FRAGCOUNT": (1.0, -1.5), "DEATHCOUNT": (-0.75, 0.75), "HITCOUNT": (0.01, -0.01),
                  "DAMAGECOUNT": (0.003, -0.003), "HEALTH": (0.005, -0.003), "ARMOR": (0.005, -0.001)}  # fmt: skip
_PREFERENCE = {2: 1, 3: 5, 4: 5, 5: 5, 6: 10, 7: 10}
for _w in range(NUM_WEAPONS):
    _BATTLE_DELTAS[f"WEAPON{_w}"] = (0.02 * _PREFERENCE.get(_w, 1), -0.01 * _PREFERENCE.get(_w, 1))
    _BATTLE_DELTAS[f"AMMO{_w}"] = (0.0002 * _PREFERENCE.get(_w, 1), -0.0001 * _PREFERENCE.get(_w, 1))
_DELTA_LIMITS = {"DAMAGECOUNT": 200.0, "HITCOUNT": 5.0}
_SELECTED_WEAPON_REWARD = 0.0002 * _PREFERENCE[7]  # Sample Factory's SELECTED{weapon} with weapon == 7 (docstring)
"""REWARD_SHAPING_BATTLE of reward_shaping.py: per variable, (reward per unit of rise, per unit of fall)"""


def _engine_ini() -> Path:
    """ZDoom's settings file, which the game writes (by default ``_vizdoom.ini`` in the working directory): in
    ``$RLFAST_CACHE/vizdoom`` or ``~/.cache/rlfast/vizdoom``, as ``rlfast.load_env``'s builds."""
    folder = Path(os.environ.get("RLFAST_CACHE", Path.home() / ".cache" / "rlfast")) / "vizdoom"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "_vizdoom.ini"


def _nearest_rows(src: int, dst: int) -> np.ndarray:
    """The source rows (or columns) OpenCV's INTER_NEAREST takes for each of ``dst``: floor(i * (1 / (dst / src)))."""
    return np.minimum(np.floor(np.arange(dst) * (1.0 / (dst / src))).astype(np.int64), src - 1)


class DoomEnv(gym.Env):
    """One VizDoom scenario (a key of ``SCENARIOS``) with Sample Factory's preprocessing (the module's docstring).

    Observation: ``Dict(measurements=Box(float32, (23,)), obs=Box(uint8, (3, 72, 128)))``; actions ``Discrete`` or
    ``MultiDiscrete`` per scenario. ``rewards``: "sample_factory" or "vizdoom"; ``frame_skip``: tics per action;
    ``render_mode="rgb_array"``: ``render()`` is the last 160x120 screen, [120, 160, 3]."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35 / FRAME_SKIP}

    def __init__(self, scenario: str, rewards: str = "sample_factory", frame_skip: int = FRAME_SKIP,
                 render_mode: Optional[str] = None) -> None:  # fmt: skip
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown VizDoom scenario {scenario!r}; one of {sorted(SCENARIOS)}")
        if rewards not in ("sample_factory", "vizdoom"):
            raise ValueError(f"rewards must be 'sample_factory' or 'vizdoom', got {rewards!r}")
        if isinstance(frame_skip, bool) or not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"frame_skip must be an int >= 1, got {frame_skip!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        try:
            import vizdoom
        except ImportError as e:
            raise ImportError(f"{scenario} needs the vizdoom package: pip install 'rlfast[vizdoom]' ({e})") from e
        self.scenario = s = SCENARIOS[scenario]
        self.sf_rewards, self.frame_skip, self.render_mode = rewards == "sample_factory", frame_skip, render_mode
        self.observation_space = gym.spaces.Dict({
            "obs": gym.spaces.Box(0, 255, (3, RESIZE[1], RESIZE[0]), np.uint8),
            "measurements": gym.spaces.Box(_LOW, _HIGH, dtype=np.float32),
        })  # fmt: skip
        self.action_space = (gym.spaces.MultiDiscrete([*s.heads, *([s.delta[0]] if s.delta else [])]) if s.heads
                             else gym.spaces.Discrete(1 + len(s.buttons)))  # fmt: skip
        self._table = _button_table(s)
        self._strides = np.cumprod([1, *self.action_space.nvec[::-1]])[-2::-1] if s.heads else None
        game = self.game = vizdoom.DoomGame()
        game.load_config(os.path.join(vizdoom.scenarios_path, s.cfg))
        game.set_doom_scenario_path(os.path.join(vizdoom.scenarios_path, s.cfg.replace(".cfg", ".wad")))
        game.set_screen_resolution(getattr(vizdoom.ScreenResolution, f"RES_{SCREEN[0]}X{SCREEN[1]}"))
        game.set_screen_format(vizdoom.ScreenFormat.CRCGCB)
        game.set_window_visible(False)
        game.set_mode(vizdoom.Mode.PLAYER)
        game.set_doom_config_path(str(_engine_ini()))
        game.set_render_hud(s.hud[0])
        game.set_render_crosshair(s.hud[1])
        game.set_render_weapon(s.hud[2])
        game.set_render_decals(False)
        game.set_render_particles(False)
        game.set_available_buttons([getattr(vizdoom.Button, b) for b in s.buttons])
        names = list(dict.fromkeys((*s.variables, *MEASUREMENT_VARIABLES)))
        game.set_available_game_variables([getattr(vizdoom.GameVariable, v) for v in names])
        if self.sf_rewards and s.sf_rewards is not None:
            game.set_living_reward(s.sf_rewards[0])
            game.set_death_penalty(s.sf_rewards[1])
        self._names = {v: i for i, v in enumerate(names)}
        self._measured = np.array([self._names[v] for v in MEASUREMENT_VARIABLES])
        rows, cols = _nearest_rows(SCREEN[1], RESIZE[1]), _nearest_rows(SCREEN[0], RESIZE[0])
        # The resize as one gather from the flat [3, 120, 160] screen (fancy indexing on 3 axes costs 7x more).
        self._pixels = (np.arange(3)[:, None, None] * SCREEN[0] * SCREEN[1] + rows[:, None] * SCREEN[0] + cols).ravel()
        self._black = np.zeros((3, RESIZE[1], RESIZE[0]), np.uint8)
        self._variables = np.zeros(len(names))
        self._screen: Optional[np.ndarray] = None
        self._started = False

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.game.set_seed(int(self.np_random.integers(0, 2**32 - 1)))
        if self._started:
            self.game.new_episode()
        else:
            self.game.init()
            self._started = True
        self._prev_health: Optional[float] = None  # gathering shaping
        self._prev: dict[str, float] = {}  # battle shaping: the variables at the last step
        self._prev_dead, self._selected = True, []
        return self._observe(False), {}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        row = int(action) if self._strides is None else int(np.dot(action, self._strides))
        reward = self.game.make_action(self._table[row], self.frame_skip)
        finished = self.game.is_episode_finished()
        truncated = finished and self.game.is_episode_timeout_reached()
        obs = self._observe(finished)
        if self.sf_rewards:
            reward = (reward + self._shaping(finished)) * self.scenario.reward_scale
        return obs, float(reward), finished and not truncated, truncated, {}

    def _observe(self, finished: bool) -> dict:
        """The observation of the current state; after an episode's end a black screen and the last measurements."""
        if finished:
            screen = self._black
        else:
            state = self.game.get_state()
            self._screen = state.screen_buffer  # [3, 120, 160]
            self._variables = state.game_variables
            screen = self._screen.ravel().take(self._pixels).reshape(3, RESIZE[1], RESIZE[0])
        return {"obs": screen, "measurements": self._measurements()}

    def _measurements(self) -> np.ndarray:
        """DoomAdditionalInput._parse_info's 23 values from the game variables."""
        v = np.maximum(self._variables[self._measured], 0.0)  # negative when no weapon is selected; dead is dead
        raw = self._variables[self._measured]
        w = 6 + NUM_WEAPONS
        return np.concatenate([
            [np.round(v[0]), min(v[1] / 15.0, 5.0), v[2] / 30.0, raw[3] / 30.0, raw[4] / 10.0, raw[5], 1 / 5.0],
            v[6:w], np.minimum(v[w:] / 15.0, 5.0),
        ]).astype(np.float32)  # fmt: skip

    def _value(self, name: str) -> float:
        i = self._names.get(name)
        return 0.0 if i is None else float(self._variables[i])

    def _shaping(self, done: bool) -> float:
        """Sample Factory's shaping reward of this step (its wrappers read the last frame's variables)."""
        if self.scenario.shaping == "gathering":  # DoomGatheringRewardShaping._reward_shaping
            if done:
                return 0.0
            health, prev = self._value("HEALTH"), self._prev_health
            self._prev_health = health
            return 1.0 if prev is not None and health - prev > 0.0 else 0.0
        if self.scenario.shaping != "battle":
            return 0.0
        # DoomRewardShapingWrapper._parse_info (REWARD_SHAPING_BATTLE); DEAD is no variable here, so alive.
        weapon = int(max(0.0, self._value("SELECTED_WEAPON")))
        self._selected = (self._selected + [weapon])[-5:]
        reward = 0.0
        if not done and not self._prev_dead:  # the first step after a (re)spawn pays nothing
            for name, (rise, fall) in _BATTLE_DELTAS.items():
                if name in self._prev:
                    delta = min(self._value(name) - self._prev[name], _DELTA_LIMITS.get(name, np.inf))
                    if delta > 1e-8:
                        reward += delta * rise
                    elif delta < -1e-8:
                        reward += -delta * fall
            held = len(self._selected) > 4 and all(w == weapon for w in self._selected)
            if held and self._value("SELECTED_WEAPON_AMMO") > 0:
                reward += _SELECTED_WEAPON_REWARD
        self._prev = {name: self._value(name) for name in _BATTLE_DELTAS}
        self._prev_dead = False
        return reward

    def render(self) -> Optional[np.ndarray]:
        if self.render_mode != "rgb_array" or self._screen is None:
            return None
        return np.ascontiguousarray(self._screen.transpose(1, 2, 0))

    def close(self) -> None:
        self.game.close()


def _button_table(s: Scenario) -> list[list[float]]:
    """The buttons' values for each action (a MultiDiscrete action's row: its heads' indices in mixed radix):
    VizdoomEnv._convert_actions of each action."""
    if not s.heads:  # Discrete(1 + k): 0 no-op, i presses button i - 1
        return [[float(i == a - 1) for i in range(len(s.buttons))] for a in range(1 + len(s.buttons))]
    parts = []
    for n in s.heads:  # one-hot heads: 0 no-op, i presses the head's button i - 1
        parts.append([[float(i == a - 1) for i in range(n - 1)] for a in range(n)])
    if s.delta is not None:
        n, lo, hi = s.delta
        parts.append([[lo + a * (hi - lo) / (n - 1)] for a in range(n)])
    rows = [[]]
    for head in parts:
        rows = [r + h for r in rows for h in head]
    return rows


for _id in SCENARIOS:
    if _id not in gym.registry:
        gym.register(_id, entry_point="rlfast.vizdoom:DoomEnv", kwargs={"scenario": _id}, disable_env_checker=True)
