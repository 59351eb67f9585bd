// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_CLASSIC_CONTROL_CARTPOLE_H_
#define RLFAST_CSRC_ENVS_CLASSIC_CONTROL_CARTPOLE_H_

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::classic_control {

/// CartPole-v1 options (gymnasium's CartPoleEnv keyword arguments).
struct CartPoleConfig {
  /// Reward -1 on the terminating step and 0 otherwise (gymnasium `sutton_barto_reward`).
  bool sutton_barto_reward = false;

  template <class V>
  void Visit(V&& v) {
    v("sutton_barto_reward", sutton_barto_reward);
  }
};

/// gymnasium CartPole-v1: same constants, Euler integration in double precision, float32
/// observations; reward 1 every step (the terminating one included).
class CartPole : public core::EnvBase {
 public:
  using Config = CartPoleConfig;
  using Action = int32_t;
  using Obs = float;

  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassCart + kMassPole;
  static constexpr double kLength = 0.5;
  static constexpr double kPoleMassLength = kMassPole * kLength;
  static constexpr double kForceMag = 10.0;
  static constexpr double kTau = 0.02;
  static constexpr double kThetaThreshold = 12 * 2 * M_PI / 360;
  static constexpr double kXThreshold = 2.4;

  static core::EnvSpec Spec(const Config& /*config*/) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {4}, {}, {}};
    spec.obs.high = {kXThreshold * 2, core::kInf, kThetaThreshold * 2, core::kInf};
    spec.obs.low = {-kXThreshold * 2, -core::kInf, -kThetaThreshold * 2, -core::kInf};
    spec.num_actions = 2;
    spec.max_episode_steps = 500;
    return spec;
  }

  CartPole(const Config& config, uint64_t seed) : core::EnvBase(seed), config_(config) {}

  void Reset() {
    for (double& s : state_) s = Uniform(-0.05, 0.05);
  }

  core::StepResult Step(const Action* action) {
    double x = state_[0], x_dot = state_[1], theta = state_[2], theta_dot = state_[3];
    double force = *action == 1 ? kForceMag : -kForceMag;
    double costheta = std::cos(theta), sintheta = std::sin(theta);
    double temp = (force + kPoleMassLength * theta_dot * theta_dot * sintheta) / kTotalMass;
    double thetaacc = (kGravity * sintheta - costheta * temp) /
                      (kLength * (4.0 / 3.0 - kMassPole * costheta * costheta / kTotalMass));
    double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
    state_[0] = x + kTau * x_dot;
    state_[1] = x_dot + kTau * xacc;
    state_[2] = theta + kTau * theta_dot;
    state_[3] = theta_dot + kTau * thetaacc;
    core::StepResult r;
    r.terminated = state_[0] < -kXThreshold || state_[0] > kXThreshold ||
                   state_[2] < -kThetaThreshold || state_[2] > kThetaThreshold;
    if (config_.sutton_barto_reward) {
      r.reward = r.terminated ? -1.0f : 0.0f;
    } else {
      r.reward = 1.0f;
    }
    return r;
  }

  void WriteObs(Obs* obs) const {
    for (int i = 0; i < 4; ++i) obs[i] = static_cast<float>(state_[i]);
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: the double-precision state, to sync with gymnasium in alignment tests.
  std::vector<double> GetState() const { return {state_, state_ + 4}; }
  void SetState(const std::vector<double>& s) { std::copy(s.begin(), s.end(), state_); }
#endif

 private:
  Config config_;
  double state_[4] = {0, 0, 0, 0};
};

}  // namespace rlfast::envs::classic_control

#endif  // RLFAST_CSRC_ENVS_CLASSIC_CONTROL_CARTPOLE_H_
