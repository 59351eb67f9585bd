// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_
#define RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "rlfast/csrc/core/semaphore.h"

namespace rlfast::core {

/// One unit of work for a worker: step (or reset) env `env_id`. The action itself lives in
/// the pool's per-env action store, written by `send` before the item is enqueued.
struct ActionItem {
  int32_t env_id = -1;  ///< -1 is the stop marker used at shutdown.
  bool reset = false;
  /// Report the env's current state again without stepping it (reward 0, not done); what
  /// a partial reset of a sync pool returns for the envs it leaves alone.
  bool peek = false;
};

/// Lock-free ring of work items between `send` (one producer at a time) and the worker
/// threads (many consumers).
///
/// Two monotonically increasing counters index the ring: `tail_` (next write, producer only)
/// and `head_` (next read, claimed by consumers with fetch_add). The semaphore counts
/// published items: a consumer (a worker, or a working `recv`) only takes an index after it
/// has taken a permit, and the single producer writes the item before signalling, so the
/// item at a claimed index is always complete.
///
/// Each cell also carries a sequence number (as in Vyukov's bounded MPMC queue) so that the
/// producer never overwrites an item its consumer has not read yet. Capacity alone cannot
/// promise that: a consumer can be preempted between claiming index i and reading cell i,
/// while the other envs keep cycling through send/recv and the ring laps; the producer then
/// waits for that one read instead of handing out a stale item (one env stepped twice, one
/// never).
class ActionBufferQueue {
 public:
  explicit ActionBufferQueue(std::size_t capacity) : cells_(capacity) {
    for (std::size_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  ActionBufferQueue(const ActionBufferQueue&) = delete;
  ActionBufferQueue& operator=(const ActionBufferQueue&) = delete;

  /// Publishes `n` items. Called from the Python thread inside `send`, serialized by the
  /// pool's API lock (one producer at a time is what makes the ordering argument hold).
  void Enqueue(const ActionItem* items, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const uint64_t pos = tail_ + i;
      Cell& c = cells_[pos % cells_.size()];
      // Free once its reader from the previous lap has read it (almost always already).
      while (c.seq.load(std::memory_order_acquire) != pos) std::this_thread::yield();
      c.item = items[i];
      c.seq.store(pos + 1, std::memory_order_release);
    }
    tail_ += n;
    sem_.Signal(static_cast<int64_t>(n));
  }

  /// Blocks until an item is available and takes it. Called by worker threads.
  ActionItem Dequeue() {
    sem_.WaitPolling();  // a worker waits here while the caller turns the batch around
    return Take();
  }

  /// Takes an item if one is published and not promised to a parked worker; never blocks.
  /// Used by a `recv` that works while it waits (PoolConfig::work_in_recv).
  bool TryDequeue(ActionItem* out) {
    if (!sem_.TryWait()) return false;
    *out = Take();
    return true;
  }

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};  // pos + 1: holds item pos; pos + capacity: free for it
    ActionItem item;
  };

  /// After a permit: claims the next index and reads its item (published before the permit).
  ActionItem Take() {
    const uint64_t pos = head_.fetch_add(1, std::memory_order_relaxed);
    Cell& c = cells_[pos % cells_.size()];
    while (c.seq.load(std::memory_order_acquire) != pos + 1) std::this_thread::yield();
    ActionItem item = c.item;
    c.seq.store(pos + cells_.size(), std::memory_order_release);
    return item;
  }

  std::vector<Cell> cells_;
  uint64_t tail_ = 0;
  std::atomic<uint64_t> head_{0};
  Semaphore sem_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_
