// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_
#define RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_

#include <mujoco/mujoco.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/env.h"
#include "rlfast/csrc/envs/mujoco/model.h"

namespace rlfast::envs::mujoco {

/// A (low, high) option such as gymnasium's `healthy_z_range` (a tuple in Python).
using Range = std::pair<double, double>;

/// Base of the MuJoCo tasks: gymnasium's MujocoEnv. Owns one mjData on the shared,
/// read-only model; everything it allocates is allocated in the constructor (mj_step works
/// inside mjData's arena), so Reset/Step allocate nothing.
///
/// Called by one pool worker at a time (the env contract in core/env.h).
class MujocoEnv : public core::EnvBase {
 public:
  using Action = float;
  using Obs = double;

  /// What a renderer outside C++ needs to draw the current state: concat(qpos, qvel).
  std::vector<double> RenderState() const {
    std::vector<double> s(data_->qpos, data_->qpos + model_->nq);
    s.insert(s.end(), data_->qvel, data_->qvel + model_->nv);
    return s;
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: concat(qpos, qvel, qacc_warmstart). The warm start is part of MuJoCo's
  /// integration state: the constraint solver starts from it, so two copies of the same
  /// (qpos, qvel) only step identically if it is copied as well.
  std::vector<double> GetState() const {
    const mjModel& m = *model_;
    std::vector<double> s(data_->qpos, data_->qpos + m.nq);
    s.insert(s.end(), data_->qvel, data_->qvel + m.nv);
    s.insert(s.end(), data_->qacc_warmstart, data_->qacc_warmstart + m.nv);
    return s;
  }
  /// Test-only: sets (qpos, qvel[, qacc_warmstart]) and runs mj_forward (gymnasium's set_state).
  void SetState(const std::vector<double>& s) {
    const mjModel& m = *model_;
    const std::size_t n = static_cast<std::size_t>(m.nq + m.nv);
    if (s.size() != n && s.size() != n + m.nv) {
      throw std::invalid_argument("MuJoCo state must have nq+nv or nq+2nv values");
    }
    std::copy(s.begin(), s.begin() + m.nq, data_->qpos);
    std::copy(s.begin() + m.nq, s.begin() + n, data_->qvel);
    if (s.size() > n) std::copy(s.begin() + n, s.end(), data_->qacc_warmstart);
    mj_forward(model_.get(), data_.get());
  }
#endif

 protected:
  /// Loads (or reuses) the model and makes this env's mjData. Pool construction thread.
  MujocoEnv(const std::string& xml_file, int frame_skip, uint64_t seed)
      : core::EnvBase(seed), model_(LoadModel(xml_file)), frame_skip_(frame_skip) {
    if (frame_skip < 1) {
      throw std::invalid_argument("frame_skip must be >= 1, got " + std::to_string(frame_skip));
    }
    data_.reset(mj_makeData(model_.get()));
    if (!data_) throw std::runtime_error("mj_makeData failed for '" + xml_file + "'");
  }

  /// gymnasium reset(): mj_resetData, after which reset_model adds noise to qpos0 / zero qvel.
  void ResetData() { mj_resetData(model_.get(), data_.get()); }

  /// The end of gymnasium's set_state(qpos, qvel): recompute everything derived.
  void Forward() {
    DropBindingsTimer();
    mj_forward(model_.get(), data_.get());
  }

  /// gymnasium do_simulation: ctrl = action (unclipped: MuJoCo clamps limited actuators to
  /// ctrlrange itself), then frame_skip mj_step calls. Throws if MuJoCo met a NaN/Inf/huge
  /// value on the way (it silently resets the simulation when that happens; surfacing the
  /// error beats returning the reset state as if nothing had happened).
  void DoSimulation(const float* action) {
    mjData* d = data_.get();
    DropBindingsTimer();
    for (int i = 0; i < model_->nu; ++i) d->ctrl[i] = action[i];
    for (int w : kBadStateWarnings) d->warning[w].number = 0;
    for (int i = 0; i < frame_skip_; ++i) mj_step(model_.get(), d);
    for (int w : kBadStateWarnings) {
      if (d->warning[w].number > 0) ThrowUnstable(w, d->warning[w].lastinfo);
    }
  }

  /// cacc, cfrc_int and cfrc_ext for the current state. gymnasium calls it after every
  /// step; it only fills those outputs, so tasks that read none of them skip it.
  void RnePostConstraint() { mj_rnePostConstraint(model_.get(), data_.get()); }

  /// Seconds per env step (gymnasium's `dt`).
  double Dt() const { return model_->opt.timestep * frame_skip_; }

  /// weight * sum(action^2) the way gymnasium computes it on a float32 action: NumPy 2
  /// keeps float32 (the Python-float weight is "weak"), so the result is float32-rounded.
  float CtrlCostF32(const float* action, double weight) const {
    float sum = 0.0f;
    for (int i = 0; i < model_->nu; ++i) sum += action[i] * action[i];
    return static_cast<float>(weight) * sum;
  }

  enum class QvelNoise { kUniform, kNormal };

  /// gymnasium's reset() for the tasks whose reset_model only adds noise: mj_resetData,
  /// qpos = qpos0 + U(-scale, scale), qvel = U(-scale, scale) or scale * N(0, 1) (init_qvel
  /// is zero), then set_state's mj_forward. Draws nq then nv values, in gymnasium's order.
  void ResetWithNoise(double scale, QvelNoise qvel) {
    ResetData();
    for (int i = 0; i < model_->nq; ++i) {
      data_->qpos[i] = model_->qpos0[i] + Uniform(-scale, scale);
    }
    for (int i = 0; i < model_->nv; ++i) {
      data_->qvel[i] = qvel == QvelNoise::kUniform ? Uniform(-scale, scale) : scale * Normal();
    }
    Forward();
  }

  /// Copies `n` values from `src` clipped to [lo, hi] into `dst`; returns dst + n.
  static double* CopyClipped(const double* src, int n, double lo, double hi, double* dst) {
    for (int i = 0; i < n; ++i) dst[i] = std::min(std::max(src[i], lo), hi);
    return dst + n;
  }
  static double* Copy(const double* src, int n, double* dst) {
    std::copy(src, src + n, dst);
    return dst + n;
  }

  /// A task's spec: float64 obs of `obs_size` (gymnasium's Box(-inf, inf, float64)), the
  /// model's actions, this env's mjData bytes, the given info fields and time limit.
  static core::EnvSpec TaskSpec(const mjModel& m, int64_t obs_size,
                                std::vector<core::ArraySpec> info, int max_episode_steps = 1000) {
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat64, {obs_size}, {-core::kInf}, {core::kInf}};
    spec.action = ActionSpec(m);
    spec.env_bytes = DataBytes(m);
    spec.info = std::move(info);
    spec.max_episode_steps = max_episode_steps;
    return spec;
  }

