// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_PYTHON_REMOTE_ENV_H_
#define RLFAST_CSRC_ENVS_PYTHON_REMOTE_ENV_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rlfast/csrc/core/env.h"
#include "rlfast/csrc/core/shared_channel.h"

namespace rlfast::envs::python {

/// What every proxy of one pool shares: the channel to the worker processes and the spec
/// the Python side derived from the env's gymnasium spaces.
struct RemoteConfig {
  std::shared_ptr<core::SharedChannel> channel;
  core::EnvSpec spec;
};

/// The stand-in, inside the engine's pool, for one Python env that runs in a worker
/// process (rlfast/procpool.py). A pool thread calls Reset/Step as for any C++ env; the
/// proxy writes the action into the env's shared slot, queues the request with the env's
/// worker and blocks until the worker has written obs, reward and ends there
/// (core::SharedChannel). So send/recv, async batches, autoreset, episode statistics and
/// error routing are the pool's own. Obs are raw bytes of the spec's dtype.
///
/// Seeding follows gymnasium: the first reset after construction or Seed() passes the seed
/// to `env.reset(seed=...)`; later resets continue the env's own RNG.
template <class ActionT>
class RemoteEnv {
 public:
  using Config = RemoteConfig;
  using Action = ActionT;
  using Obs = uint8_t;

  static core::EnvSpec Spec(const Config& config) { return config.spec; }

  RemoteEnv(const Config& config, uint64_t seed, int env_id)
      : channel_(config.channel), id_(env_id), pending_seed_(AsSeed(seed)),
        obs_bytes_(channel_->layout().obs_bytes), action_bytes_(channel_->layout().action_bytes) {}

  void Seed(uint64_t seed) { pending_seed_ = AsSeed(seed); }

  void Reset() {
    channel_->Request(id_, core::RequestKind::kReset, pending_seed_);
    pending_seed_ = -1;
  }

  core::StepResult Step(const Action* action) {
    std::memcpy(channel_->ActionPtr(id_), action, action_bytes_);
    const auto [reward, terminated, truncated] = channel_->Request(id_, core::RequestKind::kStep, -1);
    core::StepResult r;
    r.reward = reward;
    r.terminated = terminated;
    r.truncated = truncated;
    return r;
  }

  void WriteObs(Obs* obs) const { std::memcpy(obs, channel_->ObsPtr(id_), obs_bytes_); }

  template <class V>
  void VisitInfo(V&& /*visit*/) const {}

  std::vector<double> GetState() const { throw std::logic_error("Python envs have no state hooks"); }
  void SetState(const std::vector<double>& /*state*/) {
    throw std::logic_error("Python envs have no state hooks");
  }

 private:
  /// gymnasium seeds are Python ints >= 0; the channel carries int64 (-1: no seed).
  static int64_t AsSeed(uint64_t seed) { return static_cast<int64_t>(seed & 0x7fffffffffffffffULL); }

  std::shared_ptr<core::SharedChannel> channel_;
  const int id_;
  int64_t pending_seed_;
  const int64_t obs_bytes_;
  const int64_t action_bytes_;
};

}  // namespace rlfast::envs::python

#endif  // RLFAST_CSRC_ENVS_PYTHON_REMOTE_ENV_H_
