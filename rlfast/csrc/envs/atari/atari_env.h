// Copyright rlfast authors.
#ifndef RLFAST_CSRC_ENVS_ATARI_ATARI_ENV_H_
#define RLFAST_CSRC_ENVS_ATARI_ATARI_ENV_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ale/ale_interface.hpp"
#include "rlfast/csrc/core/env.h"
#include "rlfast/csrc/envs/atari/frame_processor.h"

namespace rlfast::envs::atari {

/// Every ALE game renders 210 x 160 palette-indexed screens.
constexpr int kScreenHeight = 210;
constexpr int kScreenWidth = 160;

/// Atari options: EnvPool's names and defaults (envpool/atari), documented in docs/environments/atari.md.
/// `rom_path` is not a user option: the binding fills it from ale_py.roms for the task's game.
struct AtariConfig {
  int stack_num = 4;
  int frame_skip = 4;
  int noop_max = 30;
  bool zero_discount_on_life_loss = false;
  bool episodic_life = false;
  bool reward_clip = false;
  bool use_fire_reset = true;
  int img_height = 84;
  int img_width = 84;
  bool gray_scale = true;
  bool full_action_space = false;
  float repeat_action_probability = 0.0f;
  /// Caps one game (all its lives) at this many agent frames (steps × frame_skip, reset
  /// no-ops not counted); 0: no cap. 108000 = EnvPool's 27000 steps at frame_skip 4.
  int max_num_frames_per_episode = 108000;

  std::string rom_path;

  template <class V>
  void Visit(V&& v) {
    v("stack_num", stack_num);
    v("frame_skip", frame_skip);
    v("noop_max", noop_max);
    v("zero_discount_on_life_loss", zero_discount_on_life_loss);
    v("episodic_life", episodic_life);
    v("reward_clip", reward_clip);
    v("use_fire_reset", use_fire_reset);
    v("img_height", img_height);
    v("img_width", img_width);
    v("gray_scale", gray_scale);
    v("full_action_space", full_action_space);
    v("repeat_action_probability", repeat_action_probability);
    v("max_num_frames_per_episode", max_num_frames_per_episode);
  }
};

/// Checks option values; throws std::invalid_argument naming the bad one.
void ValidateAtariConfig(const AtariConfig& config);

/// Number of actions of the ROM's minimal (or full) action set. Loads the ROM once per
/// (path, full_action_space) and caches the answer; thread-safe.
int NumActions(const std::string& rom_path, bool full_action_space);

/// Creates an ALE with the emulator settings of `config`, seeded with `seed`, ROM loaded.
std::unique_ptr<ale::ALEInterface> MakeAle(const AtariConfig& config, uint64_t seed);

/// One Atari game on the ALE C++ core with EnvPool's preprocessing: reset no-ops and FIRE,
/// frame skip with a max-pool of the last two frames, grayscale/RGB, area resize, frame
/// stack, reward clipping, episodic life. Observation: [stack_num * C, H, W] uint8, oldest
/// frame first.
///
/// Per step only the screens that are used are read: the second-to-last frame's palette
/// indices are copied (one memcpy), the last one is read in place from ALE, and
/// FrameProcessor converts, pools and resizes both in one pass straight into the stack ring.
/// Nothing is allocated after construction. The ALE (heavy) is built and the ROM loaded
/// once, in the constructor, on the thread constructing the pool.
class AtariEnv : public core::EnvBase {
 public:
  using Config = AtariConfig;
  using Action = int32_t;
  using Obs = uint8_t;

  static constexpr int kMaxEpisodeSteps = 27000;

  static core::EnvSpec Spec(const Config& config);

  AtariEnv(const Config& config, uint64_t seed);

  /// Re-seeds the noop RNG and the emulator (sticky actions); reloads the ROM. Pool thread,
  /// env idle.
  void Seed(uint64_t seed);

  void Reset();
  core::StepResult Step(const Action* action);

  void WriteObs(Obs* obs) const {
    // The ring holds stack_num frames; `newest_` is the last written. Oldest first.
    for (int i = 0; i < config_.stack_num; ++i) {
      int slot = (newest_ + 1 + i) % config_.stack_num;
      std::memcpy(obs + static_cast<std::size_t>(i) * frame_size_,
                  stack_.data() + static_cast<std::size_t>(slot) * frame_size_, frame_size_);
    }
  }

  /// The emulator's current screen in colour (ale-py's getScreenRGB): not the observation's
  /// max-pool of two frames, nor its resize.
  std::vector<int64_t> RenderShape() const { return {kScreenHeight, kScreenWidth, 3}; }
  void Render(uint8_t* out) const {
    ale_->theOSystem->colourPalette().applyPaletteRGB(out, ale_->getScreen().getArray(),
                                                      kScreenHeight * kScreenWidth);
  }

  /// Info fields, in Spec().info order (checked at make()).
  template <class V>
  void VisitInfo(V&& v) const {
    v("lives", lives_);
    v("reward", raw_reward_);
    v("frame_number", frame_number_);
    v("episode_frame_number", episode_frame_number_);
    v("game_over", game_over_);
    v("new_game", new_game_);
  }

#ifdef RLFAST_TEST_HOOKS
  /// Test-only: the console RAM (128 bytes), to compare emulation with ale-py.
  std::vector<double> GetState() const {
    const auto& ram = ale_->getRAM();
    std::vector<double> out(ram.size());
    for (std::size_t i = 0; i < ram.size(); ++i) out[i] = ram.get(i);
    return out;
  }
  void SetState(const std::vector<double>& ram) {
    for (std::size_t i = 0; i < ram.size(); ++i) ale_->setRAM(i, static_cast<uint8_t>(ram[i]));
  }
#endif

 private:
  /// Processes screen(s) into the next ring slot; with `fill_all` copies it to every slot.
  void PushFrame(const uint8_t* a, const uint8_t* b, bool fill_all);
  const uint8_t* Screen() const { return ale_->getScreen().getArray(); }
  void UpdateCounters();

  Config config_;
  std::unique_ptr<ale::ALEInterface> ale_;
  ale::ActionVect action_set_;
  bool fire_reset_ = false;
  std::unique_ptr<FrameProcessor> processor_;
  int screen_size_ = 0;
  int frame_size_ = 0;
  std::vector<uint8_t> prev_screen_;  // second-to-last frame of a skip (palette indices)
  std::vector<uint8_t> stack_;        // ring of stack_num processed frames
  int newest_ = 0;

  // Episode state.
  int game_steps_ = 0;         // agent steps since the game (not the life) started
  bool soft_reset_ = false;    // the last step lost a life under episodic_life/zero_discount
  int lives_ = 0;
  float raw_reward_ = 0.0f;
  int32_t frame_number_ = 0;
  int32_t episode_frame_number_ = 0;
  bool game_over_ = false;
  bool new_game_ = false;
};

}  // namespace rlfast::envs::atari

#endif  // RLFAST_CSRC_ENVS_ATARI_ATARI_ENV_H_
