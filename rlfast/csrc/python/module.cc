// Copyright rlfast authors.
// The `rlfast._C` extension: the task registry and a thin binding over core::Pool.
// Python (rlfast/pool.py) allocates the output tensors and wraps everything in torch.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/pool.h"
#include "rlfast/csrc/python/pool_binding.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {
namespace {

const Registry& GetRegistry() {
  static const Registry registry = [] {
    Registry r;
    RegisterClassicControl(&r);
    RegisterAtari(&r);
    RegisterTesting(&r);
    RegisterMujoco(&r);
    return r;
  }();
  return registry;
}

const TaskEntry& Lookup(const std::string& task_id) {
  const Registry& r = GetRegistry();
  auto it = r.find(task_id);
  if (it == r.end()) {
    // rlfast.make() suggests close names before it gets here; this is the last resort.
    throw py::value_error("unknown task id '" + task_id + "'");
  }
  return it->second;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "rlfast engine: C++ asynchronous environment pool";
  py::register_exception<core::PoolStateError>(m, "PoolStateError", PyExc_RuntimeError);
  // EnvsLost reaches Python as _C.EnvsLost(message, env_ids, workers); rlfast/procpool.py
  // restarts the workers and raises rlfast.EnvError from it.
  m.attr("EnvsLost") = py::handle(PyErr_NewException("rlfast._C.EnvsLost", PyExc_RuntimeError, nullptr));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const core::EnvsLost& e) {
      py::object type = py::module_::import("rlfast._C").attr("EnvsLost");
      PyErr_SetObject(type.ptr(), py::make_tuple(e.what(), e.env_ids(), e.workers()).ptr());
    }
  });

  m.def("list_tasks", [] {
    std::vector<std::string> ids;
    for (const auto& kv : GetRegistry()) ids.push_back(kv.first);
    return ids;
  });
  m.def("mujoco_version_mismatch", &MujocoVersionMismatch);
  m.def("task_family", [](const std::string& t) { return Lookup(t).family; });
  m.def("task_defaults", [](const std::string& t) { return Lookup(t).defaults(); });
  m.def("task_spec", [](const std::string& t, const py::dict& kwargs) {
    return SpecDict(Lookup(t).spec(kwargs));
  });
#ifdef RLFAST_TEST_HOOKS
  m.attr("has_test_hooks") = true;
#else
  m.attr("has_test_hooks") = false;
#endif

  py::class_<core::PoolConfig>(m, "PoolConfig")
      .def(py::init<>())
      .def_readwrite("num_envs", &core::PoolConfig::num_envs)
      .def_readwrite("batch_size", &core::PoolConfig::batch_size)
      .def_readwrite("num_threads", &core::PoolConfig::num_threads)
      .def_readwrite("seed", &core::PoolConfig::seed)
      .def_readwrite("seeds", &core::PoolConfig::seeds)
      .def_readwrite("max_episode_steps", &core::PoolConfig::max_episode_steps)
      .def_property(
          "same_step_autoreset",
          [](const core::PoolConfig& c) {
            return c.autoreset_mode == core::AutoresetMode::kSameStep;
          },
          [](core::PoolConfig& c, bool same) {
            c.autoreset_mode = same ? core::AutoresetMode::kSameStep
                                    : core::AutoresetMode::kNextStep;
          })
      .def_readwrite("work_in_recv", &core::PoolConfig::work_in_recv)
      .def_readwrite("thread_affinity_offset", &core::PoolConfig::thread_affinity_offset);

  py::class_<PyPool> pool(m, "Pool");
  pool.def(py::init([](const std::string& task_id, const core::PoolConfig& config, const py::dict& kwargs) {
    return std::make_unique<PyPool>(Lookup(task_id).make(config, kwargs));
  }));
  DefinePoolMethods(pool);

  BindSharedChannel(m);
  BindOps(m);
  m.def("make_remote_pool",
        [](const std::string& task_id, const core::PoolConfig& config,
           std::shared_ptr<core::SharedChannel> channel, const py::dict& spec) {
          return std::make_unique<PyPool>(MakeRemotePool(task_id, config, std::move(channel), spec));
        });
}

}  // namespace rlfast::python
