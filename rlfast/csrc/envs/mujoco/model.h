// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_MODEL_H_
#define RLFAST_CSRC_ENVS_MUJOCO_MODEL_H_

#include <mujoco/mujoco.h>

#include <memory>
#include <string>
#include <vector>

#include "rlfast/csrc/core/spec.h"

namespace rlfast::envs::mujoco {

/// A compiled model, shared read-only by every env (and pool) that uses the same XML file.
/// mj_step only reads the model, so workers may step different mjData on it concurrently.
using ModelPtr = std::shared_ptr<const mjModel>;

/// Loads (once per process, then cached) the MJCF model at `xml_file`, an absolute path
/// (Python resolves gymnasium's asset names; workers never touch the file system).
/// Called from the thread constructing a pool. Throws std::invalid_argument naming the file
/// and MuJoCo's message if it cannot be loaded, std::runtime_error if the loaded libmujoco
/// is not the version rlfast was compiled against. Cached models live until process exit
/// (a few hundred KB each, one per distinct file).
ModelPtr LoadModel(const std::string& xml_file);

/// Import-time check of the loaded libmujoco against the headers: empty when they agree, else
/// a message saying which libmujoco was loaded and which one rlfast was built against.
std::string MujocoVersionMismatch();

/// Switches off the profiling timer that MuJoCo's Python bindings put in libmujoco's global
/// `mjcb_time`, before a worker steps. The `mujoco` package installs a default timer (a
/// steady_clock read) as soon as `mujoco._structs` is imported, and `mujoco.set_mjcb_time(fn)`
/// installs a trampoline into a Python callable; both functions live in the bindings'
/// `mujoco/_callbacks*.so`. Whenever `mjcb_time` is set, libmujoco calls it at the start and
/// end of every timed pipeline stage of every mj_step/mj_forward, in every thread of the
/// process: rlfast's workers share the wheel's libmujoco, so `import mujoco` anywhere in the
/// process made Ant steps ~8% slower (and a Python callable would need the GIL on every stage).
/// A timer that lives anywhere else (installed from C by another native library) is kept.
/// Costs one pointer load per call unless the timer changed. docs/performance/benchmarks.md: "MuJoCo and `import mujoco`".
void DropBindingsTimer();

/// Owns one mjData (mj_deleteData on destruction).
struct DataDeleter {
  void operator()(mjData* d) const { mj_deleteData(d); }
};
using DataPtr = std::unique_ptr<mjData, DataDeleter>;

/// The float32 Box action spec of a model: one entry per actuator, bounds = ctrlrange
/// (gymnasium's `_set_action_space`); unlimited actuators get ±inf.
core::ArraySpec ActionSpec(const mjModel& m);

/// Bytes one env's mjData takes on this model (struct, buffer and arena).
int64_t DataBytes(const mjModel& m);

/// Id of the body called `name`; throws std::invalid_argument if the model has none.
int BodyId(const mjModel& m, const char* name);

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_MODEL_H_
