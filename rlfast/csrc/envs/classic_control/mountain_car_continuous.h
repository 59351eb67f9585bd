// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_CONTINUOUS_H_
#define RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_CONTINUOUS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::classic_control {

/// MountainCarContinuous-v0 options (gymnasium's Continuous_MountainCarEnv kwargs).
struct MountainCarContinuousConfig {
  /// Minimum velocity at the goal for the episode to terminate.
  double goal_velocity = 0.0;

  template <class V>
  void Visit(V&& v) {
    v("goal_velocity", goal_velocity);
  }
};

/// gymnasium MountainCarContinuous-v0: force = clip(action, -1, 1); reward 100 at the goal
/// minus 0.1 * action^2 (the unclipped action, as gymnasium). gymnasium keeps the state in
/// float32 between steps; so do we (each step computes in double and rounds the state to
/// float32, where gymnasium rounds some intermediate terms too: states agree to ~1 float32
/// ulp per step).
class MountainCarContinuous : public core::EnvBase {
 public:
  using Config = MountainCarContinuousConfig;
  using Action = float;
  using Obs = float;

  static constexpr double kMinPosition = -1.2;
  static constexpr double kMaxPosition = 0.6;
  static constexpr double kMaxSpeed = 0.07;
  static constexpr double kGoalPosition = 0.45;
  static constexpr double kPower = 0.0015;

  static core::EnvSpec Spec(const Config& /*config*/) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {2}, {}, {}};
    spec.obs.low = {kMinPosition, -kMaxSpeed};
    spec.obs.high = {kMaxPosition, kMaxSpeed};
    spec.action = {"action", core::DType::kFloat32, {1}, {-1.0}, {1.0}};
    spec.max_episode_steps = 999;
    return spec;
  }

  MountainCarContinuous(const Config& config, uint64_t seed)
      : core::EnvBase(seed), config_(config) {}

  void Reset() {
    position_ = Uniform(-0.6, -0.4);
    velocity_ = 0.0;
  }

  core::StepResult Step(const Action* action) {
    const double force = std::min(std::max(static_cast<double>(*action), -1.0), 1.0);
    double position = position_, velocity = velocity_;
    velocity += force * kPower - 0.0025 * std::cos(3 * position);
    velocity = std::min(std::max(velocity, -kMaxSpeed), kMaxSpeed);
    position += velocity;
    position = std::min(std::max(position, kMinPosition), kMaxPosition);
    if (position == kMinPosition && velocity < 0) velocity = 0.0;
    core::StepResult r;
    r.terminated = position >= kGoalPosition && velocity >= config_.goal_velocity;
    const double a = *action;
    r.reward = static_cast<float>((r.terminated ? 100.0 : 0.0) - a * a * 0.1);
    position_ = static_cast<float>(position);
    velocity_ = static_cast<float>(velocity);
    return r;
  }

  void WriteObs(Obs* obs) const {
    obs[0] = position_;
    obs[1] = velocity_;
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: [position, velocity], gymnasium's `state`.
  std::vector<double> GetState() const { return {position_, velocity_}; }
  void SetState(const std::vector<double>& s) {
    position_ = static_cast<float>(s[0]);
    velocity_ = static_cast<float>(s[1]);
  }
#endif

 private:
  Config config_;
  float position_ = 0.0f;
  float velocity_ = 0.0f;
};

}  // namespace rlfast::envs::classic_control

#endif  // RLFAST_CSRC_ENVS_CLASSIC_CONTROL_MOUNTAIN_CAR_CONTINUOUS_H_
