// Copyright rlfast authors.
#include "rlfast/csrc/envs/atari/atari_env.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace rlfast::envs::atari {

namespace {

constexpr int kMaxStackNum = 64;
constexpr int kMaxFrameSkip = 1000;
constexpr int kMaxNoops = 100000;
// Heap of one ALEInterface with a loaded ROM (emulator, console, settings), measured as the
// growth of a process's resident memory per Pong env, screens and frame stack excluded.
constexpr int64_t kAleBytes = 300 * 1000;

// ALE takes a non-negative int seed; like EnvPool and ale-py we pass the env's seed itself.
int AleSeed(uint64_t seed) { return static_cast<int>(seed & 0x7fffffffULL); }

std::invalid_argument Bad(const std::string& what) { return std::invalid_argument(what); }

}  // namespace

void ValidateAtariConfig(const AtariConfig& c) {
  auto in_range = [](const char* name, int v, int lo, int hi) {
    if (v < lo || v > hi) {
      throw Bad(std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                std::to_string(v));
    }
  };
  // Upper bounds: far beyond any published setting, low enough that a typo fails here instead
  // of allocating gigabytes (stack_num) or spending minutes per step or reset.
  in_range("stack_num", c.stack_num, 1, kMaxStackNum);
  in_range("frame_skip", c.frame_skip, 1, kMaxFrameSkip);
  in_range("noop_max", c.noop_max, 0, kMaxNoops);
  in_range("max_num_frames_per_episode", c.max_num_frames_per_episode, 0, std::numeric_limits<int>::max());
  if (c.img_height < 1 || c.img_height > kScreenHeight || c.img_width < 1 || c.img_width > kScreenWidth) {
    throw Bad("img_height must be in [1, 210] and img_width in [1, 160] (area resize only downscales), got " +
              std::to_string(c.img_height) + " x " + std::to_string(c.img_width));
  }
  if (!(c.repeat_action_probability >= 0.0f && c.repeat_action_probability <= 1.0f)) {
    throw Bad("repeat_action_probability must be in [0, 1], got " + std::to_string(c.repeat_action_probability));
  }
  if (c.rom_path.empty()) throw Bad("no ROM path: Atari envs are made through their task id, e.g. Pong-v5");
}

std::unique_ptr<ale::ALEInterface> MakeAle(const AtariConfig& config, uint64_t seed) {
  static std::once_flag quiet;  // envs are built on several threads at once
  std::call_once(quiet, [] { ale::Logger::setMode(ale::Logger::Error); });
  auto ale = std::make_unique<ale::ALEInterface>();
  ale->setFloat("repeat_action_probability", config.repeat_action_probability);
  ale->setInt("random_seed", AleSeed(seed));
  ale->loadROM(config.rom_path);
  return ale;
}

int NumActions(const std::string& rom_path, bool full_action_space) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, bool>, int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(rom_path, full_action_space);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  AtariConfig config;
  config.rom_path = rom_path;
  auto ale = MakeAle(config, 0);
  int n = static_cast<int>(full_action_space ? ale->getLegalActionSet().size()
                                             : ale->getMinimalActionSet().size());
  cache.emplace(key, n);
  return n;
}

core::EnvSpec AtariEnv::Spec(const Config& c) {
  ValidateAtariConfig(c);
  const int channels = c.gray_scale ? 1 : 3;
  core::EnvSpec spec;
  spec.obs = {"obs", core::DType::kUInt8, {c.stack_num * channels, c.img_height, c.img_width}, {0}, {255}};
  spec.num_actions = NumActions(c.rom_path, c.full_action_space);
  auto scalar = [](const char* name, core::DType t) { return core::ArraySpec{name, t, {}, {}, {}}; };
  spec.info = {scalar("lives", core::DType::kInt32),
               scalar("reward", core::DType::kFloat32),
               scalar("frame_number", core::DType::kInt32),
               scalar("episode_frame_number", core::DType::kInt32),
               scalar("game_over", core::DType::kBool),
               scalar("new_game", core::DType::kBool)};
  spec.max_episode_steps = kMaxEpisodeSteps;
  const int64_t frame = static_cast<int64_t>(channels) * c.img_height * c.img_width;
  spec.env_bytes = kAleBytes + kScreenHeight * kScreenWidth + frame * c.stack_num;
  return spec;
}

