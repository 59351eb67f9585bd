// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_
#define RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "rlfast/csrc/envs/mujoco/locomotion_options.h"
#include "rlfast/csrc/envs/mujoco/mujoco_env.h"

namespace rlfast::envs::mujoco {

/// The observation options Humanoid-v5 and HumanoidStandup-v5 add after
/// exclude_current_positions_from_observation.
struct HumanoidObsOptions {
  bool include_cinert_in_observation = true;
  bool include_cvel_in_observation = true;
  bool include_qfrc_actuator_in_observation = true;
  bool include_cfrc_ext_in_observation = true;

  template <class V>
  void VisitObs(V& v) {
    v("include_cinert_in_observation", include_cinert_in_observation);
    v("include_cvel_in_observation", include_cvel_in_observation);
    v("include_qfrc_actuator_in_observation", include_qfrc_actuator_in_observation);
    v("include_cfrc_ext_in_observation", include_cfrc_ext_in_observation);
  }
};

/// What Humanoid and HumanoidStandup share: the observation qpos[2:], qvel, cinert[1:],
/// cvel[1:], qfrc_actuator[6:], cfrc_ext[1:] (each part optional), the spec around it, and
/// the info: the task's scalars (`kInfo`) with the model's tendon arrays (tendon_length,
/// tendon_velocity) inserted after the first `kTendonsAfter` of them.
template <class Config, const auto& kInfo, std::size_t kTendonsAfter>
class HumanoidTask : public MujocoTask<Config, kInfo> {
 public:
  static core::EnvSpec Spec(const Config& c) {
    ModelPtr m = LoadModel(c.xml_file);
    const int64_t bodies = m->nbody - 1;
    const int64_t obs_size = m->nq + m->nv - 2 * c.exclude_current_positions_from_observation +
                             10 * bodies * c.include_cinert_in_observation +
                             6 * bodies * c.include_cvel_in_observation +
                             (m->nv - 6) * c.include_qfrc_actuator_in_observation +
                             6 * bodies * c.include_cfrc_ext_in_observation;
    std::vector<core::ArraySpec> info = HumanoidTask::InfoSpec();
    const core::ArraySpec length{"tendon_length", core::DType::kFloat64, {m->ntendon}, {}, {}};
    core::ArraySpec velocity = length;
    velocity.name = "tendon_velocity";
    info.insert(info.begin() + kTendonsAfter, {length, velocity});
    return HumanoidTask::TaskSpec(*m, obs_size, std::move(info));
  }

  void WriteObs(double* obs) const {
    const mjModel& m = *this->model_;
    const mjData& d = *this->data_;
    const Config& c = this->config_;
    obs = this->CopyQposQvel(c.exclude_current_positions_from_observation ? 2 : 0, obs);
    if (c.include_cinert_in_observation) obs = Copy(d.cinert + 10, 10 * (m.nbody - 1), obs);
    if (c.include_cvel_in_observation) obs = Copy(d.cvel + 6, 6 * (m.nbody - 1), obs);
    if (c.include_qfrc_actuator_in_observation) obs = Copy(d.qfrc_actuator + 6, m.nv - 6, obs);
    if (c.include_cfrc_ext_in_observation) Copy(d.cfrc_ext + 6, 6 * (m.nbody - 1), obs);
  }

  /// Replaces MujocoTask's VisitInfo: the scalars, with the tendon arrays at their place.
  template <class V>
  void VisitInfo(V&& v) const {
    const mjData& d = *this->data_;
    for (std::size_t k = 0; k < std::size(kInfo); ++k) {
      if (k == kTendonsAfter) {
        v("tendon_length", core::DoubleSpan{d.ten_length, this->model_->ntendon});
        v("tendon_velocity", core::DoubleSpan{d.ten_velocity, this->model_->ntendon});
      }
      v(kInfo[k], this->info_[k]);
    }
  }

 protected:
  HumanoidTask(const Config& c, uint64_t seed) : MujocoTask<Config, kInfo>(c, seed) {}

  /// gymnasium's humanoid ctrl cost: ctrl_cost_weight * sum(square(data.ctrl)), in float64.
  double CtrlCost() const {
    return this->config_.ctrl_cost_weight * SumSquares(this->data_->ctrl, this->model_->nu);
  }

  /// gymnasium's contact (Humanoid) or impact (HumanoidStandup) cost:
  /// clip(weight * sum(square(data.cfrc_ext)), range).
  double ContactCost(double weight, const Range& range) const {
    const double cost = weight * SumSquares(this->data_->cfrc_ext, 6 * this->model_->nbody);
    return std::min(std::max(cost, range.first), range.second);
  }

 private:
  // A static of the (dependent) base: named here so that WriteObs can call it unqualified.
  using MujocoEnv::Copy;

  /// sum(square(x)) over n float64 values (gymnasium's np.square(...).sum()).
  static double SumSquares(const double* x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) s += x[i] * x[i];
    return s;
  }
};

/// Humanoid-v5 options (gymnasium's HumanoidEnv keyword arguments and defaults).
struct HumanoidConfig : LocomotionOptions, HumanoidObsOptions {
  HumanoidConfig()
      : LocomotionOptions("humanoid.xml", /*frame_skip=*/5, /*forward_reward_weight=*/1.25,
                          /*ctrl_cost_weight=*/0.1, /*reset_noise_scale=*/1e-2) {}

  double contact_cost_weight = 5e-7;
  Range contact_cost_range{-core::kInf, 10.0};
  double healthy_reward = 5.0;
  bool terminate_when_unhealthy = true;
  Range healthy_z_range{1.0, 2.0};

  template <class V>
  void Visit(V&& v) {
    VisitAround(v, [&] {
      v("contact_cost_weight", contact_cost_weight);
      v("contact_cost_range", contact_cost_range);
      v("healthy_reward", healthy_reward);
      v("terminate_when_unhealthy", terminate_when_unhealthy);
      v("healthy_z_range", healthy_z_range);
    });
    VisitObs(v);
  }
};

/// gymnasium's scalar info keys; the tendon arrays come after the first two.
inline constexpr const char* kHumanoidInfo[] = {
    "x_position",     "y_position",  "distance_from_origin",
    "x_velocity",     "y_velocity",  "reward_survive",
    "reward_forward", "reward_ctrl", "reward_contact"};

/// gymnasium Humanoid-v5: reward = forward_weight * (mass-centre dx/dt) + healthy reward
/// - ctrl cost (on data.ctrl, float64) - clip(contact cost on cfrc_ext); terminates when
/// qpos[2] leaves the open healthy z range. Reset: uniform qpos and qvel noise.
class Humanoid : public HumanoidTask<HumanoidConfig, kHumanoidInfo, /*kTendonsAfter=*/2> {
 public:
  Humanoid(const Config& c, uint64_t seed) : HumanoidTask(c, seed) {
    total_mass_ = 0.0;
    for (int b = 0; b < model_->nbody; ++b) total_mass_ += model_->body_mass[b];
  }

  void Reset() {
    ResetWithNoise(config_.reset_noise_scale, QvelNoise::kUniform);
    info_.fill(0.0);
    SetXyInfo();
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
    const double ctrl = CtrlCost();
    const double contact = ContactCost(config_.contact_cost_weight, config_.contact_cost_range);
    SetXyInfo();
    SetInfo(3, {vx, vy, survive, forward, -ctrl, -contact});
    return {static_cast<float>((forward + survive) - (ctrl + contact)),
            /*terminated=*/!healthy && config_.terminate_when_unhealthy};
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

  double total_mass_;
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_HUMANOID_H_
