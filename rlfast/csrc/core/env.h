// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_ENV_H_
#define RLFAST_CSRC_CORE_ENV_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <random>

#include "rlfast/csrc/core/spec.h"

namespace rlfast::core {

/// What one Step reports besides the observation. The pool adds time-limit truncation,
/// episode bookkeeping and autoreset on top; an env sets `truncated` only for limits of its
/// own (e.g. Atari's frame cap).
struct StepResult {
  float reward = 0.0f;
  bool terminated = false;
  bool truncated = false;
};

/// Pointers to one slot's env-specific info arrays, in EnvSpec::info order.
class InfoOut {
 public:
  static constexpr int kMaxInfo = 16;
  template <class T>
  T* Get(int k) const {
    return static_cast<T*>(ptrs_[k]);
  }
  std::array<void*, kMaxInfo> ptrs_{};
};

/// Base of every environment: owns the env's RNG.
///
/// The environment contract (duck-typed; see envs/classic_control/cartpole.h):
///   using Config = ...;   plain struct with defaults and `template <class V> void Visit(V&&)`
///   using Action = int32_t (discrete) or float (Box);  using Obs = float / uint8_t / ...
///   static EnvSpec Spec(const Config&);
///   Env(const Config&, uint64_t seed);
///   void Reset();                        starts an episode (draws from rng_)
///   StepResult Step(const Action* a);    advances the current episode; no allocation
///   void WriteObs(Obs* obs) const;       writes the current observation in place
///   void WriteInfo(const InfoOut&) const writes EnvSpec::info arrays (default: none)
/// Every method is called by one worker thread at a time, never concurrently for one env;
/// the env is owned by the pool. Results must depend only on the seed and the actions,
/// never on which thread runs the env.
class EnvBase {
 public:
  explicit EnvBase(uint64_t seed) { Seed(seed); }

  /// Re-seeds the env's RNG. Called by the pool while the env is idle.
  void Seed(uint64_t seed) { rng_.seed(SplitMix64(seed)); }

  void WriteInfo(const InfoOut& /*info*/) const {}

 protected:
  /// Uniform double in [lo, hi), portable across standard libraries.
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(rng_() >> 11) * 0x1.0p-53);
  }
  /// Uniform integer in [lo, hi] (inclusive), portable across standard libraries.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }
  /// Standard normal via Box-Muller (portable, unlike std::normal_distribution).
  double Normal() {
    double u1 = 1.0 - Uniform(0.0, 1.0);
    double u2 = Uniform(0.0, 1.0);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  std::mt19937_64 rng_;

 private:
  // Decorrelates neighbouring seeds (seed + env_id) before they reach the Mersenne twister.
  static uint64_t SplitMix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_ENV_H_
