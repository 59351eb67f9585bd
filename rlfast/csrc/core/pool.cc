// Copyright rlfast authors.
#include "rlfast/csrc/core/pool.h"

#include "rlfast/csrc/core/env.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

namespace rlfast::core {

namespace {

std::invalid_argument BadValue(const std::string& msg) { return std::invalid_argument(msg); }

ArraySpec Scalar(const char* name, DType dtype) { return ArraySpec{name, dtype, {}, {}, {}}; }

ArraySpec AsInfo(ArraySpec field) {
  field.name = "info:" + field.name;
  return field;
}

/// Calls f(T{}) with T the C++ element type of an action dtype; false for other dtypes.
template <class F>
bool VisitActionType(DType dtype, const F& f) {
  switch (dtype) {
    case DType::kUInt8:
      f(uint8_t{});
      return true;
    case DType::kInt32:
      f(int32_t{});
      return true;
    case DType::kInt64:
      f(int64_t{});
      return true;
    case DType::kFloat32:
      f(float{});
      return true;
    case DType::kFloat64:
      f(double{});
      return true;
    default:
      return false;
  }
}

/// Element k's bound from a spec's low/high list (empty: `none`; one value: everywhere).
double Bound(const std::vector<double>& bounds, std::size_t k, double none) {
  return bounds.empty() ? none : bounds[bounds.size() == 1 ? 0 : k];
}

bool IsIntegerType(DType t) { return t == DType::kUInt8 || t == DType::kInt32 || t == DType::kInt64; }

/// Bookkeeping per env besides the env itself: action row, queue items, flags, the
/// unique_ptr and allocator overhead (a CartPole pool grows ~2.7 KB per env, 2.5 KB of it
/// the env's Mersenne twister).
constexpr int64_t kPerEnvOverhead = 256;

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 5) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

/// a * b + c in doubles, clamped to int64 (estimates of absurd pools must not overflow).
int64_t Saturate(double v) {
  constexpr double kMax = static_cast<double>(std::numeric_limits<int64_t>::max());
  return v >= kMax ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(v);
}

/// The observation's output fields named `name`: one, or one per key of a dictionary observation.
std::vector<ArraySpec> ObsFields(const EnvSpec& spec, const std::string& name) {
  if (spec.obs_keys.empty()) {
    ArraySpec obs = spec.obs;
    obs.name = name;
    return {obs};
  }
  std::vector<ArraySpec> keys = spec.obs_keys;
  for (ArraySpec& k : keys) k.name = name + ":" + k.name;
  return keys;
}

}  // namespace

std::vector<ArraySpec> MakeFields(const EnvSpec& spec, AutoresetMode mode) {
  // Info fields are named "info:<key>": an env's info key may equal a step field's name
  // (Atari's raw "reward" beside the step's reward), and the binding splits on the prefix.
  std::vector<ArraySpec> fields = ObsFields(spec, "obs");
  CommonFields{}.Visit([&](const char* name, const auto& value) {
    fields.push_back(Scalar(name, DTypeOf<std::decay_t<decltype(value)>>()));
  });
  for (const ArraySpec& info : spec.info) fields.push_back(AsInfo(info));
  if (mode == AutoresetMode::kSameStep) {
    for (const ArraySpec& final_obs : ObsFields(spec, "final_obs")) fields.push_back(AsInfo(final_obs));
  }
  return fields;
}

int64_t EstimateBytes(const PoolConfig& c, const EnvSpec& spec) {
  double slot_bytes = 0.0;
  for (const ArraySpec& f : MakeFields(spec, c.autoreset_mode)) {
    slot_bytes += static_cast<double>(f.NumElements()) * static_cast<double>(DTypeSize(f.dtype));
  }
  const int batch = c.batch_size > 0 ? c.batch_size : c.num_envs;
  const double ring = slot_bytes * StateBufferQueue::NumBlocksFor(c.num_envs, batch) * batch;
  const double action = 4.0 * static_cast<double>(spec.IsDiscrete() ? 1 : spec.action.NumElements());
  const double per_env = static_cast<double>(spec.env_bytes) + kPerEnvOverhead + action;
  return Saturate(per_env * c.num_envs + ring);
}

int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

