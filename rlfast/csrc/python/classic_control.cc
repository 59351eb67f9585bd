// Copyright rlfast authors.
#include "rlfast/csrc/envs/classic_control/cartpole.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {

void RegisterClassicControl(Registry* r) {
  namespace cc = envs::classic_control;
  RegisterEnv<cc::CartPole>(r, "CartPole-v1", "classic_control");
}

}  // namespace rlfast::python
