// Copyright rlfast authors.
// Python envs in the pool: the shared channel's binding (used by both the main process and
// the worker processes of rlfast/procpool.py) and the pool of proxy envs.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlfast/csrc/core/pool.h"
#include "rlfast/csrc/core/shared_channel.h"
#include "rlfast/csrc/envs/python/remote_pool.h"
#include "rlfast/csrc/python/pool_binding.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {
namespace {

core::DType DTypeFromName(const std::string& name) {
  for (core::DType t : {core::DType::kUInt8, core::DType::kBool, core::DType::kInt32, core::DType::kInt64,
                        core::DType::kFloat32, core::DType::kFloat64}) {
    if (name == core::DTypeName(t)) return t;
  }
  throw py::value_error("the engine has no dtype '" + name + "'");
}

core::ArraySpec ArrayFromDict(const py::dict& d, const std::string& name) {
  core::ArraySpec a;
  a.name = name;
  a.dtype = DTypeFromName(d["dtype"].cast<std::string>());
  a.shape = d["shape"].cast<std::vector<int64_t>>();
  a.low = d["low"].cast<std::vector<double>>();
  a.high = d["high"].cast<std::vector<double>>();
  return a;
}

core::SharedLayout MakeLayout(int num_envs, int num_workers, int64_t obs_bytes, int64_t action_bytes) {
  if (num_envs < 1 || num_workers < 1 || num_workers > num_envs || obs_bytes < 0 || action_bytes < 0) {
    throw py::value_error("bad shared layout: " + std::to_string(num_envs) + " envs, " +
                          std::to_string(num_workers) + " workers");
  }
  core::SharedLayout l;
  l.num_envs = num_envs;
  l.num_workers = num_workers;
  l.obs_bytes = obs_bytes;
  l.action_bytes = action_bytes;
  return l;
}

/// A worker's next request as (env, kind, seed, flags, action): `action` is the first four
/// bytes of the env's action slot as an int32, its action if the pool's actions are Discrete
/// (meaningless otherwise). The GIL is let go only when the worker has to wait.
py::tuple NextRequest(core::SharedChannel& c, int w) {
  std::tuple<int, int, int64_t, int32_t> r;
  if (c.HasRequest(w)) {
    r = c.Next(w);
  } else {
    py::gil_scoped_release release;
    r = c.Next(w);
  }
  const auto [e, kind, seed, flags] = r;
  int32_t action = 0;
  if (e >= 0) std::memcpy(&action, c.ActionPtr(e), sizeof(action));
  return py::make_tuple(e, kind, seed, flags, action);
}

}  // namespace

std::unique_ptr<core::Pool> MakeRemotePool(const std::string& task_id, const core::PoolConfig& config,
                                           std::shared_ptr<core::SharedChannel> channel,
                                           const py::dict& spec) {
  core::EnvSpec es;
  es.obs = ArrayFromDict(spec["obs"].cast<py::dict>(), "obs");
  if (spec.contains("obs_keys")) {  // a Dict observation: one output field per key
    for (const auto& key : spec["obs_keys"].cast<py::list>()) {
      const py::dict d = key.cast<py::dict>();
      es.obs_keys.push_back(ArrayFromDict(d, d["name"].cast<std::string>()));
    }
  }
  es.num_actions = spec["num_actions"].cast<int64_t>();
  es.action = ArrayFromDict(spec["action"].cast<py::dict>(), "action");
  es.integer_actions = spec["integer_actions"].cast<bool>();
  const core::SharedLayout& layout = channel->layout();
  es.env_bytes = layout.TotalBytes() / layout.num_envs;  // RemotePool checks the layout against the spec
  return std::make_unique<envs::python::RemotePool>(task_id, config, std::move(es), std::move(channel));
}

void BindSharedChannel(py::module_& m) {
  using core::SharedChannel;
  py::class_<SharedChannel, std::shared_ptr<SharedChannel>> channel(m, "SharedChannel");
  channel.attr("RESET") = static_cast<int>(core::RequestKind::kReset);
  channel.attr("RESET_WHEN_DONE") = static_cast<int>(core::kResetWhenDone);
  channel.attr("LAST_STEP") = static_cast<int>(core::kLastStep);
  channel
      .def(py::init([](uintptr_t address, int num_envs, int num_workers, int64_t obs_bytes,
                       int64_t action_bytes) {
             return std::make_shared<SharedChannel>(reinterpret_cast<void*>(address),
                                                    MakeLayout(num_envs, num_workers, obs_bytes, action_bytes));
           }),
           py::arg("address"), py::arg("num_envs"), py::arg("num_workers"), py::arg("obs_bytes"),
           py::arg("action_bytes"))
      .def_static("total_bytes",
                  [](int num_envs, int num_workers, int64_t obs_bytes, int64_t action_bytes) {
                    return MakeLayout(num_envs, num_workers, obs_bytes, action_bytes).TotalBytes();
                  })
      .def("init", [](SharedChannel& c) { c.Init(getpid()); })
      .def("set_worker_pid", &SharedChannel::SetWorkerPid)
      .def("close", &SharedChannel::Close)
      .def("destroy", &SharedChannel::Destroy)
      .def_property_readonly("closing", &SharedChannel::closing)
      .def("envs_of", [](const SharedChannel& c, int w) { return c.layout().EnvsOf(w); })
      .def("obs_offset", [](const SharedChannel& c, int e) { return c.layout().ObsOffset(e); })
      .def("action_offset", [](const SharedChannel& c, int e) { return c.layout().ActionOffset(e); })
      .def("final_obs_offset", [](const SharedChannel& c, int e) { return c.layout().FinalObsOffset(e); })
      .def("next", &NextRequest)
      .def("reply_next",
           [](SharedChannel& c, int w, int e, float reward, bool terminated, bool truncated) {
             c.Reply(e, reward, terminated, truncated);
             return NextRequest(c, w);
           })
      .def("fail", &SharedChannel::Fail);

  auto remote = [](PyPool& p) -> envs::python::RemotePool& {
    auto* r = dynamic_cast<envs::python::RemotePool*>(&p.pool());
    if (r == nullptr) throw py::type_error("not a pool of Python envs in worker processes");
    return *r;
  };
  m.def("restart_worker", [remote](PyPool& p, int w, int pid) { remote(p).RestartWorker(w, pid); },
        py::arg("pool"), py::arg("worker"), py::arg("pid"));
  m.def("set_step_timeout", [remote](PyPool& p, double seconds) { remote(p).SetStepTimeout(seconds); },
        py::arg("pool"), py::arg("seconds"));
}

}  // namespace rlfast::python
