// Copyright rlfast authors.
// The Python handle of a pool (rlfast._C.Pool), shared by the _C module and by env modules that
// rlfast.load_env compiles at run time (rlfast/loader.py): both bind it with DefinePoolMethods.
#ifndef RLFAST_CSRC_PYTHON_POOL_BINDING_H_
#define RLFAST_CSRC_PYTHON_POOL_BINDING_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/pool.h"

namespace rlfast::python {

namespace py = pybind11;

inline py::dict ArrayDict(const core::ArraySpec& a) {
  py::dict d;
  d["name"] = a.name;
  d["dtype"] = core::DTypeName(a.dtype);
  d["shape"] = py::tuple(py::cast(a.shape));
  d["low"] = a.low;
  d["high"] = a.high;
  return d;
}

inline py::dict SpecDict(const core::EnvSpec& s) {
  py::dict d;
  d["obs"] = ArrayDict(s.obs);
  py::list obs_keys;
  for (const auto& a : s.obs_keys) obs_keys.append(ArrayDict(a));
  d["obs_keys"] = obs_keys;
  d["num_actions"] = s.num_actions;
  d["action"] = ArrayDict(s.action);
  py::list info;
  for (const auto& a : s.info) info.append(ArrayDict(a));
  d["info"] = info;
  d["max_episode_steps"] = s.max_episode_steps;
  return d;
}

inline core::DType NumpyDType(const py::array& a) {
  char kind = a.dtype().kind();
  auto size = a.dtype().itemsize();
  if (kind == 'f' && size == 4) return core::DType::kFloat32;
  if (kind == 'f' && size == 8) return core::DType::kFloat64;
  if (kind == 'i' && size == 4) return core::DType::kInt32;
  if (kind == 'i' && size == 8) return core::DType::kInt64;
  if (kind == 'u' && size == 1) return core::DType::kUInt8;
  throw py::value_error("unsupported action dtype " + py::str(a.dtype()).cast<std::string>() +
                        "; use int32/int64 for discrete or float32/float64 for continuous");
}

/// Python handle of one pool. Holds references to the output tensors so they outlive the
/// workers writing into them: `pool_` is declared last, so it is destroyed (closed and
/// joined) before `buffers_` drops the tensors.
class PyPool {
 public:
  /// Takes a pool its maker validated and sized with the GIL held (options are Python
  /// objects: the registry, MakeRemotePool, a loaded env's module), then builds the envs in
  /// parallel with the GIL released; Ctrl-C stops it.
  explicit PyPool(std::unique_ptr<core::Pool> pool) : pool_(std::move(pool)) {
    py::gil_scoped_release release;
    pool_->BuildEnvs(CheckSignals);
  }

  py::list Fields() const {
    py::list out;
    for (const auto& f : pool_->fields()) out.append(ArrayDict(f));
    return out;
  }

  void Attach(const py::list& tensors) {
    const auto& fields = pool_->fields();
    if (tensors.size() != fields.size()) {
      throw py::value_error("attach() needs one tensor per field");
    }
    std::vector<void*> ptrs;
    const int64_t slots = static_cast<int64_t>(pool_->num_blocks()) * pool_->config().batch_size;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      py::object t = tensors[i];
      auto nbytes = t.attr("numel")().cast<int64_t>() * t.attr("element_size")().cast<int64_t>();
      if (!t.attr("is_contiguous")().cast<bool>() ||
          nbytes != slots * static_cast<int64_t>(fields[i].NumBytes())) {
        throw py::value_error("output tensor for field '" + fields[i].name +
                              "' is not a contiguous buffer of the expected size");
      }
      ptrs.push_back(reinterpret_cast<void*>(t.attr("data_ptr")().cast<uintptr_t>()));
      buffers_.push_back(t);
    }
    pool_->Attach(ptrs);
  }

