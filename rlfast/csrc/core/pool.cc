// Copyright rlfast authors.
#include "rlfast/csrc/core/pool.h"

#include "rlfast/csrc/core/env.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace rlfast::core {

namespace {

std::invalid_argument BadValue(const std::string& msg) { return std::invalid_argument(msg); }

ArraySpec Scalar(const char* name, DType dtype) { return ArraySpec{name, dtype, {}, {}, {}}; }

ArraySpec AsInfo(ArraySpec field) {
  field.name = "info:" + field.name;
  return field;
}

template <class T>
bool DiscreteInRange(const void* data, int64_t n, int64_t num_actions, int64_t* bad_index,
                     int64_t* bad_value, int32_t* out) {
  const T* src = static_cast<const T*>(data);
  for (int64_t i = 0; i < n; ++i) {
    auto v = static_cast<int64_t>(src[i]);
    if (v < 0 || v >= num_actions) {
      *bad_index = i;
      *bad_value = v;
      return false;
    }
    if (out != nullptr) out[i] = static_cast<int32_t>(v);
  }
  return true;
}

template <class T>
int64_t FirstNonFinite(const void* data, int64_t n) {
  const T* src = static_cast<const T*>(data);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) return i;
  }
  return -1;
}

}  // namespace

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
  if (c.max_episode_steps == 0) c.max_episode_steps = spec.max_episode_steps;
  if (c.max_episode_steps < 1) {
    throw BadValue("max_episode_steps must be >= 1, got " + std::to_string(c.max_episode_steps));
  }
  if (!c.seeds.empty() && static_cast<int>(c.seeds.size()) != c.num_envs) {
    throw BadValue("seeds must have one entry per env (" + std::to_string(c.num_envs) +
                   "), got " + std::to_string(c.seeds.size()));
  }
  return c;
}

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
  ArraySpec obs = spec_.obs;
  obs.name = "obs";
  // Info fields are named "info:<key>": an env's info key may equal a step field's name
  // (Atari's raw "reward" beside the step's reward), and the binding splits on the prefix.
  fields_ = {obs,
             Scalar("reward", DType::kFloat32),
             Scalar("terminated", DType::kBool),
             Scalar("truncated", DType::kBool),
             AsInfo(Scalar("env_id", DType::kInt32)),
             AsInfo(Scalar("elapsed_step", DType::kInt32)),
             AsInfo(Scalar("episode_return", DType::kFloat32)),
             AsInfo(Scalar("episode_length", DType::kInt32))};
  if (spec_.info.size() > static_cast<std::size_t>(InfoOut::kMaxInfo)) {
    throw std::logic_error("too many info fields for " + task_id_);
  }
  for (const ArraySpec& info : spec_.info) fields_.push_back(AsInfo(info));
  if (config_.autoreset_mode == AutoresetMode::kSameStep) {
    ArraySpec final_obs = spec_.obs;
    final_obs.name = "final_obs";
    final_obs_field_ = static_cast<int>(fields_.size());
    fields_.push_back(AsInfo(final_obs));
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
  for (void* p : field_buffers) buffers_.push_back(static_cast<char*>(p));
  threads_ = std::make_unique<ThreadPool>(config_.num_threads, config_.thread_affinity_offset,
                                          [this](int) { WorkerLoop(); });
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

void Pool::Enqueue(const int32_t* env_ids, int64_t n, bool reset) {
  items_.clear();
  for (int64_t i = 0; i < n; ++i) {
    int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
    in_flight_[id] = 1;
    items_.push_back({id, reset});
  }
  unreceived_ += n;
  actions_.Enqueue(items_.data(), items_.size());
}

void Pool::Send(const ActionArray& a, const int32_t* env_ids, int64_t n) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  CheckEnvIds(env_ids, n);
  if (a.n != n) {
    throw BadValue("got actions for " + std::to_string(a.n) + " envs but sending to " +
                   std::to_string(n) + " envs");
  }
  int64_t total = a.n * a.row_size;
  if (spec_.IsDiscrete()) {
    if (a.row_size != 1) {
      throw BadValue("discrete actions must have shape (" + std::to_string(n) + ",), got " +
                     std::to_string(a.row_size) + " values per env");
    }
    int64_t bad_i = -1, bad_v = 0;
    bool ok;
    switch (a.dtype) {
      case DType::kInt32:
        ok = DiscreteInRange<int32_t>(a.data, total, spec_.num_actions, &bad_i, &bad_v, nullptr);
        break;
      case DType::kInt64:
        ok = DiscreteInRange<int64_t>(a.data, total, spec_.num_actions, &bad_i, &bad_v, nullptr);
        break;
      case DType::kUInt8:
        ok = DiscreteInRange<uint8_t>(a.data, total, spec_.num_actions, &bad_i, &bad_v, nullptr);
        break;
      default:
        throw BadValue(std::string("discrete actions must be integers, got dtype ") +
                       DTypeName(a.dtype));
    }
    if (!ok) {
      throw BadValue("actions[" + std::to_string(bad_i) + "] = " + std::to_string(bad_v) +
                     " is out of range: " + task_id_ + " has " +
                     std::to_string(spec_.num_actions) + " actions (0.." +
                     std::to_string(spec_.num_actions - 1) + ")");
    }
    for (int64_t i = 0; i < n; ++i) {
      int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
      int64_t unused_i, unused_v;
      switch (a.dtype) {
        case DType::kInt32:
          DiscreteInRange<int32_t>(static_cast<const int32_t*>(a.data) + i, 1, spec_.num_actions,
                                   &unused_i, &unused_v, &discrete_actions_[id]);
          break;
        case DType::kInt64:
          DiscreteInRange<int64_t>(static_cast<const int64_t*>(a.data) + i, 1, spec_.num_actions,
                                   &unused_i, &unused_v, &discrete_actions_[id]);
          break;
        default:
          DiscreteInRange<uint8_t>(static_cast<const uint8_t*>(a.data) + i, 1, spec_.num_actions,
                                   &unused_i, &unused_v, &discrete_actions_[id]);
      }
    }
  } else {
    if (a.row_size != action_size_) {
      throw BadValue("each env's action must have " + std::to_string(action_size_) +
                     " values for " + task_id_ + ", got " + std::to_string(a.row_size));
    }
    int64_t bad;
    if (a.dtype == DType::kFloat32) {
      bad = FirstNonFinite<float>(a.data, total);
    } else if (a.dtype == DType::kFloat64) {
      bad = FirstNonFinite<double>(a.data, total);
    } else {
      throw BadValue(std::string("continuous actions must be float32 or float64, got dtype ") +
                     DTypeName(a.dtype));
    }
    if (bad >= 0) {
      int32_t id = env_ids == nullptr ? static_cast<int32_t>(bad / a.row_size)
                                      : env_ids[bad / a.row_size];
      double v = a.dtype == DType::kFloat32 ? static_cast<const float*>(a.data)[bad]
                                            : static_cast<const double*>(a.data)[bad];
      std::ostringstream msg;
      msg << "action for env " << id << " (row " << bad / a.row_size << ", element "
          << bad % a.row_size << ") is " << v << "; actions must be finite";
      throw BadValue(msg.str());
    }
    for (int64_t i = 0; i < n; ++i) {
      int32_t id = env_ids == nullptr ? static_cast<int32_t>(i) : env_ids[i];
      float* dst = &box_actions_[id * action_size_];
      for (int64_t k = 0; k < action_size_; ++k) {
        dst[k] = a.dtype == DType::kFloat32
                     ? static_cast<const float*>(a.data)[i * action_size_ + k]
                     : static_cast<float>(static_cast<const double*>(a.data)[i * action_size_ + k]);
      }
    }
  }
  Enqueue(env_ids, n, false);
}

