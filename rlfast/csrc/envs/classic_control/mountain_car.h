// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_H_
#define RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::classic_control {

/// MountainCar-v0 options (gymnasium's MountainCarEnv keyword arguments).
struct MountainCarConfig {
  /// Minimum velocity at the goal for the episode to terminate.
  double goal_velocity = 0.0;

  template <class V>
  void Visit(V&& v) {
    v("goal_velocity", goal_velocity);
  }
};

/// gymnasium MountainCar-v0: push left / none / right; reward -1 per step; terminates at
/// position >= 0.5 with velocity >= goal_velocity. Double-precision state like gymnasium.
class MountainCar : public core::EnvBase {
 public:
  using Config = MountainCarConfig;
  using Action = int32_t;
  using Obs = float;

  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.5;
  static constexpr double kForce = 0.001;
  static constexpr double kGravity = 0.0025;

  static core::EnvSpec Spec(const Config& /*config*/) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {2}, {}, {}};
    spec.obs.low = {kMinPosition, -kMaxSpeed};
    spec.obs.high = {kMaxPosition, kMaxSpeed};
    spec.num_actions = 3;
    spec.max_episode_steps = 200;
    return spec;
  }

  MountainCar(const Config& config, uint64_t seed) : core::EnvBase(seed), config_(config) {}

  void Reset() {
    position_ = Uniform(-0.6, -0.4);
    velocity_ = 0.0;
  }

  core::StepResult Step(const Action* action) {
    velocity_ += (*action - 1) * kForce + std::cos(3 * position_) * (-kGravity);
    velocity_ = std::min(std::max(velocity_, -kMaxSpeed), kMaxSpeed);
    position_ += velocity_;
    position_ = std::min(std::max(position_, kMinPosition), kMaxPosition);
    if (position_ == kMinPosition && velocity_ < 0) velocity_ = 0.0;
    core::StepResult r;
    r.terminated = position_ >= kGoalPosition && velocity_ >= config_.goal_velocity;
    r.reward = -1.0f;
    return r;
  }

  void WriteObs(Obs* obs) const {
    obs[0] = static_cast<float>(position_);
    obs[1] = static_cast<float>(velocity_);
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: [position, velocity], gymnasium's `state`.
  std::vector<double> GetState() const { return {position_, velocity_}; }
  void SetState(const std::vector<double>& s) {
    position_ = s[0];
    velocity_ = s[1];
  }
#endif

 private:
  Config config_;
  double position_ = 0.0;
  double velocity_ = 0.0;
};

}  // namespace rlfast::envs::classic_control

#endif  // RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_H_
