// A template env for rlfast.load_env: copy it, rename the class, change the dynamics.
//
//     import rlfast
//     rlfast.load_env("examples/gridworld.h", "GridWorld-v0")      # compiles once (~20 s), then cached
//     pool = rlfast.make("GridWorld-v0", num_envs=64, batch_size=32, size=8)
//     python scripts/ppo.py --env-id examples/gridworld.h:GridWorld-v0
//
// The contract (rlfast/csrc/core/env.h): a Config struct whose Visit names each option (they become
// rlfast.make keywords); Action (int32_t: Discrete, float: Box) and Obs types; a static Spec;
// a constructor taking (config, seed); Reset(); Step(action) returning reward and ends; WriteObs
// writing the observation in place. Draw randomness only from rng_ (EnvBase, seeded per env), so a
// run depends on its seeds alone. Nothing in Step may allocate.
#ifndef RLFAST_EXAMPLES_GRIDWORLD_H_
#define RLFAST_EXAMPLES_GRIDWORLD_H_

#include <cstdint>
#include <stdexcept>

#include "rlfast/csrc/core/env.h"

struct GridWorldConfig {
  int size = 5;             ///< the grid is size x size; the goal is the far corner
  double slip = 0.0;        ///< chance that a move goes in a random direction instead
  int max_steps = 100;      ///< episode limit (the pool truncates there)

  template <class V>
  void Visit(V&& v) {
    v("size", size);
    v("slip", slip);
    v("max_steps", max_steps);
  }
};

/// Start in a random cell (not the goal); 4 actions (right, up, left, down); reward -0.01 a step and
/// +1 on reaching the goal, which ends the episode. Observation: the agent's and the goal's (x, y)
/// divided by size - 1, float32.
class GridWorld : public rlfast::core::EnvBase {
 public:
  using Config = GridWorldConfig;
  using Action = int32_t;
  using Obs = float;

  static rlfast::core::EnvSpec Spec(const Config& config) {
    if (config.size < 2) throw std::invalid_argument("GridWorld: size must be >= 2");
    if (config.slip < 0.0 || config.slip > 1.0) throw std::invalid_argument("GridWorld: slip must be in [0, 1]");
    rlfast::core::EnvSpec spec;
    spec.obs = {"obs", rlfast::core::DType::kFloat32, {4}, {0.0}, {1.0}};
    spec.num_actions = 4;
    spec.max_episode_steps = config.max_steps;
    return spec;
  }

  GridWorld(const Config& config, uint64_t seed) : rlfast::core::EnvBase(seed), config_(config) {}

  void Reset() {
    const int last = config_.size - 1;
    do {
      x_ = static_cast<int>(UniformInt(0, last));
      y_ = static_cast<int>(UniformInt(0, last));
    } while (x_ == last && y_ == last);
  }

  rlfast::core::StepResult Step(const Action* action) {
    int a = *action;
    if (config_.slip > 0.0 && Uniform(0.0, 1.0) < config_.slip) a = static_cast<int>(UniformInt(0, 3));
    static constexpr int kDx[4] = {1, 0, -1, 0};
    static constexpr int kDy[4] = {0, 1, 0, -1};
    const int last = config_.size - 1;
    x_ = Clamp(x_ + kDx[a], last);
    y_ = Clamp(y_ + kDy[a], last);
    rlfast::core::StepResult r;
    r.terminated = x_ == last && y_ == last;
    r.reward = r.terminated ? 1.0f : -0.01f;
    return r;
  }

  void WriteObs(Obs* obs) const {
    const float scale = 1.0f / static_cast<float>(config_.size - 1);
    obs[0] = static_cast<float>(x_) * scale;
    obs[1] = static_cast<float>(y_) * scale;
    obs[2] = 1.0f;
    obs[3] = 1.0f;
  }

 private:
  static int Clamp(int v, int last) { return v < 0 ? 0 : (v > last ? last : v); }

  Config config_;
  int x_ = 0;
  int y_ = 0;
};

#endif  // RLFAST_EXAMPLES_GRIDWORLD_H_
