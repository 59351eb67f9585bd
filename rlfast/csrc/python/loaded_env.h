// Copyright rlfast authors.
// The module rlfast.load_env compiles around a user's env header (rlfast/loader.py writes a
// one-line PYBIND11_MODULE that calls BindLoadedEnv<TheirEnv>). It binds its own Pool type
// (module-local) with the _C module's methods, so rlfast.EnvPool drives it like any pool.
#ifndef RLFAST_CSRC_PYTHON_LOADED_ENV_H_
#define RLFAST_CSRC_PYTHON_LOADED_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "rlfast/csrc/core/env_pool.h"
#include "rlfast/csrc/python/pool_binding.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {

/// A PoolConfig from the dict rlfast/loader.py passes (the fields of rlfast._C.PoolConfig).
inline core::PoolConfig PoolConfigFromDict(const py::dict& d) {
  core::PoolConfig c;
  c.num_envs = d["num_envs"].cast<int>();
  c.batch_size = d["batch_size"].cast<int>();
  c.num_threads = d["num_threads"].cast<int>();
  c.work_in_recv = d["work_in_recv"].cast<bool>();
  c.seed = d["seed"].cast<uint64_t>();
  c.seeds = d["seeds"].cast<std::vector<uint64_t>>();
  c.max_episode_steps = d["max_episode_steps"].cast<int>();
  c.autoreset_mode = d["same_step_autoreset"].cast<bool>() ? core::AutoresetMode::kSameStep
                                                            : core::AutoresetMode::kNextStep;
  c.thread_affinity_offset = d["thread_affinity_offset"].cast<int>();
  return c;
}

/// Binds `Env` as task `task_id`: make(config dict, options) -> Pool, defaults(), spec(options).
template <class Env>
void BindLoadedEnv(py::module_& m, const std::string& task_id) {
  using Config = typename Env::Config;
  // rlfast._C's PoolStateError, so that `except rlfast.PoolStateError` catches this pool's too.
  static py::object pool_state_error = py::module_::import("rlfast._C").attr("PoolStateError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const core::PoolStateError& e) {
      PyErr_SetString(pool_state_error.ptr(), e.what());
    }
  });
  py::class_<PyPool> pool(m, "Pool", py::module_local());
  DefinePoolMethods(pool);
  m.attr("task_id") = task_id;
  m.def("defaults", [] {
    py::dict d;
    Config c{};
    c.Visit([&](const char* name, auto& field) { d[name] = field; });
    return d;
  });
  m.def("spec", [task_id](const py::dict& kwargs) {
    return SpecDict(Env::Spec(ParseConfig(Config{}, task_id, kwargs)));
  });
  m.def("make", [task_id](const py::dict& config, const py::dict& kwargs) {
    return std::make_unique<PyPool>(std::unique_ptr<core::Pool>(
        new core::EnvPool<Env>(task_id, PoolConfigFromDict(config), ParseConfig(Config{}, task_id, kwargs))));
  });
}

}  // namespace rlfast::python

#endif  // RLFAST_CSRC_PYTHON_LOADED_ENV_H_
