// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_PYTHON_REMOTE_POOL_H_
#define RLFAST_CSRC_ENVS_PYTHON_REMOTE_POOL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/pool.h"
#include "rlfast/csrc/core/shared_channel.h"

namespace rlfast::envs::python {

/// The pool of Python envs that run in worker processes (rlfast/procpool.py). It has no
/// threads of its own: send() writes each env's action into the env's shared slot and
/// queues the env with its worker (core::SharedChannel::Post), waking each worker at most
/// once per send; the worker steps its envs one after the other and answers each into its
/// answer ring; recv()'s thread takes the answers that have arrived, writes them into the
/// output ring and commits them (CompleteArrived), sleeping until the block it waits for
/// can be complete. So an env step costs the main process a ring entry each way and a copy
/// of its observation, no thread hand-off; send/recv, async batches, env ids, autoreset,
/// episode statistics and error routing are the pool's own.
///
/// Episode bookkeeping (elapsed steps, returns, max_episode_steps, resets) is the pool's,
/// as in core::EnvPool; the worker is told per request when the pool ends the episode
/// (kLastStep) and, under same-step autoreset, to reset the env right after its last step
/// (kResetWhenDone), so an episode end costs no second round trip.
///
/// Seeding follows gymnasium: the first reset after construction or reseeding passes the
/// seed to `env.reset(seed=...)`; later resets continue the env's own RNG.
///
/// A Dict observation (spec.obs_keys): the worker writes the keys' bytes one after the
/// other into the env's shared obs slot; each key goes to its own output field (CopyObs).
class RemotePool : public core::Pool {
 public:
  RemotePool(std::string task_id, const core::PoolConfig& config, core::EnvSpec spec,
             std::shared_ptr<core::SharedChannel> channel)
      : Pool(std::move(task_id), config, std::move(spec)),
        channel_(std::move(channel)),
        elapsed_(config_.num_envs, 0),
        episode_return_(config_.num_envs, 0.0),
        needs_reset_(config_.num_envs, 1),
        pending_seed_(config_.num_envs, -1) {
    const core::SharedLayout& l = channel_->layout();
    down_.assign(l.num_workers, 0);
    restarts_.assign(l.num_workers, 0);
    last_answers_.assign(l.num_workers, -1);
    progress_answers_.assign(l.num_workers, 0);
    progress_requests_.assign(l.num_workers, 0);
    progress_at_.assign(l.num_workers, std::chrono::steady_clock::now());
    for (int k = 0; k < num_obs_fields_; ++k) obs_bytes_ += fields_[k].NumBytes();
    if (l.num_envs != config_.num_envs || static_cast<std::size_t>(l.obs_bytes) != obs_bytes_) {
      throw std::invalid_argument("the shared layout does not match the pool");
    }
    action_bytes_ = 4 * static_cast<std::size_t>(spec_.IsDiscrete() ? 1 : spec_.action.NumElements());
    if (static_cast<int64_t>(action_bytes_) > l.action_bytes) {
      throw std::invalid_argument("the shared action slots are too small");
    }
  }

  ~RemotePool() override { Close(); }

 protected:
  void BuildEnv(int env_id) override { pending_seed_[env_id] = AsSeed(SeedFor(env_id)); }
  void CheckInfoLayout() const override {}
  void SeedEnv(int env_id, uint64_t seed) override {
    pending_seed_[env_id] = AsSeed(seed);
    needs_reset_[env_id] = 1;
  }

  /// Only peeks run here (Submit answers them at once): the env's current observation again.
  void Process(const core::ActionItem& item) override {
    if (!item.peek) throw std::logic_error("RemotePool: only peeks run in the main process");
    WriteSlot(item.env_id, core::StepResult{}, Outcome::kPeek);
  }

