// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_ANT_H_
#define RLFAST_CSRC_ENVS_MUJOCO_ANT_H_

#include <algorithm>
#include <cmath>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Ant-v5 options: gymnasium's AntEnv keyword arguments and defaults (`main_body` by index).
struct AntConfig {
  std::string xml_file = "ant.xml";
  int frame_skip = 5;
  double forward_reward_weight = 1.0;
  double ctrl_cost_weight = 0.5;
  double contact_cost_weight = 5e-4;
  double healthy_reward = 1.0;
  int main_body = 1;
  bool terminate_when_unhealthy = true;
  Range healthy_z_range{0.2, 1.0};
  Range contact_force_range{-1.0, 1.0};
  double reset_noise_scale = 0.1;
  bool exclude_current_positions_from_observation = true;
  bool include_cfrc_ext_in_observation = true;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("contact_cost_weight", contact_cost_weight);
    v("healthy_reward", healthy_reward);
    v("main_body", main_body);
    v("terminate_when_unhealthy", terminate_when_unhealthy);
    v("healthy_z_range", healthy_z_range);
    v("contact_force_range", contact_force_range);
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
    v("include_cfrc_ext_in_observation", include_cfrc_ext_in_observation);
  }
};

/// gymnasium Ant-v5: reward = forward + healthy - ctrl - contact, where contact uses the
/// clipped external contact forces (cfrc_ext, hence mj_rnePostConstraint after each step);
/// obs = qpos[2:], qvel, clip(cfrc_ext[1:]); terminates when unhealthy (z outside the
/// inclusive healthy range or a non-finite state). Reset: uniform qpos, normal qvel noise.
class Ant : public MujocoEnv {
 public:
  using Config = AntConfig;
  /// gymnasium's info keys, in order: the spec and VisitInfo both read this list.
  static constexpr const char* kInfo[] = {
      "x_position", "y_position", "distance_from_origin", "x_velocity", "y_velocity",
      "reward_forward", "reward_ctrl", "reward_contact", "reward_survive"};

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    core::EnvSpec spec;
    spec.obs = ObsSpec(ObsSize(*m, c));
    spec.action = ActionSpec(*m);
    spec.env_bytes = DataBytes(*m);
    spec.info = ScalarInfo(kInfo);
    spec.max_episode_steps = 1000;
    return spec;
  }

  Ant(const Config& c, uint64_t seed) : MujocoEnv(c.xml_file, c.frame_skip, seed), config_(c) {
    if (c.main_body < 0 || c.main_body >= model_->nbody) {
      throw std::invalid_argument("main_body " + std::to_string(c.main_body) +
                                  " is not a body index of the model");
    }
  }

  void Reset() {
    // No mj_rnePostConstraint after a reset: gymnasium's reset obs has cfrc_ext zeroed.
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kNormal);
    std::fill(std::begin(info_), std::end(info_), 0.0);
    XyInfo(info_);
  }

  core::StepResult Step(const Action* action) {
    const double* xpos = data_->xpos + 3 * config_.main_body;
    const double x0 = xpos[0], y0 = xpos[1];
    DoSimulation(action);
    RnePostConstraint();
    const double vx = (xpos[0] - x0) / Dt(), vy = (xpos[1] - y0) / Dt();
    const bool healthy = IsHealthy();
    const double forward = vx * config_.forward_reward_weight;
    const double survive = healthy ? config_.healthy_reward : 0.0;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    const auto [lo, hi] = config_.contact_force_range;
    double contact_sq = 0.0;
    for (int i = 0; i < 6 * model_->nbody; ++i) {
      const double f = std::min(std::max(data_->cfrc_ext[i], lo), hi);
      contact_sq += f * f;
    }
    const double contact = config_.contact_cost_weight * contact_sq;
    XyInfo(info_);
    info_[3] = vx;
    info_[4] = vy;
    info_[5] = forward;
    info_[6] = -ctrl;
    info_[7] = -contact;
    info_[8] = survive;
    core::StepResult r;
    r.reward = static_cast<float>((forward + survive) - (ctrl + contact));
    r.terminated = !healthy && config_.terminate_when_unhealthy;
    return r;
  }

  void WriteObs(Obs* obs) const {
    const mjModel& m = *model_;
    const int skip = config_.exclude_current_positions_from_observation ? 2 : 0;
    obs = Copy(data_->qpos + skip, m.nq - skip, obs);
    obs = Copy(data_->qvel, m.nv, obs);
    if (config_.include_cfrc_ext_in_observation) {
      const auto [lo, hi] = config_.contact_force_range;
      CopyClipped(data_->cfrc_ext + 6, 6 * (m.nbody - 1), lo, hi, obs);
    }
  }

  template <class V>
  void VisitInfo(V&& v) const {
    VisitScalars(v, kInfo, info_);
  }

 private:
  static int64_t ObsSize(const mjModel& m, const Config& c) {
    return m.nq + m.nv - 2 * c.exclude_current_positions_from_observation +
           6 * (m.nbody - 1) * c.include_cfrc_ext_in_observation;
  }

  bool IsHealthy() const {
    for (int i = 0; i < model_->nq; ++i) {
      if (!std::isfinite(data_->qpos[i])) return false;
    }
    for (int i = 0; i < model_->nv; ++i) {
      if (!std::isfinite(data_->qvel[i])) return false;
    }
    const double z = data_->qpos[2];
    return config_.healthy_z_range.first <= z && z <= config_.healthy_z_range.second;
  }

  Config config_;
  double info_[std::size(kInfo)] = {};
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_ANT_H_
