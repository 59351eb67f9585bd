// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_THREAD_POOL_H_
#define RLFAST_CSRC_CORE_THREAD_POOL_H_

#include <pthread.h>
#include <sched.h>

#include <functional>
#include <thread>
#include <vector>

namespace rlfast::core {

/// Runs `body(worker_index)` on `num_threads` threads until it returns.
///
/// Created and joined by the pool (the Python thread). With `affinity_offset` >= 0, worker
/// i is pinned to CPU (affinity_offset + i) % hardware_concurrency. Joining is the owner's
/// job: it must first make every `body` return (stop flag + stop markers), then Join().
class ThreadPool {
 public:
  ThreadPool(int num_threads, int affinity_offset, const std::function<void(int)>& body) {
    unsigned ncpu = std::thread::hardware_concurrency();
    threads_.reserve(num_threads);
    for (int i = 0; i < num_threads; ++i) {
      threads_.emplace_back(body, i);
      if (affinity_offset >= 0 && ncpu > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET((affinity_offset + i) % ncpu, &set);
        pthread_setaffinity_np(threads_.back().native_handle(), sizeof(set), &set);
      }
    }
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() { Join(); }

  void Join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  int size() const { return static_cast<int>(threads_.size()); }

  static int DefaultNumThreads(int num_envs) {
    int hw = static_cast<int>(std::thread::hardware_concurrency());
    if (hw <= 0) hw = 1;
    return num_envs < hw ? num_envs : hw;
  }

 private:
  std::vector<std::thread> threads_;
};

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_THREAD_POOL_H_
