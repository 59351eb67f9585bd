// Copyright rlfast authors.
#ifndef RLFAST_CSRC_CORE_SPEC_H_
#define RLFAST_CSRC_CORE_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace rlfast::core {

/// Element types the engine writes. Python maps them to torch dtypes by name.
enum class DType { kUInt8, kBool, kInt32, kInt64, kFloat32, kFloat64 };

inline std::size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kUInt8:
    case DType::kBool:
      return 1;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    default:
      return 8;
  }
}

inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::kUInt8:
      return "uint8";
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    default:
      return "float64";
  }
}

template <class T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <>
constexpr DType DTypeOf<bool>() { return DType::kBool; }
template <>
constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <>
constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <>
constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <>
constexpr DType DTypeOf<double>() { return DType::kFloat64; }

/// One named array of a step's output (per env): its dtype, shape and bounds.
/// `low`/`high` are either empty (unbounded), one value (same bound everywhere) or one
/// value per element.
struct ArraySpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> low;
  std::vector<double> high;

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::size_t NumBytes() const { return NumElements() * DTypeSize(dtype); }
};

/// What an environment family declares about itself, built from its Config.
struct EnvSpec {
  ArraySpec obs;
  /// A dictionary observation (a Python env's gymnasium Dict space, envs/python/remote_pool.h):
  /// one output field per key, named "obs:<key>" (same-step autoreset: "info:final_obs:<key>"),
  /// in this order, in place of the one "obs" field. `obs` then stands for the keys' bytes one
  /// after the other (uint8 [total bytes]). Empty (every C++ env): one observation array, `obs`.
  std::vector<ArraySpec> obs_keys;
  /// Discrete actions when `num_actions` > 0 (one int per env), else a float32 Box of
  /// `action.shape` with `action.low`/`action.high`.
  int64_t num_actions = 0;
  ArraySpec action;
  /// Box actions that must be whole numbers within [action.low, action.high] element by
  /// element (a gymnasium MultiDiscrete, sent as float32 rows).
  bool integer_actions = false;
  /// Env-specific per-step outputs (e.g. Atari lives, MuJoCo reward terms), written by the
  /// env's VisitInfo into the slot, in this order.
  std::vector<ArraySpec> info;
  /// Default episode step limit; the pool's config may override it.
  int max_episode_steps = std::numeric_limits<int>::max();
  /// Approximate memory one env holds besides the Env object itself (emulator, mjData,
  /// frame buffers); make() adds sizeof(Env) and refuses pools that cannot fit.
  int64_t env_bytes = 0;

  bool IsDiscrete() const { return num_actions > 0; }
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace rlfast::core

#endif  // RLFAST_CSRC_CORE_SPEC_H_
