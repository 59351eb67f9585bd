// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_

#include "rlfast/csrc/envs/mujoco/locomotion_options.h"
#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// HalfCheetah-v5 options (gymnasium's HalfCheetahEnv keyword arguments and defaults): the
/// locomotion options only.
struct HalfCheetahConfig : LocomotionOptions {
  HalfCheetahConfig()
      : LocomotionOptions("half_cheetah.xml", /*frame_skip=*/5, /*forward_reward_weight=*/1.0,
                          /*ctrl_cost_weight=*/0.1, /*reset_noise_scale=*/0.1) {}
};

/// gymnasium's info keys, in order.
inline constexpr const char* kHalfCheetahInfo[] = {"x_position", "x_velocity", "reward_forward",
                                                   "reward_ctrl"};

/// gymnasium HalfCheetah-v5: reward = forward_weight * dx/dt - ctrl cost; obs = qpos[1:],
/// qvel; never terminates. Reset: uniform qpos, normal qvel noise.
class HalfCheetah : public MujocoTask<HalfCheetahConfig, kHalfCheetahInfo> {
 public:
  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, m->nq + m->nv - c.exclude_current_positions_from_observation, InfoSpec());
  }

  HalfCheetah(const Config& c, uint64_t seed) : MujocoTask(c, seed) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kNormal);
    SetInfo(0, {data_->qpos[0], 0.0, 0.0, 0.0});
  }

  core::StepResult Step(const Action* action) {
    const double x0 = data_->qpos[0];
    DoSimulation(action);
    const double vx = (data_->qpos[0] - x0) / Dt();
    const double forward = config_.forward_reward_weight * vx;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    SetInfo(0, {data_->qpos[0], vx, forward, -ctrl});
    return {static_cast<float>(forward - ctrl)};
  }

  void WriteObs(Obs* obs) const {
    CopyQposQvel(config_.exclude_current_positions_from_observation ? 1 : 0, obs);
  }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_
