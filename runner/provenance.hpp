// What every printed or stored result says about the tool that produced it. The
// version and git revision come from the build (runner/CMakeLists.txt compiles them
// into provenance.cpp only, so a new revision rebuilds one file).
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

namespace clustersim::runner {

extern const char* const tool_version;
extern const char* const git_revision;

// The "tool" object of a result: name, version, git revision and how it was computed.
nlohmann::json tool_json(std::string_view method);

}  // namespace clustersim::runner
