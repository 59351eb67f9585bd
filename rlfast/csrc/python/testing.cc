// Copyright rlfast authors.
#include "rlfast/csrc/envs/testing/dummy.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {

void RegisterTesting(Registry* r) {
  RegisterEnv<envs::testing::Dummy>(r, "Dummy-v0", "testing");
}

}  // namespace rlfast::python