  void Submit(const core::ActionItem* items, std::size_t n) override {
    const int32_t same_step = final_obs_field_ >= 0 ? core::kResetWhenDone : 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int id = items[i].env_id;
      if (items[i].peek) {
        Process(items[i]);
        continue;
      }
      if (items[i].reset || needs_reset_[id]) {
        channel_->Post(id, core::RequestKind::kReset, pending_seed_[id], 0);
        pending_seed_[id] = -1;
      } else {
        const void* action = spec_.IsDiscrete() ? static_cast<const void*>(DiscreteAction(id))
                                                : static_cast<const void*>(BoxAction(id));
        std::memcpy(channel_->ActionPtr(id), action, action_bytes_);
        const int32_t last = elapsed_[id] + 1 >= config_.max_episode_steps ? core::kLastStep : 0;
        channel_->Post(id, core::RequestKind::kStep, -1, same_step | last);
      }
      outstanding_.fetch_add(1, std::memory_order_relaxed);
    }
    channel_->WakeWorkers();
  }

  bool CompleteArrived(int ms) override {
    std::unique_lock<std::mutex> lock(reader_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;  // another recv() completes: wait for its blocks
    const bool first_look = ms == 0;  // each recv starts with CompleteArrived(0)
    if (Drain() > 0) {
      CheckWorkersEvery(kCheckInterval, first_look);
      return true;
    }
    const int64_t outstanding = outstanding_.load(std::memory_order_relaxed);
    if (outstanding == 0 || first_look) {
      CheckWorkersEvery(kCheckInterval, first_look);
      return outstanding > 0;
    }
    // Sleep until the block being filled can be complete (or every request is answered).
    const int64_t filled = claimed_.load(std::memory_order_relaxed) % config_.batch_size;
    channel_->WaitAnswers(std::min<int64_t>(config_.batch_size - filled, outstanding), ms);
    Drain();
    CheckWorkersEvery(kCheckInterval, false);
    return true;
  }

 public:
  /// A worker that owes answers and gives none for longer than `seconds` (a step or reset
  /// that runs that long, or a worker that takes no requests) is killed and reported like a
  /// death (0: no limit, the default). Any thread, before or between recv calls.
  void SetStepTimeout(double seconds) {
    step_timeout_ns_.store(seconds > 0 ? static_cast<int64_t>(seconds * 1e9) : 0);
  }

  /// After the EnvsLost that reported worker `w`'s death: its envs now run in a new
  /// process `pid`, each reset at its next send, seeded anew (the k-th restart of a worker
  /// reseeds env i with its seed + k * num_envs). Python's thread, while no recv runs.
  void RestartWorker(int w, pid_t pid) {
    std::lock_guard<std::mutex> lock(reader_mutex_);
    channel_->RestartWorker(w, pid);
    const int generation = ++restarts_[w];
    const auto [first, count] = channel_->layout().EnvsOf(w);
    for (int e = first; e < first + count; ++e) {
      needs_reset_[e] = 1;
      pending_seed_[e] = AsSeed(SeedFor(e) + static_cast<uint64_t>(generation) * config_.num_envs);
    }
    last_answers_[w] = -1;
    progress_answers_[w] = -1;
    progress_at_[w] = std::chrono::steady_clock::now();
    down_[w] = 0;
  }

 private:
  enum class Outcome { kStep, kReset, kFailed, kPeek };

  static int64_t AsSeed(uint64_t seed) { return static_cast<int64_t>(seed & 0x7fffffffffffffffULL); }

  /// Completes every answer that has arrived; how many.
  int Drain() {
    answers_.clear();
    channel_->TakeAnswers(&answers_);
    for (const core::Answer& a : answers_) {
      core::StepResult r;
      Outcome outcome = a.kind == core::RequestKind::kReset ? Outcome::kReset : Outcome::kStep;
      if (a.failed) {
        RecordError(a.env, channel_->ErrorText(a.env));
        outcome = Outcome::kFailed;
      } else if (outcome == Outcome::kStep) {
        r.reward = a.reward;
        r.terminated = a.terminated;
        r.truncated = a.truncated;
      }
      WriteSlot(a.env, r, outcome);
      outstanding_.fetch_sub(1, std::memory_order_relaxed);
    }
    return static_cast<int>(answers_.size());
  }

  /// Recv's thread: at each recv's first look for answers (`first_look`), one poll() of the
  /// workers' pidfds finds a worker that has ended, so a death surfaces at the first recv after
  /// it. (Without pidfds, Linux < 5.3: a worker that owes answers and gave none since the last
  /// look is asked, one waitid, so it surfaces within two recvs.) Every `interval` (steady
  /// clock), also while a recv waits, every worker is asked, and whether its current step has
  /// run past the step timeout (then it is killed here). The gone are reported lost.
  void CheckWorkersEvery(std::chrono::milliseconds interval, bool first_look) {
    const auto now = std::chrono::steady_clock::now();
    const bool all = now >= next_check_;
    if (all) next_check_ = now + interval;
    if (!all && !first_look) return;  // a recv's later looks: no syscall
    exited_.clear();
    const bool polled = channel_->PollExited(&exited_);
    const int64_t timeout = step_timeout_ns_.load();
    for (int w = 0; w < channel_->layout().num_workers; ++w) {
      if (down_[w]) continue;
      const auto [answers, requests] = channel_->WorkerProgress(w);
      const bool stalled = polled ? std::find(exited_.begin(), exited_.end(), w) != exited_.end()
                                  : answers < requests && answers == last_answers_[w];
      last_answers_[w] = answers;
      if (!all && !stalled) continue;
      std::string how = channel_->WorkerExit(w);
      if (how.empty() && timeout > 0 && all) {
        // Hung: it owes answers and gave none for longer than the timeout (stuck in a step, or
        // not taking its requests at all: stopped, deadlocked).
        // (New requests restart the clock too: an idle worker's last look may be long ago.)
        if (answers == requests || answers != progress_answers_[w] || requests != progress_requests_[w]) {
          progress_answers_[w] = answers;
          progress_requests_[w] = requests;
          progress_at_[w] = now;
        } else if (now - progress_at_[w] > std::chrono::nanoseconds(timeout)) {
          const auto [env, ns] = channel_->WorkerBusy(w);
          channel_->KillWorker(w);
          const std::string limit = " for more than the step timeout (" + std::to_string(timeout / 1e9).substr(0, 6) +
                                    " s) and was killed (SIGKILL)";
          how = env >= 0 ? "ran env " + std::to_string(env) + "'s step" + limit
                         : "answered none of its envs' requests" + limit;
        }
      }
      if (!how.empty()) LoseWorker(w, how);
    }
  }

  /// Worker `w` is gone (`how`): what it answered stands, the requests it never answered
  /// are reported lost (core::Pool::ReportLost), and its envs wait for RestartWorker.
  void LoseWorker(int w, const std::string& how) {
    Drain();  // what it answered before it died stands
    const auto [first, count] = channel_->layout().EnvsOf(w);
    const std::vector<int> lost = channel_->AbandonRequests(w);
    outstanding_.fetch_sub(static_cast<int64_t>(lost.size()), std::memory_order_relaxed);
    down_[w] = 1;
    ReportLost(lost, w,
               "worker process " + std::to_string(w) + " (pid " + std::to_string(channel_->WorkerPid(w)) +
                   "), which runs envs " + std::to_string(first) + "-" + std::to_string(first + count - 1) +
                   ", " + how);
  }

  /// Writes env `id`'s result into the next slot and commits it: core::EnvPool::Process's
  /// bookkeeping, with the observation bytes the worker wrote into the env's shared slot.
  void WriteSlot(int id, core::StepResult r, Outcome outcome) {
    bool done = false;
    if (outcome == Outcome::kReset) {
      elapsed_[id] = 0;
      episode_return_[id] = 0.0;
      needs_reset_[id] = 0;
    } else if (outcome == Outcome::kStep) {
      ++elapsed_[id];
      episode_return_[id] += r.reward;
      r.truncated = r.truncated || elapsed_[id] >= config_.max_episode_steps;
      done = r.terminated || r.truncated;
    }
    const core::StateBufferQueue::SlotRef ref = states_.Claim(id);
    claimed_.fetch_add(1, std::memory_order_relaxed);
    const int b = ref.block, s = ref.slot;
    const core::CommonFields common{r.reward,     r.terminated,
                                    r.truncated,  id,
                                    elapsed_[id], static_cast<float>(episode_return_[id]),
                                    elapsed_[id]};
    common.Visit(SlotWriter(*this, /*first=*/num_obs_fields_, b, s));
    if (outcome == Outcome::kFailed) {
      CopyObs(nullptr, /*first=*/0, b, s);
      needs_reset_[id] = 1;
    } else if (done && final_obs_field_ >= 0) {
      // Same-step autoreset: the worker reset the env right after this step.
      CopyObs(channel_->FinalObsPtr(id), final_obs_field_, b, s);
      CopyObs(channel_->ObsPtr(id), /*first=*/0, b, s);
      elapsed_[id] = 0;
      episode_return_[id] = 0.0;
    } else {
      CopyObs(channel_->ObsPtr(id), /*first=*/0, b, s);
      if (done) needs_reset_[id] = 1;  // next-step autoreset: the next send resets it
    }
    states_.Commit(b);
  }

  /// Copies an observation from the shared bytes at `src` (nullptr: zeros) into the
  /// num_obs_fields_ fields from `first` on of slot (b, s): a dictionary observation's keys
  /// lie one after the other in the shared slot, each goes to its own field.
  void CopyObs(const char* src, int first, int b, int s) {
    for (int k = first; k < first + num_obs_fields_; ++k) {
      const std::size_t n = fields_[k].NumBytes();
      if (src == nullptr) {
        std::memset(SlotPtr(k, b, s), 0, n);
      } else {
        std::memcpy(SlotPtr(k, b, s), src, n);
        src += n;
      }
    }
  }

  std::shared_ptr<core::SharedChannel> channel_;
  std::size_t obs_bytes_ = 0;  ///< an env's observation in the shared slot (every key's)
  std::size_t action_bytes_ = 0;
  // Per env, touched by whichever thread has the env (send's, then the completing recv's).
  std::vector<int32_t> elapsed_;
  std::vector<double> episode_return_;
  std::vector<uint8_t> needs_reset_;
  std::vector<int64_t> pending_seed_;      ///< the next reset's seed, -1: none
  std::atomic<int64_t> outstanding_{0};  ///< requests posted whose results are not written
  std::atomic<int64_t> claimed_{0};      ///< slots written so far
  std::mutex reader_mutex_;              ///< one completing recv() at a time
  std::vector<core::Answer> answers_;
  // Workers' health, the reader's (under reader_mutex_).
  static constexpr std::chrono::milliseconds kCheckInterval{100};
  std::chrono::steady_clock::time_point next_check_{};
  std::vector<uint8_t> down_;     ///< per worker: reported lost, not restarted yet
  std::vector<int> restarts_;     ///< per worker: how often it was restarted
  std::vector<int64_t> last_answers_;  ///< per worker: its answers at the last look
  std::vector<int> exited_;            ///< PollExited's answer
  std::vector<int64_t> progress_answers_;   ///< per worker: its answers and requests when either last
  std::vector<int64_t> progress_requests_;  ///< moved (the step timeout's clock)
  std::vector<std::chrono::steady_clock::time_point> progress_at_;  ///< and when that was
  std::atomic<int64_t> step_timeout_ns_{0};
};

}  // namespace rlfast::envs::python

#endif  // RLFAST_CSRC_ENVS_PYTHON_REMOTE_POOL_H_
