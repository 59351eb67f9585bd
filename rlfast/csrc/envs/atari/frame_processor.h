// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_
#define RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace rlfast::envs::atari {

/// Turns one or two raw ALE screens (palette indices) into one observation frame:
/// palette → grayscale/RGB, max-pool of the two screens, area downscale, in one pass.
///
/// The resize reproduces OpenCV's `cv::resize(..., INTER_AREA)` general (non-integer scale)
/// path operation for operation: the same coverage tables (computeResizeAreaTab), the same
/// float32 accumulation order (horizontal taps, then rows), the same round-to-nearest-even
/// conversion. For the default 210×160 → 84×84 it is therefore bit-identical to what
/// EnvPool and ale-py's vector env (both call OpenCV) produce. (OpenCV switches to an
/// integer-arithmetic path when both scale factors are integers; there this class may differ
/// by ±1 on exact .5 ties.)
///
/// Owned by one AtariEnv, used only by the worker stepping it. All buffers are allocated in
/// the constructor; Process() allocates nothing.
class FrameProcessor {
 public:
  /// `palette_rgb`: 256 × 3 bytes, `palette_gray`: 256 bytes (ALE's palette, by index).
  FrameProcessor(int src_h, int src_w, int dst_h, int dst_w, bool gray_scale,
                 const std::vector<uint8_t>& palette_gray, const std::vector<uint8_t>& palette_rgb);

  int channels() const { return channels_; }
  int frame_size() const { return channels_ * dst_h_ * dst_w_; }

  /// Writes one [channels, dst_h, dst_w] frame to `out` from screen `a`, max-pooled with
  /// screen `b` unless `b` is null. Both are src_h × src_w palette indices.
  void Process(const uint8_t* a, const uint8_t* b, uint8_t* out) {
    // Fused: no full-size intermediate image. The palette + max-pool output lives in a
    // 4-row buffer that the horizontal pass consumes at once; only the horizontal sums
    // (src_h x dst_w floats) wait for the vertical pass.
    for (int c = 0; c < channels_; ++c) {
      ProcessChannel(c, a, b, out + static_cast<std::size_t>(c) * dst_h_ * dst_w_);
    }
  }

 private:
  struct Tap {
    int dst;
    int src;
    float weight;
  };

  /// OpenCV's computeResizeAreaTab: which source cells cover output cell d, with what weight.
  static void BuildTaps(int ssize, int dsize, double scale, std::vector<Tap>* taps);

  /// Horizontal pass: the sums of every source row y, at hsum_ row `hrow_[y]`. A row whose
  /// screen indices repeat the row above (common: backgrounds, walls) reuses its sums, an
  /// exact shortcut. The others go four at a time through SSE lanes (lane r = one row, the
  /// same operations in the same order as the scalar code, so the same floats).
  void Horizontal(int c, const uint8_t* a, const uint8_t* b) {
    int pending[4];
    int np = 0;
    for (int y = 0; y < src_h_; ++y) {
      if (y > 0 && SameAsRowAbove(a, y) && (b == nullptr || SameAsRowAbove(b, y))) {
        hrow_[y] = hrow_[y - 1];
        continue;
      }
      hrow_[y] = y;
      pending[np++] = y;
      if (np == 4) {
        Rows(c, a, b, pending);
        np = 0;
      }
    }
    if (np > 0) {
      for (int i = np; i < 4; ++i) pending[i] = pending[np - 1];  // pad: recompute a row
      Rows(c, a, b, pending);
    }
  }

  bool SameAsRowAbove(const uint8_t* screen, int y) const {
    const uint8_t* row = screen + static_cast<std::size_t>(y) * src_w_;
    return std::memcmp(row, row - src_w_, src_w_) == 0;
  }

  /// Horizontal sums of four source rows (duplicates allowed).
  void Rows(int c, const uint8_t* a, const uint8_t* b, const int* ys) {
#if defined(__SSE2__)
    switch (ntaps_) {
      case 2: return Rows4<2>(c, a, b, ys);
      case 3: return Rows4<3>(c, a, b, ys);
      default: return Rows4<0>(c, a, b, ys);
    }
#else
    for (int r = 0; r < 4; ++r) Row1(lut_[c], a, b, ys[r]);
#endif
  }

