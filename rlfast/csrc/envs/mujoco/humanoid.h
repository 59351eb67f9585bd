// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// Observation options shared by Humanoid-v5 and HumanoidStandup-v5.
struct HumanoidObsOptions {
  bool exclude_current_positions_from_observation = true;
  bool include_cinert_in_observation = true;
  bool include_cvel_in_observation = true;
  bool include_qfrc_actuator_in_observation = true;
  bool include_cfrc_ext_in_observation = true;

  template <class V>
  void VisitObs(V&& v) {
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
    v("include_cinert_in_observation", include_cinert_in_observation);
    v("include_cvel_in_observation", include_cvel_in_observation);
    v("include_qfrc_actuator_in_observation", include_qfrc_actuator_in_observation);
    v("include_cfrc_ext_in_observation", include_cfrc_ext_in_observation);
  }
};

/// The humanoid observation: qpos[2:], qvel, cinert[1:], cvel[1:], qfrc_actuator[6:],
/// cfrc_ext[1:] (each part optional), and the info arrays both tasks share.
class HumanoidBase : public MujocoEnv {
 protected:
  HumanoidBase(const std::string& xml_file, int frame_skip, uint64_t seed,
               const HumanoidObsOptions& obs)
      : MujocoEnv(xml_file, frame_skip, seed), obs_(obs) {}

  static int64_t ObsSize(const mjModel& m, const HumanoidObsOptions& o) {
    const int64_t bodies = m.nbody - 1;
    return m.nq + m.nv - 2 * o.exclude_current_positions_from_observation +
           10 * bodies * o.include_cinert_in_observation +
           6 * bodies * o.include_cvel_in_observation +
           (m.nv - 6) * o.include_qfrc_actuator_in_observation +
           6 * bodies * o.include_cfrc_ext_in_observation;
  }

  /// gymnasium's info: the task's scalars with the model's tendon arrays (tendon_length,
  /// tendon_velocity) inserted after the first `before` of them. InfoSpec and VisitInfoWith
  /// Tendons read the same name list, so spec and step agree by construction.
  template <std::size_t N>
  static std::vector<core::ArraySpec> InfoSpec(const mjModel& m, const char* const (&names)[N],
                                               std::size_t before) {
    std::vector<core::ArraySpec> spec = ScalarInfo(names);
    const core::ArraySpec length{"tendon_length", core::DType::kFloat64, {m.ntendon}, {}, {}};
    core::ArraySpec velocity = length;
    velocity.name = "tendon_velocity";
    spec.insert(spec.begin() + before, {length, velocity});
    return spec;
  }

  void WriteHumanoidObs(double* obs) const {
    const mjModel& m = *model_;
    const mjData& d = *data_;
    const int skip = obs_.exclude_current_positions_from_observation ? 2 : 0;
    obs = Copy(d.qpos + skip, m.nq - skip, obs);
    obs = Copy(d.qvel, m.nv, obs);
    if (obs_.include_cinert_in_observation) obs = Copy(d.cinert + 10, 10 * (m.nbody - 1), obs);
    if (obs_.include_cvel_in_observation) obs = Copy(d.cvel + 6, 6 * (m.nbody - 1), obs);
    if (obs_.include_qfrc_actuator_in_observation) obs = Copy(d.qfrc_actuator + 6, m.nv - 6, obs);
    if (obs_.include_cfrc_ext_in_observation) Copy(d.cfrc_ext + 6, 6 * (m.nbody - 1), obs);
  }

  template <class V, std::size_t N>
  void VisitInfoWithTendons(V& v, const char* const (&names)[N], const double* values,
                            std::size_t before) const {
    for (std::size_t k = 0; k < N; ++k) {
      if (k == before) {
        v("tendon_length", core::DoubleSpan{data_->ten_length, model_->ntendon});
        v("tendon_velocity", core::DoubleSpan{data_->ten_velocity, model_->ntendon});
      }
      v(names[k], values[k]);
    }
  }

  /// sum(square(x)) over n float64 values (gymnasium's np.square(...).sum()).
  static double SumSquares(const double* x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
  }

  HumanoidObsOptions obs_;
};