  /// Renders env_ids (already checked in range) into `out`, a C-contiguous uint8 array of
  /// shape (len(env_ids), *RenderShape()), with the GIL released.
  void Render(const std::vector<int32_t>& env_ids, py::array_t<uint8_t> out) {
    std::vector<int64_t> shape = pool_->RenderShape();
    if (shape.empty()) throw std::logic_error(pool_->task_id() + " does not render");
    bool ok = (out.flags() & py::array::c_style) && out.ndim() == 4 &&
              out.shape(0) == static_cast<py::ssize_t>(env_ids.size());
    for (int d = 0; ok && d < 3; ++d) ok = out.shape(d + 1) == shape[d];
    if (!ok) throw py::value_error("render() needs a C-contiguous uint8 output of (n, H, W, 3)");
    uint8_t* dst = out.mutable_data();
    py::gil_scoped_release release;
    pool_->Render(env_ids, dst);
  }

  void Send(const py::array& actions, const py::object& env_ids) {
    if (!(actions.flags() & py::array::c_style)) {
      throw py::value_error("actions must be C-contiguous");
    }
    if (actions.ndim() < 1) throw py::value_error("actions must have a batch dimension");
    core::ActionArray a;
    a.data = actions.data();
    a.dtype = NumpyDType(actions);
    a.n = actions.shape(0);
    a.row_size = 1;
    for (py::ssize_t d = 1; d < actions.ndim(); ++d) a.row_size *= actions.shape(d);
    const auto& spec = pool_->spec();
    if (!spec.IsDiscrete()) CheckBoxShape(actions, spec.action);
    if (spec.IsDiscrete() && actions.ndim() != 1) {
      throw py::value_error("discrete actions must have shape (num_envs_sent,), got ndim " +
                            std::to_string(actions.ndim()));
    }
    if (env_ids.is_none()) {
      pool_->Send(a, nullptr, pool_->config().num_envs);
    } else {
      const Ids ids = ToIds(env_ids, pool_->config().num_envs);
      pool_->Send(a, ids.data, ids.n);
    }
  }

  void SendReset(const py::object& env_ids) {
    if (env_ids.is_none()) {
      pool_->SendReset(nullptr, pool_->config().num_envs);
    } else {
      const Ids ids = ToIds(env_ids, pool_->config().num_envs);
      pool_->SendReset(ids.data, ids.n);
    }
  }

  std::pair<int, std::string> Recv() {
    py::gil_scoped_release release;
    return pool_->Recv(CheckSignals);
  }

  void Reseed(const std::vector<uint64_t>& seeds, const std::vector<int32_t>& env_ids) {
    py::gil_scoped_release release;
    pool_->Reseed(env_ids, seeds, CheckSignals);
  }

  void SendPeek(const py::object& env_ids) {
    const Ids ids = ToIds(env_ids, pool_->config().num_envs);
    pool_->SendPeek(ids.data, ids.n);
  }

  void Close() {
    py::gil_scoped_release release;
    pool_->Close();
  }

  core::Pool& pool() { return *pool_; }

 private:
  /// The poll of blocking calls made with the GIL released: raises KeyboardInterrupt (or
  /// whatever a signal handler raised) into the waiting C++ code.
  static void CheckSignals() {
    py::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }

  /// env_ids as int32 values: read in place from an int32 C-contiguous array (what the
  /// env_id field of recv's results is), else converted into `owned`.
  struct Ids {
    py::array array;  // keeps the array read in place alive
    std::vector<int32_t> owned;
    const int32_t* data = nullptr;
    int64_t n = 0;
  };

