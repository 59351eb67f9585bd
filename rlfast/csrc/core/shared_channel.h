// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_SHARED_CHANNEL_H_
#define RLFAST_CSRC_CORE_SHARED_CHANNEL_H_

#include <poll.h>
#include <semaphore.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace rlfast::core {

/// Where everything lives in the shared-memory segment that connects a pool in the main
/// process with the worker processes that run Python envs. Every process computes it from
/// the same four numbers, so no pointer crosses a process.
///
/// Segment: Header | one WorkerShared per worker | per env: EnvShared, action bytes,
/// obs bytes, final-obs bytes, error text (each part 64-byte aligned).
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
  int64_t FinalObsOffset(int env) const;
  int64_t ErrorOffset(int env) const;
  int64_t TotalBytes() const;
  /// Envs [first, first + count) run in worker `w`: contiguous, as even as possible.
  std::pair<int, int> EnvsOf(int w) const;
  int WorkerOf(int env) const;

 private:
  int64_t EnvStride() const;
};

/// What one request asks of a worker.
enum class RequestKind : int32_t { kStep = 0, kReset = 1 };

/// Request flags (bits).
enum RequestFlags : int32_t {
  /// Same-step autoreset: when the step ends the episode, the worker puts the final
  /// observation in the env's final-obs bytes and resets the env (its next observation goes
  /// to the obs bytes).
  kResetWhenDone = 1,
  /// The pool truncates the episode after this step (max_episode_steps): it ends the episode
  /// whatever the env says.
  kLastStep = 2,
};

/// One answer, as the pool reads it.
struct Answer {
  int env = -1;
  RequestKind kind = RequestKind::kStep;
  bool failed = false;  ///< the env raised: ErrorText(env) has its traceback
  float reward = 0.0f;
  bool terminated = false;
  bool truncated = false;
};

/// The two one-way rings per worker of a shared segment, usable from either process:
/// requests (main process -> worker: which env to step or reset) and answers (worker ->
/// main process: which env is done). Each env has at most one request outstanding, so a
/// ring of the worker's env count never overflows; each ring has one producer and one
/// consumer, so a position is published by a release store of its tail.
///
/// Wake-ups are batched: a side sleeps only when it has nothing to do and says so in a
/// shared flag; the other side posts the semaphore only if that flag is set. A worker
/// therefore wakes once per batch of requests, and the pool's reader asks to be woken only
/// when the answers it waits for (`WaitAnswers(need)`) are all there.
///
/// Main process: Init (before starting workers), SetWorkerPid, Post + WakeWorkers (the
/// pool's send, one thread at a time), TakeAnswers + WaitAnswers (the pool's reader, one
/// thread at a time), WorkerExit / WorkerBusy / KillWorker + AbandonRequests + RestartWorker
/// (the reader, for workers that die or hang), Close, Destroy. Worker process: Next,
/// HasRequest, Reply, Fail.
class SharedChannel {
 public:
  SharedChannel(void* base, const SharedLayout& layout)
      : base_(static_cast<char*>(base)), layout_(layout), posted_(layout.num_workers, 0),
        pidfds_(layout.num_workers, -1) {}
  ~SharedChannel();
  SharedChannel(const SharedChannel&) = delete;
  SharedChannel& operator=(const SharedChannel&) = delete;

  /// Main process, once, before any worker attaches: initializes header and semaphores.
  void Init(pid_t owner);
  /// Main process: records worker `w`'s pid (for WorkerExit) and opens a pidfd on it.
  void SetWorkerPid(int w, pid_t pid);
  /// Main process: appends to `out` each worker whose process has ended (its pidfd readable:
  /// one poll() for all, no wait); false if this kernel has no pidfds (Linux < 5.3).
  bool PollExited(std::vector<int>* out);
  /// Main process: tells every worker and a waiting reader to stop. Idempotent.
  void Close();
  /// Main process, after every worker is gone: destroys the semaphores.
  void Destroy();
  bool closing() const;

