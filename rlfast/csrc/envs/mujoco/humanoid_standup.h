// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_

#include <algorithm>
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

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("uph_cost_weight", uph_cost_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("impact_cost_weight", impact_cost_weight);
    v("impact_cost_range", impact_cost_range);
    v("reset_noise_scale", reset_noise_scale);
    VisitObs(v);
  }
};

/// gymnasium HumanoidStandup-v5: reward = qpos[2] / timestep - ctrl cost - clip(impact cost)
/// + 1; never terminates; the humanoid observation. Reset: uniform qpos and qvel noise.
/// (gymnasium 1.4 accepts `uph_cost_weight` but never applies it; neither does this.)
class HumanoidStandup : public HumanoidBase {
 public:
  using Config = HumanoidStandupConfig;
  /// gymnasium's scalar info keys; the tendon arrays come after the first kTendonsAfter.
  static constexpr const char* kInfo[] = {"x_position",   "y_position",      "z_distance_from_origin",
                                          "reward_linup", "reward_quadctrl", "reward_impact"};
  static constexpr std::size_t kTendonsAfter = 3;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    core::EnvSpec spec;
    spec.obs = ObsSpec(ObsSize(*m, c));
    spec.action = ActionSpec(*m);
    spec.env_bytes = DataBytes(*m);
    spec.info = InfoSpec(*m, kInfo, kTendonsAfter);
    spec.max_episode_steps = 1000;
    return spec;
  }

  HumanoidStandup(const Config& c, uint64_t seed)
      : HumanoidBase(c.xml_file, c.frame_skip, seed, c), config_(c) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    std::fill(std::begin(info_), std::end(info_), 0.0);
    WritePositionInfo();
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    RnePostConstraint();
    const double uph = (data_->qpos[2] - 0) / model_->opt.timestep;
    const double ctrl = config_.ctrl_cost_weight * SumSquares(data_->ctrl, model_->nu);
    const double impact =
        std::min(std::max(config_.impact_cost_weight *
                              SumSquares(data_->cfrc_ext, 6 * model_->nbody),
                          config_.impact_cost_range.first),
                 config_.impact_cost_range.second);
    WritePositionInfo();
    info_[3] = uph;
    info_[4] = -ctrl;
    info_[5] = -impact;
    core::StepResult r;
    r.reward = static_cast<float>(uph - ctrl - impact + 1);
    return r;
  }

  void WriteObs(Obs* obs) const { WriteHumanoidObs(obs); }
  template <class V>
  void VisitInfo(V&& v) const {
    VisitInfoWithTendons(v, kInfo, info_, kTendonsAfter);
  }

 private:
  void WritePositionInfo() {
    info_[0] = data_->qpos[0];
    info_[1] = data_->qpos[1];
    info_[2] = data_->qpos[2] - model_->qpos0[2];
  }

  Config config_;
  double info_[std::size(kInfo)] = {};
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_STANDUP_H_