PoolConfig ResolveConfig(PoolConfig c, const EnvSpec& spec) {
  if (c.num_envs < 1) {
    throw BadValue("num_envs must be >= 1, got " + std::to_string(c.num_envs));
  }
  if (c.batch_size == 0) c.batch_size = c.num_envs;
  if (c.batch_size < 1 || c.batch_size > c.num_envs) {
    throw BadValue("batch_size must be in [1, num_envs=" + std::to_string(c.num_envs) +
                   "], got " + std::to_string(c.batch_size));
  }
  if (c.num_threads == -1) {
    // Under work_in_recv the thread calling recv() is one of the workers.
    c.num_threads = ThreadPool::DefaultNumThreads(c.num_envs) - (c.work_in_recv ? 1 : 0);
  }
  if (c.num_threads < (c.work_in_recv ? 0 : 1)) {
    throw BadValue(c.work_in_recv
                       ? "num_threads must be >= 0, got " + std::to_string(c.num_threads)
                       : "num_threads must be >= 1 (or 0 with work_in_recv), got " +
                             std::to_string(c.num_threads));
  }
  // More threads than envs would only park: at most one env step runs per env at a time.
  if (c.num_threads > c.num_envs) c.num_threads = c.num_envs;
  if (c.max_episode_steps == 0) c.max_episode_steps = spec.max_episode_steps;
  if (c.max_episode_steps < 1) {
    throw BadValue("max_episode_steps must be >= 1, got " + std::to_string(c.max_episode_steps));
  }
  if (!c.seeds.empty() && static_cast<int>(c.seeds.size()) != c.num_envs) {
    throw BadValue("seeds must have one entry per env (" + std::to_string(c.num_envs) +
                   "), got " + std::to_string(c.seeds.size()));
  }
  const int64_t need = EstimateBytes(c, spec);
  const int64_t available = AvailableMemoryBytes();
  if (available > 0 && need > available) {
    throw BadValue("a pool of " + std::to_string(c.num_envs) + " envs (batch_size " +
                   std::to_string(c.batch_size) + ") needs about " +
                   FormatBytes(static_cast<double>(need)) + " (" +
                   FormatBytes(static_cast<double>(spec.env_bytes + kPerEnvOverhead)) +
                   " per env plus the output ring) but this machine has " +
                   FormatBytes(static_cast<double>(available)) +
                   " available; use fewer envs, a smaller batch_size or smaller observations");
  }
  return c;
}

int64_t Pool::memory_estimate() const { return EstimateBytes(config_, spec_); }

Pool::Pool(std::string task_id, const PoolConfig& config, EnvSpec spec)
    : task_id_(std::move(task_id)),
      config_(ResolveConfig(config, spec)),
      spec_(std::move(spec)),
      states_(config_.batch_size,
              StateBufferQueue::NumBlocksFor(config_.num_envs, config_.batch_size),
              config_.batch_size == config_.num_envs),
      actions_(2 * static_cast<std::size_t>(config_.num_envs) + config_.num_threads),
      in_flight_(config_.num_envs, 0),
      stamp_(config_.num_envs, 0),
      errors_(config_.num_envs) {
  fields_ = MakeFields(spec_, config_.autoreset_mode);
  num_obs_fields_ = spec_.obs_keys.empty() ? 1 : static_cast<int>(spec_.obs_keys.size());
  first_info_field_ = static_cast<int>(fields_.size() - spec_.info.size()) -
                      (config_.autoreset_mode == AutoresetMode::kSameStep ? num_obs_fields_ : 0);
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    if (fields_[f].name == "info:env_id") env_id_field_ = static_cast<int>(f);
  }
  if (config_.autoreset_mode == AutoresetMode::kSameStep) {
    final_obs_field_ = static_cast<int>(fields_.size()) - num_obs_fields_;
  }
  for (const ArraySpec& f : fields_) field_bytes_.push_back(f.NumBytes());
  if (spec_.IsDiscrete()) {
    discrete_actions_.assign(config_.num_envs, 0);
  } else {
    action_size_ = spec_.action.NumElements();
    box_actions_.assign(config_.num_envs * action_size_, 0.0f);
  }
  items_.reserve(config_.num_envs + config_.num_threads);
}

