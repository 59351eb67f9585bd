// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_CLASSIC_CONTROL_ACROBOT_H_
#define RLFAST_CSRC_ENVS_CLASSIC_CONTROL_ACROBOT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::classic_control {

/// Acrobot-v1 has no options (gymnasium's AcrobotEnv takes none besides render_mode).
struct AcrobotConfig {
  template <class V>
  void Visit(V&& /*v*/) {}
};

/// gymnasium Acrobot-v1 ("book" dynamics, no torque noise): one RK4 step of dt = 0.2 per
/// action, angles wrapped to [-pi, pi], velocities clipped; reward -1 per step, 0 on the
/// terminating one. The arithmetic follows gymnasium's `_dsdt`/`rk4` term by term so the
/// double-precision states agree to the last bit or two.
class Acrobot : public core::EnvBase {
 public:
  using Config = AcrobotConfig;
  using Action = int32_t;
  using Obs = float;

  static constexpr double kDt = 0.2;
  static constexpr double kLinkLength1 = 1.0;
  static constexpr double kLinkMass1 = 1.0;
  static constexpr double kLinkMass2 = 1.0;
  static constexpr double kLinkComPos1 = 0.5;
  static constexpr double kLinkComPos2 = 0.5;
  static constexpr double kLinkMoi = 1.0;
  static constexpr double kMaxVel1 = 4 * M_PI;
  static constexpr double kMaxVel2 = 9 * M_PI;
  static constexpr double kTorque[3] = {-1.0, 0.0, 1.0};

  static core::EnvSpec Spec(const Config& /*config*/) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {6}, {}, {}};
    spec.obs.high = {1.0, 1.0, 1.0, 1.0, kMaxVel1, kMaxVel2};
    spec.obs.low = {-1.0, -1.0, -1.0, -1.0, -kMaxVel1, -kMaxVel2};
    spec.num_actions = 3;
    spec.max_episode_steps = 500;
    return spec;
  }

  Acrobot(const Config& /*config*/, uint64_t seed) : core::EnvBase(seed) {}

  void Reset() {
    // gymnasium draws float64 then casts the state to float32; keep that rounding.
    for (double& s : state_) s = static_cast<float>(Uniform(-0.1, 0.1));
  }

  core::StepResult Step(const Action* action) {
    const double torque = kTorque[*action];
    double k1[4], k2[4], k3[4], k4[4], y[4];
    const double dt2 = kDt / 2.0;
    Derivs(state_, torque, k1);
    for (int i = 0; i < 4; ++i) y[i] = state_[i] + dt2 * k1[i];
    Derivs(y, torque, k2);
    for (int i = 0; i < 4; ++i) y[i] = state_[i] + dt2 * k2[i];
    Derivs(y, torque, k3);
    for (int i = 0; i < 4; ++i) y[i] = state_[i] + kDt * k3[i];
    Derivs(y, torque, k4);
    for (int i = 0; i < 4; ++i) {
      state_[i] = state_[i] + kDt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    }
    state_[0] = Wrap(state_[0], -M_PI, M_PI);
    state_[1] = Wrap(state_[1], -M_PI, M_PI);
    state_[2] = std::min(std::max(state_[2], -kMaxVel1), kMaxVel1);
    state_[3] = std::min(std::max(state_[3], -kMaxVel2), kMaxVel2);
    core::StepResult r;
    r.terminated = -std::cos(state_[0]) - std::cos(state_[1] + state_[0]) > 1.0;
    r.reward = r.terminated ? 0.0f : -1.0f;
    return r;
  }

  void WriteObs(Obs* obs) const {
    obs[0] = static_cast<float>(std::cos(state_[0]));
    obs[1] = static_cast<float>(std::sin(state_[0]));
    obs[2] = static_cast<float>(std::cos(state_[1]));
    obs[3] = static_cast<float>(std::sin(state_[1]));
    obs[4] = static_cast<float>(state_[2]);
    obs[5] = static_cast<float>(state_[3]);
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: [theta1, theta2, dtheta1, dtheta2], gymnasium's `state`.
  std::vector<double> GetState() const { return {state_, state_ + 4}; }
  void SetState(const std::vector<double>& s) { std::copy(s.begin(), s.end(), state_); }
#endif

 private:
  /// gymnasium `_dsdt` with the "book" equation for ddtheta2.
  static void Derivs(const double* s, double a, double* out) {
    const double m1 = kLinkMass1, m2 = kLinkMass2, l1 = kLinkLength1;
    const double lc1 = kLinkComPos1, lc2 = kLinkComPos2, i1 = kLinkMoi, i2 = kLinkMoi;
    const double g = 9.8;
    const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    const double d1 =
        m1 * (lc1 * lc1) + m2 * (l1 * l1 + lc2 * lc2 + 2 * l1 * lc2 * std::cos(theta2)) + i1 + i2;
    const double d2 = m2 * (lc2 * lc2 + l1 * lc2 * std::cos(theta2)) + i2;
    const double phi2 = m2 * lc2 * g * std::cos(theta1 + theta2 - M_PI / 2.0);
    const double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * std::sin(theta2) -
                        2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                        (m1 * lc1 + m2 * l1) * g * std::cos(theta1 - M_PI / 2) + phi2;
    const double ddtheta2 =
        (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * std::sin(theta2) - phi2) /
        (m2 * (lc2 * lc2) + i2 - (d2 * d2) / d1);
    const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    out[0] = dtheta1;
    out[1] = dtheta2;
    out[2] = ddtheta1;
    out[3] = ddtheta2;
  }

  static double Wrap(double x, double m, double hi) {
    const double diff = hi - m;
    while (x > hi) x -= diff;
    while (x < m) x += diff;
    return x;
  }

  double state_[4] = {0, 0, 0, 0};
};

}  // namespace rlfast::envs::classic_control

#endif  // RLFAST_CSRC_ENVS_CLASSIC_CONTROL_ACROBOT_H_