  /// Main process: queues a request for `env` (its action, if a step, already at
  /// ActionPtr(env)); `seed` >= 0 for a reset with that seed. The worker is woken by the
  /// next WakeWorkers().
  void Post(int env, RequestKind kind, int64_t seed, int32_t flags);
  /// Main process: wakes each worker that sleeps with requests queued since the last call.
  void WakeWorkers();
  /// Main process: appends every answer that has arrived to `out` (in each worker's order);
  /// returns how many.
  int TakeAnswers(std::vector<Answer>* out);
  /// Main process: sleeps until `need` answers have arrived that TakeAnswers has not taken
  /// yet, at most `ms` milliseconds; whether they are there.
  bool WaitAnswers(int64_t need, int ms);
  /// Main process: "" while worker `w`'s process runs, else how it ended ("was killed by
  /// signal 9 (SIGKILL)", "exited with status 1"; "died" when the process is not this one's
  /// child to ask). Asks without reaping (waitid WNOWAIT): multiprocessing still reaps it.
  std::string WorkerExit(int w) const;
  pid_t WorkerPid(int w) const;
  /// Main process: the env whose request worker `w` is running and for how many
  /// nanoseconds it has run it; {-1, 0} while the worker waits for requests.
  std::pair<int, int64_t> WorkerBusy(int w) const;
  /// Main process: worker `w`'s answers so far and requests so far (equal: nothing owed).
  std::pair<int64_t, int64_t> WorkerProgress(int w) const;
  /// Main process: SIGKILLs worker `w` and waits (up to 2 s) until it is gone.
  void KillWorker(int w);
  /// Main process, for a worker that died: the envs whose requests it will never answer
  /// (it answers in request order), taken off its rings.
  std::vector<int> AbandonRequests(int w);
  /// Main process, after AbandonRequests: worker `w`'s rings start afresh for a new process
  /// `pid` that runs the same envs (no request of the old one is left to answer); its pidfd
  /// follows the new process.
  void RestartWorker(int w, pid_t pid);

  /// Worker side: blocks for worker `w`'s next request and returns (env, kind, seed, flags);
  /// env -1 once the pool closes or the main process is gone (checked every 100 ms).
  std::tuple<int, int, int64_t, int32_t> Next(int w);
  /// Worker side: whether worker `w` has a request queued (Next would return at once).
  bool HasRequest(int w) const;
  /// Worker side: `env`'s request is done (its obs, and final obs if it reset, in place).
  void Reply(int env, float reward, bool terminated, bool truncated);
  /// Worker side: `env` raised; `what` (its traceback) goes to recv's EnvError.
  void Fail(int env, const std::string& what);

  char* ActionPtr(int env) const { return base_ + layout_.ActionOffset(env); }
  char* ObsPtr(int env) const { return base_ + layout_.ObsOffset(env); }
  char* FinalObsPtr(int env) const { return base_ + layout_.FinalObsOffset(env); }
  std::string ErrorText(int env) const;
  const SharedLayout& layout() const { return layout_; }

 private:
  friend struct SharedLayout;
  struct Header;
  struct WorkerShared;
  struct EnvShared;
  Header& header() const;
  WorkerShared& worker(int w) const;
  EnvShared& env(int e) const;
  /// Pushes `env` on worker `w`'s answer ring and wakes the reader if it waits for it.
  void PushAnswer(int w, int env);

  char* base_;
  SharedLayout layout_;
  // Main process only (the pool's send and reader threads each own theirs).
  std::vector<uint8_t> posted_;  ///< per worker: requests queued since WakeWorkers
  int64_t taken_ = 0;            ///< answers TakeAnswers has returned
  std::vector<int> pidfds_;      ///< per worker: a pidfd on its process (-1: none)
  std::vector<pollfd> polled_;   ///< PollExited's poll() list
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_SHARED_CHANNEL_H_
