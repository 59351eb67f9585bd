// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_INVERTED_PENDULUM_H_
#define RLFAST_CSRC_ENVS_MUJOCO_INVERTED_PENDULUM_H_

#include <cmath>
#include <string>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// InvertedPendulum-v5 options (gymnasium's InvertedPendulumEnv keyword arguments).
struct InvertedPendulumConfig {
  std::string xml_file = "inverted_pendulum.xml";
  int frame_skip = 2;
  double reset_noise_scale = 0.01;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("reset_noise_scale", reset_noise_scale);
  }
};

/// gymnasium's info keys.
inline constexpr const char* kInvertedPendulumInfo[] = {"reward_survive"};

/// gymnasium InvertedPendulum-v5: obs = qpos, qvel; terminates when the pole angle
/// |qpos[1]| > 0.2 or the obs is not finite; reward 1 while not terminated, else 0.
/// Reset: uniform qpos and qvel noise.
class InvertedPendulum : public MujocoTask<InvertedPendulumConfig, kInvertedPendulumInfo> {
 public:
  static constexpr double kMaxAngle = 0.2;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    return TaskSpec(*m, m->nq + m->nv, InfoSpec());
  }

  InvertedPendulum(const Config& c, uint64_t seed) : MujocoTask(c, seed) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    info_[0] = 0.0;
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    bool finite = true;
    for (int i = 0; i < model_->nq; ++i) finite = finite && std::isfinite(data_->qpos[i]);
    for (int i = 0; i < model_->nv; ++i) finite = finite && std::isfinite(data_->qvel[i]);
    const bool terminated = !finite || std::abs(data_->qpos[1]) > kMaxAngle;
    info_[0] = terminated ? 0.0 : 1.0;
    return {static_cast<float>(info_[0]), terminated};
  }

  void WriteObs(Obs* obs) const { CopyQposQvel(0, obs); }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_INVERTED_PENDULUM_H_
