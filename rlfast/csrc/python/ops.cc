// Copyright rlfast authors.
// _C.normalize_frames: the binding of ops::NormalizeFrames over numpy views of CPU tensors
// (rlfast/algos/frame_norm.py calls it and checks the tensors first; the checks here name what is wrong
// for any other caller).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "rlfast/csrc/ops/frame_norm.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {
namespace {

void CheckContiguous(const py::array& a, const char* name) {
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
}

void NormalizeFramesBinding(const py::array& frames, const py::array& mean, const py::array& scale,
                            py::array out, float limit, int threads) {
  if (!py::isinstance<py::array_t<uint8_t>>(frames)) throw py::value_error("frames must be uint8");
  for (const auto& [a, name] : {std::pair{&mean, "mean"}, std::pair{&scale, "scale"}}) {
    if (!py::isinstance<py::array_t<float>>(*a)) throw py::value_error(std::string(name) + " must be float32");
    CheckContiguous(*a, name);
  }
  CheckContiguous(frames, "frames");
  CheckContiguous(out, "out");
  if (!out.writeable()) throw py::value_error("out must be writable");
  if (frames.ndim() < 1 || out.ndim() != frames.ndim() ||
      !std::equal(frames.shape(), frames.shape() + frames.ndim(), out.shape())) {
    throw py::value_error("out must have the shape of frames");
  }
  if (mean.size() != scale.size()) throw py::value_error("mean and scale must have as many values");
  const int64_t count = frames.shape(0);
  const int64_t size = mean.size();
  if (count * size != static_cast<int64_t>(frames.size())) {
    throw py::value_error("frames must hold " + std::to_string(size) + " values (mean's) per row of its first "
                          "axis, got " + std::to_string(count) + " rows and " + std::to_string(frames.size()) +
                          " values");
  }
  if (!(limit >= 0)) throw py::value_error("limit must be >= 0, got " + std::to_string(limit));
  const auto* src = static_cast<const uint8_t*>(frames.data());
  const auto* m = static_cast<const float*>(mean.data());
  const auto* s = static_cast<const float*>(scale.data());
  if (py::isinstance<py::array_t<float>>(out)) {
    auto* o = static_cast<float*>(out.mutable_data());
    py::gil_scoped_release release;
    ops::NormalizeFrames(src, m, s, count, size, limit, o, threads);
  } else if (py::isinstance<py::array_t<uint16_t>>(out)) {
    auto* o = static_cast<uint16_t*>(out.mutable_data());
    py::gil_scoped_release release;
    ops::NormalizeFrames(src, m, s, count, size, limit, o, threads);
  } else {
    throw py::value_error("out must be float32 or uint16 (the bits of bfloat16)");
  }
}

}  // namespace

void BindOps(py::module_& m) {
  m.def("normalize_frames", &NormalizeFramesBinding, py::arg("frames").noconvert(), py::arg("mean").noconvert(),
        py::arg("scale").noconvert(), py::arg("out").noconvert(), py::arg("limit"), py::arg("threads") = 1,
        "out = clamp((frames - mean) * scale, -limit, limit) per row of frames' first axis, one pass: float32 "
        "out, or bfloat16 bits (uint16 out) rounded to nearest even; threads > 1 splits the rows.");
}

}  // namespace rlfast::python
