// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_
#define RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "rlfast/csrc/core/semaphore.h"

namespace rlfast::core {

/// One unit of work for a worker: step (or reset) env `env_id`. The action itself lives in
/// the pool's per-env action store, written by `send` before the item is enqueued.
struct ActionItem {
  int32_t env_id = -1;  ///< -1 is the stop marker used at shutdown.
  bool reset = false;
};

/// Lock-free ring of work items between `send` (one producer at a time) and the worker
/// threads (many consumers).
///
/// Two monotonically increasing counters index the ring: `tail_` (next write, producer only)
/// and `head_` (next read, claimed by consumers with fetch_add). The semaphore counts
/// published items: a consumer (a worker, or a working `recv`) only takes an index after it has taken a permit, and the
/// single producer writes the item before signalling, so the item at a claimed index is
/// always complete. Capacity must exceed the number of items that can be queued at once
/// (at most one per env plus one stop marker per worker), so writes never lap reads.
class ActionBufferQueue {
 public:
  explicit ActionBufferQueue(std::size_t capacity) : items_(capacity) {}
  ActionBufferQueue(const ActionBufferQueue&) = delete;
  ActionBufferQueue& operator=(const ActionBufferQueue&) = delete;

  /// Publishes `n` items. Called from the Python thread inside `send`, serialized by the
  /// pool's API lock (one producer at a time is what makes the ordering argument hold).
  void Enqueue(const ActionItem* items, std::size_t n) {
    std::size_t cap = items_.size();
    for (std::size_t i = 0; i < n; ++i) items_[(tail_ + i) % cap] = items[i];
    tail_ += n;
    sem_.Signal(static_cast<int64_t>(n));
  }

  /// Blocks until an item is available and takes it. Called by worker threads.
  ActionItem Dequeue() {
    sem_.Wait();
    uint64_t idx = head_.fetch_add(1, std::memory_order_relaxed);
    return items_[idx % items_.size()];
  }

  /// Takes an item if one is published and not promised to a parked worker; never blocks.
  /// Used by a `recv` that works while it waits (PoolConfig::work_in_recv).
  bool TryDequeue(ActionItem* out) {
    if (!sem_.TryWait()) return false;
    uint64_t idx = head_.fetch_add(1, std::memory_order_relaxed);
    *out = items_[idx % items_.size()];
    return true;
  }

 private:
  std::vector<ActionItem> items_;
  uint64_t tail_ = 0;
  std::atomic<uint64_t> head_{0};
  Semaphore sem_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_ACTION_BUFFER_QUEUE_H_