void Pool::SendReset(const int32_t* env_ids, int64_t n) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  CheckEnvIds(env_ids, n);
  Enqueue(env_ids, n, true);
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
    const auto* ids = reinterpret_cast<const int32_t*>(SlotPtr(kEnvId, block, 0));
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
  while (true) {
    int block = states_.TryReady();
    ActionItem item;
    if (block < 0 && !closed_ && TakeWork(&item)) {
      Process(item);  // the same code a worker runs; its result may complete any block
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

void Pool::CheckIdle(int env_id, const char* what) const {
  if (env_id < 0 || env_id >= config_.num_envs) {
    throw BadValue(std::string(what) + ": env id " + std::to_string(env_id) + " out of range");
  }
  if (in_flight_[env_id]) {
    throw PoolStateError(std::string(what) + ": env " + std::to_string(env_id) + " is in flight");
  }
}

void Pool::Reseed(const std::vector<uint64_t>& seeds) {
  std::lock_guard<std::mutex> lock(book_mutex_);
  if (static_cast<int>(seeds.size()) != config_.num_envs) {
    throw BadValue("reseed needs one seed per env (" + std::to_string(config_.num_envs) +
                   "), got " + std::to_string(seeds.size()));
  }
  for (int i = 0; i < config_.num_envs; ++i) CheckIdle(i, "seed");
  for (int i = 0; i < config_.num_envs; ++i) SeedEnv(i, seeds[i]);
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
