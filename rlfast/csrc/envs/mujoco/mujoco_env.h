// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_
#define RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_

#include <mujoco/mujoco.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdint>
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

  /// gymnasium's x_position, y_position, distance_from_origin (of qpos[0:2]) into out[0..2].
  void XyInfo(double* out) const {
    out[0] = data_->qpos[0];
    out[1] = data_->qpos[1];
    out[2] = std::sqrt(out[0] * out[0] + out[1] * out[1]);
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

  /// One float64 scalar info field per name (gymnasium's info keys), in order. A task lists
  /// its names once (`kInfo`) for both this spec and VisitScalars, and keeps its values in
  /// `double info_[std::size(kInfo)]`.
  template <std::size_t N>
  static std::vector<core::ArraySpec> ScalarInfo(const char* const (&names)[N]) {
    std::vector<core::ArraySpec> out;
    for (const char* n : names) out.push_back({n, core::DType::kFloat64, {}, {}, {}});
    return out;
  }
  /// Visits (names[k], values[k]) for every k: the info of tasks whose fields are scalars.
  template <class V, std::size_t N>
  static void VisitScalars(V& v, const char* const (&names)[N], const double* values) {
    for (std::size_t k = 0; k < N; ++k) v(names[k], values[k]);
  }
  /// The observation spec: float64, unbounded (gymnasium's Box(-inf, inf, float64)).
  static core::ArraySpec ObsSpec(int64_t size) {
    return {"obs", core::DType::kFloat64, {size}, {-core::kInf}, {core::kInf}};
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

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_MUJOCO_ENV_H_
