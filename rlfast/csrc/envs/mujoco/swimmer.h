// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_SWIMMER_H_
#define RLFAST_CSRC_ENVS_MUJOCO_SWIMMER_H_

#include "rlfast/csrc/envs/mujoco/locomotion_options.h"
#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Swimmer-v5 options (gymnasium's SwimmerEnv keyword arguments and defaults): the locomotion
/// options only.
struct SwimmerConfig : LocomotionOptions {
  SwimmerConfig()
      : LocomotionOptions("swimmer.xml", /*frame_skip=*/4, /*forward_reward_weight=*/1.0,
                          /*ctrl_cost_weight=*/1e-4, /*reset_noise_scale=*/0.1) {}
};

/// gymnasium's info keys, in order.
inline constexpr const char* kSwimmerInfo[] = {
    "x_position", "y_position",     "distance_from_origin", "x_velocity",
    "y_velocity", "reward_forward", "reward_ctrl"};

/// gymnasium Swimmer-v5: reward = forward_weight * dx/dt (of qpos[0]) - ctrl cost; obs =
/// qpos[2:], qvel; never terminates. Reset: uniform qpos and qvel noise.
class Swimmer : public MujocoTask<SwimmerConfig, kSwimmerInfo> {
 public:
  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, m->nq + m->nv - 2 * c.exclude_current_positions_from_observation,
                    InfoSpec());
  }

  Swimmer(const Config& c, uint64_t seed) : MujocoTask(c, seed) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    info_.fill(0.0);
    SetXyInfo();
  }

  core::StepResult Step(const Action* action) {
    const double x0 = data_->qpos[0], y0 = data_->qpos[1];
    DoSimulation(action);
    const double vx = (data_->qpos[0] - x0) / Dt(), vy = (data_->qpos[1] - y0) / Dt();
    const double forward = config_.forward_reward_weight * vx;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    SetXyInfo();
    SetInfo(3, {vx, vy, forward, -ctrl});
    return {static_cast<float>(forward - ctrl)};
  }

  void WriteObs(Obs* obs) const {
    CopyQposQvel(config_.exclude_current_positions_from_observation ? 2 : 0, obs);
  }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_SWIMMER_H_