void Pool::Attach(const std::vector<void*>& field_buffers) {
  if (field_buffers.size() != fields_.size()) {
    throw BadValue("expected " + std::to_string(fields_.size()) + " output buffers, got " +
                   std::to_string(field_buffers.size()));
  }
  if (threads_) throw PoolStateError("pool already attached");
  if (!built_) throw PoolStateError("BuildEnvs() must run before Attach()");
  for (void* p : field_buffers) buffers_.push_back(static_cast<char*>(p));
  threads_ = std::make_unique<ThreadPool>(config_.num_threads, config_.thread_affinity_offset,
                                          [this](int) { WorkerLoop(); });
}

void Pool::BuildEnvs(const std::function<void()>& poll) {
  if (built_) throw PoolStateError("envs already built");
  ParallelFor(
      config_.num_envs,
      [this](int i) {
        try {
          BuildEnv(i);
        } catch (const std::invalid_argument& e) {  // a bad option: ValueError in Python
          throw std::invalid_argument(task_id_ + " env " + std::to_string(i) + " could not be built: " + e.what());
        } catch (const std::exception& e) {
          throw std::runtime_error(task_id_ + " env " + std::to_string(i) + " could not be built: " + e.what());
        }
      },
      poll);
  CheckInfoLayout();
  built_ = true;
}

void Pool::ParallelFor(int n, const std::function<void(int)>& body,
                       const std::function<void()>& poll) {
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<int> next{0};
  std::atomic<bool> stop{false};
  int done = 0;
  std::exception_ptr error;
  auto worker = [&](int) {
    while (!stop.load(std::memory_order_relaxed)) {
      const int i = next.fetch_add(1);
      if (i >= n) return;
      std::exception_ptr e;
      try {
        body(i);
      } catch (...) {
        e = std::current_exception();
        stop = true;
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (e && !error) error = e;
      ++done;
      cv.notify_one();
    }
  };
  // Builders run on threads of their own (Attach has not started the workers yet); the
  // calling thread only waits and polls.
  const int threads = std::max(1, std::min(n, config_.num_threads + (config_.work_in_recv ? 1 : 0)));
  ThreadPool builders(threads, /*affinity_offset=*/-1, worker);
  std::unique_lock<std::mutex> lock(mutex);
  while (done < n && !error) {
    if (cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done >= n || error; })) break;
    lock.unlock();
    try {
      poll();
    } catch (...) {
      stop = true;
      builders.Join();
      throw;
    }
    lock.lock();
  }
  lock.unlock();
  stop = true;
  builders.Join();
  if (error) std::rethrow_exception(error);
}

void Pool::WorkerLoop() {
  while (true) {
    ActionItem item = actions_.Dequeue();
    if (item.env_id < 0 || closed_.load(std::memory_order_relaxed)) return;
    Process(item);
  }
}

uint64_t Pool::SeedFor(int env_id) const {
  return config_.seeds.empty() ? config_.seed + env_id : config_.seeds[env_id];
}

void Pool::CheckEnvIds(const int32_t* env_ids, int64_t n) {
  if (closed_) throw PoolStateError("the pool is closed");
  if (n < 1) throw BadValue("send() needs at least one env id, got an empty batch");
  if (n > config_.num_envs) {
    throw BadValue("got " + std::to_string(n) + " env ids for a pool of " +
                   std::to_string(config_.num_envs) + " envs");
  }
  if (!threads_) throw PoolStateError("pool not attached to output buffers");
  ++send_count_;
  for (int64_t i = 0; i < n; ++i) {
    int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
    if (id < 0 || id >= config_.num_envs) {
      throw BadValue("env_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                     " is out of range for a pool of " + std::to_string(config_.num_envs) +
                     " envs");
    }
    if (stamp_[id] == send_count_) {
      throw BadValue("env id " + std::to_string(id) + " appears more than once in env_ids");
    }
    stamp_[id] = send_count_;
    if (in_flight_[id]) {
      throw PoolStateError("env " + std::to_string(id) +
                           " is still in flight (sent, result not yet returned by recv); "
                           "recv() its result before sending to it again");
    }
  }
}

void Pool::Enqueue(const int32_t* env_ids, int64_t n, bool reset, bool peek) {
  items_.clear();
  for (int64_t i = 0; i < n; ++i) {
    int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
    in_flight_[id] = 1;
    items_.push_back({id, reset, peek});
  }
  unreceived_ += n;
  Submit(items_.data(), items_.size());
}

void Pool::Submit(const ActionItem* items, std::size_t n) { actions_.Enqueue(items, n); }

