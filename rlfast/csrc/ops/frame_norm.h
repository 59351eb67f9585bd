// Copyright rlfast authors.
// Per-pixel normalization of uint8 frames in one pass: what FrameNet.normalize (rlfast/algos/speed.py)
// computes with torch's element-wise ops, without their float32 temporaries.
#pragma once

#include <cstdint>

namespace rlfast::ops {

/// For each of `count` stacks of `size` values: out[k * size + i] = min(max((src[k * size + i] - mean[i]) *
/// scale[i], -limit), limit), in float32 (`out` float) or rounded to the nearest bfloat16, ties to even (`out`
/// uint16_t: the bfloat16 bits), the values torch's sub, mul, clamp and cast to bfloat16 give (no fused
/// multiply-add: the extension builds with -ffp-contract=off). `threads` > 1 splits the stacks over that many
/// threads, the calling one among them.
void NormalizeFrames(const uint8_t* src, const float* mean, const float* scale, int64_t count, int64_t size,
                     float limit, float* out, int threads);
void NormalizeFrames(const uint8_t* src, const float* mean, const float* scale, int64_t count, int64_t size,
                     float limit, uint16_t* out, int threads);

}  // namespace rlfast::ops
