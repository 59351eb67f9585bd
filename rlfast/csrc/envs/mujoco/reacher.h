// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_REACHER_H_
#define RLFAST_CSRC_ENVS_MUJOCO_REACHER_H_

#include <cmath>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Reacher-v5 options (gymnasium's ReacherEnv keyword arguments and defaults).
struct ReacherConfig {
  std::string xml_file = "reacher.xml";
  int frame_skip = 2;
  double reward_dist_weight = 1.0;
  double reward_control_weight = 1.0;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("reward_dist_weight", reward_dist_weight);
    v("reward_control_weight", reward_control_weight);
  }
};

/// gymnasium's info keys, in order.
inline constexpr const char* kReacherInfo[] = {"reward_dist", "reward_ctrl"};

/// gymnasium Reacher-v5: reward = -|fingertip - target| * dist_weight - sum(a^2) *
/// control_weight; never terminates (time limit 50). obs = cos/sin of the two arm angles,
/// the target's qpos, the arm's qvel, (fingertip - target)[:2]. Reset: qpos0 + U(±0.1), the
/// target drawn uniformly in the disc of radius 0.2 (rejection sampling, as gymnasium),
/// arm qvel U(±0.005), target qvel 0. The target lives in qpos[-2:], so state sync covers it.
class Reacher : public MujocoTask<ReacherConfig, kReacherInfo> {
 public:
  static constexpr double kGoalRadius = 0.2;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, 10, InfoSpec(), /*max_episode_steps=*/50);
  }

  Reacher(const Config& c, uint64_t seed)
      : MujocoTask(c, seed),
        fingertip_(BodyId(*model_, "fingertip")),
        target_(BodyId(*model_, "target")) {
    if (model_->nq != 4 || model_->nv != 4) {
      throw std::invalid_argument("Reacher expects a model with nq = nv = 4");
    }
  }

  void Reset() {
    ResetData();
    const int nq = model_->nq, nv = model_->nv;
    for (int i = 0; i < nq; ++i) data_->qpos[i] = Uniform(-0.1, 0.1) + model_->qpos0[i];
    double gx, gy;
    do {
      gx = Uniform(-kGoalRadius, kGoalRadius);
      gy = Uniform(-kGoalRadius, kGoalRadius);
    } while (!(std::sqrt(gx * gx + gy * gy) < kGoalRadius));
    data_->qpos[nq - 2] = gx;
    data_->qpos[nq - 1] = gy;
    for (int i = 0; i < nv; ++i) data_->qvel[i] = Uniform(-0.005, 0.005);
    data_->qvel[nv - 2] = data_->qvel[nv - 1] = 0.0;
    Forward();
    info_.fill(0.0);
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    const double* f = data_->xpos + 3 * fingertip_;
    const double* t = data_->xpos + 3 * target_;
    const double dx = f[0] - t[0], dy = f[1] - t[1], dz = f[2] - t[2];
    info_[0] = -std::sqrt(dx * dx + dy * dy + dz * dz) * config_.reward_dist_weight;
    info_[1] = -CtrlCostF32(action, config_.reward_control_weight);
    return {static_cast<float>(info_[0] + info_[1])};
  }

  void WriteObs(Obs* obs) const {
    const double* q = data_->qpos;
    obs[0] = std::cos(q[0]);
    obs[1] = std::cos(q[1]);
    obs[2] = std::sin(q[0]);
    obs[3] = std::sin(q[1]);
    obs[4] = q[2];
    obs[5] = q[3];
    obs[6] = data_->qvel[0];
    obs[7] = data_->qvel[1];
    obs[8] = data_->xpos[3 * fingertip_] - data_->xpos[3 * target_];
    obs[9] = data_->xpos[3 * fingertip_ + 1] - data_->xpos[3 * target_ + 1];
  }

 private:
  int fingertip_;
  int target_;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_REACHER_H_
