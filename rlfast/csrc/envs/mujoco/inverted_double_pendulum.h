// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_INVERTED_DOUBLE_PENDULUM_H_
#define RLFAST_CSRC_ENVS_MUJOCO_INVERTED_DOUBLE_PENDULUM_H_

#include <cmath>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// InvertedDoublePendulum-v5 options (gymnasium's keyword arguments and defaults).
struct InvertedDoublePendulumConfig {
  std::string xml_file = "inverted_double_pendulum.xml";
  int frame_skip = 5;
  double healthy_reward = 10.0;
  double reset_noise_scale = 0.1;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("healthy_reward", healthy_reward);
    v("reset_noise_scale", reset_noise_scale);
  }
};

/// gymnasium's info keys, in order.
inline constexpr const char* kInvertedDoublePendulumInfo[] = {"reward_survive", "distance_penalty",
                                                              "velocity_penalty"};

/// gymnasium InvertedDoublePendulum-v5: (x, _, y) = the tip site's position; terminates
/// when y <= 1; reward = healthy_reward * alive - (0.01 x^2 + (y - 2)^2)
/// - (0.001 v1^2 + 0.005 v2^2). obs = qpos[0], sin(qpos[1:]), cos(qpos[1:]),
/// clip(qvel, ±10), clip(qfrc_constraint[0], ±10). Reset: uniform qpos, normal qvel noise.
class InvertedDoublePendulum
    : public MujocoTask<InvertedDoublePendulumConfig, kInvertedDoublePendulumInfo> {
 public:
  static constexpr double kClip = 10.0;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, 1 + 2 * (m->nq - 1) + m->nv + 1, InfoSpec());
  }

  InvertedDoublePendulum(const Config& c, uint64_t seed) : MujocoTask(c, seed) {
    if (model_->nsite < 1) throw std::invalid_argument("the model needs a tip site");
  }

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kNormal);
    info_.fill(0.0);
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    const double x = data_->site_xpos[0], y = data_->site_xpos[2];
    const bool terminated = y <= 1;
    const double v1 = data_->qvel[1], v2 = data_->qvel[2];
    const double dist_penalty = 0.01 * (x * x) + (y - 2) * (y - 2);
    const double vel_penalty = 1e-3 * (v1 * v1) + 5e-3 * (v2 * v2);
    const double alive = terminated ? 0.0 : config_.healthy_reward;
    SetInfo(0, {alive, -dist_penalty, -vel_penalty});
    return {static_cast<float>(alive - dist_penalty - vel_penalty), terminated};
  }

  void WriteObs(Obs* obs) const {
    const mjModel& m = *model_;
    *obs++ = data_->qpos[0];
    for (int i = 1; i < m.nq; ++i) *obs++ = std::sin(data_->qpos[i]);
    for (int i = 1; i < m.nq; ++i) *obs++ = std::cos(data_->qpos[i]);
    obs = CopyClipped(data_->qvel, m.nv, -kClip, kClip, obs);
    CopyClipped(data_->qfrc_constraint, 1, -kClip, kClip, obs);
  }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_INVERTED_DOUBLE_PENDULUM_H_
