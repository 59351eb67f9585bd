// Copyright rlfast authors.
// MuJoCo tasks. Each task's `xml_file` default is a gymnasium asset name; rlfast/_mujoco.py
// turns it into an absolute path under the installed gymnasium before the pool is built.
#include "rlfast/csrc/envs/mujoco/ant.h"
#include "rlfast/csrc/envs/mujoco/half_cheetah.h"
#include "rlfast/csrc/envs/mujoco/humanoid.h"
#include "rlfast/csrc/envs/mujoco/humanoid_standup.h"
#include "rlfast/csrc/envs/mujoco/inverted_double_pendulum.h"
#include "rlfast/csrc/envs/mujoco/inverted_pendulum.h"
#include "rlfast/csrc/envs/mujoco/planar_walker.h"
#include "rlfast/csrc/envs/mujoco/pusher.h"
#include "rlfast/csrc/envs/mujoco/reacher.h"
#include "rlfast/csrc/envs/mujoco/swimmer.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {

void RegisterMujoco(Registry* r) {
  namespace mj = envs::mujoco;
  RegisterEnv<mj::Ant>(r, "Ant-v5", "mujoco");
  RegisterEnv<mj::HalfCheetah>(r, "HalfCheetah-v5", "mujoco");
  RegisterEnv<mj::Hopper>(r, "Hopper-v5", "mujoco");
  RegisterEnv<mj::Walker2d>(r, "Walker2d-v5", "mujoco");
  RegisterEnv<mj::Humanoid>(r, "Humanoid-v5", "mujoco");
  RegisterEnv<mj::HumanoidStandup>(r, "HumanoidStandup-v5", "mujoco");
  RegisterEnv<mj::Swimmer>(r, "Swimmer-v5", "mujoco");
  RegisterEnv<mj::InvertedPendulum>(r, "InvertedPendulum-v5", "mujoco");
  RegisterEnv<mj::InvertedDoublePendulum>(r, "InvertedDoublePendulum-v5", "mujoco");
  RegisterEnv<mj::Reacher>(r, "Reacher-v5", "mujoco");
  RegisterEnv<mj::Pusher>(r, "Pusher-v5", "mujoco");
}

std::string MujocoVersionMismatch() { return envs::mujoco::MujocoVersionMismatch(); }

}  // namespace rlfast::python
