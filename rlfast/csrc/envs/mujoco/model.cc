// Copyright rlfast authors.
#include "rlfast/csrc/envs/mujoco/model.h"

#include <dlfcn.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

namespace rlfast::envs::mujoco {

std::string MujocoVersionMismatch() {
  if (mj_version() == mjVERSION_HEADER) return "";
  return std::string("rlfast was compiled against MuJoCo ") + std::to_string(mjVERSION_HEADER) +
         " but libmujoco " + mj_versionString() +
         " is loaded; install the mujoco version pinned by rlfast or rebuild rlfast";
}

namespace {

/// True if `fn` is code of the mujoco Python package's callback module.
bool InMujocoBindings(mjfTime fn) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(fn), &info) == 0 || info.dli_fname == nullptr) return false;
  const std::string path = info.dli_fname;
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return false;
  const std::string dir = path.substr(0, slash);
  const std::string suffix = "/mujoco";
  return path.compare(slash + 1, 10, "_callbacks") == 0 && dir.size() >= suffix.size() &&
         dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The last timer found to live outside the bindings (kept; not looked up again).
std::atomic<mjfTime> kept_timer{nullptr};

}  // namespace

void DropBindingsTimer() {
  const mjfTime timer = mjcb_time;
  if (timer == nullptr || timer == kept_timer.load(std::memory_order_relaxed)) return;
  if (InMujocoBindings(timer)) {
    mjcb_time = nullptr;
  } else {
    kept_timer.store(timer, std::memory_order_relaxed);
  }
}

ModelPtr LoadModel(const std::string& xml_file) {
  static std::mutex mutex;
  static std::map<std::string, ModelPtr> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(xml_file);
  if (it != cache.end()) return it->second;
  std::string mismatch = MujocoVersionMismatch();
  if (!mismatch.empty()) throw std::runtime_error(mismatch);
  if (xml_file.empty() || xml_file[0] != '/') {
    throw std::invalid_argument("xml_file must be an absolute path, got '" + xml_file +
                                "' (rlfast.make resolves gymnasium asset names)");
  }
  char error[1024] = "";
  mjModel* m = mj_loadXML(xml_file.c_str(), nullptr, error, sizeof(error));
  if (m == nullptr) {
    throw std::invalid_argument("MuJoCo could not load '" + xml_file + "': " + error);
  }
  ModelPtr model(m, [](const mjModel* p) { mj_deleteModel(const_cast<mjModel*>(p)); });
  cache.emplace(xml_file, model);
  return model;
}

core::ArraySpec ActionSpec(const mjModel& m) {
  core::ArraySpec a{"action", core::DType::kFloat32, {m.nu}, {}, {}};
  for (int i = 0; i < m.nu; ++i) {
    const bool limited = m.actuator_ctrllimited[i] != 0;
    // float32 bounds, as gymnasium's Box(ctrlrange.astype(float32)).
    a.low.push_back(limited ? static_cast<float>(m.actuator_ctrlrange[2 * i]) : -core::kInf);
    a.high.push_back(limited ? static_cast<float>(m.actuator_ctrlrange[2 * i + 1]) : core::kInf);
  }
  return a;
}

int64_t DataBytes(const mjModel& m) {
  DataPtr d(mj_makeData(&m));
  if (!d) throw std::runtime_error("mj_makeData failed");
  mj_forward(&m, d.get());
  // The arena (narena, megabytes) is reserved address space: only the pages the solver
  // touches become resident. Contacts during steps use a few times what mj_forward at qpos0
  // does (Ant: 28 KB after 200 steps vs 12 KB). Measured resident growth of an Ant pool:
  // 0.16-0.19 MB per env; this gives ~0.2 MB (sizeof(mjData) alone is ~0.16 MB).
  const int64_t touched = 2 * static_cast<int64_t>(d->maxuse_arena + d->maxuse_stack);
  return static_cast<int64_t>(sizeof(mjData) + d->nbuffer) + touched;
}

int BodyId(const mjModel& m, const char* name) {
  int id = mj_name2id(&m, mjOBJ_BODY, name);
  if (id < 0) throw std::invalid_argument(std::string("the model has no body '") + name + "'");
  return id;
}

}  // namespace rlfast::envs::mujoco