bool Pool::CompleteArrived(int /*ms*/) { return false; }

void Pool::Send(const ActionArray& a, const int32_t* env_ids, int64_t n) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  CheckEnvIds(env_ids, n);
  CheckActions(a, env_ids, n);
  StoreActions(a, env_ids);
  Enqueue(env_ids, n, false);
}

bool Pool::IntegerInRange(double x, int64_t k) const {
  const auto e = static_cast<std::size_t>(k);
  return x == std::floor(x) && x >= Bound(spec_.action.low, e, -kInf) &&
         x <= Bound(spec_.action.high, e, kInf);
}

void Pool::CheckActions(const ActionArray& a, const int32_t* env_ids, int64_t n) const {
  if (a.n != n) {
    throw BadValue("got actions for " + std::to_string(a.n) + " envs but sending to " +
                   std::to_string(n) + " envs");
  }
  const bool discrete = spec_.IsDiscrete();
  if (discrete && a.row_size != 1) {
    throw BadValue("discrete actions must have shape (" + std::to_string(n) + ",), got " +
                   std::to_string(a.row_size) + " values per env");
  }
  if (!discrete && a.row_size != action_size_) {
    throw BadValue("each env's action must have " + std::to_string(action_size_) +
                   " values for " + task_id_ + ", got " + std::to_string(a.row_size));
  }
  if (discrete && !IsIntegerType(a.dtype)) {
    throw BadValue(std::string("discrete actions must be integers, got dtype ") +
                   DTypeName(a.dtype));
  }
  if (!discrete && a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64) {
    throw BadValue(std::string("continuous actions must be float32 or float64, got dtype ") +
                   DTypeName(a.dtype));
  }
  VisitActionType(a.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(a.data);
    for (int64_t i = 0; i < a.n * a.row_size; ++i) {
      if constexpr (std::is_integral_v<T>) {
        const auto x = static_cast<int64_t>(v[i]);
        if (x < 0 || x >= spec_.num_actions) {
          throw BadValue("actions[" + std::to_string(i) + "] = " + std::to_string(x) +
                         " is out of range: " + task_id_ + " has " +
                         std::to_string(spec_.num_actions) + " actions (0.." +
                         std::to_string(spec_.num_actions - 1) + ")");
        }
      } else if (spec_.integer_actions && !IntegerInRange(static_cast<double>(v[i]), i % a.row_size)) {
        const int64_t row = i / a.row_size;
        const std::size_t k = static_cast<std::size_t>(i % a.row_size);
        std::ostringstream msg;
        msg << "action for env " << (env_ids == nullptr ? row : env_ids[row]) << " (row " << row
            << ", element " << k << ") is " << static_cast<double>(v[i]) << "; " << task_id_
            << " takes whole numbers in [" << Bound(spec_.action.low, k, -kInf) << ", "
            << Bound(spec_.action.high, k, kInf) << "] there";
        throw BadValue(msg.str());
      } else if (!(std::fabs(static_cast<double>(v[i])) <= std::numeric_limits<float>::max())) {
        // NaN fails the comparison too; float64 values beyond float32 would become inf.
        const int64_t row = i / a.row_size;
        std::ostringstream msg;
        msg << "action for env " << (env_ids == nullptr ? row : env_ids[row]) << " (row " << row
            << ", element " << i % a.row_size << ") is " << static_cast<double>(v[i])
            << "; actions must be finite float32 values";
        throw BadValue(msg.str());
      }
    }
  });
}

void Pool::StoreActions(const ActionArray& a, const int32_t* env_ids) {
  VisitActionType(a.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* v = static_cast<const T*>(a.data);
    for (int64_t i = 0; i < a.n; ++i) {
      const int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
      if constexpr (std::is_integral_v<T>) {
        discrete_actions_[id] = static_cast<int32_t>(v[i]);
      } else {
        float* dst = &box_actions_[static_cast<int64_t>(id) * action_size_];
        for (int64_t k = 0; k < action_size_; ++k) dst[k] = static_cast<float>(v[i * action_size_ + k]);
      }
    }
  });
}

void Pool::SendReset(const int32_t* env_ids, int64_t n) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  CheckEnvIds(env_ids, n);
  Enqueue(env_ids, n, true);
}