  void Row1(const float* lut, const uint8_t* a, const uint8_t* b, int y) {
    const std::size_t off = static_cast<std::size_t>(y) * src_w_;
    float* row = row_.data();
    for (int x = 0; x < src_w_; ++x) {
      row[x] = b == nullptr ? lut[a[off + x]] : std::max(lut[a[off + x]], lut[b[off + x]]);
    }
    const int n = ntaps_;
    float* out = hsum_.data() + static_cast<std::size_t>(y) * dst_w_;
    for (int dx = 0; dx < dst_w_; ++dx) {
      float s = 0.0f;
      for (int k = 0; k < n; ++k) s += row[xsrc_[dx * n + k]] * xw_[dx * n + k];
      out[dx] = s;
    }
  }

#if defined(__SSE2__)
  template <int kTaps>
  void Rows4(int c, const uint8_t* a, const uint8_t* b, const int* ys) {
    const int n = kTaps > 0 ? kTaps : ntaps_;
    const uint8_t* lut = lut8_[c];
    const uint8_t* pool = pool_lut_.data() + static_cast<std::size_t>(c) * kPoolLutSize;
    // Palette + max-pool lookups into four byte rows (scalar: one table load per pixel),
    // then widen and interleave them with SSE: rows[x * 4 + r] = float(pixel (y + r, x)).
    uint8_t* bytes = bytes_.data();
    for (int r = 0; r < 4; ++r) {
      const std::size_t off = static_cast<std::size_t>(ys[r]) * src_w_;
      uint8_t* dst = bytes + r * src_w_;
      if (b == nullptr) {
        for (int x = 0; x < src_w_; ++x) dst[x] = lut[a[off + x]];
      } else {
        // Table indices 16 at a time, then one scalar load per pixel.
        uint16_t* idx = index_.data();
        const __m128i even = _mm_set1_epi16(0xFE);
        int x = 0;
        for (; x + 16 <= src_w_; x += 16) {
          __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + off + x));
          __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + off + x));
          __m128i alo = _mm_unpacklo_epi8(va, _mm_setzero_si128());
          __m128i ahi = _mm_unpackhi_epi8(va, _mm_setzero_si128());
          __m128i blo = _mm_unpacklo_epi8(vb, _mm_setzero_si128());
          __m128i bhi = _mm_unpackhi_epi8(vb, _mm_setzero_si128());
          __m128i ilo = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(alo, even), 6), _mm_srli_epi16(blo, 1));
          __m128i ihi = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(ahi, even), 6), _mm_srli_epi16(bhi, 1));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(idx + x), ilo);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(idx + x + 8), ihi);
        }
        for (; x < src_w_; ++x) idx[x] = static_cast<uint16_t>(PoolIndex(a[off + x], b[off + x]));
        for (x = 0; x < src_w_; ++x) dst[x] = pool[idx[x]];
      }
    }
    float* rows = row_.data();
    const __m128i zero = _mm_setzero_si128();
    int x = 0;
    for (; x + 16 <= src_w_; x += 16) {
      __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + x));
      __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + src_w_ + x));
      __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 2 * src_w_ + x));
      __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 3 * src_w_ + x));
      __m128i r01lo = _mm_unpacklo_epi8(r0, r1), r01hi = _mm_unpackhi_epi8(r0, r1);
      __m128i r23lo = _mm_unpacklo_epi8(r2, r3), r23hi = _mm_unpackhi_epi8(r2, r3);
      // Each 32-bit group now holds (r0, r1, r2, r3) of one x.
      __m128i q[4] = {_mm_unpacklo_epi16(r01lo, r23lo), _mm_unpackhi_epi16(r01lo, r23lo),
                      _mm_unpacklo_epi16(r01hi, r23hi), _mm_unpackhi_epi16(r01hi, r23hi)};
      for (int i = 0; i < 4; ++i) {
        __m128i w16lo = _mm_unpacklo_epi8(q[i], zero), w16hi = _mm_unpackhi_epi8(q[i], zero);
        float* o = rows + (x + 4 * i) * 4;
        _mm_storeu_ps(o, _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16lo, zero)));
        _mm_storeu_ps(o + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(w16lo, zero)));
        _mm_storeu_ps(o + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16hi, zero)));
        _mm_storeu_ps(o + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(w16hi, zero)));
      }
    }
    for (; x < src_w_; ++x) {
      for (int r = 0; r < 4; ++r) rows[x * 4 + r] = bytes[r * src_w_ + x];
    }
    float* out[4];
    for (int r = 0; r < 4; ++r) out[r] = hsum_.data() + static_cast<std::size_t>(ys[r]) * dst_w_;
    const int* src = xsrc_.data();
    const float* w = xw_.data();
    __m128 col[4];
    for (int dx = 0; dx < dst_w_; ++dx, src += n, w += n) {
      __m128 s = _mm_setzero_ps();
      for (int k = 0; k < n; ++k) {
        s = _mm_add_ps(s, _mm_mul_ps(_mm_loadu_ps(rows + src[k] * 4), _mm_set1_ps(w[k])));
      }
      col[dx & 3] = s;
      if ((dx & 3) == 3) {  // 4 columns x 4 rows done: transpose into the 4 rows
        _MM_TRANSPOSE4_PS(col[0], col[1], col[2], col[3]);
        for (int r = 0; r < 4; ++r) _mm_storeu_ps(out[r] + dx - 3, col[r]);
      }
    }
    for (int dx = dst_w_ & ~3; dx < dst_w_; ++dx) {
      alignas(16) float lanes[4];
      _mm_store_ps(lanes, col[dx & 3]);
      for (int r = 0; r < 4; ++r) out[r][dx] = lanes[r];
    }
  }
