// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_
#define RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

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
                 const std::vector<uint8_t>& palette_gray, const std::vector<uint8_t>& palette_rgb)
      : src_h_(src_h),
        src_w_(src_w),
        dst_h_(dst_h),
        dst_w_(dst_w),
        channels_(gray_scale ? 1 : 3),
        row_(src_w),
        hsum_(dst_w),
        vsum_(dst_w) {
    if (dst_h < 1 || dst_h > src_h || dst_w < 1 || dst_w > src_w) {
      throw std::invalid_argument("img_height/img_width must be in [1, " + std::to_string(src_h) +
                                  "] x [1, " + std::to_string(src_w) + "] (area resize only "
                                  "downscales), got " + std::to_string(dst_h) + "x" +
                                  std::to_string(dst_w));
    }
    for (int c = 0; c < channels_; ++c) {
      for (int i = 0; i < 256; ++i) {
        lut_[c][i] = gray_scale ? palette_gray[i] : palette_rgb[i * 3 + c];
      }
    }
    // OpenCV computes the scale as 1 / (dst / src) in double; so do we.
    BuildTaps(src_w, dst_w, 1.0 / (static_cast<double>(dst_w) / src_w), &xtaps_);
    BuildTaps(src_h, dst_h, 1.0 / (static_cast<double>(dst_h) / src_h), &ytaps_);
    // Pad the horizontal taps to a fixed count per output column (extra taps weigh 0 and
    // add +0.0f last, which leaves the float sum unchanged) so the hot loop is branch-free.
    std::vector<int> count(dst_w, 0);
    for (const Tap& t : xtaps_) ++count[t.dst];
    ntaps_ = *std::max_element(count.begin(), count.end());
    xsrc_.assign(static_cast<std::size_t>(dst_w) * ntaps_, 0);
    xw_.assign(static_cast<std::size_t>(dst_w) * ntaps_, 0.0f);
    std::fill(count.begin(), count.end(), 0);
    for (const Tap& t : xtaps_) {
      std::size_t k = static_cast<std::size_t>(t.dst) * ntaps_ + count[t.dst]++;
      xsrc_[k] = t.src;
      xw_[k] = t.weight;
    }
  }

  int channels() const { return channels_; }
  int frame_size() const { return channels_ * dst_h_ * dst_w_; }

  /// Writes one [channels, dst_h, dst_w] frame to `out` from screen `a`, max-pooled with
  /// screen `b` unless `b` is null. Both are src_h × src_w palette indices.
  void Process(const uint8_t* a, const uint8_t* b, uint8_t* out) {
    for (int c = 0; c < channels_; ++c) {
      ProcessChannel(lut_[c], a, b, out + static_cast<std::size_t>(c) * dst_h_ * dst_w_);
    }
  }

 private:
  struct Tap {
    int dst;
    int src;
    float weight;
  };

  /// OpenCV's computeResizeAreaTab: which source cells cover output cell d, with what weight.
  static void BuildTaps(int ssize, int dsize, double scale, std::vector<Tap>* taps) {
    for (int d = 0; d < dsize; ++d) {
      double fs1 = d * scale;
      double fs2 = fs1 + scale;
      double cell = std::min(scale, ssize - fs1);
      int s1 = static_cast<int>(std::ceil(fs1));
      int s2 = static_cast<int>(std::floor(fs2));
      s2 = std::min(s2, ssize - 1);
      s1 = std::min(s1, s2);
      if (s1 - fs1 > 1e-3) taps->push_back({d, s1 - 1, static_cast<float>((s1 - fs1) / cell)});
      for (int s = s1; s < s2; ++s) taps->push_back({d, s, static_cast<float>(1.0 / cell)});
      if (fs2 - s2 > 1e-3) {
        taps->push_back({d, s2, static_cast<float>(std::min(std::min(fs2 - s2, 1.0), cell) / cell)});
      }
    }
  }

  /// Horizontal pass of one source row: palette lookup, max-pool, weighted column sums.
  void RowSums(const uint8_t* lut, const uint8_t* a, const uint8_t* b) {
    float* row = row_.data();
    if (b == nullptr) {
      for (int x = 0; x < src_w_; ++x) row[x] = lut[a[x]];
    } else {
      for (int x = 0; x < src_w_; ++x) row[x] = std::max(lut[a[x]], lut[b[x]]);
    }
    const int* src = xsrc_.data();
    const float* w = xw_.data();
    for (int dx = 0; dx < dst_w_; ++dx, src += ntaps_, w += ntaps_) {
      float s = 0.0f;
      for (int k = 0; k < ntaps_; ++k) s += row[src[k]] * w[k];
      hsum_[dx] = s;
    }
  }

  void WriteRow(uint8_t* out) const {
    for (int dx = 0; dx < dst_w_; ++dx) {
      // saturate_cast<uchar>(float): round to nearest, ties to even (cvRound), then clamp.
      long v = std::lrint(vsum_[dx]);
      out[dx] = static_cast<uint8_t>(std::clamp(v, 0L, 255L));
    }
  }

  /// The vertical pass walks the row taps in OpenCV's order; a source row shared by two
  /// output rows is summed horizontally once (same floats as recomputing it).
  void ProcessChannel(const uint8_t* lut, const uint8_t* a, const uint8_t* b, uint8_t* out) {
    int prev_dy = ytaps_[0].dst;
    int cached_sy = -1;
    std::fill(vsum_.begin(), vsum_.end(), 0.0f);
    for (const Tap& t : ytaps_) {
      if (t.src != cached_sy) {
        const std::size_t off = static_cast<std::size_t>(t.src) * src_w_;
        RowSums(lut, a + off, b == nullptr ? nullptr : b + off);
        cached_sy = t.src;
      }
      const float beta = t.weight;
      if (t.dst != prev_dy) {
        WriteRow(out + static_cast<std::size_t>(prev_dy) * dst_w_);
        for (int dx = 0; dx < dst_w_; ++dx) vsum_[dx] = beta * hsum_[dx];
        prev_dy = t.dst;
      } else {
        for (int dx = 0; dx < dst_w_; ++dx) vsum_[dx] += beta * hsum_[dx];
      }
    }
    WriteRow(out + static_cast<std::size_t>(prev_dy) * dst_w_);
  }

  int src_h_, src_w_, dst_h_, dst_w_, channels_;
  uint8_t lut_[3][256] = {};
  std::vector<Tap> xtaps_, ytaps_;
  int ntaps_ = 1;
  std::vector<int> xsrc_;
  std::vector<float> xw_;
  std::vector<float> row_, hsum_, vsum_;
};

}  // namespace rlfast::envs::atari

#endif  // RLFAST_CSRC_ENVS_ATARI_FRAME_PROCESSOR_H_