void Pool::SendPeek(const int32_t* env_ids, int64_t n) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  CheckEnvIds(env_ids, n);
  Enqueue(env_ids, n, false, true);
}

std::pair<int, std::string> Pool::Recv(const std::function<void()>& poll) {
  {
    std::lock_guard<std::mutex> lock(book_mutex_);
    if (closed_) throw PoolStateError("the pool is closed");
    if (unreceived_ < config_.batch_size) {
      throw PoolStateError("recv() would wait forever: " + std::to_string(unreceived_) +
                           " env(s) in flight but batch_size is " +
                           std::to_string(config_.batch_size) +
                           "; send() actions or async_reset() first");
    }
    // Reserve the block's results so a concurrent recv cannot wait for the same ones.
    unreceived_ -= config_.batch_size;
  }
  const int block = WaitBlock(poll);
  std::string failures;
  {
    std::lock_guard<std::mutex> lock(book_mutex_);
    const auto* ids = reinterpret_cast<const int32_t*>(SlotPtr(env_id_field_, block, 0));
    for (int s = 0; s < config_.batch_size; ++s) {
      in_flight_[ids[s]] = 0;
      if (has_errors_.load(std::memory_order_acquire) && !errors_[ids[s]].empty()) {
        failures += (failures.empty() ? "" : "\n") + errors_[ids[s]];
        errors_[ids[s]].clear();
      }
    }
  }
  return {block, failures};
}

int Pool::WaitBlock(const std::function<void()>& poll) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kPollInterval = std::chrono::milliseconds(50);
  auto check = [&] {
    if (closed_) throw PoolStateError("the pool was closed while recv() was waiting");
    try {
      poll();
    } catch (...) {
      // Interrupted (Ctrl-C): the block stays pending and a later recv() returns it.
      std::lock_guard<std::mutex> lock(book_mutex_);
      unreceived_ += config_.batch_size;
      throw;
    }
  };
  auto next_check = Clock::now() + kPollInterval;
  CompleteArrived(0);  // a pool whose envs run elsewhere takes what has arrived and looks at its workers
  while (true) {
    if (has_lost_.load(std::memory_order_acquire)) ThrowLost();
    int block = states_.TryReady();
    ActionItem item;
    bool worked = false;
    if (block < 0 && !closed_ && TakeWork(&item)) {
      Process(item);  // the same code a worker runs; its result may complete any block
      worked = true;
    } else if (block < 0 && !closed_) {
      worked = CompleteArrived(static_cast<int>(kPollInterval.count()));
    }
    if (worked) {
      if (Clock::now() >= next_check) {
        check();
        next_check = Clock::now() + kPollInterval;
      }
      continue;
    }
    // Nothing to do here (or work_in_recv is off): sleep until a worker completes a block.
    if (block < 0) block = states_.WaitReady(kPollInterval);
    if (block >= 0 && !closed_) return block;
    check();
    next_check = Clock::now() + kPollInterval;
  }
}

bool Pool::TakeWork(ActionItem* item) {
  if (!config_.work_in_recv || !actions_.TryDequeue(item)) return false;
  if (item->env_id >= 0) return true;
  // A worker's stop marker (close() is under way): hand it back, the worker must get it.
  std::lock_guard<std::mutex> lock(book_mutex_);
  actions_.Enqueue(item, 1);
  return false;
}

void Pool::RecordError(int env_id, const std::string& what) {
  errors_[env_id] = task_id_ + " env " + std::to_string(env_id) + " raised: " + what +
                    " (the env will be reset on its next send)";
  has_errors_.store(true, std::memory_order_release);
}

void Pool::ReportLost(const std::vector<int>& env_ids, int worker, const std::string& what) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  for (const int e : env_ids) {
    if (!in_flight_[e]) continue;
    in_flight_[e] = 0;
    --unreceived_;
    lost_envs_.push_back(e);
  }
  lost_workers_.push_back(worker);
  lost_what_ += (lost_what_.empty() ? "" : "\n") + what;
  has_lost_.store(true, std::memory_order_release);
}

void Pool::ThrowLost() {
  std::vector<int32_t> envs, workers;
  std::string what;
  {
    std::lock_guard<std::mutex> lock(book_mutex_);
    unreceived_ += config_.batch_size;  // this Recv's reservation: it returns no block
    envs.swap(lost_envs_);
    workers.swap(lost_workers_);
    what.swap(lost_what_);
    has_lost_.store(false, std::memory_order_release);
  }
  throw EnvsLost(what, std::move(envs), std::move(workers));
}