AtariEnv::AtariEnv(const Config& config, uint64_t seed)
    : core::EnvBase(seed), config_(config), ale_(MakeAle(config, seed)) {
  ValidateAtariConfig(config_);
  action_set_ = config_.full_action_space ? ale_->getLegalActionSet() : ale_->getMinimalActionSet();
  if (config_.use_fire_reset) {
    fire_reset_ = std::find(action_set_.begin(), action_set_.end(), ale::PLAYER_A_FIRE) != action_set_.end();
  }
  const ale::ALEScreen& screen = ale_->getScreen();
  const int h = static_cast<int>(screen.height()), w = static_cast<int>(screen.width());
  // The palette as lookup tables (ALE's own conversion, applied to every even index: ALE
  // screens hold even NTSC indices; odd ones copy their even neighbour).
  std::vector<uint8_t> index(128), gray(256), rgb(768);
  for (int i = 0; i < 128; ++i) index[i] = static_cast<uint8_t>(2 * i);
  std::vector<uint8_t> gray_even(128), rgb_even(384);
  ale_->theOSystem->colourPalette().applyPaletteGrayscale(gray_even.data(), index.data(), 128);
  ale_->theOSystem->colourPalette().applyPaletteRGB(rgb_even.data(), index.data(), 128);
  for (int i = 0; i < 256; ++i) {
    gray[i] = gray_even[i / 2];
    for (int c = 0; c < 3; ++c) rgb[i * 3 + c] = rgb_even[(i / 2) * 3 + c];
  }
  processor_ = std::make_unique<FrameProcessor>(h, w, config_.img_height, config_.img_width,
                                                config_.gray_scale, gray, rgb);
  screen_size_ = h * w;
  frame_size_ = processor_->frame_size();
  prev_screen_.assign(screen_size_, 0);
  stack_.assign(static_cast<std::size_t>(frame_size_) * config_.stack_num, 0);
  newest_ = config_.stack_num - 1;
}

void AtariEnv::Seed(uint64_t seed) {
  core::EnvBase::Seed(seed);
  ale_->setInt("random_seed", AleSeed(seed));
  ale_->loadROM(config_.rom_path);
  soft_reset_ = false;
}

void AtariEnv::Reset() {
  // A reset after a life lost under episodic_life / zero_discount_on_life_loss keeps the
  // game going (EnvPool's behaviour); any other reset (game over, truncation, a reset asked
  // for by the user) starts a new game.
  const bool soft = soft_reset_ && !ale_->game_over(false);
  soft_reset_ = false;
  new_game_ = !soft;
  if (!soft) {
    ale_->reset_game();
    game_steps_ = 0;
  }
  if (!soft || config_.episodic_life) {
    // EnvPool: 1..noop_max no-ops, one fewer when FIRE follows.
    int noops = config_.noop_max > 0 ? static_cast<int>(UniformInt(1, config_.noop_max)) - fire_reset_ : 0;
    for (; noops > 0; --noops) {
      ale_->act(ale::PLAYER_A_NOOP);
      if (ale_->game_over(false)) {
        ale_->reset_game();
        game_steps_ = 0;
        new_game_ = true;
      }
    }
    if (fire_reset_) ale_->act(ale::PLAYER_A_FIRE);
  }
  // Every result pushes exactly one frame; a new game fills the whole stack with it. (Under
  // zero_discount_on_life_loss alone the emulator is untouched: the frame is the current
  // screen again.) FrameStack (rlfast/frame_stack.py) relies on this rule.
  PushFrame(Screen(), nullptr, new_game_);
  raw_reward_ = 0.0f;
  game_over_ = false;
  lives_ = ale_->lives();
  UpdateCounters();
}

core::StepResult AtariEnv::Step(const Action* action) {
  const ale::Action a = action_set_[*action];
  const int skip = config_.frame_skip;
  int reward = 0;
  bool over = false;
  int frames = 0;
  while (frames < skip) {
    reward += ale_->act(a);
    ++frames;
    over = ale_->game_over(false);
    if (over) break;
    // Keep the second-to-last frame's indices; the last one is read in place below.
    if (frames == skip - 1) std::memcpy(prev_screen_.data(), Screen(), screen_size_);
  }
  // Max-pool the last two frames when every frame of the skip ran (as EnvPool); a game that
  // ends early shows its final frame.
  const bool pool = frames == skip && skip >= 2;
  PushFrame(Screen(), pool ? prev_screen_.data() : nullptr, false);
  new_game_ = false;

  ++game_steps_;
  const int lives = ale_->lives();
  const bool life_lost = lives < lives_ && lives > 0;
  core::StepResult r;
  raw_reward_ = static_cast<float>(reward);
  r.reward = config_.reward_clip ? static_cast<float>((reward > 0) - (reward < 0)) : raw_reward_;
  r.truncated = config_.max_num_frames_per_episode > 0 &&
                static_cast<int64_t>(game_steps_) * skip >= config_.max_num_frames_per_episode;
  const bool life_end = life_lost && (config_.episodic_life || config_.zero_discount_on_life_loss);
  r.terminated = over || life_end;
  soft_reset_ = life_end && !over && !r.truncated;
  game_over_ = over;
  lives_ = lives;
  UpdateCounters();
  return r;
}

void AtariEnv::PushFrame(const uint8_t* a, const uint8_t* b, bool fill_all) {
  newest_ = (newest_ + 1) % config_.stack_num;
  uint8_t* slot = stack_.data() + static_cast<std::size_t>(newest_) * frame_size_;
  processor_->Process(a, b, slot);
  if (fill_all) {
    for (int i = 0; i < config_.stack_num; ++i) {
      if (i != newest_) std::memcpy(stack_.data() + static_cast<std::size_t>(i) * frame_size_, slot, frame_size_);
    }
  }
}

void AtariEnv::UpdateCounters() {
  frame_number_ = ale_->getFrameNumber();
  episode_frame_number_ = ale_->getEpisodeFrameNumber();
}

}  // namespace rlfast::envs::atari
