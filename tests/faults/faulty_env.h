// A C++ env for rlfast.load_env that fails on demand (tests/faults/test_cpp_faults.py): action 1 throws
// in Step, action 2 raises SIGSEGV (as a bad pointer in env code would), reset number `fail_reset` throws,
// and with `fail_build` every constructor throws.
#ifndef RLFAST_TESTS_FAULTS_FAULTY_ENV_H_
#define RLFAST_TESTS_FAULTS_FAULTY_ENV_H_

#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "rlfast/csrc/core/env.h"

struct FaultyConfig {
  int fail_reset = -1;  ///< the env's reset number this (0: its first) throws
  int fail_build = 0;   ///< 1: the constructor throws

  template <class V>
  void Visit(V&& v) {
    v("fail_reset", fail_reset);
    v("fail_build", fail_build);
  }
};

/// obs = [steps in episode]; 3 actions (0 steps, 1 throws, 2 segfaults); episodes of 20 steps.
class Faulty : public rlfast::core::EnvBase {
 public:
  using Config = FaultyConfig;
  using Action = int32_t;
  using Obs = float;

  static rlfast::core::EnvSpec Spec(const Config&) {
    rlfast::core::EnvSpec spec;
    spec.obs = {"obs", rlfast::core::DType::kFloat32, {1}, {0.0}, {100.0}};
    spec.num_actions = 3;
    spec.max_episode_steps = 1000;
    return spec;
  }

  Faulty(const Config& config, uint64_t seed) : rlfast::core::EnvBase(seed), config_(config) {
    if (config_.fail_build) throw std::runtime_error("Faulty was told to fail in its constructor");
  }

  void Reset() {
    if (resets_++ == config_.fail_reset) throw std::runtime_error("Faulty was told to fail in reset");
    t_ = 0;
  }

  rlfast::core::StepResult Step(const Action* action) {
    if (*action == 1) throw std::runtime_error("Faulty was told to fail in step");
    if (*action == 2) std::raise(SIGSEGV);
    rlfast::core::StepResult r;
    r.terminated = ++t_ >= 20;
    return r;
  }

  void WriteObs(Obs* obs) const { obs[0] = static_cast<float>(t_); }

 private:
  Config config_;
  int t_ = 0;
  int resets_ = 0;
};

#endif  // RLFAST_TESTS_FAULTS_FAULTY_ENV_H_