void Pool::CheckIdle(int env_id, const char* what) const {
  if (env_id < 0 || env_id >= config_.num_envs) {
    throw BadValue(std::string(what) + ": env id " + std::to_string(env_id) +
                   " is out of range for a pool of " + std::to_string(config_.num_envs) + " envs");
  }
  if (in_flight_[env_id]) {
    throw PoolStateError(std::string(what) + ": env " + std::to_string(env_id) + " is in flight");
  }
}

Pool::Hold::Hold(Pool* pool, const std::vector<int32_t>& ids, const char* what) : pool_(pool), ids_(ids) {
  std::lock_guard<std::mutex> lock(pool->book_mutex_);
  if (pool->closed_) throw PoolStateError(std::string(what) + ": the pool is closed");
  ++pool->send_count_;  // a fresh stamp: an env id twice in ids is refused
  for (int32_t id : ids) {
    pool->CheckIdle(id, what);
    if (pool->stamp_[id] == pool->send_count_) {
      throw BadValue(std::string(what) + ": env id " + std::to_string(id) + " appears more than once");
    }
    pool->stamp_[id] = pool->send_count_;
  }
  // Held as in flight, without the lock: Reseed's `poll` takes the GIL, and a Python thread holding the GIL
  // may be waiting for this lock in send().
  for (int32_t id : ids) pool->in_flight_[id] = 1;
}

Pool::Hold::~Hold() {
  std::lock_guard<std::mutex> lock(pool_->book_mutex_);
  for (int32_t id : ids_) pool_->in_flight_[id] = 0;
}

void Pool::Reseed(const std::vector<int32_t>& env_ids, const std::vector<uint64_t>& seeds,
                  const std::function<void()>& poll) {
  std::vector<int32_t> ids = env_ids;
  if (ids.empty()) {
    for (int i = 0; i < config_.num_envs; ++i) ids.push_back(i);
  }
  if (seeds.size() != ids.size()) {
    throw BadValue("reseed needs one seed per env (" + std::to_string(ids.size()) + "), got " +
                   std::to_string(seeds.size()));
  }
  Hold hold(this, ids, "seed");
  // An Atari env reloads its ROM to reseed: worth the builder threads for large pools.
  ParallelFor(static_cast<int>(ids.size()), [&](int i) { SeedEnv(ids[i], seeds[i]); }, poll);
}

void Pool::Render(const std::vector<int32_t>& env_ids, uint8_t* out) {
  const std::vector<int64_t> shape = RenderShape();
  if (shape.empty()) throw std::logic_error(task_id_ + " does not render");
  const int64_t frame_bytes = shape[0] * shape[1] * shape[2];
  Hold hold(this, env_ids, "render");
  for (std::size_t i = 0; i < env_ids.size(); ++i) {
    RenderEnv(env_ids[i], out + static_cast<int64_t>(i) * frame_bytes);
  }
}

std::vector<double> Pool::RenderState(int env_id) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  if (closed_) throw PoolStateError("render: the pool is closed");
  CheckIdle(env_id, "render");
  return RenderStateOf(env_id);
}

void Pool::RenderEnv(int /*env_id*/, uint8_t* /*out*/) const {
  throw std::logic_error(task_id_ + " does not render");
}

std::vector<double> Pool::DebugGetState(int /*env_id*/) const {
  throw std::logic_error(task_id_ + " has no test state hooks in this build");
}

void Pool::DebugSetState(int /*env_id*/, const std::vector<double>& /*state*/) {
  throw std::logic_error(task_id_ + " has no test state hooks in this build");
}

void Pool::Close() {
  {
    std::lock_guard<std::mutex> lock(book_mutex_);
    if (closed_.exchange(true)) return;
    if (threads_) {
      // One stop marker per worker: every worker, busy or parked, wakes and returns.
      std::vector<ActionItem> stop(threads_->size(), ActionItem{-1, false});
      actions_.Enqueue(stop.data(), stop.size());
    }
  }
  if (threads_) threads_->Join();
  // A recv() parked on the ready semaphore re-checks closed_ when woken.
  states_.WakeReader();
}

}  // namespace rlfast::core
