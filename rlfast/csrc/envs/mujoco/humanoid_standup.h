// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_

#include <string>

#include "rlfast/csrc/envs/mujoco/humanoid.h"

namespace rlfast::envs::mujoco {

/// HumanoidStandup-v5 options (gymnasium's HumanoidStandupEnv keyword arguments and defaults).
struct HumanoidStandupConfig : HumanoidObsOptions {
  std::string xml_file = "humanoidstandup.xml";
  int frame_skip = 5;
  double uph_cost_weight = 1.0;
  double ctrl_cost_weight = 0.1;
  double impact_cost_weight = 5e-7;
  Range impact_cost_range{-core::kInf, 10.0};
  double reset_noise_scale = 1e-2;
  bool exclude_current_positions_from_observation = true;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("uph_cost_weight", uph_cost_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("impact_cost_weight", impact_cost_weight);
    v("impact_cost_range", impact_cost_range);
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
    VisitObs(v);
  }
};

/// gymnasium's scalar info keys; the tendon arrays come after the first three.
inline constexpr const char* kHumanoidStandupInfo[] = {
    "x_position",   "y_position",      "z_distance_from_origin",
    "reward_linup", "reward_quadctrl", "reward_impact"};

/// gymnasium HumanoidStandup-v5: reward = qpos[2] / timestep - ctrl cost - clip(impact cost)
/// + 1; never terminates; the humanoid observation. Reset: uniform qpos and qvel noise.
/// (gymnasium 1.4 accepts `uph_cost_weight` but never applies it; neither does this.)
class HumanoidStandup
    : public HumanoidTask<HumanoidStandupConfig, kHumanoidStandupInfo, /*kTendonsAfter=*/3> {
 public:
  HumanoidStandup(const Config& c, uint64_t seed) : HumanoidTask(c, seed) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    info_.fill(0.0);
    SetPositionInfo();
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    RnePostConstraint();
    const double uph = (data_->qpos[2] - 0) / model_->opt.timestep;
    const double ctrl = CtrlCost();
    const double impact = ContactCost(config_.impact_cost_weight, config_.impact_cost_range);
    SetPositionInfo();
    SetInfo(3, {uph, -ctrl, -impact});
    return {static_cast<float>(uph - ctrl - impact + 1)};
  }

 private:
  void SetPositionInfo() {
    SetInfo(0, {data_->qpos[0], data_->qpos[1], data_->qpos[2] - model_->qpos0[2]});
  }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_
