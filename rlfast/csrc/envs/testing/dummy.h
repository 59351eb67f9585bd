// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_TESTING_DUMMY_H_
#define RLFAST_CSRC_ENVS_TESTING_DUMMY_H_

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rlfast/csrc/core/env.h"

namespace rlfast::envs::testing {

/// Dummy-v0 options. The env exists to test the pool, not to learn anything.
struct DummyConfig {
  int num_actions = 1000;
  int episode_length = 10;  ///< terminates after this many steps
  int step_sleep_us = 0;    ///< fixed time per step (microseconds)
  int jitter_us = 0;        ///< plus a random 0..jitter_us from the env's RNG
  int throw_on_action = -1; ///< Step throws std::runtime_error when given this action
  int throw_on_reset = -1;  ///< the env's reset number this (0: its first) throws
  int throw_on_build = 0;   ///< 1: every env's constructor throws
  int slow_write_action = -1;  ///< after a step with this action, writing the obs sleeps
  int slow_write_us = 0;       ///< for this long (between the slot claim and its commit)
  /// 1: VisitInfo reports last_action as float32, 2: adds an undeclared field (both must
  /// be refused at make() by InfoLayoutCheck).
  int info_layout_bug = 0;

  template <class V>
  void Visit(V&& v) {
    v("num_actions", num_actions);
    v("episode_length", episode_length);
    v("step_sleep_us", step_sleep_us);
    v("jitter_us", jitter_us);
    v("throw_on_action", throw_on_action);
    v("throw_on_reset", throw_on_reset);
    v("throw_on_build", throw_on_build);
    v("slow_write_action", slow_write_action);
    v("slow_write_us", slow_write_us);
    v("info_layout_bug", info_layout_bug);
  }
};

/// Pool test env. obs = [last action, steps in episode, a draw from the RNG at reset];
/// reward = the action; info `last_action` repeats the action as int32. Lets tests check
/// that each action reaches its own env, that seeds drive resets, ordering, error routing.
class Dummy : public core::EnvBase {
 public:
  using Config = DummyConfig;
  using Action = int32_t;
  using Obs = float;

  static core::EnvSpec Spec(const Config& config) {
    if (config.num_actions < 1 || config.episode_length < 1) {
      throw std::invalid_argument("Dummy-v0: num_actions and episode_length must be >= 1");
    }
    core::EnvSpec spec;
    spec.obs = {"obs", core::DType::kFloat32, {3}, {-core::kInf}, {core::kInf}};
    spec.num_actions = config.num_actions;
    spec.info = {{"last_action", core::DType::kInt32, {}, {}, {}}};
    spec.max_episode_steps = 1 << 30;
    return spec;
  }

  Dummy(const Config& config, uint64_t seed) : core::EnvBase(seed), config_(config) {
    if (config_.throw_on_build) throw std::runtime_error("Dummy-v0 was told to fail in its constructor");
  }

  void Reset() {
    if (resets_++ == config_.throw_on_reset) {
      throw std::runtime_error("Dummy-v0 was told to fail in reset " + std::to_string(resets_ - 1));
    }
    steps_ = 0;
    last_action_ = -1;
    reset_draw_ = static_cast<float>(Uniform(0.0, 1.0));
    Sleep();
  }

  core::StepResult Step(const Action* action) {
    if (*action == config_.throw_on_action) {
      throw std::runtime_error("Dummy-v0 was told to fail on action " + std::to_string(*action));
    }
    last_action_ = *action;
    ++steps_;
    Sleep();
    core::StepResult r;
    r.reward = static_cast<float>(*action);
    r.terminated = steps_ >= config_.episode_length;
    return r;
  }

  void WriteObs(Obs* obs) const {
    if (last_action_ == config_.slow_write_action && config_.slow_write_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(config_.slow_write_us));
    }
    obs[0] = static_cast<float>(last_action_);
    obs[1] = static_cast<float>(steps_);
    obs[2] = reset_draw_;
  }

  template <class V>
  void VisitInfo(V&& v) const {
    if (config_.info_layout_bug == 1) {
      v("last_action", static_cast<float>(last_action_));
    } else {
      v("last_action", last_action_);
    }
    if (config_.info_layout_bug == 2) v("extra", last_action_);
  }

#ifdef RLFAST_TEST_HOOKS
  std::vector<double> GetState() const { return {static_cast<double>(steps_)}; }
  void SetState(const std::vector<double>& s) { steps_ = static_cast<int>(s.at(0)); }
#endif

 private:
  void Sleep() {
    int us = config_.step_sleep_us;
    if (config_.jitter_us > 0) us += static_cast<int>(UniformInt(0, config_.jitter_us));
    if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }

  Config config_;
  int steps_ = 0;
  int last_action_ = -1;
  int resets_ = 0;
  float reset_draw_ = 0.0f;
};

}  // namespace rlfast::envs::testing

#endif  // RLFAST_CSRC_ENVS_TESTING_DUMMY_H_
