// Copyright rlfast authors.
#include "rlfast/csrc/core/shared_channel.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <new>
#include <stdexcept>
#include <thread>

#include "rlfast/csrc/core/semaphore.h"

namespace rlfast::core {

struct alignas(64) SharedChannel::Header {
  std::atomic<int32_t> closing;
  int32_t owner_pid;
  // The pool's reader: it sleeps on `answers` with `reader_sleeping` set until `answered`
  // (every worker's answers so far) reaches `wake_at`.
  alignas(64) sem_t answers;
  std::atomic<int32_t> reader_sleeping;
  std::atomic<int64_t> wake_at;
  alignas(64) std::atomic<int64_t> answered;
};

/// One worker's two rings. Ring position p of worker w lives in the EnvShared of env
/// first(w) + p % count(w) (request_entry / answer_entry): the env whose request or answer
/// it is.
struct alignas(64) SharedChannel::WorkerShared {
  sem_t requests;                       // posted when the worker sleeps and requests came
  std::atomic<int32_t> sleeping;
  std::atomic<int32_t> pid;
  std::atomic<int32_t> busy_env;        // the request being run (-1: none), since busy_since
  std::atomic<int64_t> busy_since;      // CLOCK_MONOTONIC ns (the same clock in every process)
  std::atomic<int64_t> request_tail;    // written by the main process
  std::atomic<int64_t> request_head;    // the worker's
  alignas(64) std::atomic<int64_t> answer_tail;  // written by the worker
  int64_t answer_head;                  // the main process's
};

struct alignas(64) SharedChannel::EnvShared {
  int32_t request_entry;  // ring places (see WorkerShared)
  int32_t answer_entry;
  int32_t kind;           // this env's request (RequestKind), flags and reset seed (-1: none)
  int32_t flags;
  int64_t seed;
  int32_t failed;         // its answer: 1 if the env raised (text at ErrorOffset)
  float reward;
  uint8_t terminated;
  uint8_t truncated;
};

namespace {

constexpr int64_t Round64(int64_t n) { return (n + 63) / 64 * 64; }

int64_t MonotonicNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

/// "SIGKILL" for 9 and the other signals that end a process; "" for the rest.
const char* SignalName(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGTERM: return "SIGTERM";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "";
  }
}

/// How process `pid`, a child of this one, ended: "" if it has not (asked without reaping it),
/// "?" when it is not this process's child (waitid fails).
std::string ChildExit(pid_t pid) {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return "?";
  if (info.si_pid != pid) return "";
  if (info.si_code == CLD_EXITED) return "exited with status " + std::to_string(info.si_status);
  const std::string name = SignalName(info.si_status);
  return "was killed by signal " + std::to_string(info.si_status) + (name.empty() ? "" : " (" + name + ")") +
         (info.si_code == CLD_DUMPED ? ", core dumped" : "");
}

/// sem_wait with a deadline `ms` from now; whether a post was taken. The main process waits
/// for answers without spinning: it waits only while the workers have work to do, and on a
/// machine with as many busy processes as cores its spin would take a worker's core.
bool TimedWait(sem_t* sem, int ms) {
  if (sem_trywait(sem) == 0) return true;
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

void InitSem(sem_t* sem) {
  if (sem_init(sem, /*pshared=*/1, 0) != 0) {
    throw std::runtime_error(std::string("sem_init failed: ") + std::strerror(errno));
  }
}

}  // namespace

int64_t SharedLayout::WorkersOffset() const { return Round64(sizeof(SharedChannel::Header)); }

int64_t SharedLayout::EnvStride() const {
  return Round64(sizeof(SharedChannel::EnvShared)) + Round64(action_bytes) + 2 * Round64(obs_bytes) +
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
int64_t SharedLayout::FinalObsOffset(int env) const { return ObsOffset(env) + Round64(obs_bytes); }
int64_t SharedLayout::ErrorOffset(int env) const { return FinalObsOffset(env) + Round64(obs_bytes); }
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
  InitSem(&h->answers);
  h->reader_sleeping.store(0);
  h->wake_at.store(0);
  h->answered.store(0);
  for (int w = 0; w < layout_.num_workers; ++w) {
    WorkerShared* ws = new (&worker(w)) WorkerShared;
    InitSem(&ws->requests);
    ws->sleeping.store(0);
    ws->pid.store(0);
    ws->busy_env.store(-1);
    ws->busy_since.store(0);
    ws->request_tail.store(0);
    ws->request_head.store(0);
    ws->answer_tail.store(0);
    ws->answer_head = 0;
  }
  for (int e = 0; e < layout_.num_envs; ++e) {
    EnvShared* es = new (&env(e)) EnvShared;
    *es = EnvShared{-1, -1, 0, 0, -1, 0, 0.0f, 0, 0};
  }
}

SharedChannel::~SharedChannel() {
  for (const int fd : pidfds_) {
    if (fd >= 0) close(fd);
  }
}

void SharedChannel::SetWorkerPid(int w, pid_t pid) {
  worker(w).pid.store(pid);
  if (pidfds_[w] >= 0) close(pidfds_[w]);
#ifdef SYS_pidfd_open
  pidfds_[w] = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  pidfds_[w] = -1;
#endif
}

bool SharedChannel::PollExited(std::vector<int>* out) {
  polled_.clear();
  for (const int fd : pidfds_) {
    if (fd < 0) return false;
    polled_.push_back(pollfd{fd, POLLIN, 0});
  }
  if (poll(polled_.data(), polled_.size(), 0) <= 0) return true;
  for (std::size_t w = 0; w < polled_.size(); ++w) {
    if (polled_[w].revents != 0) out->push_back(static_cast<int>(w));
  }
  return true;
}

pid_t SharedChannel::WorkerPid(int w) const { return worker(w).pid.load(); }

void SharedChannel::Close() {
  if (header().closing.exchange(1) != 0) return;
  for (int w = 0; w < layout_.num_workers; ++w) sem_post(&worker(w).requests);
  sem_post(&header().answers);
}

void SharedChannel::Destroy() {
  for (int w = 0; w < layout_.num_workers; ++w) sem_destroy(&worker(w).requests);
  sem_destroy(&header().answers);
}

bool SharedChannel::closing() const { return header().closing.load() != 0; }

std::string SharedChannel::ErrorText(int e) const {
  const char* text = base_ + layout_.ErrorOffset(e);
  return std::string(text, strnlen(text, SharedLayout::kErrorBytes));
}

std::string SharedChannel::WorkerExit(int w) const {
  const pid_t pid = worker(w).pid.load();
  if (pid <= 0) return "";  // not started yet: the main process sets pids before any step
  const std::string how = ChildExit(pid);
  if (how != "?") return how;
  // Not our child (or reaped already): gone if no such process, or a zombie.
  if (kill(pid, 0) != 0 && errno == ESRCH) return "died";
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return "died";
  const auto close = line.rfind(')');
  const bool gone = close != std::string::npos && close + 2 < line.size() &&
                    (line[close + 2] == 'Z' || line[close + 2] == 'X');
  return gone ? "died" : "";
}

std::pair<int, int64_t> SharedChannel::WorkerBusy(int w) const {
  const WorkerShared& ws = worker(w);
  const int e = ws.busy_env.load(std::memory_order_acquire);
  if (e < 0) return {-1, 0};
  return {e, MonotonicNs() - ws.busy_since.load(std::memory_order_relaxed)};
}

std::pair<int64_t, int64_t> SharedChannel::WorkerProgress(int w) const {
  const WorkerShared& ws = worker(w);
  return {ws.answer_tail.load(std::memory_order_acquire), ws.request_tail.load(std::memory_order_relaxed)};
}

void SharedChannel::KillWorker(int w) {
  const pid_t pid = worker(w).pid.load();
  if (pid <= 0 || kill(pid, SIGKILL) != 0) return;
  for (int i = 0; i < 2000 && WorkerExit(w).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void SharedChannel::RestartWorker(int w, pid_t pid) {
  WorkerShared& ws = worker(w);
  const int64_t tail = ws.request_tail.load();
  ws.request_head.store(tail);
  ws.answer_tail.store(tail);
  ws.answer_head = tail;
  ws.sleeping.store(0);
  ws.busy_env.store(-1);
  SetWorkerPid(w, pid);
}

std::vector<int> SharedChannel::AbandonRequests(int w) {
  WorkerShared& ws = worker(w);
  const auto [first, count] = layout_.EnvsOf(w);
  const int64_t answered = ws.answer_tail.load(std::memory_order_acquire);
  const int64_t requested = ws.request_tail.load();
  std::vector<int> envs;
  for (int64_t p = std::max(answered, ws.answer_head); p < requested; ++p) {
    envs.push_back(env(first + static_cast<int>(p % count)).request_entry);
  }
  ws.answer_tail.store(requested);
  ws.answer_head = requested;
  return envs;
}

void SharedChannel::Post(int e, RequestKind kind, int64_t seed, int32_t flags) {
  EnvShared& me = env(e);
  me.kind = static_cast<int32_t>(kind);
  me.seed = seed;
  me.flags = flags;
  const int w = layout_.WorkerOf(e);
  const auto [first, count] = layout_.EnvsOf(w);
  WorkerShared& ws = worker(w);
  const int64_t tail = ws.request_tail.load(std::memory_order_relaxed);
  env(first + static_cast<int>(tail % count)).request_entry = e;
  ws.request_tail.store(tail + 1);  // seq_cst: ordered before WakeWorkers' read of `sleeping`
  posted_[w] = 1;
}

void SharedChannel::WakeWorkers() {
  for (int w = 0; w < layout_.num_workers; ++w) {
    if (!posted_[w]) continue;
    posted_[w] = 0;
    if (worker(w).sleeping.exchange(0) != 0) sem_post(&worker(w).requests);
  }
}

int SharedChannel::TakeAnswers(std::vector<Answer>* out) {
  int n = 0;
  for (int w = 0; w < layout_.num_workers; ++w) {
    WorkerShared& ws = worker(w);
    const auto [first, count] = layout_.EnvsOf(w);
    const int64_t tail = ws.answer_tail.load(std::memory_order_acquire);
    for (int64_t p = ws.answer_head; p < tail; ++p) {
      const int e = env(first + static_cast<int>(p % count)).answer_entry;
      const EnvShared& me = env(e);
      out->push_back(Answer{e, static_cast<RequestKind>(me.kind), me.failed != 0, me.reward,
                            me.terminated != 0, me.truncated != 0});
      ++n;
    }
    ws.answer_head = tail;
  }
  taken_ += n;
  return n;
}

bool SharedChannel::WaitAnswers(int64_t need, int ms) {
  Header& h = header();
  const int64_t target = taken_ + need;
  h.wake_at.store(target);
  h.reader_sleeping.store(1);  // seq_cst with the load below against PushAnswer's (Dekker)
  if (h.answered.load() < target && !closing()) TimedWait(&h.answers, ms);
  // Woken, timed out, or the answers were already there: either way no post is owed now
  // (a post that raced with this reset only makes a later wait return early).
  h.reader_sleeping.store(0);
  return h.answered.load() >= target;
}

std::tuple<int, int, int64_t, int32_t> SharedChannel::Next(int w) {
  WorkerShared& ws = worker(w);
  const int64_t head = ws.request_head.load(std::memory_order_relaxed);
  while (true) {
    if (closing()) return {-1, 0, -1, 0};
    if (ws.request_tail.load() != head) break;
    // Nothing queued: look again for a moment (kPollBeforeSleep), then say so, look once more
    // (Post's tail store and WakeWorkers' read of `sleeping` are the other half), then sleep
    // until woken or every 100 ms to check that the pool and the main process are still there.
    auto queued = [&] { return ws.request_tail.load(std::memory_order_acquire) != head; };
    if (PollUntil(kPollBeforeSleep, queued)) break;
    ws.sleeping.store(1);
    if (ws.request_tail.load() == head && !TimedWait(&ws.requests, 100) && getppid() != header().owner_pid) {
      return {-1, 0, -1, 0};
    }
    ws.sleeping.store(0);
  }
  const auto [first, count] = layout_.EnvsOf(w);
  const int e = env(first + static_cast<int>(head % count)).request_entry;
  ws.request_head.store(head + 1, std::memory_order_relaxed);
  ws.busy_since.store(MonotonicNs(), std::memory_order_relaxed);
  ws.busy_env.store(e, std::memory_order_release);
  const EnvShared& me = env(e);
  return {e, me.kind, me.seed, me.flags};
}

bool SharedChannel::HasRequest(int w) const {
  const WorkerShared& ws = worker(w);
  return ws.request_tail.load(std::memory_order_acquire) != ws.request_head.load(std::memory_order_relaxed);
}

void SharedChannel::PushAnswer(int w, int e) {
  WorkerShared& ws = worker(w);
  const auto [first, count] = layout_.EnvsOf(w);
  ws.busy_env.store(-1, std::memory_order_relaxed);
  const int64_t tail = ws.answer_tail.load(std::memory_order_relaxed);
  env(first + static_cast<int>(tail % count)).answer_entry = e;
  ws.answer_tail.store(tail + 1, std::memory_order_release);
  Header& h = header();
  const int64_t answered = h.answered.fetch_add(1) + 1;
  if (answered >= h.wake_at.load() && h.reader_sleeping.exchange(0) != 0) sem_post(&h.answers);
}

void SharedChannel::Reply(int e, float reward, bool terminated, bool truncated) {
  EnvShared& me = env(e);
  me.failed = 0;
  me.reward = reward;
  me.terminated = terminated;
  me.truncated = truncated;
  PushAnswer(layout_.WorkerOf(e), e);
}

void SharedChannel::Fail(int e, const std::string& what) {
  EnvShared& me = env(e);
  char* text = base_ + layout_.ErrorOffset(e);
  const std::size_t n = std::min<std::size_t>(what.size(), SharedLayout::kErrorBytes - 1);
  std::memcpy(text, what.data(), n);
  text[n] = '\0';
  me.failed = 1;
  PushAnswer(layout_.WorkerOf(e), e);
}

}  // namespace rlfast::core
