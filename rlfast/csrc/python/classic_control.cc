// Copyright rlfast authors.
#include "rlfast/csrc/envs/classic_control/acrobot.h"
#include "rlfast/csrc/envs/classic_control/cartpole.h"
#include "rlfast/csrc/envs/classic_control/mountain_car.h"
#include "rlfast/csrc/envs/classic_control/mountain_car_continuous.h"
#include "rlfast/csrc/envs/classic_control/pendulum.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {

void RegisterClassicControl(Registry* r) {
  namespace cc = envs::classic_control;
  RegisterEnv<cc::CartPole>(r, "CartPole-v1", "classic_control");
  RegisterEnv<cc::Acrobot>(r, "Acrobot-v1", "classic_control");
  RegisterEnv<cc::MountainCar>(r, "MountainCar-v0", "classic_control");
  RegisterEnv<cc::MountainCarContinuous>(r, "MountainCarContinuous-v0", "classic_control");
  RegisterEnv<cc::Pendulum>(r, "Pendulum-v1", "classic_control");
}

}  // namespace rlfast::python