  /// Closed first, as the pool itself checks it: a closed pool answers PoolStateError
  /// whatever else is wrong with the call.
  Ids ToIds(const py::object& env_ids, int num_envs) const {
    if (pool_->closed()) throw core::PoolStateError("the pool is closed");
    Ids ids;
    ids.array = py::array::ensure(env_ids);
    const py::array& arr = ids.array;
    if (!arr || arr.ndim() != 1 || (arr.dtype().kind() != 'i' && arr.dtype().kind() != 'u')) {
      throw py::value_error("env_ids must be a 1-d array of integers, got " +
                            py::repr(env_ids).cast<std::string>());
    }
    ids.n = static_cast<int64_t>(arr.size());
    if (arr.dtype().kind() == 'i' && arr.itemsize() == 4 && (arr.flags() & py::array::c_style)) {
      ids.data = static_cast<const int32_t*>(arr.data());
      return ids;
    }
    auto ids64 = arr.cast<py::array_t<int64_t, py::array::forcecast>>();
    ids.owned.resize(ids64.size());
    for (py::ssize_t i = 0; i < ids64.size(); ++i) {
      const int64_t v = ids64.at(i);
      if (v < 0 || v >= num_envs) {  // here, before int32 could not hold it
        throw py::value_error("env_ids[" + std::to_string(i) + "] = " + std::to_string(v) +
                              " is out of range for a pool of " + std::to_string(num_envs) +
                              " envs");
      }
      ids.owned[i] = static_cast<int32_t>(v);
    }
    ids.data = ids.owned.data();
    return ids;
  }

  static void CheckBoxShape(const py::array& actions, const core::ArraySpec& action) {
    bool ok = actions.ndim() == static_cast<py::ssize_t>(action.shape.size()) + 1;
    for (std::size_t d = 0; ok && d < action.shape.size(); ++d) {
      ok = actions.shape(d + 1) == action.shape[d];
    }
    if (!ok) {
      std::string want = "(n";
      for (auto s : action.shape) want += ", " + std::to_string(s);
      std::string got = "(";
      for (py::ssize_t d = 0; d < actions.ndim(); ++d) {
        got += (d ? ", " : "") + std::to_string(actions.shape(d));
      }
      throw py::value_error("continuous actions must have shape " + want + "), got " + got + ")");
    }
  }

  std::vector<py::object> buffers_;
  std::unique_ptr<core::Pool> pool_;
};


/// The methods of rlfast._C.Pool on `cls` (a py::class_<PyPool>), for every module that binds one.
template <class Class>
void DefinePoolMethods(Class& cls) {
  cls.def("fields", &PyPool::Fields)
      .def("attach", &PyPool::Attach)
      .def("send", &PyPool::Send, py::arg("actions"), py::arg("env_ids") = py::none())
      .def("send_reset", &PyPool::SendReset, py::arg("env_ids") = py::none())
      .def("recv", &PyPool::Recv)
      .def("close", &PyPool::Close)
      .def("reseed", &PyPool::Reseed, py::arg("seeds"), py::arg("env_ids") = std::vector<int32_t>())
      .def("send_peek", &PyPool::SendPeek, py::arg("env_ids"))
      .def("get_state", [](PyPool& p, int i) { return p.pool().DebugGetState(i); })
      .def("set_state", [](PyPool& p, int i, const std::vector<double>& s) {
        p.pool().DebugSetState(i, s);
      })
      .def("render_shape", [](PyPool& p) { return p.pool().RenderShape(); })
      .def("render", &PyPool::Render, py::arg("env_ids"), py::arg("out"))
      .def("render_state", [](PyPool& p, int i) {
        py::gil_scoped_release release;
        return p.pool().RenderState(i);
      })
      .def_property_readonly("num_blocks", [](PyPool& p) { return p.pool().num_blocks(); })
      .def_property_readonly("memory_estimate", [](PyPool& p) { return p.pool().memory_estimate(); })
      .def_property_readonly("closed", [](PyPool& p) { return p.pool().closed(); })
      .def_property_readonly("config", [](PyPool& p) { return p.pool().config(); })
      .def_property_readonly("spec", [](PyPool& p) { return SpecDict(p.pool().spec()); });
}

}  // namespace rlfast::python

#endif  // RLFAST_CSRC_PYTHON_POOL_BINDING_H_
