// Copyright rlfast authors.
// Atari tasks: one `<Game>-v5` per ROM that the installed ale-py ships (EnvPool's names).
// ROM paths come from Python (ale_py.roms.get_rom_path) when a pool or spec is made, on the
// calling Python thread; the C++ workers only ever see the resulting string.
#include <cctype>
#include <string>
#include <vector>

#include "rlfast/csrc/envs/atari/atari_env.h"
#include "rlfast/csrc/python/registry.h"

namespace rlfast::python {
namespace {

using envs::atari::AtariEnv;

/// "montezuma_revenge" -> "MontezumaRevenge-v5" (Python's str.capitalize per '_' part).
std::string TaskId(const std::string& game) {
  std::string id;
  bool start = true;
  for (char ch : game) {
    if (ch == '_') {
      start = true;
      continue;
    }
    id += static_cast<char>(start ? std::toupper(static_cast<unsigned char>(ch))
                                  : std::tolower(static_cast<unsigned char>(ch)));
    start = false;
  }
  return id + "-v5";
}

std::string RomPath(const std::string& game) {
  try {
    return py::str(py::module_::import("ale_py.roms").attr("get_rom_path")(game)).cast<std::string>();
  } catch (py::error_already_set& e) {
    throw py::value_error("cannot find the ROM of '" + game + "' in ale_py.roms: " + std::string(e.what()));
  }
}

AtariEnv::Config Parse(const std::string& task_id, const std::string& game, const py::dict& kwargs) {
  AtariEnv::Config config = ParseConfig(AtariEnv::Config{}, task_id, kwargs);
  config.rom_path = RomPath(game);
  return config;
}

}  // namespace

void RegisterAtari(Registry* registry) {
  std::vector<std::string> games;
  try {
    games = py::module_::import("ale_py.roms").attr("get_all_rom_ids")().cast<std::vector<std::string>>();
  } catch (py::error_already_set& e) {
    // The other families stay usable; say why the Atari ones are missing.
    std::string msg = "rlfast: no Atari tasks, ale_py.roms is unavailable: " + std::string(e.what());
    PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1);
    return;
  }
  for (const std::string& game : games) {
    const std::string task_id = TaskId(game);
    TaskEntry entry;
    entry.family = "atari";
    entry.defaults = [] {
      py::dict d;
      AtariEnv::Config c;
      c.Visit([&](const char* name, auto& field) { d[name] = field; });
      return d;
    };
    entry.spec = [task_id, game](const py::dict& kwargs) { return AtariEnv::Spec(Parse(task_id, game, kwargs)); };
    entry.make = [task_id, game](const core::PoolConfig& pool, const py::dict& kwargs) {
      return std::unique_ptr<core::Pool>(new core::EnvPool<AtariEnv>(task_id, pool, Parse(task_id, game, kwargs)));
    };
    (*registry)[task_id] = std::move(entry);
  }
}

}  // namespace rlfast::python
