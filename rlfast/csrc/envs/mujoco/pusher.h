// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_PUSHER_H_
#define RLFAST_CSRC_ENVS_MUJOCO_PUSHER_H_

#include <cmath>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Pusher-v5 options (gymnasium's PusherEnv keyword arguments and defaults).
struct PusherConfig {
  std::string xml_file = "pusher_v5.xml";
  int frame_skip = 5;
  double reward_near_weight = 0.5;
  double reward_dist_weight = 1.0;
  double reward_control_weight = 0.1;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("reward_near_weight", reward_near_weight);
    v("reward_dist_weight", reward_dist_weight);
    v("reward_control_weight", reward_control_weight);
  }
};

/// gymnasium's info keys, in order.
inline constexpr const char* kPusherInfo[] = {"reward_dist", "reward_ctrl", "reward_near"};

/// gymnasium Pusher-v5: reward = -|object - goal| * dist_weight - sum(a^2) * control_weight
/// - |object - tips_arm| * near_weight; never terminates (time limit 100). obs = arm qpos
/// and qvel (7 each), then the positions of tips_arm, object and goal. Reset: qpos0 with the
/// object (qpos[-4:-2]) drawn from U([-0.3, 0] x [-0.2, 0.2]) until it is more than 0.17
/// from the goal at the origin (qpos[-2:] = 0); qvel U(±0.005) with the last four zeroed.
class Pusher : public MujocoTask<PusherConfig, kPusherInfo> {
 public:
  static constexpr int kArmDofs = 7;
  static constexpr double kMinGoalDistance = 0.17;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, 2 * kArmDofs + 9, InfoSpec(), /*max_episode_steps=*/100);
  }

  Pusher(const Config& c, uint64_t seed)
      : MujocoTask(c, seed),
        tips_arm_(BodyId(*model_, "tips_arm")),
        object_(BodyId(*model_, "object")),
        goal_(BodyId(*model_, "goal")) {
    if (model_->nq < kArmDofs + 4 || model_->nv < kArmDofs + 4) {
      throw std::invalid_argument("Pusher expects 7 arm joints, then object and goal x/y");
    }
  }

  void Reset() {
    ResetData();
    const int nq = model_->nq, nv = model_->nv;
    for (int i = 0; i < nq; ++i) data_->qpos[i] = model_->qpos0[i];
    double cx, cy;
    do {
      cx = Uniform(-0.3, 0.0);
      cy = Uniform(-0.2, 0.2);
    } while (!(std::sqrt(cx * cx + cy * cy) > kMinGoalDistance));
    data_->qpos[nq - 4] = cx;
    data_->qpos[nq - 3] = cy;
    data_->qpos[nq - 2] = data_->qpos[nq - 1] = 0.0;
    for (int i = 0; i < nv; ++i) data_->qvel[i] = Uniform(-0.005, 0.005);
    for (int i = nv - 4; i < nv; ++i) data_->qvel[i] = 0.0;
    Forward();
    info_.fill(0.0);
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    info_[0] = -Distance(object_, goal_) * config_.reward_dist_weight;
    info_[1] = -CtrlCostF32(action, config_.reward_control_weight);
    info_[2] = -Distance(object_, tips_arm_) * config_.reward_near_weight;
    return {static_cast<float>(info_[0] + info_[1] + info_[2])};
  }

  void WriteObs(Obs* obs) const {
    obs = Copy(data_->qpos, kArmDofs, obs);
    obs = Copy(data_->qvel, kArmDofs, obs);
    obs = Copy(data_->xpos + 3 * tips_arm_, 3, obs);
    obs = Copy(data_->xpos + 3 * object_, 3, obs);
    Copy(data_->xpos + 3 * goal_, 3, obs);
  }

 private:
  double Distance(int a, int b) const {
    const double* p = data_->xpos + 3 * a;
    const double* q = data_->xpos + 3 * b;
    const double dx = p[0] - q[0], dy = p[1] - q[1], dz = p[2] - q[2];
    return std::sqrt(dx * dx + dy * dy + dz * dz);
  }

  int tips_arm_;
  int object_;
  int goal_;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_PUSHER_H_