/// Humanoid-v5 options (gymnasium's HumanoidEnv keyword arguments and defaults).
struct HumanoidConfig : HumanoidObsOptions {
  std::string xml_file = "humanoid.xml";
  int frame_skip = 5;
  double forward_reward_weight = 1.25;
  double ctrl_cost_weight = 0.1;
  double contact_cost_weight = 5e-7;
  Range contact_cost_range{-core::kInf, 10.0};
  double healthy_reward = 5.0;
  bool terminate_when_unhealthy = true;
  Range healthy_z_range{1.0, 2.0};
  double reset_noise_scale = 1e-2;

  template <class V>
  void Visit(V&& v) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    v("contact_cost_weight", contact_cost_weight);
    v("contact_cost_range", contact_cost_range);
    v("healthy_reward", healthy_reward);
    v("terminate_when_unhealthy", terminate_when_unhealthy);
    v("healthy_z_range", healthy_z_range);
    v("reset_noise_scale", reset_noise_scale);
    VisitObs(v);
  }
};

/// gymnasium Humanoid-v5: reward = forward_weight * (mass-centre dx/dt) + healthy reward
/// - ctrl cost (on data.ctrl, float64) - clip(contact cost on cfrc_ext); terminates when
/// qpos[2] leaves the open healthy z range. Reset: uniform qpos and qvel noise.
class Humanoid : public HumanoidBase {
 public:
  using Config = HumanoidConfig;
  /// gymnasium's scalar info keys; the tendon arrays come after the first kTendonsAfter.
  static constexpr const char* kInfo[] = {"x_position",     "y_position",     "distance_from_origin",
                                          "x_velocity",     "y_velocity",     "reward_survive",
                                          "reward_forward", "reward_ctrl",    "reward_contact"};
  static constexpr std::size_t kTendonsAfter = 2;

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

  Humanoid(const Config& c, uint64_t seed)
      : HumanoidBase(c.xml_file, c.frame_skip, seed, c), config_(c) {
    total_mass_ = 0.0;
    for (int b = 0; b < model_->nbody; ++b) total_mass_ += model_->body_mass[b];
  }

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    std::fill(std::begin(info_), std::end(info_), 0.0);
    XyInfo(info_);
  }

  core::StepResult Step(const Action* action) {
    double x0, y0, x1, y1;
    MassCenter(&x0, &y0);
    DoSimulation(action);
    RnePostConstraint();
    MassCenter(&x1, &y1);
    const double vx = (x1 - x0) / Dt(), vy = (y1 - y0) / Dt();
    const double z = data_->qpos[2];
    const bool healthy = config_.healthy_z_range.first < z && z < config_.healthy_z_range.second;
    const double forward = config_.forward_reward_weight * vx;
    const double survive = healthy ? config_.healthy_reward : 0.0;
    const double ctrl = config_.ctrl_cost_weight * SumSquares(data_->ctrl, model_->nu);
    const double contact =
        std::min(std::max(config_.contact_cost_weight *
                              SumSquares(data_->cfrc_ext, 6 * model_->nbody),
                          config_.contact_cost_range.first),
                 config_.contact_cost_range.second);
    XyInfo(info_);
    info_[3] = vx;
    info_[4] = vy;
    info_[5] = survive;
    info_[6] = forward;
    info_[7] = -ctrl;
    info_[8] = -contact;
    core::StepResult r;
    r.reward = static_cast<float>((forward + survive) - (ctrl + contact));
    r.terminated = !healthy && config_.terminate_when_unhealthy;
    return r;
  }

  void WriteObs(Obs* obs) const { WriteHumanoidObs(obs); }
  template <class V>
  void VisitInfo(V&& v) const {
    VisitInfoWithTendons(v, kInfo, info_, kTendonsAfter);
  }

 private:
  /// gymnasium's mass_center: body-mass-weighted mean of xipos, x and y.
  void MassCenter(double* x, double* y) const {
    double sx = 0.0, sy = 0.0;
    for (int b = 0; b < model_->nbody; ++b) {
      sx += model_->body_mass[b] * data_->xipos[3 * b];
      sy += model_->body_mass[b] * data_->xipos[3 * b + 1];
    }
    *x = sx / total_mass_;
    *y = sy / total_mass_;
  }

  Config config_;
  double total_mass_;
  double info_[std::size(kInfo)] = {};
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_
