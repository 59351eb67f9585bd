// Copyright rlfast authors.
#include "rlfast/csrc/envs/atari/frame_processor.h"

namespace rlfast::envs::atari {

FrameProcessor::FrameProcessor(int src_h, int src_w, int dst_h, int dst_w, bool gray_scale,
                               const std::vector<uint8_t>& palette_gray,
                               const std::vector<uint8_t>& palette_rgb)
    : src_h_(src_h),
      src_w_(src_w),
      dst_h_(dst_h),
      dst_w_(dst_w),
      channels_(gray_scale ? 1 : 3),
      row_(static_cast<std::size_t>(src_w) * 4),
      bytes_(static_cast<std::size_t>(src_w) * 4),
      index_(src_w),
      hsum_(static_cast<std::size_t>(src_h) * dst_w),
      hrow_(src_h),
      vsum_(dst_w) {
  if (dst_h < 1 || dst_h > src_h || dst_w < 1 || dst_w > src_w) {
    throw std::invalid_argument("img_height/img_width must be in [1, " + std::to_string(src_h) +
                                "] x [1, " + std::to_string(src_w) + "] (area resize only "
                                "downscales), got " + std::to_string(dst_h) + "x" +
                                std::to_string(dst_w));
  }
  pool_lut_.resize(static_cast<std::size_t>(channels_) * kPoolLutSize);
  for (int c = 0; c < channels_; ++c) {
    auto value = [&](int i) { return gray_scale ? palette_gray[i] : palette_rgb[i * 3 + c]; };
    for (int i = 0; i < 256; ++i) lut8_[c][i] = value(i);
    for (int i = 0; i < 256; ++i) lut_[c][i] = value(i);
    for (int i = 0; i < 128; ++i) {
      for (int j = 0; j < 128; ++j) {
        pool_lut_[c * kPoolLutSize + i * 128 + j] = std::max(value(2 * i), value(2 * j));
      }
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

// OpenCV's computeResizeAreaTab (imgproc/src/resize.cpp), same double arithmetic, same
// 1e-3 thresholds: the taps and weights must be the same floats for bit-equal frames.
void FrameProcessor::BuildTaps(int ssize, int dsize, double scale, std::vector<Tap>* taps) {
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

}  // namespace rlfast::envs::atari
