// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_SEMAPHORE_H_
#define RLFAST_CSRC_CORE_SEMAPHORE_H_

#include <sched.h>
#include <semaphore.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace rlfast::core {

/// How long a thread or worker process that has run out of work looks for more before it
/// sleeps (`PollUntil`), and how long a `recv` looks for its batch. In sync mode the caller
/// turns a batch around in tens of microseconds (its policy aside); a worker asleep by then
/// costs the next `send` a futex wake and the round its CPU's wake-up latency. On the 2-core
/// KVM guest, one env on one thread stepped in sync went from 18-20k to 430k steps/s (CartPole)
/// and from 10-11k to 47k (HalfCheetah) with it (docs/performance/benchmarks.md). It
/// yields the core between looks, so a thread that shares the core runs first.
inline constexpr std::chrono::microseconds kPollBeforeSleep{50};

/// Polls `ready` (a short pause between looks, the core yielded between rounds) until it holds
/// or `budget` has passed; whether it held.
template <class Ready>
bool PollUntil(std::chrono::microseconds budget, Ready ready) {
  const auto until = std::chrono::steady_clock::now() + budget;
  while (true) {
    for (int i = 0; i < 16; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
    sched_yield();
  }
}

/// Counting semaphore with a lock-free fast path.
///
/// `count_` holds the number of available permits; a negative value is the number of
/// parked waiters. Signal/Wait only touch the kernel (a POSIX semaphore, i.e. a futex) when
/// a waiter must really sleep. A short spin before parking keeps a hand-off between a
/// producer and an already-running consumer free of system calls; it is kept short because
/// on a 2-core machine every spinning thread steals the core of the thread it waits for.
/// WaitPolling looks longer, yielding the core, for waiters that only wait for a turnaround.
///
/// Thread-safe: any thread may Signal or Wait. Not copyable.
class Semaphore {
 public:
  explicit Semaphore(int64_t initial = 0) : count_(initial) { sem_init(&os_sem_, 0, 0); }
  ~Semaphore() { sem_destroy(&os_sem_); }
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  /// Adds `n` permits and wakes up to `n` parked waiters.
  void Signal(int64_t n = 1) {
    int64_t old = count_.fetch_add(n, std::memory_order_release);
    int64_t to_wake = old < 0 ? (-old < n ? -old : n) : 0;
    for (int64_t i = 0; i < to_wake; ++i) sem_post(&os_sem_);
  }

  /// Blocks until a permit is available and takes it.
  void Wait() {
    if (TryWait() || Spin()) return;
    Park();
  }

  /// Like Wait, but looks for a permit for up to kPollBeforeSleep before it parks: for a
  /// consumer that is idle only while its producer turns a batch around.
  void WaitPolling() {
    if (PollUntil(kPollBeforeSleep, [this] { return TryWait(); })) return;
    Park();
  }

  /// Like Wait, but gives up after `timeout`; returns whether a permit was taken.
  /// Used by callers that must wake periodically (Ctrl-C checks, shutdown flags).
  bool WaitFor(std::chrono::microseconds timeout) {
    if (TryWait() || Spin()) return true;
    if (count_.fetch_sub(1, std::memory_order_acquire) > 0) return true;
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    int64_t ns = deadline.tv_nsec + static_cast<int64_t>(timeout.count()) * 1000;
    deadline.tv_sec += ns / 1000000000;
    deadline.tv_nsec = ns % 1000000000;
    while (true) {
      if (sem_timedwait(&os_sem_, &deadline) == 0) return true;
      if (errno != EINTR) break;
    }
    // Timed out: withdraw our registration as a waiter. A Signal may have raced with the
    // timeout and already posted the OS semaphore for us; in that case take that post.
    while (true) {
      int64_t old = count_.load(std::memory_order_acquire);
      if (old >= 0 && sem_trywait(&os_sem_) == 0) return true;
      if (old < 0 && count_.compare_exchange_strong(old, old + 1, std::memory_order_relaxed)) {
        return false;
      }
    }
  }

  /// Takes a permit if one is available right now.
  bool TryWait() {
    int64_t old = count_.load(std::memory_order_relaxed);
    while (old > 0) {
      if (count_.compare_exchange_weak(old, old - 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }

 private:
  /// Registers as a waiter and sleeps until a Signal wakes it (or takes a permit that came).
  void Park() {
    if (count_.fetch_sub(1, std::memory_order_acquire) > 0) return;
    while (sem_wait(&os_sem_) != 0 && errno == EINTR) {
    }
  }

  bool Spin() {
    for (int i = 0; i < kSpins; ++i) {
      if (TryWait()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    return false;
  }

  static constexpr int kSpins = 256;
  std::atomic<int64_t> count_;
  sem_t os_sem_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_SEMAPHORE_H_
