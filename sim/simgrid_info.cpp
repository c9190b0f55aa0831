#include "sim/simgrid_info.hpp"

#include <fmt/format.h>
#include <simgrid/config.h>
#include <xbt/base.h>
#include <simgrid/version.h>

namespace clustersim::sim {
std::string simgrid_version() {
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  return fmt::format("{}.{}.{}", major, minor, patch);
}
}  // namespace clustersim::sim
