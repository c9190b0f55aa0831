// What every printed or stored result says about the tool that produced it. The
// version and git revision come from the build (cli/CMakeLists.txt).
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#ifndef CLUSTERSIM_GIT_REVISION
#define CLUSTERSIM_GIT_REVISION "unknown"
#endif
#ifndef CLUSTERSIM_VERSION
#define CLUSTERSIM_VERSION "0"
#endif

namespace clustersim::cli {

inline constexpr const char* tool_version = CLUSTERSIM_VERSION;
inline constexpr const char* git_revision = CLUSTERSIM_GIT_REVISION;

// The "tool" object of a result: name, version, git revision and how it was computed.
inline nlohmann::json tool_json(std::string_view method) {
  return {{"name", "clustersim"}, {"version", tool_version}, {"git_revision", git_revision}, {"method", method}};
}

}  // namespace clustersim::cli
