// Copyright rlfast authors.
#include "rlfast/csrc/ops/frame_norm.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace rlfast::ops {
namespace {

// One loop per instruction set, picked at load time (GCC's function multiversioning): the wheel is built for
// any x86-64, and the loops run several times faster with AVX2 or AVX-512 than with the baseline's SSE2.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RLFAST_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RLFAST_CLONES
#endif

inline float Normalized(uint8_t x, float mean, float scale, float limit) {
  const float v = (static_cast<float>(x) - mean) * scale;
  return std::min(std::max(v, -limit), limit);
}

RLFAST_CLONES void StacksF32(const uint8_t* src, const float* mean, const float* scale, int64_t count,
                             int64_t size, float limit, float* out) {
  for (int64_t k = 0; k < count; ++k) {
    const uint8_t* s = src + k * size;
    float* o = out + k * size;
    for (int64_t i = 0; i < size; ++i) o[i] = Normalized(s[i], mean[i], scale[i], limit);
  }
}

RLFAST_CLONES void StacksBF16(const uint8_t* src, const float* mean, const float* scale, int64_t count,
                              int64_t size, float limit, uint16_t* out) {
  for (int64_t k = 0; k < count; ++k) {
    const uint8_t* s = src + k * size;
    uint16_t* o = out + k * size;
    for (int64_t i = 0; i < size; ++i) {
      const float v = Normalized(s[i], mean[i], scale[i], limit);
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even (v is finite: clamped)
      o[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

template <typename Out, typename Fn>
void Split(int64_t count, int64_t size, int threads, Out* out, const uint8_t* src, Fn fn) {
  if (count <= 0) return;
  // A thread per ~1M values at most: below that starting one costs more than it saves.
  const int64_t by_work = std::max<int64_t>(1, count * size / (1 << 20));
  const int64_t parts = std::min<int64_t>({static_cast<int64_t>(std::max(threads, 1)), by_work, count});
  const int64_t per = (count + parts - 1) / parts;
  std::vector<std::thread> workers;
  for (int64_t start = per; start < count; start += per) {
    const int64_t n = std::min(per, count - start);
    workers.emplace_back([=] { fn(src + start * size, n, out + start * size); });
  }
  fn(src, per, out);
  for (auto& w : workers) w.join();
}

}  // namespace

void NormalizeFrames(const uint8_t* src, const float* mean, const float* scale, int64_t count, int64_t size,
                     float limit, float* out, int threads) {
  Split(count, size, threads, out, src, [=](const uint8_t* s, int64_t n, float* o) {
    StacksF32(s, mean, scale, n, size, limit, o);
  });
}

void NormalizeFrames(const uint8_t* src, const float* mean, const float* scale, int64_t count, int64_t size,
                     float limit, uint16_t* out, int threads) {
  Split(count, size, threads, out, src, [=](const uint8_t* s, int64_t n, uint16_t* o) {
    StacksBF16(s, mean, scale, n, size, limit, o);
  });
}

}  // namespace rlfast::ops
