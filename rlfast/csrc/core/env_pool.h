// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_ENV_POOL_H_
#define RLFAST_CSRC_CORE_ENV_POOL_H_

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/env.h"
#include "rlfast/csrc/core/pool.h"

namespace rlfast::core {

/// Whether an env draws its own frames (`RenderShape()` and `Render(uint8_t*) const`), or has a
/// state an outside renderer draws from (`RenderState() const`).
template <class Env, class = void>
struct Renders : std::false_type {};
template <class Env>
struct Renders<Env, std::void_t<decltype(std::declval<const Env&>().Render(nullptr))>>
    : std::true_type {};
template <class Env, class = void>
struct HasRenderState : std::false_type {};
template <class Env>
struct HasRenderState<Env, std::void_t<decltype(std::declval<const Env&>().RenderState())>>
    : std::true_type {};

/// The pool for one environment type: owns `num_envs` Env instances and implements the
/// worker side of the data path (Process). Everything type-independent is in Pool.
/// The constructor validates and sizes everything (refusing a pool that cannot fit in
/// memory) but builds no env: BuildEnvs() does, in parallel.
template <class Env>
class EnvPool : public Pool {
 public:
  using Config = typename Env::Config;
  using Obs = typename Env::Obs;
  using Action = typename Env::Action;

  EnvPool(std::string task_id, const PoolConfig& pool_config, const Config& env_config)
      : Pool(std::move(task_id), pool_config, SpecOf(env_config)),
        env_config_(env_config),
        envs_(config_.num_envs),
        elapsed_(config_.num_envs, 0),
        episode_return_(config_.num_envs, 0.0),
        needs_reset_(config_.num_envs, 1) {
    static_assert(std::is_same_v<Action, int32_t> || std::is_same_v<Action, float>,
                  "Env::Action must be int32_t (discrete) or float (Box)");
    // Process writes one observation (field 0); dictionary observations are Python envs' only.
    if (num_obs_fields_ != 1) throw std::logic_error(task_id_ + ": a C++ env's spec may not set obs_keys");
  }

  ~EnvPool() override { Close(); }

  std::vector<int64_t> RenderShape() const override {
    if constexpr (Renders<Env>::value) {
      return envs_[0]->RenderShape();
    } else {
      return {};
    }
  }

#ifdef RLFAST_TEST_HOOKS
  std::vector<double> DebugGetState(int env_id) const override {
    CheckIdle(env_id, "get_state");
    return envs_[env_id]->GetState();
  }
  void DebugSetState(int env_id, const std::vector<double>& state) override {
    CheckIdle(env_id, "set_state");
    envs_[env_id]->SetState(state);
  }
#endif

 protected:
  void BuildEnv(int env_id) override {
    if constexpr (std::is_constructible_v<Env, const Config&, uint64_t, int>) {
      envs_[env_id] = std::make_unique<Env>(env_config_, SeedFor(env_id), env_id);  // a proxy
    } else {
      envs_[env_id] = std::make_unique<Env>(env_config_, SeedFor(env_id));
    }
  }

  void CheckInfoLayout() const override {
    InfoLayoutCheck check(spec_.info, task_id_);
    envs_[0]->VisitInfo(check);
    check.Finish();
  }

  void RenderEnv(int env_id, uint8_t* out) const override {
    if constexpr (Renders<Env>::value) {
      envs_[env_id]->Render(out);
    } else {
      Pool::RenderEnv(env_id, out);
    }
  }

  std::vector<double> RenderStateOf(int env_id) const override {
    if constexpr (HasRenderState<Env>::value) {
      return envs_[env_id]->RenderState();
    } else {
      return {};
    }
  }

  void SeedEnv(int env_id, uint64_t seed) override {
    envs_[env_id]->Seed(seed);
    needs_reset_[env_id] = 1;
  }

  /// Worker thread. The env is stepped before its slot is claimed, so in async mode a
  /// slot goes to whichever env finishes first; the result is then written in place.
  void Process(const ActionItem& item) override {
    const int id = item.env_id;
    Env& env = *envs_[id];
    StepResult r;
    bool reset = !item.peek && (item.reset || needs_reset_[id]);
    bool failed = false;
    try {
      if (item.peek) {
        // Nothing runs: the result below reports the current state again.
      } else if (reset) {
        env.Reset();
      } else {
        r = env.Step(ActionOf(id));
      }
    } catch (const std::exception& e) {
      RecordError(id, e.what());
      failed = true;
    } catch (...) {
      RecordError(id, "unknown C++ exception");
      failed = true;
    }
    if (reset && !failed) {
      elapsed_[id] = 0;
      episode_return_[id] = 0.0;
      needs_reset_[id] = 0;
    } else if (!failed && !item.peek) {
      ++elapsed_[id];
      episode_return_[id] += r.reward;
      r.truncated = r.truncated || elapsed_[id] >= config_.max_episode_steps;
    }
    StateBufferQueue::SlotRef ref = states_.Claim(id);
    const int b = ref.block, s = ref.slot;
    const CommonFields common{r.reward,    r.terminated,
                              r.truncated, id,
                              elapsed_[id], static_cast<float>(episode_return_[id]),
                              elapsed_[id]};
    common.Visit(SlotWriter(*this, /*first=*/1, b, s));
    Obs* obs = reinterpret_cast<Obs*>(SlotPtr(/*obs=*/0, b, s));
    if (failed) {
      std::memset(obs, 0, fields_[/*obs=*/0].NumBytes());
      needs_reset_[id] = 1;
    } else {
      try {
        WriteResult(env, id, r.terminated || r.truncated, obs, b, s);
      } catch (const std::exception& e) {
        RecordError(id, e.what());
        needs_reset_[id] = 1;
      }
    }
    states_.Commit(b);
  }

 private:
  static EnvSpec SpecOf(const Config& config) {
    EnvSpec spec = Env::Spec(config);
    spec.env_bytes += static_cast<int64_t>(sizeof(Env));
    return spec;
  }

  const Action* ActionOf(int id) const {
    if constexpr (std::is_same_v<Action, int32_t>) {
      return DiscreteAction(id);
    } else {
      return BoxAction(id);
    }
  }

  /// Writes obs/info of the current state, handling the episode end per autoreset mode.
  void WriteResult(Env& env, int id, bool done, Obs* obs, int b, int s) {
    env.VisitInfo(SlotWriter(*this, first_info_field_, b, s));
    if (!done) {
      env.WriteObs(obs);
    } else if (final_obs_field_ < 0) {
      // Next-step autoreset (gymnasium 1.x default): the next send resets this env.
      env.WriteObs(obs);
      needs_reset_[id] = 1;
    } else {
      // Same-step autoreset: the final observation goes to info, obs starts a new episode.
      env.WriteObs(reinterpret_cast<Obs*>(SlotPtr(final_obs_field_, b, s)));
      env.Reset();
      env.WriteObs(obs);
      elapsed_[id] = 0;
      episode_return_[id] = 0.0;
    }
  }

  const Config env_config_;
  std::vector<std::unique_ptr<Env>> envs_;
  // Per-env episode state, touched only by the worker currently running that env.
  std::vector<int32_t> elapsed_;
  std::vector<double> episode_return_;
  std::vector<uint8_t> needs_reset_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_ENV_POOL_H_
