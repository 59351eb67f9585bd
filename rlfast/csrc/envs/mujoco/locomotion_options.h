// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_MUJOCO_LOCOMOTION_OPTIONS_H_
#define RLFAST_CSRC_ENVS_MUJOCO_LOCOMOTION_OPTIONS_H_

#include <string>
#include <utility>

namespace rlfast::envs::mujoco {

/// The options gymnasium's locomotion tasks share (HalfCheetah, Swimmer, Hopper, Walker2d, Ant,
/// Humanoid): the model, the forward reward and ctrl cost weights, the reset noise, and whether
/// the observation leaves out the current x (and y) position. A task's Config derives from it
/// and passes the task's defaults to the constructor; a task with options of its own declares
/// them and visits them through VisitAround, which keeps gymnasium's keyword order.
struct LocomotionOptions {
  LocomotionOptions(std::string xml_file, int frame_skip, double forward_reward_weight,
                    double ctrl_cost_weight, double reset_noise_scale)
      : xml_file(std::move(xml_file)),
        frame_skip(frame_skip),
        forward_reward_weight(forward_reward_weight),
        ctrl_cost_weight(ctrl_cost_weight),
        reset_noise_scale(reset_noise_scale) {}

  std::string xml_file;
  int frame_skip;
  double forward_reward_weight;
  double ctrl_cost_weight;
  double reset_noise_scale;
  bool exclude_current_positions_from_observation = true;

  /// The Visit of a task with no options of its own (HalfCheetah, Swimmer).
  template <class V>
  void Visit(V&& v) {
    VisitAround(v, [] {});
  }

  /// Visits xml_file, frame_skip, forward_reward_weight, ctrl_cost_weight, then the task's own
  /// options (`own()` visits them), then reset_noise_scale and
  /// exclude_current_positions_from_observation: gymnasium's keyword order, which the Python
  /// defaults dict follows. A task visits the options gymnasium lists after those itself.
  template <class V, class Own>
  void VisitAround(V& v, Own&& own) {
    v("xml_file", xml_file);
    v("frame_skip", frame_skip);
    v("forward_reward_weight", forward_reward_weight);
    v("ctrl_cost_weight", ctrl_cost_weight);
    own();
    v("reset_noise_scale", reset_noise_scale);
    v("exclude_current_positions_from_observation", exclude_current_positions_from_observation);
  }
};

}  // namespace rlfast::envs::mujoco

#endif  // RLFAST_CSRC_ENVS_MUJOCO_LOCOMOTION_OPTIONS_H_
