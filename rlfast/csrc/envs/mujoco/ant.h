// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_ANT_H_
#define RLFAST_CSRC_ENVS_MUJOCO_ANT_H_

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "rlfast/csrc/envs/mujoco/locomotion_options.h"
#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Ant-v5 options: gymnasium's AntEnv keyword arguments and defaults (`main_body` by index).
struct AntConfig : LocomotionOptions {
  AntConfig()
      : LocomotionOptions("ant.xml", /*frame_skip=*/5, /*forward_reward_weight=*/1.0,
                          /*ctrl_cost_weight=*/0.5, /*reset_noise_scale=*/0.1) {}

  double contact_cost_weight = 5e-4;
  double healthy_reward = 1.0;
  int main_body = 1;
  bool terminate_when_unhealthy = true;
  Range healthy_z_range{0.2, 1.0};
  Range contact_force_range{-1.0, 1.0};
  bool include_cfrc_ext_in_observation = true;

  template <class V>
  void Visit(V&& v) {
    VisitAround(v, [&] {
      v("contact_cost_weight", contact_cost_weight);
      v("healthy_reward", healthy_reward);
      v("main_body", main_body);
      v("terminate_when_unhealthy", terminate_when_unhealthy);
      v("healthy_z_range", healthy_z_range);
      v("contact_force_range", contact_force_range);
    });
    v("include_cfrc_ext_in_observation", include_cfrc_ext_in_observation);
  }
};

/// gymnasium's info keys, in order.
inline constexpr const char* kAntInfo[] = {
    "x_position",     "y_position",  "distance_from_origin", "x_velocity",    "y_velocity",
    "reward_forward", "reward_ctrl", "reward_contact",       "reward_survive"};

/// gymnasium Ant-v5: reward = forward + healthy - ctrl - contact, where contact uses the
/// clipped external contact forces (cfrc_ext, hence mj_rnePostConstraint after each step);
/// obs = qpos[2:], qvel, clip(cfrc_ext[1:]); terminates when unhealthy (z outside the
/// inclusive healthy range or a non-finite state). Reset: uniform qpos, normal qvel noise.
class Ant : public MujocoTask<AntConfig, kAntInfo> {
 public:
  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m,
                    m->nq + m->nv - 2 * c.exclude_current_positions_from_observation +
                        6 * (m->nbody - 1) * c.include_cfrc_ext_in_observation,
                    InfoSpec());
  }

  Ant(const Config& c, uint64_t seed) : MujocoTask(c, seed) {
    if (c.main_body < 0 || c.main_body >= model_->nbody) {
      throw std::invalid_argument("main_body " + std::to_string(c.main_body) +
                                  " is not a body index of the model");
    }
  }

  void Reset() {
    // No mj_rnePostConstraint after a reset: gymnasium's reset obs has cfrc_ext zeroed.
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kNormal);
    info_.fill(0.0);
    SetXyInfo();
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
    SetXyInfo();
    SetInfo(3, {vx, vy, forward, -ctrl, -contact, survive});
    return {static_cast<float>((forward + survive) - (ctrl + contact)),
            /*terminated=*/!healthy && config_.terminate_when_unhealthy};
  }

  void WriteObs(Obs* obs) const {
    obs = CopyQposQvel(config_.exclude_current_positions_from_observation ? 2 : 0, obs);
    if (config_.include_cfrc_ext_in_observation) {
      const auto [lo, hi] = config_.contact_force_range;
      CopyClipped(data_->cfrc_ext + 6, 6 * (model_->nbody - 1), lo, hi, obs);
    }
  }

 private:
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
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_ANT_H_
