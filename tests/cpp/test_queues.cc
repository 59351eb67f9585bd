// Copyright rlfast authors.
// Stress tests of the engine's concurrency primitives (action queue, state buffer queue,
// semaphore) with exact invariants; tests/core/test_cpp_queues.py builds and runs them
// plain and under ThreadSanitizer. No framework: CHECK prints file:line and exits 1.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "rlfast/csrc/core/action_buffer_queue.h"
#include "rlfast/csrc/core/semaphore.h"
#include "rlfast/csrc/core/state_buffer_queue.h"

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                         \
    }                                                                       \
  } while (0)

using rlfast::core::ActionBufferQueue;
using rlfast::core::ActionItem;
using rlfast::core::Semaphore;
using rlfast::core::StateBufferQueue;

namespace {

// One producer (as send() is serialized), several consumers on a small ring that laps
// thousands of times, plus a thread taking items with TryDequeue (a working recv): every
// item comes out exactly once.
void ActionQueueEveryItemOnce() {
  constexpr int kItems = 100000, kConsumers = 4;
  ActionBufferQueue queue(16);
  std::vector<std::atomic<int>> seen(kItems);
  std::atomic<int> taken{0};
  auto consume = [&] {
    while (true) {
      ActionItem item = queue.Dequeue();
      if (item.env_id < 0) return;
      seen[item.env_id].fetch_add(1, std::memory_order_relaxed);
      taken.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::atomic<bool> done{false};
  auto try_consume = [&] {
    ActionItem item;
    while (!done.load()) {
      if (queue.TryDequeue(&item)) {
        if (item.env_id < 0) {  // a consumer's stop marker: hand it back, as Pool::TakeWork does
          queue.Enqueue(&item, 1);
          continue;
        }
        seen[item.env_id].fetch_add(1, std::memory_order_relaxed);
        taken.fetch_add(1, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kConsumers; ++i) threads.emplace_back(consume);
  std::thread stealer(try_consume);
  std::mt19937 rng(1);
  std::vector<ActionItem> batch;
  for (int next = 0; next < kItems;) {
    batch.clear();
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n && next < kItems; ++k) batch.push_back({next++, (next % 3) == 0});
    queue.Enqueue(batch.data(), batch.size());
  }
  while (taken.load() < kItems) std::this_thread::yield();
  done = true;
  stealer.join();
  std::vector<ActionItem> stop(kConsumers, ActionItem{-1, false});
  queue.Enqueue(stop.data(), stop.size());
  for (auto& t : threads) t.join();
  CHECK(taken.load() == kItems);
  for (int i = 0; i < kItems; ++i) CHECK(seen[i].load() == 1);
}

// The pool's data path without envs: workers take env ids from the action queue, claim a
// slot, write the id into it (plain memory) and commit; the reader waits for blocks, checks
// each holds batch_size distinct in-flight ids (ordered by id in sync mode) and sends those
// envs again. TSan checks the slot writes happen-before the reader's reads.
void StateQueueBlocks(int num_envs, int batch, int workers, int rounds) {
  const bool ordered = batch == num_envs;
  const int blocks = StateBufferQueue::NumBlocksFor(num_envs, batch);
  StateBufferQueue states(batch, blocks, ordered);
  ActionBufferQueue actions(2 * num_envs + workers);
  std::vector<int> slots(static_cast<std::size_t>(blocks) * batch, -1);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(w);
      while (true) {
        ActionItem item = actions.Dequeue();
        if (item.env_id < 0) return;
        if (rng() % 4 == 0) std::this_thread::yield();  // vary finishing order
        auto ref = states.Claim(item.env_id);
        slots[static_cast<std::size_t>(ref.block) * batch + ref.slot] = item.env_id;
        states.Commit(ref.block);
      }
    });
  }
  std::vector<ActionItem> all;
  for (int i = 0; i < num_envs; ++i) all.push_back({i, true});
  actions.Enqueue(all.data(), all.size());
  std::vector<int> in_flight(num_envs, 1);
  const int total = rounds * num_envs / batch;
  for (int r = 0; r < total; ++r) {
    int block = -1;
    while (block < 0) block = states.WaitReady(std::chrono::milliseconds(50));
    std::vector<ActionItem> again;
    for (int s = 0; s < batch; ++s) {
      const int id = slots[static_cast<std::size_t>(block) * batch + s];
      CHECK(id >= 0 && id < num_envs);
      CHECK(in_flight[id] == 1);  // each result once, only for envs that were sent
      if (ordered) CHECK(id == s);
      in_flight[id] = 0;
      again.push_back({id, false});
    }
    for (const ActionItem& a : again) in_flight[a.env_id] = 1;
    actions.Enqueue(again.data(), again.size());
  }
  std::vector<ActionItem> stop(workers, ActionItem{-1, false});
  actions.Enqueue(stop.data(), stop.size());
  for (auto& t : threads) t.join();
}

// WakeReader unblocks a reader parked in WaitReady with nothing complete.
void WakeReaderUnblocks() {
  StateBufferQueue states(4, 3, false);
  std::atomic<bool> returned{false};
  std::thread reader([&] {
    while (states.WaitReady(std::chrono::seconds(5)) < 0) {
    }
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  states.WakeReader();
  reader.join();
  CHECK(returned.load());
}

// Permits are conserved under concurrent Signal / Wait / TryWait / WaitFor.
void SemaphorePermitsConserved() {
  constexpr int kPerThread = 20000, kThreads = 4;
  Semaphore sem;
  std::atomic<int> got{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) sem.Signal();
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (t == 0) {
          while (!sem.TryWait()) std::this_thread::yield();
        } else if (t == 1) {
          while (!sem.WaitFor(std::chrono::microseconds(100))) {
          }
        } else {
          sem.Wait();
        }
        got.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(got.load() == kPerThread * kThreads);
  CHECK(!sem.TryWait());  // nothing left over
  const auto start = std::chrono::steady_clock::now();
  CHECK(!sem.WaitFor(std::chrono::milliseconds(20)));  // times out with no signal
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(15));
  sem.Signal(3);
  CHECK(sem.TryWait() && sem.TryWait() && sem.TryWait() && !sem.TryWait());
}

void Run(const char* name, void (*test)()) {
  const auto start = std::chrono::steady_clock::now();
  test();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("ok %s (%.0f ms)\n", name, ms);
}

}  // namespace

int main() {
  Run("action queue: every item exactly once", ActionQueueEveryItemOnce);
  Run("state queue: async blocks", [] { StateQueueBlocks(12, 4, 4, 3000); });
  Run("state queue: sync blocks ordered by env id", [] { StateQueueBlocks(8, 8, 3, 3000); });
  Run("state queue: batch of one", [] { StateQueueBlocks(5, 1, 3, 2000); });
  Run("state queue: WakeReader unblocks a waiting reader", WakeReaderUnblocks);
  Run("semaphore: permits conserved", SemaphorePermitsConserved);
  return 0;
}
