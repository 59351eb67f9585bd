// Copyright rlfast authors.
#ifndef RLFAST_CSRC_PYTHON_REGISTRY_H_
#define RLFAST_CSRC_PYTHON_REGISTRY_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "rlfast/csrc/core/env_pool.h"
#include "rlfast/csrc/core/shared_channel.h"

namespace rlfast::python {

namespace py = pybind11;

/// How Python builds a pool for one task id. Filled once at import by the per-family
/// Register* functions; read-only afterwards.
struct TaskEntry {
  std::string family;
  std::function<py::dict()> defaults;  ///< the env options and their default values
  std::function<core::EnvSpec(const py::dict&)> spec;
  std::function<std::unique_ptr<core::Pool>(const core::PoolConfig&, const py::dict&)> make;
};

using Registry = std::map<std::string, TaskEntry>;

/// Float options must be finite; (low, high) ranges may use +-inf but not NaN, low <= high.
template <class T>
void CheckValue(const char* name, const T& v, const std::string& task_id, py::handle value) {
  bool ok = true;
  if constexpr (std::is_floating_point_v<T>) {
    ok = std::isfinite(v);
  } else if constexpr (std::is_same_v<T, std::pair<double, double>>) {
    ok = !std::isnan(v.first) && !std::isnan(v.second) && v.first <= v.second;
  }
  if (!ok) {
    throw py::value_error("option '" + std::string(name) + "' of " + task_id + " got " +
                          py::repr(value).cast<std::string>() +
                          (std::is_floating_point_v<T> ? "; it must be finite"
                                                       : "; it must be (low, high) with low <= high"));
  }
}

/// Applies `kwargs` to a Config through its Visit(); unknown keys and values of the wrong
/// type raise ValueError naming the option.
template <class Config>
Config ParseConfig(Config config, const std::string& task_id, const py::dict& kwargs) {
  std::set<std::string> known;
  config.Visit([&](const char* name, auto& field) {
    known.insert(name);
    if (!kwargs.contains(name)) return;
    using T = std::decay_t<decltype(field)>;
    py::handle value = kwargs[name];
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!py::isinstance<py::bool_>(value)) throw py::cast_error("");
      }
      field = value.cast<T>();
    } catch (const py::cast_error&) {
      throw py::value_error("option '" + std::string(name) + "' of " + task_id + " got " +
                            py::repr(value).cast<std::string>() + " of the wrong type");
    }
    CheckValue(name, field, task_id, value);
  });
  for (auto item : kwargs) {
    auto key = item.first.cast<std::string>();
    if (known.count(key) == 0) {
      std::string options;
      for (const auto& k : known) options += (options.empty() ? "" : ", ") + k;
      throw py::value_error("unknown option '" + key + "' for " + task_id +
                            "; its options are: " + (options.empty() ? "(none)" : options));
    }
  }
  return config;
}

/// Registers `task_id` as an Env with the given Config defaults (one line per task).
template <class Env>
void RegisterEnv(Registry* registry, const std::string& task_id, const std::string& family,
                 typename Env::Config defaults = {}) {
  using Config = typename Env::Config;
  TaskEntry entry;
  entry.family = family;
  entry.defaults = [defaults]() {
    py::dict d;
    Config c = defaults;
    c.Visit([&](const char* name, auto& field) { d[name] = field; });
    return d;
  };
  entry.spec = [task_id, defaults](const py::dict& kwargs) {
    return Env::Spec(ParseConfig(defaults, task_id, kwargs));
  };
  entry.make = [task_id, defaults](const core::PoolConfig& pool, const py::dict& kwargs) {
    return std::unique_ptr<core::Pool>(
        new core::EnvPool<Env>(task_id, pool, ParseConfig(defaults, task_id, kwargs)));
  };
  (*registry)[task_id] = std::move(entry);
}

/// The pool of proxy envs whose Python envs run in the worker processes behind `channel`
/// (rlfast/procpool.py); `spec` is the dict of core::EnvSpec the Python side derived from
/// the env's spaces (obs, num_actions, action, integer_actions). Defined in remote.cc.
std::unique_ptr<core::Pool> MakeRemotePool(const std::string& task_id, const core::PoolConfig& config,
                                           std::shared_ptr<core::SharedChannel> channel,
                                           const py::dict& spec);
/// Binds core::SharedChannel as _C.SharedChannel (remote.cc).
void BindSharedChannel(py::module_& m);
/// Binds the tensor kernels of rlfast/csrc/ops (_C.normalize_frames; ops.cc).
void BindOps(py::module_& m);

void RegisterClassicControl(Registry* registry);
void RegisterAtari(Registry* registry);
void RegisterTesting(Registry* registry);
void RegisterMujoco(Registry* registry);
/// Empty when the loaded libmujoco is the one rlfast was compiled against, else why not.
std::string MujocoVersionMismatch();

}  // namespace rlfast::python

#endif  // RLFAST_CSRC_PYTHON_REGISTRY_H_
