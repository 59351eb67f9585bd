// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_STATE_BUFFER_QUEUE_H_
#define RLFAST_CSRC_CORE_STATE_BUFFER_QUEUE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "rlfast/csrc/core/semaphore.h"

namespace rlfast::core {

/// Hands out output slots to workers and completed blocks to `recv`.
///
/// The output memory is a ring of `num_blocks` blocks of `batch_size` slots, allocated once
/// by Python (torch tensors) and owned by it; this queue only deals in indices. A worker
/// claims the next slot with one fetch_add on `claimed_`, writes its env's result there in
/// place, then commits; the worker that commits the last slot of a block signals `ready_`.
/// `recv` waits on `ready_` and takes blocks strictly in ring order.
///
/// Why a slot is never written while the caller still reads it: the pool admits at most
/// `num_envs` results in flight and sizes the ring as ceil(num_envs / batch_size) + 2
/// blocks, so claims can run at most one full ring lap minus two blocks ahead of `recv`.
/// A block returned by `recv` is therefore untouched until the caller's second next `recv`.
///
/// Ordered mode (sync pools, batch_size == num_envs): slot = env_id, so results come back
/// ordered by env id; the counter still decides the block and counts completion.
class StateBufferQueue {
 public:
  struct SlotRef {
    int block;
    int slot;
  };

  StateBufferQueue(int batch_size, int num_blocks, bool ordered)
      : batch_size_(batch_size),
        num_blocks_(num_blocks),
        ordered_(ordered),
        committed_(new std::atomic<int>[num_blocks]) {
    for (int i = 0; i < num_blocks; ++i) committed_[i].store(0);
  }
  StateBufferQueue(const StateBufferQueue&) = delete;
  StateBufferQueue& operator=(const StateBufferQueue&) = delete;

  static int NumBlocksFor(int num_envs, int batch_size) {
    return (num_envs + batch_size - 1) / batch_size + 2;
  }

  /// Claims the slot for one result of env `env_id`. Called by worker threads.
  ///
  /// acq_rel, not relaxed (free on x86: a locked add either way): a slow env's item sent
  /// long ago may claim a block's next lap. Its worker never synchronized with the reader's
  /// reads of that block's previous lap; the claims before it in this counter's order come
  /// from items sent after those reads, and the acquire/release chain through the counter
  /// is what orders the reads before this write. Found by ThreadSanitizer
  /// (tests/cpp/test_queues.cc, async blocks).
  SlotRef Claim(int env_id) {
    uint64_t g = claimed_.fetch_add(1, std::memory_order_acq_rel);
    int block = static_cast<int>((g / batch_size_) % num_blocks_);
    int slot = ordered_ ? env_id : static_cast<int>(g % batch_size_);
    return {block, slot};
  }

  /// Marks one slot of `block` as written. The release in fetch_add publishes the slot's
  /// data to the thread that observes the block as complete.
  void Commit(int block) {
    if (committed_[block].fetch_add(1, std::memory_order_acq_rel) + 1 == batch_size_) {
      ready_.Signal();
    }
  }

  /// Waits up to `timeout` for the next complete block; returns its index or -1. Looks for it
  /// for kPollBeforeSleep first, yielding the core between looks: a block that completes within
  /// that costs no wake-up (HalfCheetah, 8 envs in blocks of 2 on 2 threads: 68% -> 76-80% of
  /// the raw mj_step limit on the 2-core guest; PPO on Pong unchanged). Called by the `recv`
  /// thread only.
  int WaitReady(std::chrono::microseconds timeout) {
    if (PollUntil(kPollBeforeSleep, [this] { return ready_.TryWait(); })) return TakeReady();
    if (!ready_.WaitFor(timeout)) return -1;
    return TakeReady();
  }

  /// The next complete block if there is one now, else -1. Called by the `recv` thread only.
  int TryReady() { return ready_.TryWait() ? TakeReady() : -1; }

  /// Wakes a `recv` blocked in WaitReady (used by close; the caller re-checks its stop flag).
  void WakeReader() {
    woken_.store(true, std::memory_order_release);
    ready_.Signal();
  }

  int batch_size() const { return batch_size_; }
  int num_blocks() const { return num_blocks_; }

 private:
  /// Bookkeeping after a permit of `ready_` was taken: the block in ring order.
  int TakeReady() {
    int block = static_cast<int>(read_ % num_blocks_);
    ++read_;
    // The permit says that *a* block is complete, not this one: blocks can complete out of
    // order when a writer is preempted between its claim and its commit while later slots
    // fill. All of this block's slots are claimed (a later block completed), so its late
    // writers are only finishing their copy: wait for them. (Unless the permit came from
    // WakeReader: then the caller sees its stop flag and discards the block.)
    while (committed_[block].load(std::memory_order_acquire) < batch_size_ &&
           !woken_.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    // Safe to reset here: the next claim on this block is a full ring lap away (see above).
    committed_[block].store(0, std::memory_order_relaxed);
    return block;
  }

  const int batch_size_;
  const int num_blocks_;
  const bool ordered_;
  std::unique_ptr<std::atomic<int>[]> committed_;
  std::atomic<uint64_t> claimed_{0};
  uint64_t read_ = 0;
  std::atomic<bool> woken_{false};
  Semaphore ready_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_STATE_BUFFER_QUEUE_H_