  /// qpos[qpos_from:] then qvel into `obs` (the start of most tasks' observation, where
  /// qpos_from leaves out the excluded positions); returns the end.
  double* CopyQposQvel(int qpos_from, double* obs) const {
    obs = Copy(data_->qpos + qpos_from, model_->nq - qpos_from, obs);
    return Copy(data_->qvel, model_->nv, obs);
  }

  ModelPtr model_;
  DataPtr data_;
  int frame_skip_;

 private:
  static constexpr int kBadStateWarnings[] = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC};

  [[noreturn]] void ThrowUnstable(int warning, int dof) const {
    static const char* kWhat[] = {"qpos", "qvel", "qacc"};
    throw std::runtime_error(std::string("MuJoCo simulation became unstable: NaN, Inf or huge "
                                         "value in ") +
                             kWhat[warning - mjWARN_BADQPOS] + " at DOF " + std::to_string(dof) +
                             " (MuJoCo reset the simulation; the env restarts with a reset)");
  }
};

/// Base of a task: MujocoEnv plus the task's options (`config_`, a copy made at construction)
/// and the values of its info fields (`info_`), float64 scalars named by `kInfo`, gymnasium's
/// info keys in order. The spec (InfoSpec) and VisitInfo both read that one list, so they agree
/// by construction. `kInfo` is a namespace-scope `inline constexpr const char* k<Task>Info[]`
/// (a template argument must be). Called like MujocoEnv: by one pool worker at a time.
template <class ConfigT, const auto& kInfo>
class MujocoTask : public MujocoEnv {
 public:
  using Config = ConfigT;

  template <class V>
  void VisitInfo(V&& v) const {
    for (std::size_t k = 0; k < std::size(kInfo); ++k) v(kInfo[k], info_[k]);
  }

 protected:
  MujocoTask(const Config& c, uint64_t seed)
      : MujocoEnv(c.xml_file, c.frame_skip, seed), config_(c) {}

  /// One float64 scalar info field per name in kInfo.
  static std::vector<core::ArraySpec> InfoSpec() {
    std::vector<core::ArraySpec> out;
    for (const char* n : kInfo) out.push_back({n, core::DType::kFloat64, {}, {}, {}});
    return out;
  }

  /// info_[first], info_[first + 1], ... = values, in kInfo's order (first + values.size()
  /// must not pass the end of kInfo).
  void SetInfo(std::size_t first, std::initializer_list<double> values) {
    std::copy(values.begin(), values.end(), info_.begin() + first);
  }
  /// gymnasium's x_position, y_position, distance_from_origin (of qpos[0:2]) into info_[0..2].
  void SetXyInfo() {
    const double x = data_->qpos[0], y = data_->qpos[1];
    SetInfo(0, {x, y, std::sqrt(x * x + y * y)});
  }

  Config config_;
  std::array<double, std::size(kInfo)> info_{};
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_
