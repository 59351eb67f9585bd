// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_CLASSIC_CONTROL_PENDULUM_H_
#define RLFAST_CSRC_ENVS_CLASSIC_CONTROL_PENDULUM_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::classic_control {

/// Pendulum-v1 options (gymnasium's PendulumEnv keyword arguments).
struct PendulumConfig {
  /// Gravitational acceleration.
  double g = 10.0;

  template <class V>
  void Visit(V&& v) {
    v("g", g);
  }
};

/// gymnasium Pendulum-v1: torque clipped to [-2, 2]; reward -(theta^2 + 0.1 thetadot^2 +
/// 0.001 u^2) with theta normalized to [-pi, pi); never terminates (time limit 200).
/// The torque terms are rounded to float32 where gymnasium (NumPy 2 promotion of a float32
/// action times a Python float) computes them in float32.
class Pendulum : public core::EnvBase {
 public:
  using Config = PendulumConfig;
  using Action = float;
  using Obs = float;

  static constexpr double kMaxSpeed = 8.0;
  static constexpr double kMaxTorque = 2.0;
  static constexpr double kDt = 0.05;
  static constexpr double kMass = 1.0;
  static constexpr double kLength = 1.0;

  static core::EnvSpec Spec(const Config& /*config*/) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {3}, {}, {}};
    spec.obs.low = {-1.0, -1.0, -kMaxSpeed};
    spec.obs.high = {1.0, 1.0, kMaxSpeed};
    spec.action = {"action", core::DType::kFloat32, {1}, {-kMaxTorque}, {kMaxTorque}};
    spec.max_episode_steps = 200;
    return spec;
  }

  Pendulum(const Config& config, uint64_t seed) : core::EnvBase(seed), config_(config) {}

  void Reset() {
    theta_ = Uniform(-M_PI, M_PI);
    theta_dot_ = Uniform(-1.0, 1.0);
  }

  core::StepResult Step(const Action* action) {
    const float u = std::min(std::max(*action, -2.0f), 2.0f);
    const double g = config_.g;
    const double th = theta_, thdot = theta_dot_;
    const double norm = AngleNormalize(th);
    const float u_cost = 0.001f * (u * u);
    const double costs = norm * norm + 0.1 * (thdot * thdot) + u_cost;
    const float u_acc = static_cast<float>(3.0 / (kMass * kLength * kLength)) * u;
    double new_thdot = thdot + (3 * g / (2 * kLength) * std::sin(th) + u_acc) * kDt;
    new_thdot = std::min(std::max(new_thdot, -kMaxSpeed), kMaxSpeed);
    theta_ = th + new_thdot * kDt;
    theta_dot_ = new_thdot;
    core::StepResult r;
    r.reward = static_cast<float>(-costs);
    return r;
  }

  void WriteObs(Obs* obs) const {
    obs[0] = static_cast<float>(std::cos(theta_));
    obs[1] = static_cast<float>(std::sin(theta_));
    obs[2] = static_cast<float>(theta_dot_);
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: [theta, thetadot], gymnasium's `state`.
  std::vector<double> GetState() const { return {theta_, theta_dot_}; }
  void SetState(const std::vector<double>& s) {
    theta_ = s[0];
    theta_dot_ = s[1];
  }
#endif

 private:
  /// ((x + pi) mod 2pi) - pi with Python's floor-mod sign convention.
  static double AngleNormalize(double x) {
    double m = std::fmod(x + M_PI, 2 * M_PI);
    if (m < 0) m += 2 * M_PI;
    return m - M_PI;
  }

  Config config_;
  double theta_ = 0.0;
  double theta_dot_ = 0.0;
};

}  // namespace rlfast::envs::classic_control

#endif  // RLFAST_CSRC_ENVS_CLASSIC_CONTROL_PENDULUM_H_
