#include "runner/provenance.hpp"

#ifndef CLUSTERSIM_GIT_REVISION
#error "CLUSTERSIM_GIT_REVISION comes from runner/CMakeLists.txt"
#endif
#ifndef CLUSTERSIM_VERSION
#error "CLUSTERSIM_VERSION comes from runner/CMakeLists.txt"
#endif

namespace clustersim::runner {

const char* const tool_version = CLUSTERSIM_VERSION;
const char* const git_revision = CLUSTERSIM_GIT_REVISION;

nlohmann::json tool_json(std::string_view method) {
  return {{"name", "clustersim"}, {"version", tool_version}, {"git_revision", git_revision}, {"method", method}};
}

}  // namespace clustersim::runner
