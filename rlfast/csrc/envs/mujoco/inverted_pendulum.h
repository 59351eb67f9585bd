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

/// gymnasium InvertedPendulum-v5: obs = qpos, qvel; terminates when the pole angle
/// |qpos[1]| > 0.2 or the obs is not finite; reward 1 while not terminated, else 0.
/// Reset: uniform qpos and qvel noise.
class InvertedPendulum : public MujocoEnv {
 public:
  using Config = InvertedPendulumConfig;
  static constexpr const char* kInfo[] = {"reward_survive"};
  static constexpr double kMaxAngle = 0.2;

  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    core::EnvSpec spec;
    spec.obs = ObsSpec(m->nq + m->nv);
    spec.action = ActionSpec(*m);
    spec.env_bytes = DataBytes(*m);
    spec.info = ScalarInfo(kInfo);
    spec.max_episode_steps = 1000;
    return spec;
  }

  InvertedPendulum(const Config& c, uint64_t seed)
      : MujocoEnv(c.xml_file, c.frame_skip, seed), config_(c) {}

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    survive_ = 0.0;
  }

  core::StepResult Step(const Action* action) {
    DoSimulation(action);
    bool finite = true;
    for (int i = 0; i < model_->nq; ++i) finite = finite && std::isfinite(data_->qpos[i]);
    for (int i = 0; i < model_->nv; ++i) finite = finite && std::isfinite(data_->qvel[i]);
    core::StepResult r;
    r.terminated = !finite || std::abs(data_->qpos[1]) > kMaxAngle;
    survive_ = r.terminated ? 0.0 : 1.0;
    r.reward = static_cast<float>(survive_);
    return r;
  }

  void WriteObs(Obs* obs) const {
    obs = Copy(data_->qpos, model_->nq, obs);
    Copy(data_->qvel, model_->nv, obs);
  }

  template <class V>
  void VisitInfo(V&& v) const {
    VisitScalars(v, kInfo, &survive_);
  }

 private:
  Config config_;
  double survive_ = 0.0;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_INVERTED_PENDULUM_H_
