// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_SHARED_CHANNEL_H_
#define RLFAST_CSRC_CORE_SHARED_CHANNEL_H_

#include <semaphore.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>

namespace rlfast::core {

/// Where everything lives in the shared-memory segment that connects a pool's proxy envs
/// (threads of the main process) with the worker processes that run Python envs. Every
/// process computes it from the same four numbers, so no pointer crosses a process.
///
/// Segment: Header | one WorkerShared per worker | per env: EnvShared, action bytes,
/// obs bytes, error text (each part 64-byte aligned).
struct SharedLayout {
  int num_envs = 0;
  int num_workers = 0;
  int64_t obs_bytes = 0;
  int64_t action_bytes = 0;
  static constexpr int64_t kErrorBytes = 16384;

  int64_t WorkersOffset() const;
  int64_t EnvOffset(int env) const;
  int64_t ActionOffset(int env) const;
  int64_t ObsOffset(int env) const;
  int64_t ErrorOffset(int env) const;
  int64_t TotalBytes() const;
  /// Envs [first, first + count) run in worker `w`: contiguous, as even as possible.
  std::pair<int, int> EnvsOf(int w) const;
  int WorkerOf(int env) const;

 private:
  int64_t EnvStride() const;
};

/// What one request asks of a worker (EnvShared::kind).
enum class RequestKind : int32_t { kStep = 0, kReset = 1 };

/// A connection to one shared segment, usable from either side. The main process creates
/// the segment's semaphores (Init) before starting the workers; each worker attaches.
///
/// Proxy side (pool worker threads, any number concurrently, one per env at a time):
/// Request() queues an env's step or reset with its worker and blocks until the worker
/// answers, the pool closes, or the worker process dies (then it throws, naming them).
/// Worker side (one thread per worker process): Next() blocks for the worker's next
/// request; Answer()/Fail() reply to it.
class SharedChannel {
 public:
  SharedChannel(void* base, const SharedLayout& layout) : base_(static_cast<char*>(base)), layout_(layout) {}

  /// Main process, once, before any worker attaches: initializes header and semaphores.
  void Init(pid_t owner);
  /// Main process: records worker `w`'s pid (for the liveness checks of Request).
  void SetWorkerPid(int w, pid_t pid);
  /// Main process: tells every worker and every waiting proxy to stop. Idempotent.
  void Close();
  /// Main process, after every worker is gone: destroys the semaphores.
  void Destroy();
  bool closing() const;

  /// Proxy side: runs one request for `env` (`seed` >= 0: reset with that seed) and
  /// returns (reward, terminated, truncated). Throws std::runtime_error with the env's
  /// Python traceback if it raised, or naming the worker if it died or the pool closed.
  std::tuple<float, bool, bool> Request(int env, RequestKind kind, int64_t seed);

  /// Worker side: blocks for worker `w`'s next request and returns (env, kind, seed);
  /// env -1 once the pool closes or the main process is gone. `poll` is not needed: the
  /// wait wakes every 100 ms to check both.
  std::tuple<int, int, int64_t> Next(int w);
  /// Worker side: the answer to `env`'s request (its obs already written in place).
  void Answer(int env, float reward, bool terminated, bool truncated);
  /// Worker side: `env` raised; `what` (its traceback) goes to recv's EnvError.
  void Fail(int env, const std::string& what);

  char* ActionPtr(int env) const { return base_ + layout_.ActionOffset(env); }
  char* ObsPtr(int env) const { return base_ + layout_.ObsOffset(env); }
  const SharedLayout& layout() const { return layout_; }

 private:
  friend struct SharedLayout;
  struct Header;
  struct WorkerShared;
  struct EnvShared;
  Header& header() const;
  WorkerShared& worker(int w) const;
  EnvShared& env(int e) const;
  /// Whether worker `w`'s process still runs (not exited, not a zombie).
  bool WorkerAlive(int w) const;

  char* base_;
  SharedLayout layout_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_SHARED_CHANNEL_H_
