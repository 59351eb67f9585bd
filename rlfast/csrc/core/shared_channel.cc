// Copyright rlfast authors.
#include "rlfast/csrc/core/shared_channel.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <new>
#include <stdexcept>
#include <thread>

namespace rlfast::core {

struct alignas(64) SharedChannel::Header {
  std::atomic<int32_t> closing;
  int32_t owner_pid;
};

/// One worker's request queue: a ring of (env) entries with `count` places, stored in the
/// EnvShared slots of the worker's own envs (place k in env first + k). Each env has at
/// most one request outstanding, so the ring cannot overflow.
struct alignas(64) SharedChannel::WorkerShared {
  sem_t requests;              // one post per queued request (and one per Close)
  std::atomic<int64_t> tail;   // next ring position; producers fetch_add it
  int64_t head;                // next position the worker reads; the worker's alone
  std::atomic<int32_t> pid;
};

struct alignas(64) SharedChannel::EnvShared {
  sem_t done;                      // posted once per answered request
  std::atomic<int64_t> ring_seq;   // position + 1 of the ring entry stored in this place
  int32_t ring_env;                // that entry: the env whose request it is
  int32_t kind;                    // this env's request (RequestKind)
  int64_t seed;                    // reset seed, -1 for none
  int32_t failed;                  // the answer: 1 if the env raised (text at ErrorOffset)
  float reward;
  uint8_t terminated;
  uint8_t truncated;
};

namespace {

constexpr int64_t Round64(int64_t n) { return (n + 63) / 64 * 64; }

/// sem_wait with a short spin first and a deadline `ms` from now; whether a post was taken.
bool TimedWait(sem_t* sem, int ms) {
  for (int i = 0; i < 200; ++i) {
    if (sem_trywait(sem) == 0) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  int64_t ns = deadline.tv_nsec + static_cast<int64_t>(ms) * 1000000;
  deadline.tv_sec += ns / 1000000000;
  deadline.tv_nsec = ns % 1000000000;
  while (sem_timedwait(sem, &deadline) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

}  // namespace

int64_t SharedLayout::WorkersOffset() const { return Round64(sizeof(SharedChannel::Header)); }

int64_t SharedLayout::EnvStride() const {
  return Round64(sizeof(SharedChannel::EnvShared)) + Round64(action_bytes) + Round64(obs_bytes) +
         Round64(kErrorBytes);
}

int64_t SharedLayout::EnvOffset(int env) const {
  return WorkersOffset() + num_workers * Round64(sizeof(SharedChannel::WorkerShared)) +
         env * EnvStride();
}

int64_t SharedLayout::ActionOffset(int env) const {
  return EnvOffset(env) + Round64(sizeof(SharedChannel::EnvShared));
}
int64_t SharedLayout::ObsOffset(int env) const { return ActionOffset(env) + Round64(action_bytes); }
int64_t SharedLayout::ErrorOffset(int env) const { return ObsOffset(env) + Round64(obs_bytes); }
int64_t SharedLayout::TotalBytes() const { return EnvOffset(num_envs); }

std::pair<int, int> SharedLayout::EnvsOf(int w) const {
  const int base = num_envs / num_workers, extra = num_envs % num_workers;
  return {w * base + (w < extra ? w : extra), base + (w < extra ? 1 : 0)};
}

int SharedLayout::WorkerOf(int env) const {
  const int base = num_envs / num_workers, extra = num_envs % num_workers;
  const int big = extra * (base + 1);  // envs of the workers that run one more
  return env < big ? env / (base + 1) : extra + (env - big) / base;
}

SharedChannel::Header& SharedChannel::header() const { return *reinterpret_cast<Header*>(base_); }

SharedChannel::WorkerShared& SharedChannel::worker(int w) const {
  return *reinterpret_cast<WorkerShared*>(base_ + layout_.WorkersOffset() +
                                          w * Round64(sizeof(WorkerShared)));
}

SharedChannel::EnvShared& SharedChannel::env(int e) const {
  return *reinterpret_cast<EnvShared*>(base_ + layout_.EnvOffset(e));
}

void SharedChannel::Init(pid_t owner) {
  Header* h = new (base_) Header;
  h->closing.store(0);
  h->owner_pid = owner;
  for (int w = 0; w < layout_.num_workers; ++w) {
    WorkerShared* ws = new (&worker(w)) WorkerShared;
    if (sem_init(&ws->requests, /*pshared=*/1, 0) != 0) {
      throw std::runtime_error(std::string("sem_init failed: ") + std::strerror(errno));
    }
    ws->tail.store(0);
    ws->head = 0;
    ws->pid.store(0);
  }
  for (int e = 0; e < layout_.num_envs; ++e) {
    EnvShared* es = new (&env(e)) EnvShared;
    if (sem_init(&es->done, /*pshared=*/1, 0) != 0) {
      throw std::runtime_error(std::string("sem_init failed: ") + std::strerror(errno));
    }
    es->ring_seq.store(0);
    es->ring_env = -1;
    es->kind = 0;
    es->seed = -1;
    es->failed = 0;
    es->reward = 0.0f;
    es->terminated = es->truncated = 0;
  }
}

void SharedChannel::SetWorkerPid(int w, pid_t pid) { worker(w).pid.store(pid); }

void SharedChannel::Close() {
  if (header().closing.exchange(1) != 0) return;
  for (int w = 0; w < layout_.num_workers; ++w) sem_post(&worker(w).requests);
  for (int e = 0; e < layout_.num_envs; ++e) sem_post(&env(e).done);
}

void SharedChannel::Destroy() {
  for (int w = 0; w < layout_.num_workers; ++w) sem_destroy(&worker(w).requests);
  for (int e = 0; e < layout_.num_envs; ++e) sem_destroy(&env(e).done);
}

bool SharedChannel::closing() const { return header().closing.load() != 0; }

bool SharedChannel::WorkerAlive(int w) const {
  const pid_t pid = worker(w).pid.load();
  if (pid <= 0) return true;  // not started yet: the main process sets pids before any step
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A worker that exited stays a zombie until its parent reaps it: read its state.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ||
         (line[close + 2] != 'Z' && line[close + 2] != 'X');
}

std::tuple<float, bool, bool> SharedChannel::Request(int e, RequestKind kind, int64_t seed) {
  EnvShared& me = env(e);
  me.kind = static_cast<int32_t>(kind);
  me.seed = seed;
  const int w = layout_.WorkerOf(e);
  WorkerShared& ws = worker(w);
  const auto [first, count] = layout_.EnvsOf(w);
  const int64_t pos = ws.tail.fetch_add(1);
  EnvShared& place = env(first + static_cast<int>(pos % count));
  place.ring_env = e;
  place.ring_seq.store(pos + 1, std::memory_order_release);
  sem_post(&ws.requests);
  while (!TimedWait(&me.done, 100)) {
    if (closing()) break;
    if (!WorkerAlive(w)) {
      throw std::runtime_error("worker process " + std::to_string(w) + " (pid " +
                               std::to_string(ws.pid.load()) + "), which runs envs " +
                               std::to_string(first) + "-" + std::to_string(first + count - 1) +
                               ", died");
    }
  }
  if (closing()) throw std::runtime_error("the pool was closed while the env was stepping");
  if (me.failed) {
    const char* text = base_ + layout_.ErrorOffset(e);
    throw std::runtime_error(std::string(text, strnlen(text, SharedLayout::kErrorBytes)));
  }
  return {me.reward, me.terminated != 0, me.truncated != 0};
}

std::tuple<int, int, int64_t> SharedChannel::Next(int w) {
  WorkerShared& ws = worker(w);
  while (!TimedWait(&ws.requests, 100)) {
    if (closing() || getppid() != header().owner_pid) return {-1, 0, -1};
  }
  if (closing()) return {-1, 0, -1};
  const auto [first, count] = layout_.EnvsOf(w);
  const int64_t pos = ws.head++;
  EnvShared& place = env(first + static_cast<int>(pos % count));
  // The producer stores its entry before posting, but another producer's post may have
  // woken us first: wait the few instructions until this position's entry is stored.
  for (int spins = 0; place.ring_seq.load(std::memory_order_acquire) != pos + 1; ++spins) {
    if (spins > 1000) std::this_thread::yield();
  }
  const int e = place.ring_env;
  return {e, env(e).kind, env(e).seed};
}

void SharedChannel::Answer(int e, float reward, bool terminated, bool truncated) {
  EnvShared& me = env(e);
  me.failed = 0;
  me.reward = reward;
  me.terminated = terminated;
  me.truncated = truncated;
  sem_post(&me.done);
}

void SharedChannel::Fail(int e, const std::string& what) {
  EnvShared& me = env(e);
  char* text = base_ + layout_.ErrorOffset(e);
  const std::size_t n = std::min<std::size_t>(what.size(), SharedLayout::kErrorBytes - 1);
  std::memcpy(text, what.data(), n);
  text[n] = '\0';
  me.failed = 1;
  sem_post(&me.done);
}

}  // namespace rlfast::core
