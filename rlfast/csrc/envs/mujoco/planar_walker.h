// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_
#define RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_

#include <optional>
#include <string>
#include <utility>

#include "rlfast/csrc/envs/mujoco/locomotion_options.h"
#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// The options of Hopper-v5 and Walker2d-v5 (gymnasium's keyword arguments) and the defaults
/// the two share; HopperConfig and Walker2dConfig give the model and health ranges.
/// `healthy_state_range` is Hopper's alone: Walker2d has no such option (empty here, and
/// neither visited nor checked).
struct PlanarWalkerConfig : LocomotionOptions {
  PlanarWalkerConfig(std::string xml_file, std::optional<Range> state, Range z, Range angle)
      : LocomotionOptions(std::move(xml_file), /*frame_skip=*/4, /*forward_reward_weight=*/1.0,
                          /*ctrl_cost_weight=*/1e-3, /*reset_noise_scale=*/5e-3),
        healthy_state_range(state),
        healthy_z_range(z),
        healthy_angle_range(angle) {}

  double healthy_reward = 1.0;
  bool terminate_when_unhealthy = true;
  std::optional<Range> healthy_state_range;
  Range healthy_z_range;
  Range healthy_angle_range;

  template <class V>
  void Visit(V&& v) {
    VisitAround(v, [&] {
      v("healthy_reward", healthy_reward);
      v("terminate_when_unhealthy", terminate_when_unhealthy);
      if (healthy_state_range) v("healthy_state_range", *healthy_state_range);
      v("healthy_z_range", healthy_z_range);
      v("healthy_angle_range", healthy_angle_range);
    });
  }
};

/// Hopper-v5 options (gymnasium's HopperEnv keyword arguments and defaults).
struct HopperConfig : PlanarWalkerConfig {
  HopperConfig()
      : PlanarWalkerConfig("hopper.xml", /*healthy_state_range=*/Range{-100.0, 100.0},
                           /*healthy_z_range=*/{0.7, core::kInf},
                           /*healthy_angle_range=*/{-0.2, 0.2}) {}
};

/// Walker2d-v5 options (gymnasium's Walker2dEnv keyword arguments and defaults).
struct Walker2dConfig : PlanarWalkerConfig {
  Walker2dConfig()
      : PlanarWalkerConfig("walker2d_v5.xml", /*healthy_state_range=*/std::nullopt,
                           /*healthy_z_range=*/{0.8, 2.0}, /*healthy_angle_range=*/{-1.0, 1.0}) {}
};

/// gymnasium's info keys, in order.
inline constexpr const char* kPlanarWalkerInfo[] = {
    "x_position",     "z_distance_from_origin", "x_velocity",
    "reward_forward", "reward_ctrl",            "reward_survive"};

/// Hopper-v5 and Walker2d-v5, which differ only in their model, defaults and health rule.
/// reward = forward_weight * dx/dt + healthy_reward * healthy - ctrl cost; obs = qpos[1:],
/// clip(qvel, -10, 10); terminates when unhealthy: z = qpos[1] and angle = qpos[2] strictly
/// inside their ranges (Hopper also every state value after the first two). Reset: uniform
/// qpos and qvel noise.
class PlanarWalker : public MujocoTask<PlanarWalkerConfig, kPlanarWalkerInfo> {
 public:
  static constexpr double kVelocityClip = 10.0;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, m->nq + m->nv - c.exclude_current_positions_from_observation, InfoSpec());
  }

  PlanarWalker(const Config& c, uint64_t seed) : MujocoTask(c, seed) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    info_.fill(0.0);
    SetPositionInfo();
  }

  core::StepResult Step(const float* action) {
    const double x0 = data_->qpos[0];
    DoSimulation(action);
    const double vx = (data_->qpos[0] - x0) / Dt();
    const bool healthy = IsHealthy();
    const double forward = config_.forward_reward_weight * vx;
    const double survive = healthy ? config_.healthy_reward : 0.0;
    const double ctrl = CtrlCostF32(action, config_.ctrl_cost_weight);
    SetPositionInfo();
    SetInfo(2, {vx, forward, -ctrl, survive});
    return {static_cast<float>((forward + survive) - ctrl),
            /*terminated=*/!healthy && config_.terminate_when_unhealthy};
  }

  void WriteObs(double* obs) const {
    const int skip = config_.exclude_current_positions_from_observation ? 1 : 0;
    obs = Copy(data_->qpos + skip, model_->nq - skip, obs);
    CopyClipped(data_->qvel, model_->nv, -kVelocityClip, kVelocityClip, obs);
  }

 private:
  static bool Inside(double x, const Range& r) { return r.first < x && x < r.second; }

  bool IsHealthy() const {
    if (const std::optional<Range>& state = config_.healthy_state_range) {
      // gymnasium: state_vector()[2:], i.e. qpos[2:] and all of qvel.
      for (int i = 2; i < model_->nq; ++i) {
        if (!Inside(data_->qpos[i], *state)) return false;
      }
      for (int i = 0; i < model_->nv; ++i) {
        if (!Inside(data_->qvel[i], *state)) return false;
      }
    }
    return Inside(data_->qpos[1], config_.healthy_z_range) &&
           Inside(data_->qpos[2], config_.healthy_angle_range);
  }

  void SetPositionInfo() { SetInfo(0, {data_->qpos[0], data_->qpos[1] - model_->qpos0[1]}); }
};

/// The env contract wants `Env::Config`; these give the two tasks their names and defaults.
class Hopper : public PlanarWalker {
 public:
  using Config = HopperConfig;
  using PlanarWalker::PlanarWalker;
};

class Walker2d : public PlanarWalker {
 public:
  using Config = Walker2dConfig;
  using PlanarWalker::PlanarWalker;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_PLANAR_WALKER_H_
