// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_POOL_H_
#define RLFAST_CSRC_CORE_POOL_H_

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/action_buffer_queue.h"
#include "rlfast/csrc/core/env.h"
#include "rlfast/csrc/core/spec.h"
#include "rlfast/csrc/core/state_buffer_queue.h"
#include "rlfast/csrc/core/thread_pool.h"

namespace rlfast::core {

/// send/recv used in an order that cannot work (Python: rlfast.PoolStateError).
class PoolStateError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Envs whose results will never come: the worker process that ran them died (Python envs,
/// envs/python/remote_pool.h). Thrown by Recv once per loss; Recv consumed nothing, and the
/// lost envs are idle again (`env_ids`). `workers`: the dead workers' indices.
class EnvsLost : public std::runtime_error {
 public:
  EnvsLost(const std::string& what, std::vector<int32_t> env_ids, std::vector<int32_t> workers)
      : std::runtime_error(what), env_ids_(std::move(env_ids)), workers_(std::move(workers)) {}
  const std::vector<int32_t>& env_ids() const { return env_ids_; }
  const std::vector<int32_t>& workers() const { return workers_; }

 private:
  std::vector<int32_t> env_ids_;
  std::vector<int32_t> workers_;
};

enum class AutoresetMode { kNextStep, kSameStep };

/// Options common to every pool (the env's own options live in its Config struct).
struct PoolConfig {
  int num_envs = 1;
  int batch_size = 0;   ///< 0: num_envs (sync mode).
  int num_threads = -1;  ///< -1: min(cores, num_envs), one fewer under work_in_recv.
  /// recv() steps queued envs on its own thread while its batch is incomplete, instead of
  /// sleeping (the calling thread counts as one more worker; num_threads may be 0).
  bool work_in_recv = false;
  uint64_t seed = 0;
  std::vector<uint64_t> seeds;  ///< Per-env seeds; empty: seed + env_id.
  int max_episode_steps = 0;    ///< 0: the env's default.
  AutoresetMode autoreset_mode = AutoresetMode::kNextStep;
  int thread_affinity_offset = -1;  ///< >= 0 pins worker i to CPU offset + i.
};

/// The per-slot outputs every env has besides its observation (field 0), in field order;
/// "info:" names go to recv()'s info dict. This one list gives both the layout (MakeFields)
/// and the writes (EnvPool::Process), so the two cannot disagree.
struct CommonFields {
  float reward = 0.0f;
  bool terminated = false;
  bool truncated = false;
  int32_t env_id = 0;
  int32_t elapsed_step = 0;
  float episode_return = 0.0f;
  int32_t episode_length = 0;

  template <class V>
  void Visit(V&& v) const {
    v("reward", reward);
    v("terminated", terminated);
    v("truncated", truncated);
    v("info:env_id", env_id);
    v("info:elapsed_step", elapsed_step);
    v("info:episode_return", episode_return);
    v("info:episode_length", episode_length);
  }
};

/// A batch of actions as handed over by the binding: `n` rows of `row_size` elements.
struct ActionArray {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t n = 0;
  int64_t row_size = 0;
};

/// The asynchronous env pool minus everything that depends on the env type.
///
/// Data path: Send() validates, stores each env's action in the per-env
/// action store and enqueues (env_id, reset) items; worker threads dequeue, run the env
/// (EnvPool<Env>::Process) and write its result in place into a slot claimed from the
/// StateBufferQueue; Recv() returns the index of the next complete block of the
/// Python-owned output tensors.
///
/// Threads: Send/Recv/Reseed/Close are called from Python threads (each with the GIL
/// released around blocking waits); bookkeeping they share is under `book_mutex_`. Workers
/// touch only their env, its action row and their claimed slot.
class Pool {
 public:
  Pool(std::string task_id, const PoolConfig& config, EnvSpec spec);
  virtual ~Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Builds the envs in parallel on up to num_threads temporary threads (each env is
  /// independent; the first exception is rethrown after all builders stop). `poll` runs
  /// every 50 ms on the calling thread (the binding checks for Ctrl-C there and may throw:
  /// building then stops after the envs in progress). Called once, before Attach.
  void BuildEnvs(const std::function<void()>& poll);

  /// Hands over the output ring: one buffer per field of [num_blocks, batch_size, *shape],
  /// owned by the caller and kept alive until Close() returns. Starts the workers.
  void Attach(const std::vector<void*>& field_buffers);

  /// Queues one step (or reset, for async_reset) for each env in `env_ids` (nullptr: all
  /// envs, in order). Throws std::invalid_argument for bad values, PoolStateError for envs
  /// still in flight or a closed pool. On error nothing is sent.
  void Send(const ActionArray& actions, const int32_t* env_ids, int64_t n);
  void SendReset(const int32_t* env_ids, int64_t n);
  /// Queues a "peek" of each env in `env_ids`: its result is its current observation and
  /// info again (reward 0, not terminated or truncated), nothing stepped or reset. Lets a
  /// sync pool reset some envs (SendReset) and fill the rest of the batch with peeks.
  void SendPeek(const int32_t* env_ids, int64_t n);

  /// Blocks until a block of batch_size results is complete and returns its index, plus
  /// the errors of envs in that block that raised (empty if none; the block is consumed
  /// either way, so its envs are idle again). `poll` runs every 50 ms while waiting (the
  /// binding checks for Ctrl-C there and may throw; under work_in_recv, between env steps,
  /// so a step in progress finishes first). Throws PoolStateError if nothing
  /// could ever complete a block or the pool is closed, EnvsLost (consuming nothing) once
  /// after ReportLost.
  std::pair<int, std::string> Recv(const std::function<void()>& poll);

  /// Re-seeds env env_ids[i] with seeds[i] (env_ids empty: env i, every env), in parallel
  /// like BuildEnvs; only while those envs are idle.
  void Reseed(const std::vector<int32_t>& env_ids, const std::vector<uint64_t>& seeds,
              const std::function<void()>& poll);

  /// Stops the workers (each finishes at most its current env step) and wakes a blocked
  /// Recv. Idempotent; safe from any thread.
  void Close();

  const std::string& task_id() const { return task_id_; }
  const EnvSpec& spec() const { return spec_; }
  const PoolConfig& config() const { return config_; }
  const std::vector<ArraySpec>& fields() const { return fields_; }
  int num_blocks() const { return states_.num_blocks(); }
  /// What make() estimated this pool needs (envs + output ring + bookkeeping), in bytes.
  int64_t memory_estimate() const;
  bool closed() const { return closed_.load(); }

  virtual std::vector<double> DebugGetState(int env_id) const;
  virtual void DebugSetState(int env_id, const std::vector<double>& state);

  /// The shape (height, width, 3) of the RGB frames Render() writes; empty where the task's
  /// envs do not render in C++.
  virtual std::vector<int64_t> RenderShape() const { return {}; }
  /// Writes the current frame of each env of `env_ids` (RGB uint8, RenderShape() each, one after
  /// the other) into `out`. The envs must be idle (not in flight); they are held as busy while
  /// they render, so a send to them waits. Throws std::logic_error where RenderShape() is empty.
  void Render(const std::vector<int32_t>& env_ids, uint8_t* out);
  /// The state an outside renderer draws env `env_id` from (MuJoCo: qpos, then qvel); empty
  /// where the task has none. The env must be idle.
  std::vector<double> RenderState(int env_id);

 protected:
  /// Runs one work item on a worker thread and commits its slot. Implemented per env type.
  virtual void Process(const ActionItem& item) = 0;
  /// Constructs env `env_id` (seeded with SeedFor(env_id)); may run on any thread, for
  /// different envs concurrently. Implemented per env type.
  virtual void BuildEnv(int env_id) = 0;
  /// Calls body(i) for i in [0, n) on up to `num_threads` temporary threads while the
  /// calling thread runs `poll` every 50 ms. Stops early on the first exception (rethrown
  /// once every thread has stopped) or when `poll` throws (rethrown likewise).
  void ParallelFor(int n, const std::function<void(int)>& body, const std::function<void()>& poll);
  /// Re-seeds one idle env. Implemented per env type.
  virtual void SeedEnv(int env_id, uint64_t seed) = 0;
  /// Hands the items of one send to whatever runs them; called from Send/SendReset/SendPeek
  /// under the pool's lock. Default: the pool's threads, through the action queue.
  virtual void Submit(const ActionItem* items, std::size_t n);
  /// recv()'s wait in a pool whose envs run outside its threads (Python envs in worker
  /// processes): writes the results that have arrived into their slots and commits them,
  /// waiting up to `ms` milliseconds for more (0: not at all; each recv starts with such a
  /// call). False if it cannot help (the default: the
  /// pool's threads commit results), and recv() then sleeps until a block is complete.
  virtual bool CompleteArrived(int ms);

  /// Pointer to field `f` of slot (block, slot).
  char* SlotPtr(int f, int block, int slot) const {
    return buffers_[f] + (static_cast<int64_t>(block) * config_.batch_size + slot) *
                             static_cast<int64_t>(field_bytes_[f]);
  }

  /// A visitor writing each visited (name, value) into the next field of one slot, from
  /// field `first` on. A value's C++ type is its field's dtype: MakeFields derives the common
  /// fields from the same Visit, and InfoLayoutCheck checks every env's info at make().
  class SlotWriter {
   public:
    SlotWriter(const Pool& pool, int first, int block, int slot)
        : pool_(pool), field_(first), block_(block), slot_(slot) {}
    template <class T>
    void operator()(const char* /*name*/, const T& value) {
      char* dst = pool_.SlotPtr(field_++, block_, slot_);
      if constexpr (std::is_same_v<T, DoubleSpan>) {
        std::memcpy(dst, value.data, static_cast<std::size_t>(value.size) * sizeof(double));
      } else {
        std::memcpy(dst, &value, sizeof(T));
      }
    }

   private:
    const Pool& pool_;
    int field_;
    const int block_, slot_;
  };

  /// Verifies an env's VisitInfo against spec_.info (InfoLayoutCheck); after BuildEnvs.
  virtual void CheckInfoLayout() const = 0;
  /// Render()'s frame of one idle env into `out`; RenderState()'s values of one. Per env type.
  virtual void RenderEnv(int env_id, uint8_t* out) const;
  virtual std::vector<double> RenderStateOf(int /*env_id*/) const { return {}; }
  const int32_t* DiscreteAction(int env_id) const { return &discrete_actions_[env_id]; }
  const float* BoxAction(int env_id) const { return &box_actions_[env_id * action_size_]; }
  void RecordError(int env_id, const std::string& what);
  /// The results of `env_ids` (in flight) will never come, for the reason `what` (worker
  /// `worker` is gone): they are idle again, and the next Recv (or the one waiting) throws
  /// EnvsLost with them. Called by a pool whose envs run elsewhere, under its recv.
  void ReportLost(const std::vector<int>& env_ids, int worker, const std::string& what);
  void CheckIdle(int env_id, const char* what) const;
  uint64_t SeedFor(int env_id) const;

  const std::string task_id_;
  const PoolConfig config_;
  const EnvSpec spec_;
  std::vector<ArraySpec> fields_;
  StateBufferQueue states_;
  int num_obs_fields_ = 1;    // fields 0.. hold the observation: one, or one per key (EnvSpec::obs_keys)
  int first_info_field_ = 0;  // the env's own info fields follow obs and CommonFields
  int final_obs_field_ = -1;  // the first of num_obs_fields_ (same-step autoreset), else -1

 private:
  /// Holds idle envs busy (as in flight) while Reseed or Render works on them without book_mutex_: checks, under
  /// it, that the pool is open and each env idle and named once (errors start with `what`); the destructor
  /// marks them idle again, however the work ends.
  class Hold {
   public:
    Hold(Pool* pool, const std::vector<int32_t>& ids, const char* what);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    Pool* pool_;
    const std::vector<int32_t>& ids_;
  };

  /// Recv's wait: the index of the next complete block. Runs queued work meanwhile under
  /// work_in_recv; calls `poll` every 50 ms.
  int WaitBlock(const std::function<void()>& poll);
  /// WaitBlock's way out after ReportLost: gives back Recv's reservation, throws EnvsLost.
  [[noreturn]] void ThrowLost();
  /// Under work_in_recv: takes one queued step (or reset) for the calling thread, if any.
  bool TakeWork(ActionItem* item);
  void CheckEnvIds(const int32_t* env_ids, int64_t n);
  /// Send's validation: count, shape, dtype and every value (discrete: in range;
  /// continuous: finite and within float32). Throws std::invalid_argument naming the value.
  void CheckActions(const ActionArray& a, const int32_t* env_ids, int64_t n) const;
  /// Whether `x` is a whole number within element k's action bounds (integer_actions).
  bool IntegerInRange(double x, int64_t k) const;
  /// Send's copy of validated actions into the per-env action store (as int32 / float32).
  void StoreActions(const ActionArray& a, const int32_t* env_ids);
  void Enqueue(const int32_t* env_ids, int64_t n, bool reset, bool peek = false);
  void WorkerLoop();

  std::vector<char*> buffers_;
  std::vector<std::size_t> field_bytes_;
  int64_t action_size_ = 1;
  std::vector<int32_t> discrete_actions_;
  std::vector<float> box_actions_;
  ActionBufferQueue actions_;
  std::unique_ptr<ThreadPool> threads_;

  std::mutex book_mutex_;          // guards everything below
  std::vector<uint8_t> in_flight_;  // sent, result not yet returned by recv
  std::vector<uint64_t> stamp_;     // duplicate detection within one send
  uint64_t send_count_ = 0;
  int64_t unreceived_ = 0;
  std::vector<ActionItem> items_;
  std::vector<std::string> errors_;  // per env; written by its worker before commit
  std::atomic<bool> has_errors_{false};
  std::vector<int32_t> lost_envs_, lost_workers_;  // ReportLost's, until Recv throws them
  std::string lost_what_;
  std::atomic<bool> has_lost_{false};
  std::atomic<bool> closed_{false};
  bool built_ = false;
  int env_id_field_ = -1;
};

/// Resolves defaults (batch_size, num_threads; num_threads is capped at num_envs) and
/// validates a PoolConfig against a spec, including that the pool fits in the memory the
/// machine has available (std::invalid_argument naming both figures otherwise).
PoolConfig ResolveConfig(PoolConfig config, const EnvSpec& spec);

/// The output fields of a pool: obs, reward, terminated, truncated, the common info
/// fields, the env's info fields and (same-step autoreset) final_obs; a dictionary
/// observation (EnvSpec::obs_keys) has one obs field, and one final_obs field, per key.
std::vector<ArraySpec> MakeFields(const EnvSpec& spec, AutoresetMode mode);

/// Estimated bytes of a pool: envs (spec.env_bytes each plus bookkeeping), the output ring
/// and the action store. Saturates instead of overflowing.
int64_t EstimateBytes(const PoolConfig& config, const EnvSpec& spec);

/// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read (no check then).
int64_t AvailableMemoryBytes();

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_POOL_H_
