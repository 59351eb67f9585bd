// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_

#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// HalfCheetah-v5 options (gymnasium's HalfCheetahEnv keyword arguments and defaults).
struct HalfCheetahConfig {
  std::string xml_file = "half_cheetah.xml";
  int frame_skip = 5;
  double forward_reward_weight = 1.0;
  double ctrl_cost_weight = 0.1;
  double reset_noise_scale = 0.1;
  bool exclude_current_positions_from_observation = true;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
  }
};

/// gymnasium HalfCheetah-v5: reward = forward_weight * dx/dt - ctrl cost; obs = qpos[1:],
/// qvel; never terminates. Reset: uniform qpos, normal qvel noise.
class HalfCheetah : public MujocoEnv {
 public:
  using Config = HalfCheetahConfig;
  /// gymnasium's info keys, in order: the spec and VisitInfo both read this list.
  static constexpr const char* kInfo[] = {"x_position", "x_velocity", "reward_forward", "reward_ctrl"};

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    core::EnvSpec spec;
    spec.obs = ObsSpec(m->nq + m->nv - c.exclude_current_positions_from_observation);
    spec.action = ActionSpec(*m);
    spec.env_bytes = DataBytes(*m);
    spec.info = ScalarInfo(kInfo);
    spec.max_episode_steps = 1000;
    return spec;
  }

  HalfCheetah(const Config& c, uint64_t seed)
      : MujocoEnv(c.xml_file, c.frame_skip, seed), config_(c) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kNormal);
    info_[0] = data_->qpos[0];
    info_[1] = info_[2] = info_[3] = 0.0;
  }

  core::StepResult Step(const Action* action) {
    const double x0 = data_->qpos[0];
    DoSimulation(action);
    const double vx = (data_->qpos[0] - x0) / Dt();
    const double forward = config_.forward_reward_weight * vx;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    info_[0] = data_->qpos[0];
    info_[1] = vx;
    info_[2] = forward;
    info_[3] = -ctrl;
    core::StepResult r;
    r.reward = static_cast<float>(forward - ctrl);
    return r;
  }

  void WriteObs(Obs* obs) const {
    const int skip = config_.exclude_current_positions_from_observation ? 1 : 0;
    obs = Copy(data_->qpos + skip, model_->nq - skip, obs);
    Copy(data_->qvel, model_->nv, obs);
  }

  template <class V>
  void VisitInfo(V&& v) const {
    VisitScalars(v, kInfo, info_);
  }

 private:
  Config config_;
  double info_[std::size(kInfo)] = {};
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HALF_CHEETAH_H_
