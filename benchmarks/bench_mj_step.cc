// Copyright rlfast authors.
// The raw MuJoCo limit for benchmarks/bench_envs.py, which compiles it against the installed mujoco
// wheel: bare mj_step x frame_skip per env step, one mjData per thread (threads share only the
// read-only mjModel), random controls in ctrlrange, reset (mj_resetData + U(+-0.1) qpos noise)
// after 1000 env steps or when the root height leaves [z_min, z_max] (qpos[2] under a free
// joint, else qpos[1], the rootz slider of Hopper and Walker2d), as an RL rollout would.
// A C loop, not Python: mj_step through the `mujoco` bindings measured 12-20% slower (Ant,
// HalfCheetah).
// Usage: bench_mj_step XML FRAME_SKIP THREADS SECONDS [Z_MIN Z_MAX]
// Prints: env steps summed over threads, then the seconds they took.
#include <mujoco/mujoco.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5 && argc != 7) {
    std::fprintf(stderr, "usage: %s XML FRAME_SKIP THREADS SECONDS [Z_MIN Z_MAX]\n", argv[0]);
    return 2;
  }
  char error[1024] = "";
  mjModel* m = mj_loadXML(argv[1], nullptr, error, sizeof(error));
  if (m == nullptr) {
    std::fprintf(stderr, "%s\n", error);
    return 1;
  }
  const int skip = std::atoi(argv[2]), threads = std::atoi(argv[3]);
  const double seconds = std::atof(argv[4]);
  const bool check_z = argc == 7;
  const double z_min = check_z ? std::atof(argv[5]) : 0, z_max = check_z ? std::atof(argv[6]) : 0;
  const int z_index = m->njnt > 0 && m->jnt_type[0] == mjJNT_FREE ? 2 : 1;
  std::atomic<long> total{0};
  auto worker = [&](int seed) {
    mjData* d = mj_makeData(m);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    auto reset = [&] {
      mj_resetData(m, d);
      for (int i = 0; i < m->nq; ++i) d->qpos[i] = m->qpos0[i] + 0.2 * u(rng) - 0.1;
      mj_forward(m, d);
    };
    reset();
    long steps = 0;
    int elapsed = 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      for (int k = 0; k < 100; ++k) {
        for (int i = 0; i < m->nu; ++i) {
          const double lo = m->actuator_ctrlrange[2 * i], hi = m->actuator_ctrlrange[2 * i + 1];
          d->ctrl[i] = lo + (hi - lo) * u(rng);
        }
        for (int s = 0; s < skip; ++s) mj_step(m, d);
        ++steps;
        const double z = d->qpos[z_index];
        if (++elapsed >= 1000 || (check_z && !(z_min <= z && z <= z_max))) {
          reset();
          elapsed = 0;
        }
      }
    }
    total += steps;
    mj_deleteData(d);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (auto& t : pool) t.join();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("%ld %.6f\n", total.load(), took.count());
  mj_deleteModel(m);
  return 0;
}