#endif

  /// saturate_cast<uchar>(float): round to nearest, ties to even (cvRound), then clamp.
  void WriteRow(const float* sum, uint8_t* out) const {
    int dx = 0;
#if defined(__SSE2__)
    for (; dx + 8 <= dst_w_; dx += 8) {  // cvtps2dq rounds by MXCSR: nearest-even by default
      __m128i lo = _mm_cvtps_epi32(_mm_loadu_ps(sum + dx));
      __m128i hi = _mm_cvtps_epi32(_mm_loadu_ps(sum + dx + 4));
      __m128i v = _mm_packus_epi16(_mm_packs_epi32(lo, hi), _mm_setzero_si128());
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + dx), v);
    }
#endif
    for (; dx < dst_w_; ++dx) {
      out[dx] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::nearbyint(sum[dx])), 0, 255));
    }
  }

  /// Vertical pass: walks the row taps in OpenCV's order over the horizontal sums.
  void ProcessChannel(int c, const uint8_t* a, const uint8_t* b, uint8_t* out) {
    Horizontal(c, a, b);
    float* sum = vsum_.data();
    int prev_dy = ytaps_[0].dst;
    std::fill(vsum_.begin(), vsum_.end(), 0.0f);
    for (const Tap& t : ytaps_) {
      const float* h = hsum_.data() + static_cast<std::size_t>(hrow_[t.src]) * dst_w_;
      const float beta = t.weight;
      if (t.dst != prev_dy) {
        WriteRow(sum, out + static_cast<std::size_t>(prev_dy) * dst_w_);
        for (int dx = 0; dx < dst_w_; ++dx) sum[dx] = beta * h[dx];
        prev_dy = t.dst;
      } else {
        for (int dx = 0; dx < dst_w_; ++dx) sum[dx] += beta * h[dx];
      }
    }
    WriteRow(sum, out + static_cast<std::size_t>(prev_dy) * dst_w_);
  }

  // Max-pool lookup: max(lut[a], lut[b]) for both indices even (ALE's NTSC/PAL/SECAM
  // indices always are; odd ones fold onto their even neighbour like the 1-d table).
  static constexpr int kPoolLutSize = 128 * 128;
  static int PoolIndex(uint8_t a, uint8_t b) { return (a >> 1) * 128 + (b >> 1); }

  int src_h_, src_w_, dst_h_, dst_w_, channels_;
  std::vector<float> row_;         // one row (scalar path) or four interleaved (SSE path)
  std::vector<uint8_t> bytes_;     // four rows of pixels (SSE path)
  std::vector<uint16_t> index_;    // one row of PoolIndex values (SSE path)
  std::vector<float> hsum_;        // [src_h, dst_w] horizontal sums
  std::vector<int> hrow_;          // [src_h] which hsum_ row holds source row y's sums
  std::vector<float> vsum_;        // [dst_w] vertical accumulator
  float lut_[3][256] = {};         // palette index -> gray or R/G/B, as float
  uint8_t lut8_[3][256] = {};      // the same, as bytes
  std::vector<uint8_t> pool_lut_;  // [channels][128 * 128], see PoolIndex
  std::vector<Tap> xtaps_, ytaps_;
  int ntaps_ = 1;
  std::vector<int> xsrc_;   // [dst_w, ntaps_] source column of each horizontal tap
  std::vector<float> xw_;   // [dst_w, ntaps_] its weight (0 for padding taps)
};

}  // namespace rlfast::envs::atari

#endif  // RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_
