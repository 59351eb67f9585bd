// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_ENV_H_
#define RLFAST_CSRC_CORE_ENV_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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

/// A float64 info array whose length is known only at run time (e.g. a model's tendons).
struct DoubleSpan {
  const double* data = nullptr;
  int64_t size = 0;
};

/// Checks, once per pool, that an env's VisitInfo names the same fields, in the same order,
/// with the same element types and counts as its static Spec().info: an env whose step and
/// spec disagree fails at make() with std::logic_error, never writes a wrong slot.
class InfoLayoutCheck {
 public:
  InfoLayoutCheck(const std::vector<ArraySpec>& spec, std::string task)
      : spec_(spec), task_(std::move(task)) {}

  template <class T>
  void operator()(const char* name, const T& value) {
    DType dtype;
    int64_t count = 1;
    if constexpr (std::is_same_v<T, DoubleSpan>) {
      dtype = DType::kFloat64;
      count = value.size;
    } else {
      dtype = DTypeOf<T>();
    }
    if (next_ >= spec_.size() || spec_[next_].name != name || spec_[next_].dtype != dtype ||
        spec_[next_].NumElements() != count) {
      const std::string want = next_ < spec_.size() ? Describe(spec_[next_].name, spec_[next_].dtype,
                                                               spec_[next_].NumElements())
                                                    : "nothing";
      throw std::logic_error(task_ + ": info field " + std::to_string(next_) + " is " +
                             Describe(name, dtype, count) + " in the env's step but " + want +
                             " in its spec");
    }
    ++next_;
  }

  void Finish() const {
    if (next_ != spec_.size()) {
      throw std::logic_error(task_ + ": the env's step writes " + std::to_string(next_) +
                             " info fields but its spec declares " + std::to_string(spec_.size()));
    }
  }

 private:
  static std::string Describe(const std::string& name, DType dtype, int64_t count) {
    return "'" + name + "' (" + DTypeName(dtype) + " x " + std::to_string(count) + ")";
  }

  const std::vector<ArraySpec>& spec_;
  std::string task_;
  std::size_t next_ = 0;
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
///   template <class V> void VisitInfo(V&& v) const
///                                        calls v(name, value) for each EnvSpec::info field,
///                                        in order; value: int32_t, float, double, bool or
///                                        DoubleSpan (default: none). The pool writes each
///                                        value into its slot by type; InfoLayoutCheck
///                                        verifies names, types and counts at make().
/// Every method is called by one worker thread at a time, never concurrently for one env;
/// the env is owned by the pool. Results must depend only on the seed and the actions,
/// never on which thread runs the env.
class EnvBase {
 public:
  explicit EnvBase(uint64_t seed) { Seed(seed); }

  /// Re-seeds the env's RNG. Called by the pool while the env is idle.
  void Seed(uint64_t seed) { rng_.seed(SplitMix64(seed)); }

  template <class V>
  void VisitInfo(V&& /*visit*/) const {}

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
