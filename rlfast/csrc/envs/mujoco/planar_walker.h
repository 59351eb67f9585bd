// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_
#define RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_

#include <algorithm>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Hopper-v5 and Walker2d-v5, which differ only in their model, defaults and health rule.
/// reward = forward_weight * dx/dt + healthy_reward * healthy - ctrl cost; obs = qpos[1:],
/// clip(qvel, -10, 10); terminates when unhealthy: z = qpos[1] and angle = qpos[2] strictly
/// inside their ranges (Hopper also every state value after the first two). Reset: uniform
/// qpos and qvel noise. `Config` provides the options and `kHasStateRange`.
template <class Config>
class PlanarWalker : public MujocoEnv {
 public:
  static constexpr double kVelocityClip = 10.0;
  /// gymnasium's info keys, in order: the spec and VisitInfo both read this list.
  static constexpr const char* kInfo[] = {
      "x_position", "z_distance_from_origin", "x_velocity", "reward_forward", "reward_ctrl",
      "reward_survive"};

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

  PlanarWalker(const Config& c, uint64_t seed)
      : MujocoEnv(c.xml_file, c.frame_skip, seed), config_(c) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    std::fill(std::begin(info_), std::end(info_), 0.0);
    WritePositionInfo();
  }

  core::StepResult Step(const float* action) {
    const double x0 = data_->qpos[0];
    DoSimulation(action);
    const double vx = (data_->qpos[0] - x0) / Dt();
    const bool healthy = IsHealthy();
    const double forward = config_.forward_reward_weight * vx;
    const double survive = healthy ? config_.healthy_reward : 0.0;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    WritePositionInfo();
    info_[2] = vx;
    info_[3] = forward;
    info_[4] = -ctrl;
    info_[5] = survive;
    core::StepResult r;
    r.reward = static_cast<float>((forward + survive) - ctrl);
    r.terminated = !healthy && config_.terminate_when_unhealthy;
    return r;
  }

  void WriteObs(double* obs) const {
    const int skip = config_.exclude_current_positions_from_observation ? 1 : 0;
    obs = Copy(data_->qpos + skip, model_->nq - skip, obs);
    CopyClipped(data_->qvel, model_->nv, -kVelocityClip, kVelocityClip, obs);
  }

  template <class V>
  void VisitInfo(V&& v) const {
    VisitScalars(v, kInfo, info_);
  }

 private:
  static bool Inside(double x, const Range& r) { return r.first < x && x < r.second; }

  bool IsHealthy() const {
    if constexpr (Config::kHasStateRange) {
      // gymnasium: state_vector()[2:], i.e. qpos[2:] and all of qvel.
      for (int i = 2; i < model_->nq; ++i) {
        if (!Inside(data_->qpos[i], config_.healthy_state_range)) return false;
      }
      for (int i = 0; i < model_->nv; ++i) {
        if (!Inside(data_->qvel[i], config_.healthy_state_range)) return false;
      }
    }
    return Inside(data_->qpos[1], config_.healthy_z_range) &&
           Inside(data_->qpos[2], config_.healthy_angle_range);
  }

  void WritePositionInfo() {
    info_[0] = data_->qpos[0];
    info_[1] = data_->qpos[1] - model_->qpos0[1];
  }

  Config config_;
  double info_[std::size(kInfo)] = {};
};

/// Hopper-v5 options (gymnasium's HopperEnv keyword arguments and defaults).
struct HopperConfig {
  static constexpr bool kHasStateRange = true;
  std::string xml_file = "hopper.xml";
  int frame_skip = 4;
  double forward_reward_weight = 1.0;
  double ctrl_cost_weight = 1e-3;
  double healthy_reward = 1.0;
  bool terminate_when_unhealthy = true;
  Range healthy_state_range{-100.0, 100.0};
  Range healthy_z_range{0.7, core::kInf};
  Range healthy_angle_range{-0.2, 0.2};
  double reset_noise_scale = 5e-3;
  bool exclude_current_positions_from_observation = true;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("healthy_reward", healthy_reward);
    v("terminate_when_unhealthy", terminate_when_unhealthy);
    v("healthy_state_range", healthy_state_range);
    v("healthy_z_range", healthy_z_range);
    v("healthy_angle_range", healthy_angle_range);
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
  }
};

/// Walker2d-v5 options (gymnasium's Walker2dEnv keyword arguments and defaults).
struct Walker2dConfig {
  static constexpr bool kHasStateRange = false;
  std::string xml_file = "walker2d_v5.xml";
  int frame_skip = 4;
  double forward_reward_weight = 1.0;
  double ctrl_cost_weight = 1e-3;
  double healthy_reward = 1.0;
  bool terminate_when_unhealthy = true;
  Range healthy_z_range{0.8, 2.0};
  Range healthy_angle_range{-1.0, 1.0};
  double reset_noise_scale = 5e-3;
  bool exclude_current_positions_from_observation = true;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("healthy_reward", healthy_reward);
    v("terminate_when_unhealthy", terminate_when_unhealthy);
    v("healthy_z_range", healthy_z_range);
    v("healthy_angle_range", healthy_angle_range);
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
  }
};

/// The env contract wants `Env::Config`; these give the two tasks their names.
class Hopper : public PlanarWalker<HopperConfig> {
 public:
  using Config = HopperConfig;
  using PlanarWalker<HopperConfig>::PlanarWalker;
};

class Walker2d : public PlanarWalker<Walker2dConfig> {
 public:
  using Config = Walker2dConfig;
  using PlanarWalker<Walker2dConfig>::PlanarWalker;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_
